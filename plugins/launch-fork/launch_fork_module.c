/* launch-fork: starts workers on this machine with fork + exec (or fork + a function,
 * for an embedder's own hooks). Everything the child needs (argv, envp) is built by
 * the caller before fork; between fork and exec the child calls only
 * async-signal-safe functions. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch_fork_module.h"

struct cinfer_worker_handle {
    pid_t pid;
    int reaped;                       /* waitpid returned for it */
    struct cinfer_worker_status last; /* valid once reaped */
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

/* In the child: stdin becomes the lifeline, every other descriptor above 2 closes,
 * signals go back to their defaults, and the worker leaves the terminal's process
 * group so a Ctrl-C reaches only the main process (which then drains and stops it). */
static void prepare_child(int stdin_fd)
{
    if (stdin_fd >= 0) {
        if (stdin_fd != 0)
            dup2(stdin_fd, 0);
    } else {
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0 && null_fd != 0) {
            dup2(null_fd, 0);
            close(null_fd);
        }
    }
    syscall(SYS_close_range, 3u, ~0u, 0u);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    setpgid(0, 0);
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

    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        free(w);
        return cinfer_error_set(err, CINFER_ERR_CHILD, "launch-fork: %s: fork failed: %s", title, strerror(e));
    }
    if (pid == 0) {
        prepare_child(req->stdin_fd);
        if (req->argv) {
            if (req->envp)
                for (const char *const *e = req->envp; *e; e++)
                    putenv((char *)*e);
            execv(req->argv[0], (char *const *)req->argv);
            /* exec failed: say so on stderr without stdio (async-signal-safe). */
            static const char msg[] = "launch-fork: exec of the worker failed\n";
            ssize_t ignored = write(2, msg, sizeof msg - 1);
            (void)ignored;
            _exit(127);
        }
        _exit(req->child_main(req->child_ctx) & 0xff);
    }
    w->pid = pid;
    w->next = l->workers;
    l->workers = w;
    *out = w;
    return CINFER_OK;
}

static void record(struct cinfer_worker_handle *w, int status)
{
    w->reaped = 1;
    if (WIFSIGNALED(status)) {
        w->last.state = CINFER_WORKER_SIGNALED;
        w->last.code = WTERMSIG(status);
    } else {
        w->last.state = CINFER_WORKER_EXITED;
        w->last.code = WEXITSTATUS(status);
    }
}

static int fork_status(struct cinfer_launcher *l, struct cinfer_worker_handle *w, struct cinfer_worker_status *out)
{
    (void)l;
    if (!w->reaped) {
        int status;
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid)
            record(w, status);
        else if (r < 0 && errno == ECHILD) {
            /* Someone else reaped it (an embedder's SIGCHLD handler): it is gone. */
            w->reaped = 1;
            w->last.state = CINFER_WORKER_EXITED;
            w->last.code = -1;
        }
    }
    if (w->reaped)
        *out = w->last;
    else
        *out = (struct cinfer_worker_status){CINFER_WORKER_RUNNING, 0};
    return CINFER_OK;
}

static int fork_signal(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo)
{
    (void)l;
    if (w->reaped)
        return CINFER_OK;
    if (kill(w->pid, signo) != 0 && errno != ESRCH)
        return CINFER_ERR_CHILD;
    return CINFER_OK;
}

static int fork_wait(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                     struct cinfer_worker_status *out)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        fork_status(l, w, out);
        if (out->state != CINFER_WORKER_RUNNING)
            return CINFER_OK;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (timeout_ms >= 0 && elapsed_ms >= timeout_ms)
            return CINFER_ERR_TIMEOUT;
        struct timespec nap = {0, 5 * 1000000};
        nanosleep(&nap, NULL);
    }
}

/* Stops what still runs: SIGTERM, a short grace, then SIGKILL; reaps everything. */
static void fork_fini(struct cinfer_launcher **lp)
{
    if (!lp || !*lp)
        return;
    struct cinfer_launcher *l = *lp;
    struct cinfer_worker_status st;
    for (struct cinfer_worker_handle *w = l->workers; w; w = w->next)
        fork_signal(l, w, SIGTERM);
    for (struct cinfer_worker_handle *w = l->workers; w; w = w->next)
        if (fork_wait(l, w, 1000, &st) == CINFER_ERR_TIMEOUT) {
            fork_signal(l, w, SIGKILL);
            fork_wait(l, w, -1, &st);
        }
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
};
