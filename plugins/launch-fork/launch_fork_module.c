/* launch-fork: starts workers on this machine with fork + exec (or fork + a function,
 * for an embedder's own hooks); plugins/common/local_process.h does the starting and
 * watching. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/local_process.h"
#include "launch_fork_module.h"

struct cinfer_worker_handle {
    struct local_process process;
    struct cinfer_worker_handle *next;
};

struct cinfer_launcher {
    struct cinfer_worker_handle *workers;
};

#define FORK_PRIORITY 10 /* PRRTE's rsh/fork rank: MPI and SSH rank higher where they apply */

static int is_this_machine(const char *host)
{
    return !host || !host[0] || !strcmp(host, "localhost") || !strcmp(host, "127.0.0.1") || !strcmp(host, "::1");
}

static int fork_query(int *priority)
{
    *priority = FORK_PRIORITY;
    return 1;
}

/* Usable unless the configuration names hosts other than this machine. */
static int fork_query_config(const struct cinfer_launcher_config *config, struct cinfer_launcher_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    answer->usable = 1;
    answer->priority = FORK_PRIORITY;
    if (config && config->struct_size >= offsetof(struct cinfer_launcher_config, hosts) + sizeof config->hosts &&
        config->hosts)
        for (const char *const *h = config->hosts; *h; h++)
            if (!is_this_machine(*h)) {
                answer->usable = 0;
                snprintf(answer->why, sizeof answer->why,
                         "starts workers on this machine only, and launcher.hosts lists '%s'", *h);
                break;
            }
    return CINFER_OK;
}

static int fork_init(const struct cinfer_launcher_options *opts, struct cinfer_launcher **out,
                     struct cinfer_error *err)
{
    (void)opts;
    *out = calloc(1, sizeof **out);
    return *out ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-fork: out of memory");
}

static int fork_init_config(const struct cinfer_launcher_config *config, struct cinfer_launcher **out,
                            struct cinfer_error *err)
{
    (void)config;
    return fork_init(NULL, out, err);
}

static int fork_spawn(struct cinfer_launcher *l, const struct cinfer_spawn_request *req,
                      struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    const char *title = req->title ? req->title : "worker";
    if (!is_this_machine(req->host))
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "launch-fork: %s: host '%s' is not this machine (use launch-ssh for other hosts)",
                                title, req->host);
    if (!req->argv && !req->child_main)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "launch-fork: %s: neither argv nor child_main",
                                title);
    struct cinfer_worker_handle *w = calloc(1, sizeof *w);
    if (!w)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-fork: out of memory");
    if (local_process_start(&w->process, req->argv, req->envp, req->child_main, req->child_ctx, req->stdin_fd, -1,
                            0) != 0) {
        int e = errno;
        free(w);
        return cinfer_error_set(err, CINFER_ERR_CHILD, "launch-fork: %s: fork failed: %s", title, strerror(e));
    }
    w->next = l->workers;
    l->workers = w;
    *out = w;
    return CINFER_OK;
}

static int fork_status(struct cinfer_launcher *l, struct cinfer_worker_handle *w, struct cinfer_worker_status *out)
{
    (void)l;
    local_process_status(&w->process, out);
    return CINFER_OK;
}

static int fork_signal(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo)
{
    (void)l;
    return local_process_signal(&w->process, signo);
}

static int fork_wait(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                     struct cinfer_worker_status *out)
{
    (void)l;
    return local_process_wait(&w->process, timeout_ms, out);
}

/* Stops what still runs: SIGTERM, a short grace, then SIGKILL; reaps everything. */
static void fork_fini(struct cinfer_launcher **lp)
{
    if (!lp || !*lp)
        return;
    struct cinfer_launcher *l = *lp;
    for (struct cinfer_worker_handle *w = l->workers; w; w = w->next)
        local_process_signal(&w->process, SIGTERM);
    for (struct cinfer_worker_handle *w = l->workers; w; w = w->next)
        local_process_stop(&w->process, 1000);
    while (l->workers) {
        struct cinfer_worker_handle *next = l->workers->next;
        free(l->workers);
        l->workers = next;
    }
    free(l);
    *lp = NULL;
}

const struct cinfer_launcher_ops cinfer_launch_fork_ops = {
    .version = CINFER_LAUNCHER_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_launcher_ops),
    .query = fork_query,
    .init = fork_init,
    .spawn = fork_spawn,
    .status = fork_status,
    .signal = fork_signal,
    .wait = fork_wait,
    .fini = fork_fini,
    .query_config = fork_query_config,
    .init_config = fork_init_config,
    .spawn_group = NULL, /* one fork per worker: the core calls spawn for each */
    .describe = NULL,
};
