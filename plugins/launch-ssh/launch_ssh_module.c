/* launch-ssh: starts scheduler workers on the listed hosts with the OpenSSH client, and
 * the workers that belong on this machine (the detokenizer) with fork and exec.
 *
 * A remote worker runs as `ssh -T -o BatchMode=yes -o ConnectTimeout=S [ssh_args] HOST
 * -- 'WORKER' ARGS...; echo "cinfer-launch-ssh: exit $?" >&2`. Its settings and the
 * engine's keys go through ssh's standard input (the engine's lifeline socket), never
 * argv; when the session ends (the engine closed the lifeline, the ssh client was
 * killed, the connection dropped) the worker's standard input ends and it exits. The
 * trailing echo tells how the remote worker ended (137 after kill -9: killed by signal
 * 9); what else ssh or the remote shell printed last (an unreachable host, a refused
 * key, a missing cinfer-worker) is kept for the engine's message. */
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/local_process.h"
#include "common/remote_hosts.h"
#include "launch_ssh_module.h"

#define SSH_PRIORITY 20     /* above launch-fork: with hosts listed, ssh reaches them */
#define MAX_SSH_ARGS 32
#define TAIL_LINES 3
#define EXIT_MARKER "cinfer-launch-ssh: exit "

struct cinfer_worker_handle {
    struct local_process process; /* the ssh client, or the worker itself when local */
    char host[128];               /* "" when local */
    int stderr_fd;                /* our end of its standard error (-1: inherited, local) */
    /* under the launcher's lock: */
    char partial[512];            /* a line being read */
    size_t partial_len;
    char tail[TAIL_LINES][256];   /* its last lines that were not the exit marker */
    int n_tail;
    int remote_exit;              /* from the marker, -1 until seen */
    int eof;                      /* its standard error ended */
    struct cinfer_worker_handle *next;
};

struct cinfer_launcher {
    char ssh_path[4096];
    char worker_path[4096];
    char *ssh_args_copy;
    const char *ssh_args[MAX_SSH_ARGS];
    int n_ssh_args;
    int connect_timeout_s;
    char **remote_workers;        /* "PATH" or "HOST=PATH", NULL-terminated copies */
    struct cinfer_worker_handle *workers;
    pthread_mutex_t lock;
    pthread_t reader;
    int reader_started;
    volatile int stop;
};

/* ---- configuration -------------------------------------------------------------------- */

#define HAS(c, field) REMOTE_CONFIG_HAS(c, field)

static int ssh_query_config(const struct cinfer_launcher_config *config, struct cinfer_launcher_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    char ssh[4096];
    if (!HAS(config, hosts) || !config->hosts || !config->hosts[0])
        snprintf(answer->why, sizeof answer->why, "launcher.hosts is empty: launch-ssh starts workers on hosts");
    else if (!remote_find_on_path("ssh", ssh, sizeof ssh))
        snprintf(answer->why, sizeof answer->why, "no ssh client on PATH (Debian: apt-get install openssh-client)");
    else {
        answer->usable = 1;
        answer->priority = SSH_PRIORITY;
    }
    return CINFER_OK;
}

static int ssh_query(int *priority)
{
    char ssh[4096];
    *priority = SSH_PRIORITY;
    return remote_find_on_path("ssh", ssh, sizeof ssh);
}

/* ---- the readers of the ssh clients' standard error ---------------------------------- */

static void keep_line(struct cinfer_worker_handle *w, const char *line)
{
    if (!strncmp(line, EXIT_MARKER, strlen(EXIT_MARKER))) {
        w->remote_exit = atoi(line + strlen(EXIT_MARKER));
        return;
    }
    fprintf(stderr, "%s\n", line); /* the worker's own log lines, and ssh's */
    if (!line[0])
        return;
    if (w->n_tail == TAIL_LINES) {
        memmove(w->tail[0], w->tail[1], sizeof w->tail[0] * (TAIL_LINES - 1));
        w->n_tail--;
    }
    snprintf(w->tail[w->n_tail++], sizeof w->tail[0], "%s", line);
}

/* Reads what is there; lock held. */
static void drain(struct cinfer_worker_handle *w)
{
    char buf[1024];
    ssize_t n = read(w->stderr_fd, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (w->partial_len) {
                w->partial[w->partial_len] = '\0';
                keep_line(w, w->partial);
                w->partial_len = 0;
            }
            w->eof = 1;
        }
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || w->partial_len == sizeof w->partial - 1) {
            w->partial[w->partial_len] = '\0';
            keep_line(w, w->partial);
            w->partial_len = 0;
            if (buf[i] == '\n')
                continue;
        }
        w->partial[w->partial_len++] = buf[i];
    }
}

static void *reader_thread(void *arg)
{
    struct cinfer_launcher *l = arg;
    while (!l->stop) {
        struct pollfd fds[256];
        struct cinfer_worker_handle *owners[256];
        int n = 0;
        pthread_mutex_lock(&l->lock);
        for (struct cinfer_worker_handle *w = l->workers; w && n < 256; w = w->next)
            if (w->stderr_fd >= 0 && !w->eof) {
                fds[n] = (struct pollfd){.fd = w->stderr_fd, .events = POLLIN};
                owners[n++] = w;
            }
        pthread_mutex_unlock(&l->lock);
        if (poll(fds, (nfds_t)n, 50) <= 0)
            continue;
        pthread_mutex_lock(&l->lock);
        for (int i = 0; i < n; i++)
            if (fds[i].revents)
                drain(owners[i]);
        pthread_mutex_unlock(&l->lock);
    }
    return NULL;
}

/* ---- init ------------------------------------------------------------------------------ */

/* ssh_args split on spaces and tabs (no quoting: a path with a space goes in an
 * ssh_config file named with -F). */
static int split_ssh_args(struct cinfer_launcher *l, const char *args, struct cinfer_error *err)
{
    if (!args)
        return CINFER_OK;
    l->ssh_args_copy = strdup(args);
    if (!l->ssh_args_copy)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-ssh: out of memory");
    for (char *save = NULL, *t = strtok_r(l->ssh_args_copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (l->n_ssh_args == MAX_SSH_ARGS)
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "launcher.ssh_args: more than %d arguments; put the options in a file for -F",
                                    MAX_SSH_ARGS);
        l->ssh_args[l->n_ssh_args++] = t;
    }
    return CINFER_OK;
}

static void ssh_fini(struct cinfer_launcher **lp);

static int ssh_init_config(const struct cinfer_launcher_config *config, struct cinfer_launcher **out,
                           struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_launcher *l = calloc(1, sizeof *l);
    if (!l)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-ssh: out of memory");
    pthread_mutex_init(&l->lock, NULL);
    int rc = CINFER_OK;
    if (!remote_find_on_path("ssh", l->ssh_path, sizeof l->ssh_path))
        rc = cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "launch-ssh: no ssh client on PATH");
    snprintf(l->worker_path, sizeof l->worker_path, "%s", config && config->worker_path ? config->worker_path : "");
    l->connect_timeout_s = 10;
    if (HAS(config, connect_timeout_ms) && config->connect_timeout_ms > 0)
        l->connect_timeout_s = (config->connect_timeout_ms + 999) / 1000;
    if (rc == CINFER_OK && HAS(config, ssh_args))
        rc = split_ssh_args(l, config->ssh_args, err);
    if (rc == CINFER_OK && HAS(config, remote_workers) && config->remote_workers &&
        remote_workers_copy(config->remote_workers, &l->remote_workers) != 0)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-ssh: out of memory");
    if (rc == CINFER_OK) {
        if (pthread_create(&l->reader, NULL, reader_thread, l) != 0)
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-ssh: cannot start its reader thread");
        else
            l->reader_started = 1;
    }
    if (rc) {
        ssh_fini(&l);
        return rc;
    }
    *out = l;
    return CINFER_OK;
}

static int ssh_init(const struct cinfer_launcher_options *opts, struct cinfer_launcher **out, struct cinfer_error *err)
{
    struct cinfer_launcher_config config = {.struct_size = offsetof(struct cinfer_launcher_config, tp_size),
                                            .worker_path = opts ? opts->worker_path : NULL,
                                            .hosts = opts ? opts->hosts : NULL};
    return ssh_init_config(&config, out, err);
}

/* ---- spawn ----------------------------------------------------------------------------- */

/* The cinfer-worker path for host, from launcher.remote_worker (common/remote_hosts.h). */
static const char *worker_path_for(const struct cinfer_launcher *l, const char *host)
{
    return remote_worker_path(l->remote_workers, host, l->worker_path);
}

/* Appends s to the remote command in single quotes (the remote shell's quoting). */
static int append_quoted(char *cmd, size_t cap, size_t *len, const char *s)
{
    if (*len + 3 >= cap)
        return -1;
    cmd[(*len)++] = '\'';
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t k = piece ? strlen(piece) : 1;
        if (*len + k + 2 >= cap)
            return -1;
        if (piece)
            memcpy(cmd + *len, piece, k);
        else
            cmd[*len] = *s;
        *len += k;
    }
    cmd[(*len)++] = '\'';
    cmd[(*len)++] = ' ';
    cmd[*len] = '\0';
    return 0;
}

static int ssh_spawn(struct cinfer_launcher *l, const struct cinfer_spawn_request *req,
                     struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    const char *title = req->title ? req->title : "worker";
    if (!req->argv)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "launch-ssh: %s: workers run as cinfer-worker (an embedder's own hooks need its own "
                                "worker binary on the hosts)", title);
    struct cinfer_worker_handle *w = calloc(1, sizeof *w);
    if (!w)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-ssh: out of memory");
    w->stderr_fd = -1;
    w->remote_exit = -1;
    if (!req->host || !req->host[0]) { /* this machine's worker: the detokenizer */
        if (local_process_start(&w->process, req->argv, req->envp, NULL, NULL, req->stdin_fd, -1, 0) != 0) {
            int e = errno;
            free(w);
            return cinfer_error_set(err, CINFER_ERR_CHILD, "launch-ssh: %s: fork failed: %s", title, strerror(e));
        }
    } else {
        snprintf(w->host, sizeof w->host, "%s", req->host);
        char command[8192] = "";
        size_t len = 0;
        int bad = append_quoted(command, sizeof command, &len, worker_path_for(l, req->host));
        for (int i = 1; !bad && req->argv[i]; i++)
            bad = append_quoted(command, sizeof command, &len, req->argv[i]);
        char timeout[64];
        snprintf(timeout, sizeof timeout, "ConnectTimeout=%d", l->connect_timeout_s);
        if (!bad)
            bad = snprintf(command + len, sizeof command - len, "; echo \"" EXIT_MARKER "$?\" >&2") >=
                  (int)(sizeof command - len);
        const char *argv[MAX_SSH_ARGS + 16];
        int n = 0;
        argv[n++] = l->ssh_path;
        argv[n++] = "-T";
        argv[n++] = "-o";
        argv[n++] = "BatchMode=yes";
        argv[n++] = "-o";
        argv[n++] = timeout;
        argv[n++] = "-o";
        argv[n++] = "ServerAliveInterval=5";
        for (int i = 0; i < l->n_ssh_args; i++)
            argv[n++] = l->ssh_args[i];
        argv[n++] = req->host;
        argv[n++] = "--";
        argv[n++] = command;
        argv[n] = NULL;
        int pipe_fds[2] = {-1, -1};
        if (bad || pipe2(pipe_fds, O_CLOEXEC) != 0) {
            free(w);
            return cinfer_error_set(err, bad ? CINFER_ERR_RANGE : CINFER_ERR_IO,
                                    "launch-ssh: %s on host %s: %s", title, req->host,
                                    bad ? "the remote command is too long" : strerror(errno));
        }
        /* the ssh client dies with the engine's process: its session, and so the
         * remote worker, end then too */
        int started = local_process_start(&w->process, argv, req->envp, NULL, NULL, req->stdin_fd, pipe_fds[1], 1);
        int e = errno;
        close(pipe_fds[1]);
        if (started != 0) {
            close(pipe_fds[0]);
            free(w);
            return cinfer_error_set(err, CINFER_ERR_CHILD, "launch-ssh: %s on host %s: fork failed: %s", title,
                                    req->host, strerror(e));
        }
        fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
        w->stderr_fd = pipe_fds[0];
    }
    pthread_mutex_lock(&l->lock);
    w->next = l->workers;
    l->workers = w;
    pthread_mutex_unlock(&l->lock);
    *out = w;
    return CINFER_OK;
}

/* ---- watching --------------------------------------------------------------------------- */

static int ssh_status(struct cinfer_launcher *l, struct cinfer_worker_handle *w, struct cinfer_worker_status *out)
{
    local_process_status(&w->process, out);
    if (out->state == CINFER_WORKER_RUNNING || w->stderr_fd < 0)
        return CINFER_OK;
    /* The client ended: its last words are in the pipe (read them before judging). */
    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < 100 && !w->eof; i++) {
        drain(w);
        if (!w->eof) {
            pthread_mutex_unlock(&l->lock);
            struct timespec nap = {0, 5 * 1000000};
            nanosleep(&nap, NULL);
            pthread_mutex_lock(&l->lock);
        }
    }
    int remote = w->remote_exit;
    pthread_mutex_unlock(&l->lock);
    if (remote >= 128 && remote < 128 + 65) /* the remote shell's way of saying "killed by signal" */
        *out = (struct cinfer_worker_status){CINFER_WORKER_SIGNALED, remote - 128};
    else if (remote >= 0)
        *out = (struct cinfer_worker_status){CINFER_WORKER_EXITED, remote};
    return CINFER_OK;
}

static void ssh_describe(struct cinfer_launcher *l, struct cinfer_worker_handle *w, char *buf, size_t buf_bytes)
{
    buf[0] = '\0';
    pthread_mutex_lock(&l->lock);
    size_t used = 0;
    if (w->remote_exit >= 128) { /* killed: the signal says it all (the shell's "Killed" line adds nothing) */
        pthread_mutex_unlock(&l->lock);
        return;
    }
    for (int i = 0; i < w->n_tail && used < buf_bytes; i++)
        used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%s", i ? "; " : "", w->tail[i]);
    pthread_mutex_unlock(&l->lock);
}

static int ssh_signal(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo)
{
    (void)l;
    /* For a remote worker this ends its session, which ends the worker. */
    return local_process_signal(&w->process, signo);
}

static int ssh_wait(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                    struct cinfer_worker_status *out)
{
    int rc = local_process_wait(&w->process, timeout_ms, out);
    if (rc == CINFER_OK)
        ssh_status(l, w, out);
    return rc;
}

static void ssh_fini(struct cinfer_launcher **lp)
{
    if (!lp || !*lp)
        return;
    struct cinfer_launcher *l = *lp;
    for (struct cinfer_worker_handle *w = l->workers; w; w = w->next)
        local_process_signal(&w->process, SIGTERM);
    for (struct cinfer_worker_handle *w = l->workers; w; w = w->next)
        local_process_stop(&w->process, 1000);
    l->stop = 1;
    if (l->reader_started)
        pthread_join(l->reader, NULL);
    while (l->workers) {
        struct cinfer_worker_handle *next = l->workers->next;
        if (l->workers->stderr_fd >= 0)
            close(l->workers->stderr_fd);
        free(l->workers);
        l->workers = next;
    }
    remote_workers_free(l->remote_workers);
    free(l->ssh_args_copy);
    pthread_mutex_destroy(&l->lock);
    free(l);
    *lp = NULL;
}

const struct cinfer_launcher_ops cinfer_launch_ssh_ops = {
    .version = CINFER_LAUNCHER_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_launcher_ops),
    .query = ssh_query,
    .init = ssh_init,
    .spawn = ssh_spawn,
    .status = ssh_status,
    .signal = ssh_signal,
    .wait = ssh_wait,
    .fini = ssh_fini,
    .query_config = ssh_query_config,
    .init_config = ssh_init_config,
    .spawn_group = NULL, /* one ssh session per worker */
    .describe = ssh_describe,
};
