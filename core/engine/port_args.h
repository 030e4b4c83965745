/* How one engine spells its channel endpoints, and each worker's own set of them
 * (struct cinfer_port_args). Between processes on this machine: ipc:// sockets in the
 * engine's private run folder. */
#ifndef CINFER_ENGINE_PORT_ARGS_H
#define CINFER_ENGINE_PORT_ARGS_H

#include <stddef.h>

#include "cinfer/engine.h"

struct engine_endpoints {
    char run_dir[192];
    char comm_prefix[64]; /* "/<run folder's name>-comm": shared-memory names */
};

/* For run_dir; CINFER_ERR_RANGE when the folder's path is too long for a unix socket
 * address. */
int cinfer_endpoints_init(struct engine_endpoints *ep, const char *run_dir, struct cinfer_error *err);

/* The endpoints of the worker with this role and ranks (dp_rank and tp_rank ignored
 * for the detokenizer; the per-worker fields then stay empty). The engine uses the same
 * to reach each replica and rank. */
void cinfer_endpoints_of_worker(const struct engine_endpoints *ep, int role, int dp_rank, int tp_rank,
                                struct cinfer_port_args *out);

#endif
