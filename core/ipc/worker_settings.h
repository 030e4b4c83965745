/* A worker's settings on its standard input: the engine writes one WORKER_SETTINGS
 * frame, preceded by its length (u32, little-endian), then keeps the stream open as
 * the worker's lifeline; the worker reads the frame first thing. Nothing passes
 * through a file, so workers on other hosts (over SSH) get theirs the same way. */
#ifndef CINFER_IPC_WORKER_SETTINGS_H
#define CINFER_IPC_WORKER_SETTINGS_H

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/error.h"

/* Writes the settings to fd (a socket or pipe; a closed peer is an error, never a
 * SIGPIPE). A non-blocking fd whose buffer is full is an error too: the engine writes
 * before the worker exists, so waiting would never end. */
int cinfer_worker_settings_send(int fd, const struct cinfer_server_args *args, const struct cinfer_port_args *ports,
                                struct cinfer_error *err);

/* Reads them from fd, waiting up to timeout_ms for each part, into args (initialised
 * here; free with cinfer_server_args_free) and ports. Every refusal says which part was
 * wrong: no settings (end of file), a bad length, a malformed frame, a bad setting. */
int cinfer_worker_settings_receive(int fd, int timeout_ms, struct cinfer_server_args *args,
                                   struct cinfer_port_args *ports, struct cinfer_error *err);

/* The same check of a frame held in memory (what receive does after reading it); for
 * tests and the fuzzer. */
int cinfer_worker_settings_parse(const void *frame, size_t len, struct cinfer_server_args *args,
                                 struct cinfer_port_args *ports, struct cinfer_error *err);

#endif
