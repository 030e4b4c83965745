#include "engine/port_args.h"

#include <stdio.h>
#include <string.h>

#include "ipc/messages.h"

/* sun_path holds 108 bytes; keep every endpoint's path well inside it, with room for
 * the longest per-rank suffix. */
#define MAX_SOCKET_PATH 100
#define LONGEST_SOCKET_NAME "/detokenizer-in"
#define LONGEST_SUFFIX "-dp1023-tp1023"

int cinfer_endpoints_init(struct engine_endpoints *ep, const char *run_dir, struct cinfer_error *err)
{
    memset(ep, 0, sizeof *ep);
    if (strlen(run_dir) + sizeof LONGEST_SOCKET_NAME + sizeof LONGEST_SUFFIX > MAX_SOCKET_PATH ||
        strlen(run_dir) >= sizeof ep->run_dir)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "run folder %s is too long for a unix socket path (at most %d bytes with the socket name)",
                                run_dir, MAX_SOCKET_PATH);
    snprintf(ep->run_dir, sizeof ep->run_dir, "%s", run_dir);
    /* A shared-memory name is one path component: the run folder's own name makes it
     * unique to this engine. */
    const char *base = strrchr(run_dir, '/');
    snprintf(ep->comm_prefix, sizeof ep->comm_prefix, "/%.40s-comm", base ? base + 1 : run_dir);
    return CINFER_OK;
}

void cinfer_endpoints_of_worker(const struct engine_endpoints *ep, int role, int dp_rank, int tp_rank,
                                struct cinfer_port_args *out)
{
    memset(out, 0, sizeof *out);
    const char *dir = ep->run_dir;
    snprintf(out->run_dir, sizeof out->run_dir, "%s", dir);
    snprintf(out->status, sizeof out->status, "ipc://%s/status", dir);
    snprintf(out->tokenizer_input, sizeof out->tokenizer_input, "ipc://%s/tokenizer-in", dir);
    snprintf(out->detokenizer_input, sizeof out->detokenizer_input, "ipc://%s/detokenizer-in", dir);
    if (role != CINFER_WORKER_SCHEDULER)
        return;
    snprintf(out->scheduler_input, sizeof out->scheduler_input, "ipc://%s/scheduler-in-dp%d", dir, dp_rank);
    snprintf(out->rpc, sizeof out->rpc, "ipc://%s/rpc-dp%d-tp%d", dir, dp_rank, tp_rank);
    snprintf(out->plan, sizeof out->plan, "ipc://%s/plan-dp%d", dir, dp_rank);
    snprintf(out->comm, sizeof out->comm, "%s-dp%d", ep->comm_prefix, dp_rank);
}
