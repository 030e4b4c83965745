/* What every worker process shares: its status channel to the main process (READY or
 * FAILED with its reason) and its lifeline (standard input: EOF means the main
 * process is gone and the worker must exit). */
#ifndef CINFER_ENGINE_WORKER_LINK_H
#define CINFER_ENGINE_WORKER_LINK_H

#include "cinfer/engine.h"
#include "ipc/messages.h"

struct cinfer_worker_link {
    void *zmq_context;
    void *status;        /* PUSH to the main process */
    int role;            /* enum cinfer_worker_role_id */
    int tp_rank, dp_rank;
    char name[32];       /* "scheduler tp0" */
};

int cinfer_worker_link_open(struct cinfer_worker_link *link, const struct cinfer_port_args *ports, int role,
                            int tp_rank, int dp_rank, struct cinfer_error *err);
/* Fills role, ranks and pid of ready and sends it. */
void cinfer_worker_link_ready(struct cinfer_worker_link *link, struct cinfer_msg_ready *ready);
/* Sends FAILED with the message, logs it, and returns the exit status to use (1). */
int cinfer_worker_link_failed(struct cinfer_worker_link *link, int code, const char *message);
void cinfer_worker_link_close(struct cinfer_worker_link *link);

/* 1 once standard input reports end of file or hang-up (the main process is gone). */
int cinfer_lifeline_gone(void);

#endif
