/* cinfer/launcher.h — the launcher plugin interface (kind CINFER_PLUGIN_KIND_LAUNCHER).
 *
 * A launcher decides where and how a worker process runs: launch-fork starts
 * cinfer-worker on this machine, launch-ssh on a listed host, launch-mpi as MPI ranks.
 * Modelled on PRRTE's plm framework: query() says whether the launcher is usable here
 * and with what priority; "not usable" is an answer, not an error. */
#ifndef CINFER_LAUNCHER_H
#define CINFER_LAUNCHER_H

#include <stdint.h>
#include <sys/types.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CINFER_LAUNCHER_OPS_VERSION 1u

struct cinfer_launcher;        /* the plugin's state */
struct cinfer_worker_handle;   /* one started worker, owned by the launcher */

enum cinfer_worker_role {
    CINFER_ROLE_SCHEDULER = 1,
    CINFER_ROLE_DETOKENIZER = 2,
};

struct cinfer_spawn_request {
    enum cinfer_worker_role role;
    int tp_rank;                 /* tensor-parallel rank, 0-based */
    int dp_rank;                 /* data-parallel replica, 0-based */
    int gpu_id;                  /* -1 for CPU */
    const char *host;            /* NULL or "localhost" for this machine */
    const char *const *argv;     /* full argv of cinfer-worker (argv[0] its path), built before
                                  * any fork; NULL to run child_main instead of exec */
    const char *const *envp;     /* extra NAME=value entries, NULL-terminated, may be NULL */
    /* Fork without exec (local launchers only): the child runs child_main(child_ctx)
     * and exits with its return value. Lets an embedder's own hooks run in workers. */
    int (*child_main)(void *child_ctx);
    void *child_ctx;
    /* The worker's standard input: the read end of the engine's lifeline pipe, so a
     * worker sees EOF when the main process is gone (-1: /dev/null). Every other
     * descriptor above 2 is closed in the worker. */
    int stdin_fd;
    const char *title;           /* "scheduler tp0": for messages about this worker */
};

enum cinfer_worker_state {
    CINFER_WORKER_RUNNING = 1,
    CINFER_WORKER_EXITED = 2,    /* code holds the exit status */
    CINFER_WORKER_SIGNALED = 3,  /* code holds the signal number */
};

struct cinfer_worker_status {
    enum cinfer_worker_state state;
    int code;
};

struct cinfer_launcher_options {
    const char *worker_path;     /* absolute path of cinfer-worker */
    const char *const *hosts;    /* for remote launchers; NULL-terminated, may be NULL */
};

struct cinfer_launcher_ops {
    uint32_t version;     /* CINFER_LAUNCHER_OPS_VERSION */
    uint32_t struct_size; /* sizeof(struct cinfer_launcher_ops) */

    /* 1 when usable here (with *priority set: higher wins for launcher = "auto"),
     * 0 when not. Must not start anything. */
    int (*query)(int *priority);
    int (*init)(const struct cinfer_launcher_options *opts, struct cinfer_launcher **out,
                struct cinfer_error *err);
    int (*spawn)(struct cinfer_launcher *l, const struct cinfer_spawn_request *req,
                 struct cinfer_worker_handle **out, struct cinfer_error *err);
    int (*status)(struct cinfer_launcher *l, struct cinfer_worker_handle *w,
                  struct cinfer_worker_status *out);
    int (*signal)(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo);
    /* Waits up to timeout_ms (-1: forever) for w to end; CINFER_ERR_TIMEOUT if it has not. */
    int (*wait)(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                struct cinfer_worker_status *out);
    /* Stops every worker still running and frees l; sets *l to NULL. */
    void (*fini)(struct cinfer_launcher **l);
};

#ifdef __cplusplus
}
#endif
#endif
