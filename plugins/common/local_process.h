/* A process on this machine that a launcher plugin starts and watches: the worker itself
 * (launch-fork), or the ssh or mpirun client that runs workers elsewhere (launch-ssh,
 * launch-mpi). Static functions in a header, so each plugin compiles its own copy and
 * none exports a name.
 *
 * Start: the argv and environment are built by the caller before fork; between fork
 * and exec the child calls only async-signal-safe functions. Its standard input becomes
 * the given descriptor (the engine's lifeline), its standard error optionally a pipe,
 * every other descriptor above 2 closes, signals go back to their defaults, and it
 * leaves the terminal's process group (a Ctrl-C reaches only the main process, which
 * then drains and stops the workers). */
#ifndef CINFER_PLUGINS_LOCAL_PROCESS_H
#define CINFER_PLUGINS_LOCAL_PROCESS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/launcher.h"

struct local_process {
    pid_t pid;
    int reaped;                       /* waitpid returned for it */
    struct cinfer_worker_status last; /* valid once reaped */
};

/* In the child, before exec or child_main. die_with_parent: SIGTERM when the process
 * that forked it dies (for clients such as ssh, whose remote end must then go too). */
static void local_process_prepare_child(int stdin_fd, int stderr_fd, int die_with_parent)
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
    if (stderr_fd >= 0 && stderr_fd != 2)
        dup2(stderr_fd, 2);
    syscall(SYS_close_range, 3u, ~0u, 0u);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    setpgid(0, 0);
    if (die_with_parent)
        prctl(PR_SET_PDEATHSIG, SIGTERM);
}

/* Starts argv (argv[0] a path: resolve a command name before calling; or child_main(child_ctx)
 * when argv is NULL); 0, or -1 with errno. */
static int local_process_start(struct local_process *p, const char *const *argv, const char *const *envp,
                               int (*child_main)(void *), void *child_ctx, int stdin_fd, int stderr_fd,
                               int die_with_parent)
{
    memset(p, 0, sizeof *p);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        local_process_prepare_child(stdin_fd, stderr_fd, die_with_parent);
        if (argv) {
            if (envp)
                for (const char *const *e = envp; *e; e++)
                    putenv((char *)*e);
            execv(argv[0], (char *const *)argv);
            /* exec failed: say so on stderr without stdio (async-signal-safe). */
            static const char msg[] = "cinfer launcher: exec failed: ";
            ssize_t ignored = write(2, msg, sizeof msg - 1);
            ignored = write(2, argv[0], strlen(argv[0]));
            ignored = write(2, "\n", 1);
            (void)ignored;
            _exit(127);
        }
        _exit(child_main(child_ctx) & 0xff);
    }
    p->pid = pid;
    return 0;
}

static void local_process_record(struct local_process *p, int status)
{
    p->reaped = 1;
    if (WIFSIGNALED(status)) {
        p->last.state = CINFER_WORKER_SIGNALED;
        p->last.code = WTERMSIG(status);
    } else {
        p->last.state = CINFER_WORKER_EXITED;
        p->last.code = WEXITSTATUS(status);
    }
}

static void local_process_status(struct local_process *p, struct cinfer_worker_status *out)
{
    if (!p->reaped) {
        int status;
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid)
            local_process_record(p, status);
        else if (r < 0 && errno == ECHILD) {
            /* Someone else reaped it (an embedder's SIGCHLD handler): it is gone. */
            p->reaped = 1;
            p->last.state = CINFER_WORKER_EXITED;
            p->last.code = -1;
        }
    }
    *out = p->reaped ? p->last : (struct cinfer_worker_status){CINFER_WORKER_RUNNING, 0};
}

static int local_process_signal(struct local_process *p, int signo)
{
    if (p->reaped)
        return CINFER_OK;
    if (kill(p->pid, signo) != 0 && errno != ESRCH)
        return CINFER_ERR_CHILD;
    return CINFER_OK;
}

/* Waits up to timeout_ms (-1 forever); CINFER_ERR_TIMEOUT when it still runs. */
static int local_process_wait(struct local_process *p, int timeout_ms, struct cinfer_worker_status *out)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        local_process_status(p, out);
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

/* SIGTERM, a grace of grace_ms, then SIGKILL; reaped either way. */
static void local_process_stop(struct local_process *p, int grace_ms)
{
    struct cinfer_worker_status st;
    local_process_signal(p, SIGTERM);
    if (local_process_wait(p, grace_ms, &st) == CINFER_ERR_TIMEOUT) {
        local_process_signal(p, SIGKILL);
        local_process_wait(p, -1, &st);
    }
}

#endif
