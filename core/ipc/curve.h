/* CURVE security for tcp:// channels (ZeroMQ's CurveZMQ): the binding side of a channel
 * is a CURVE server with the engine's server key pair, the connecting side a client
 * with the engine's client key pair, and a ZAP handler in every process that binds
 * admits only clients presenting that client key. Both pairs are made fresh for each
 * engine and reach workers only on their standard input (struct cinfer_port_args), so a
 * peer without them cannot complete a handshake. ipc:// channels (one machine, a run
 * folder of mode 0700) and empty keys are left as they are. */
#ifndef CINFER_IPC_CURVE_H
#define CINFER_IPC_CURVE_H

#include "cinfer/engine.h"
#include "cinfer/error.h"

/* Fresh server and client key pairs into ports' curve_* fields. */
int cinfer_curve_keys_generate(struct cinfer_port_args *ports, struct cinfer_error *err);

/* 1 when ports carries keys, so tcp:// channels must use them. */
int cinfer_curve_enabled(const struct cinfer_port_args *ports);

/* Sets socket s up as a CURVE server (bind) or client (connect) when endpoint is tcp://
 * and ports carries keys; otherwise does nothing. */
int cinfer_curve_apply(void *socket, const char *endpoint, int bind, const struct cinfer_port_args *ports,
                       struct cinfer_error *err);

/* The ZAP handler of one ZeroMQ context: admits CURVE clients whose public key is
 * ports->curve_client_public, refuses every other. Start it before the context's first
 * CURVE server socket binds; stop it before the context is terminated. */
struct cinfer_zap;
int cinfer_zap_start(void *zmq_context, const struct cinfer_port_args *ports, struct cinfer_zap **out,
                     struct cinfer_error *err);
void cinfer_zap_stop(struct cinfer_zap **zap);
/* Handshakes refused so far (for tests and logs). */
int cinfer_zap_refusals(const struct cinfer_zap *zap);

#endif
