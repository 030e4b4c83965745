/* What every worker process shares: its status channel to the main process (READY or
 * FAILED with its reason, then heartbeats while its loop turns) and its lifeline
 * (standard input: EOF means the main process is gone and the worker must exit). */
#ifndef CINFER_ENGINE_WORKER_LINK_H
#define CINFER_ENGINE_WORKER_LINK_H

#include "cinfer/engine.h"
#include "ipc/curve.h"
#include "ipc/messages.h"

struct cinfer_worker_link {
    void *zmq_context;
    void *status;        /* PUSH to the main process */
    int role;            /* enum cinfer_worker_role_id */
    int tp_rank, dp_rank;
    char name[48];       /* "scheduler tp0", "scheduler dp1 tp0" */
    long last_heartbeat_ms; /* monotonic time of the last HEARTBEAT sent */
    struct cinfer_zap *zap; /* admits the engine's CURVE clients (channels on hosts) */
};

/* Names the worker as the engine does ("scheduler dp1 tp0" when dp_size > 1). */
int cinfer_worker_link_open(struct cinfer_worker_link *link, const struct cinfer_port_args *ports, int role,
                            int tp_rank, int dp_rank, int dp_size, struct cinfer_error *err);
/* Fills role, ranks and pid of ready and sends it. */
void cinfer_worker_link_ready(struct cinfer_worker_link *link, struct cinfer_msg_ready *ready);
/* Sends FAILED with the message, logs it, and returns the exit status to use (1). */
int cinfer_worker_link_failed(struct cinfer_worker_link *link, int code, const char *message);
void cinfer_worker_link_close(struct cinfer_worker_link *link);

/* Called on every turn of a worker's loop: sends a HEARTBEAT when a quarter of the
 * watchdog's timeout (at most 1 s) has passed since the last one, so the watchdog sees
 * several per timeout; a loop stuck in one step sends none. */
void cinfer_worker_link_heartbeat(struct cinfer_worker_link *link, int watchdog_timeout_ms);
/* How often a worker loop must turn, at least, for its heartbeats to keep time. */
int cinfer_worker_heartbeat_interval_ms(int watchdog_timeout_ms);

/* 1 once standard input reports end of file or hang-up (the main process is gone). */
int cinfer_lifeline_gone(void);

/* Makes the process that started this worker its lifeline instead of standard input
 * (a rank of a launch-mpi group other than the one that read the settings): it gets
 * SIGKILL when that process ends. */
int cinfer_lifeline_use_parent(struct cinfer_error *err);

/* A thread that ends the process grace_ms after standard input hangs up, whatever its
 * loop is doing: a rank stuck in a collective or in a long step, or a remote worker
 * whose SSH session ended, still goes. The loops' own check (cinfer_lifeline_gone)
 * normally ends the process first, cleanly. */
int cinfer_lifeline_watch(int grace_ms);

#endif
