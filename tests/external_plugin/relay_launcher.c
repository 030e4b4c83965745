/* relay-launcher: a third-party launcher plugin built out of tree against the installed
 * headers. It starts workers on this machine with fork and exec, as launch-fork does,
 * and writes one line per worker it starts to the file named by $RELAY_LAUNCHER_LOG, so
 * a test can see that the engine chose it. It says it is usable (priority 50, above
 * launch-fork's 10) only when $RELAY_LAUNCHER_ENABLE is 1, and why not otherwise. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cinfer/launcher.h>
#include <cinfer/plugin.h>

struct cinfer_worker_handle {
    pid_t pid;
    int reaped;
    struct cinfer_worker_status last;
    struct cinfer_worker_handle *next;
};

struct cinfer_launcher {
    struct cinfer_worker_handle *workers;
};

static int relay_query(int *priority)
{
    *priority = 50;
    const char *on = getenv("RELAY_LAUNCHER_ENABLE");
    return on && !strcmp(on, "1");
}

static int relay_query_config(const struct cinfer_launcher_config *config, struct cinfer_launcher_answer *answer)
{
    (void)config;
    memset(answer, 0, sizeof *answer);
    answer->usable = relay_query(&answer->priority);
    if (!answer->usable)
        snprintf(answer->why, sizeof answer->why, "RELAY_LAUNCHER_ENABLE is not set to 1");
    return CINFER_OK;
}

static int relay_init(const struct cinfer_launcher_options *opts, struct cinfer_launcher **out,
                      struct cinfer_error *err)
{
    (void)opts;
    *out = calloc(1, sizeof **out);
    return *out ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "relay-launcher: out of memory");
}

static int relay_init_config(const struct cinfer_launcher_config *config, struct cinfer_launcher **out,
                             struct cinfer_error *err)
{
    (void)config;
    return relay_init(NULL, out, err);
}

static int relay_spawn(struct cinfer_launcher *l, const struct cinfer_spawn_request *req,
                       struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    if (!req->argv)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "relay-launcher: %s: only exec'd workers", req->title);
    const char *log = getenv("RELAY_LAUNCHER_LOG");
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "%s\n", req->title);
            fclose(f);
        }
    }
    struct cinfer_worker_handle *w = calloc(1, sizeof *w);
    if (!w)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "relay-launcher: out of memory");
    pid_t pid = fork();
    if (pid < 0) {
        free(w);
        return cinfer_error_set(err, CINFER_ERR_CHILD, "relay-launcher: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        dup2(req->stdin_fd, 0);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        setpgid(0, 0);
        execv(req->argv[0], (char *const *)req->argv);
        _exit(127);
    }
    w->pid = pid;
    w->next = l->workers;
    l->workers = w;
    *out = w;
    return CINFER_OK;
}

static int relay_status(struct cinfer_launcher *l, struct cinfer_worker_handle *w, struct cinfer_worker_status *out)
{
    (void)l;
    int status;
    if (!w->reaped && waitpid(w->pid, &status, WNOHANG) == w->pid) {
        w->reaped = 1;
        w->last.state = WIFSIGNALED(status) ? CINFER_WORKER_SIGNALED : CINFER_WORKER_EXITED;
        w->last.code = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
    }
    *out = w->reaped ? w->last : (struct cinfer_worker_status){CINFER_WORKER_RUNNING, 0};
    return CINFER_OK;
}

static int relay_signal(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo)
{
    (void)l;
    if (!w->reaped)
        kill(w->pid, signo);
    return CINFER_OK;
}

static int relay_wait(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                      struct cinfer_worker_status *out)
{
    for (int waited = 0;; waited += 5) {
        relay_status(l, w, out);
        if (out->state != CINFER_WORKER_RUNNING)
            return CINFER_OK;
        if (timeout_ms >= 0 && waited >= timeout_ms)
            return CINFER_ERR_TIMEOUT;
        struct timespec nap = {0, 5 * 1000000};
        nanosleep(&nap, NULL);
    }
}

static void relay_fini(struct cinfer_launcher **lp)
{
    struct cinfer_launcher *l = *lp;
    struct cinfer_worker_status st;
    while (l->workers) {
        struct cinfer_worker_handle *w = l->workers;
        relay_signal(l, w, SIGKILL);
        relay_wait(l, w, -1, &st);
        l->workers = w->next;
        free(w);
    }
    free(l);
    *lp = NULL;
}

static const struct cinfer_launcher_ops relay_ops = {
    .version = CINFER_LAUNCHER_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_launcher_ops),
    .query = relay_query,
    .init = relay_init,
    .spawn = relay_spawn,
    .status = relay_status,
    .signal = relay_signal,
    .wait = relay_wait,
    .fini = relay_fini,
    .query_config = relay_query_config,
    .init_config = relay_init_config,
    .spawn_group = NULL,
};

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_LAUNCHER, "relay-launcher", "0.1.0", &relay_ops);
