#include "engine/port_args.h"

#include <stdio.h>
#include <string.h>

/* sun_path holds 108 bytes; keep every endpoint's path well inside it. */
#define MAX_SOCKET_PATH 100

int cinfer_port_args_init(struct cinfer_port_args *ports, const char *run_dir, struct cinfer_error *err)
{
    memset(ports, 0, sizeof *ports);
    if (strlen(run_dir) + sizeof "/detokenizer-in" > MAX_SOCKET_PATH || strlen(run_dir) >= sizeof ports->run_dir)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "run folder %s is too long for a unix socket path (at most %d bytes with the socket name)",
                                run_dir, MAX_SOCKET_PATH);
    snprintf(ports->run_dir, sizeof ports->run_dir, "%s", run_dir);
    snprintf(ports->scheduler_input, sizeof ports->scheduler_input, "ipc://%s/scheduler-in", run_dir);
    snprintf(ports->detokenizer_input, sizeof ports->detokenizer_input, "ipc://%s/detokenizer-in", run_dir);
    snprintf(ports->tokenizer_input, sizeof ports->tokenizer_input, "ipc://%s/tokenizer-in", run_dir);
    snprintf(ports->status, sizeof ports->status, "ipc://%s/status", run_dir);
    snprintf(ports->rpc_prefix, sizeof ports->rpc_prefix, "ipc://%s/rpc", run_dir);
    return CINFER_OK;
}

void cinfer_port_args_rpc_endpoint(const struct cinfer_port_args *ports, int tp_rank, char *buf, size_t buf_bytes)
{
    snprintf(buf, buf_bytes, "%s-tp%d", ports->rpc_prefix, tp_rank);
}
