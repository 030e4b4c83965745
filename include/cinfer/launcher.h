/* cinfer/launcher.h — the launcher plugin interface (kind CINFER_PLUGIN_KIND_LAUNCHER).
 *
 * A launcher decides where and how a worker process runs: launch-fork starts
 * cinfer-worker on this machine, launch-ssh on a listed host, launch-mpi as MPI ranks.
 * Modelled on PRRTE's plm framework: query() says whether the launcher is usable here
 * and with what priority; "not usable" is an answer, not an error.
 *
 * Versions (slots are only appended; the core checks a vtable's version before calling
 * a slot that came later, and NULL for optional ones):
 *   1: query, init, spawn, status, signal, wait, fini.
 *   2: query_config and init_config, which see the engine's launcher configuration
 *      (struct cinfer_launcher_config, sized by its first word) and say why a
 *      launcher is not usable; spawn_group (optional) starts a whole group of ranks
 *      in one call, as mpirun does; describe (optional) tells what the launcher knows
 *      of how a worker ended (its host, the remote shell's or ssh's last words). A
 *      version-1 plugin still loads: the core then calls query and init, and spawn
 *      once per worker.
 *   3: group_join (optional), for launchers whose groups bring their own transport
 *      (launch-mpi): a worker started with "--group FILE" calls it to learn its rank,
 *      receive its settings and get the group's communicator; allocation_hosts
 *      (optional) names the hosts of the surrounding allocation (Slurm, a hostfile)
 *      when launcher.hosts is empty. */
#ifndef CINFER_LAUNCHER_H
#define CINFER_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CINFER_LAUNCHER_OPS_VERSION 3u
/* The oldest vtable version this core still drives. */
#define CINFER_LAUNCHER_OPS_MIN_VERSION 1u

struct cinfer_launcher;        /* the plugin's state */
struct cinfer_comm;            /* cinfer/communicator.h */
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

/* What version-1 slots (query, init) receive. Frozen: new settings go in
 * struct cinfer_launcher_config. */
struct cinfer_launcher_options {
    const char *worker_path;     /* absolute path of cinfer-worker */
    const char *const *hosts;    /* for remote launchers; NULL-terminated, may be NULL */
};

/* The engine's launcher configuration, for version-2 slots. struct_size is the size
 * the core built it with: a plugin reads a field only when struct_size covers it (a
 * core older than the plugin passes fewer fields). Fields are only appended. */
struct cinfer_launcher_config {
    uint32_t struct_size;
    const char *worker_path;     /* absolute path of cinfer-worker on this machine */
    const char *const *hosts;    /* launcher.hosts: NULL-terminated, may be NULL */
    int tp_size;                 /* ranks per replica (launcher.tp_size) */
    int dp_size;                 /* replicas (launcher.dp_size) */
    const char *ssh_args;        /* launcher.ssh_args: extra ssh client arguments, space-separated; may be NULL */
    int connect_timeout_ms;      /* launcher.connect_timeout */
    const char *const *remote_workers; /* launcher.remote_worker: "PATH" or "HOST=PATH" items, NULL-terminated;
                                        * may be NULL (worker_path on every host) */
};

/* query_config's answer. */
#define CINFER_LAUNCHER_WHY_BYTES 256
struct cinfer_launcher_answer {
    int usable;                  /* 1: usable here; 0: not (why says why) */
    int priority;                /* when usable: higher wins for launcher = "auto" */
    char why[CINFER_LAUNCHER_WHY_BYTES]; /* when not usable: the reason, for a person */
};

/* What group_join gives a worker (version 3). The worker sets struct_size to the size
 * it was built with; the plugin fills only the fields that size covers. */
struct cinfer_group_member {
    uint32_t struct_size;
    int rank;                    /* this worker's rank in its group (its tp rank) */
    int size;                    /* ranks in the group */
    void *settings;              /* malloc'd: this rank's settings frame as the engine wrote
                                  * it (u32 length, then the frame); the worker frees it */
    size_t settings_bytes;
    struct cinfer_comm *comm;    /* the group's communicator (NULL when size is 1); the
                                  * worker ends it with cinfer_comm_destroy */
    int stdin_is_lifeline;       /* 1: standard input stays open as the lifeline (the rank
                                  * that read the settings); 0: it is not, and the process
                                  * that started this rank is (the worker then dies with it) */
};

/* The flag a launcher adds to the worker's argv before the path of its own plugin file,
 * for ranks that must call group_join. */
#define CINFER_WORKER_GROUP_FLAG "--group"

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

    /* ---- valid since version 2 ---- */
    /* Whether this launcher can start the configured workers here, and with what
     * priority; fills *answer and returns CINFER_OK (an unusable launcher is an
     * answer, not an error). Must not start anything. Required. */
    int (*query_config)(const struct cinfer_launcher_config *config, struct cinfer_launcher_answer *answer);
    /* init with the whole configuration. Required. */
    int (*init_config)(const struct cinfer_launcher_config *config, struct cinfer_launcher **out,
                       struct cinfer_error *err);
    /* Optional (NULL: the core calls spawn once per request). Starts the n workers of
     * reqs as one group (the ranks of a replica); out[i] is the handle of reqs[i].
     * Either every worker starts or none is left running. */
    int (*spawn_group)(struct cinfer_launcher *l, const struct cinfer_spawn_request *reqs, int n,
                       struct cinfer_worker_handle **out, struct cinfer_error *err);
    /* Optional (NULL: nothing to add). What the launcher knows of why w ended, for the
     * engine's message after "scheduler dp1 tp0 on host b exited with status 255":
     * e.g. "ssh: connect to host b port 22: Connection refused". Writes a NUL-terminated
     * text into buf (empty when there is nothing). */
    void (*describe)(struct cinfer_launcher *l, struct cinfer_worker_handle *w, char *buf, size_t buf_bytes);

    /* ---- valid since version 3 ---- */
    /* Optional. Called inside a worker process that this launcher started with
     * CINFER_WORKER_GROUP_FLAG FILE in its argv (FILE: this plugin), before anything else
     * reads standard input (stdin_fd). The launcher's spawn or spawn_group reads each
     * request's settings from its stdin_fd (the engine writes them before the start) and
     * delivers them its own way; group_join hands this rank its own and the group's
     * communicator. A launcher that has group_join brings the communicator of every
     * group it starts: the engine then makes no shared-memory segment for it. */
    int (*group_join)(int stdin_fd, struct cinfer_group_member *out, struct cinfer_error *err);
    /* Optional. When launcher.hosts is empty: the hosts of the allocation this process
     * runs in (Slurm's nodes, an MPI hostfile), shaped to the configuration: one per
     * rank (tp_size * dp_size of them) or one per replica (dp_size). Writes a
     * NULL-terminated array of malloc'd strings into *hosts (the caller frees each and
     * the array), or *hosts = NULL when there is no allocation. An allocation too small
     * for the configuration is an error that says both sizes. */
    int (*allocation_hosts)(const struct cinfer_launcher_config *config, char ***hosts, struct cinfer_error *err);
};

#ifdef __cplusplus
}
#endif
#endif
