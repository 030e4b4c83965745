/* ZeroMQ sockets for the engine's channels: one helper to open each with the settings
 * every channel needs (LINGER 0 so shutdown never hangs), and typed send/receive of
 * whole frames. */
#ifndef CINFER_IPC_CHANNEL_H
#define CINFER_IPC_CHANNEL_H

#include <stddef.h>

#include "cinfer/error.h"

/* type: ZMQ_PUSH, ZMQ_PULL, ZMQ_ROUTER, ZMQ_DEALER. bind: 1 to bind, 0 to connect.
 * routing_id: for a DEALER, its identity (may be NULL). Returns the socket or NULL. */
void *cinfer_channel_open(void *zmq_context, int type, const char *endpoint, int bind, const char *routing_id,
                          struct cinfer_error *err);
/* The same, with CURVE (ipc/curve.h) for a tcp:// endpoint when keys carries them. */
struct cinfer_port_args;
void *cinfer_channel_open_keyed(void *zmq_context, int type, const char *endpoint, int bind, const char *routing_id,
                                const struct cinfer_port_args *keys, struct cinfer_error *err);
/* cinfer_channel_open_keyed without the bind or connect, which the caller then makes
 * itself (zmq_bind, zmq_connect): for a socket monitored from its first connection on. */
void *cinfer_channel_prepare_keyed(void *zmq_context, int type, const char *endpoint, int bind,
                                   const char *routing_id, const struct cinfer_port_args *keys,
                                   struct cinfer_error *err);
void cinfer_channel_close(void **socket);

/* Sends one frame; with dont_wait, CINFER_ERR_TIMEOUT when it would block.
 * The frame stays the caller's. */
int cinfer_channel_send(void *socket, const void *frame, size_t len, int dont_wait, struct cinfer_error *err);
/* Sends a ROUTER frame to the peer with this routing id. */
int cinfer_channel_send_to(void *socket, const char *routing_id, const void *frame, size_t len,
                           struct cinfer_error *err);
/* Receives one frame into a malloc'd buffer; waits up to timeout_ms (-1 forever, 0 not
 * at all) and returns CINFER_ERR_TIMEOUT when none came. For a ROUTER socket,
 * routing_id (may be NULL) receives the sender's identity (up to 63 bytes). */
int cinfer_channel_recv(void *socket, int timeout_ms, void **frame, size_t *len, char *routing_id,
                        struct cinfer_error *err);

#endif
