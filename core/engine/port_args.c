#include "engine/port_args.h"

#include <stdio.h>
#include <string.h>

/* sun_path holds 108 bytes; keep every endpoint's path well inside it, with room for
 * the longest per-rank suffix ("-dp1023-tp1023"). */
#define MAX_SOCKET_PATH 100
#define LONGEST_SOCKET_NAME "/detokenizer-in"
#define LONGEST_SUFFIX "-dp1023-tp1023"

int cinfer_port_args_init(struct cinfer_port_args *ports, const char *run_dir, struct cinfer_error *err)
{
    memset(ports, 0, sizeof *ports);
    if (strlen(run_dir) + sizeof LONGEST_SOCKET_NAME + sizeof LONGEST_SUFFIX > MAX_SOCKET_PATH ||
        strlen(run_dir) >= sizeof ports->run_dir)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "run folder %s is too long for a unix socket path (at most %d bytes with the socket name)",
                                run_dir, MAX_SOCKET_PATH);
    snprintf(ports->run_dir, sizeof ports->run_dir, "%s", run_dir);
    snprintf(ports->scheduler_input, sizeof ports->scheduler_input, "ipc://%s/scheduler-in", run_dir);
    snprintf(ports->detokenizer_input, sizeof ports->detokenizer_input, "ipc://%s/detokenizer-in", run_dir);
    snprintf(ports->tokenizer_input, sizeof ports->tokenizer_input, "ipc://%s/tokenizer-in", run_dir);
    snprintf(ports->status, sizeof ports->status, "ipc://%s/status", run_dir);
    snprintf(ports->rpc_prefix, sizeof ports->rpc_prefix, "ipc://%s/rpc", run_dir);
    snprintf(ports->plan_prefix, sizeof ports->plan_prefix, "ipc://%s/plan", run_dir);
    /* A shared-memory name is one path component: the run folder's own name makes it
     * unique to this engine. */
    const char *base = strrchr(run_dir, '/');
    snprintf(ports->comm_prefix, sizeof ports->comm_prefix, "/%.40s-comm", base ? base + 1 : run_dir);
    return CINFER_OK;
}

void cinfer_port_args_scheduler_input(const struct cinfer_port_args *ports, int dp_rank, char *buf, size_t buf_bytes)
{
    snprintf(buf, buf_bytes, "%s-dp%d", ports->scheduler_input, dp_rank);
}

void cinfer_port_args_rpc(const struct cinfer_port_args *ports, int dp_rank, int tp_rank, char *buf, size_t buf_bytes)
{
    snprintf(buf, buf_bytes, "%s-dp%d-tp%d", ports->rpc_prefix, dp_rank, tp_rank);
}

void cinfer_port_args_plan(const struct cinfer_port_args *ports, int dp_rank, int tp_rank, char *buf,
                           size_t buf_bytes)
{
    snprintf(buf, buf_bytes, "%s-dp%d-tp%d", ports->plan_prefix, dp_rank, tp_rank);
}

void cinfer_port_args_comm(const struct cinfer_port_args *ports, int dp_rank, char *buf, size_t buf_bytes)
{
    snprintf(buf, buf_bytes, "%s-dp%d", ports->comm_prefix, dp_rank);
}
