/* How one engine spells its channel endpoints, and each worker's own set of them
 * (struct cinfer_port_args). Without hosts, every process is on this machine: ipc://
 * sockets in the engine's private run folder. With hosts (launcher.hosts), tcp:// on
 * consecutive ports from launcher.port_base, each rank binding on its own host's
 * address and the main process (and the detokenizer, which runs beside it) on this
 * machine's; CURVE keys made for the engine go with every set. */
#ifndef CINFER_ENGINE_PORT_ARGS_H
#define CINFER_ENGINE_PORT_ARGS_H

#include <stddef.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"

#define CINFER_ADDRESS_BYTES 64

struct engine_endpoints {
    char run_dir[192];
    char comm_prefix[64];      /* "/<run folder's name>-comm": shared-memory names */
    int tcp;                   /* 1: workers on hosts, tcp:// with CURVE */
    int port_base;
    char main_bind[CINFER_ADDRESS_BYTES];    /* what the main process binds ("*" or an address) */
    char main_address[CINFER_ADDRESS_BYTES]; /* where workers reach the main process */
    char (*rank_address)[CINFER_ADDRESS_BYTES]; /* (dp_size * tp_size) numeric address of each scheduler rank */
    char (*rank_host)[CINFER_ADDRESS_BYTES];    /* (dp_size * tp_size) the host as listed, user@ included */
    int dp_size, tp_size;
    int group_comm;            /* the launcher brings each group's communicator */
    struct cinfer_port_args keys; /* the curve_* fields only */
};

/* For run_dir and the settings' hosts, sizes, bind address and port base; group_comm:
 * the launcher brings each replica's communicator (launch-mpi). Errors name a host that
 * does not resolve, or a run folder too long for a unix socket path. */
int cinfer_endpoints_init(struct engine_endpoints *ep, const char *run_dir, const struct cinfer_server_args *args,
                          int group_comm, struct cinfer_error *err);
void cinfer_endpoints_free(struct engine_endpoints *ep);

/* The endpoints of the worker with this role and ranks (dp_rank and tp_rank ignored
 * for the detokenizer; the per-worker fields then stay empty). The engine uses the same
 * to reach each replica and rank. */
void cinfer_endpoints_of_worker(const struct engine_endpoints *ep, int role, int dp_rank, int tp_rank,
                                struct cinfer_port_args *out);
/* Where the main process binds its status channel. */
void cinfer_endpoints_status_bind(const struct engine_endpoints *ep, char *out, size_t out_bytes);
/* The host a scheduler rank runs on, as listed (NULL without hosts: this machine). */
const char *cinfer_endpoints_host_of(const struct engine_endpoints *ep, int dp_rank, int tp_rank);

#endif
