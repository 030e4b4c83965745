/* launch-mpi: starts each replica's scheduler ranks as one OpenMPI job, and the workers
 * that belong on this machine (the detokenizer) with fork and exec.
 *
 * A replica of n ranks runs as
 *   mpirun --oversubscribe --bind-to none --mca plm_rsh_args "SSH OPTIONS"
 *          -np 1 --host H0 WORKER scheduler --dp-rank D --gpu-id -1 --group PLUGIN : ... : -np 1 --host Hn-1 ...
 * one application context per rank, so rank r runs on the host the engine placed tp r
 * on. mpirun forwards its standard input to rank 0 only: the launcher reads every rank's
 * settings from the engine's lifelines (written before the start), sends them to mpirun
 * as one blob (group_blob.h), and keeps mpirun's standard input open while every
 * lifeline is; rank 0's group_join hands the others theirs over MPI. When any lifeline
 * closes, mpirun's standard input closes, rank 0 sees end of file and exits, and mpirun
 * ends the job on every host (the other ranks die with their MPI daemon). mpirun itself
 * dies with the engine's process (SIGTERM, which it turns into the job's end).
 *
 * mpirun's own messages (between its lines of dashes) are kept, not echoed: when the
 * job ends early they say which rank ended it and how (mpi_job_output.h), and that rank's
 * handle reports it; the group's other handles report an exit status of 0, so the
 * engine's message names the rank that failed. Worker lines pass through to stderr. */
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/local_process.h"
#include "common/remote_hosts.h"
#include "group_blob.h"
#include "launch_mpi_module.h"
#include "mpi_allocation.h"
#include "mpi_group_join.h"
#include "mpi_job_output.h"

#define PRIORITY_IN_ALLOCATION 30 /* above launch-ssh (20): a cluster's own launcher */
#define PRIORITY_WITH_HOSTS 15    /* below launch-ssh: MPI is chosen by name or by an allocation */
#define MAX_SSH_ARGS 32
#define TAIL_LINES 3
#define OUTPUT_BYTES 16384        /* the tail of mpirun's standard error kept for reading */
#define KILL_GRACE_MS 3000        /* mpirun's time to end its job after SIGTERM */
#define SETTINGS_READ_MS 2000     /* the engine wrote them before the start: they are there */

/* One mpirun job (a replica's ranks), or one worker forked here (the detokenizer). */
struct mpi_group {
    struct local_process process;  /* mpirun, or the local worker */
    int local;                     /* 1: a worker forked here, not an MPI job */
    int n;                         /* ranks */
    int stdin_w;                   /* our end of mpirun's standard input; -1 once closed */
    uint8_t *blob;                 /* the settings still to write there */
    size_t blob_len, blob_sent;
    int *lifelines;                /* (n) the engine's lifelines (our copies): a hang-up ends the job */
    int stderr_fd;                 /* our end of mpirun's standard error; -1 when local */
    long kill_deadline_ms;         /* after SIGTERM: SIGKILL past this (0: not asked) */
    /* under the launcher's lock: */
    char partial[512];
    size_t partial_len;
    int in_block;                  /* inside one of mpirun's dashed messages */
    char output[OUTPUT_BYTES];     /* the tail of mpirun's own messages */
    size_t output_len;
    char tail[TAIL_LINES][256];    /* the last worker lines */
    int n_tail;
    int eof;
    struct mpi_job_end end;
    int end_read;
    struct mpi_group *next;
};

struct cinfer_worker_handle {
    struct mpi_group *group;
    int rank;
    char host[128];
    struct cinfer_worker_handle *next;
};

struct cinfer_launcher {
    char mpirun_path[4096];
    char worker_path[4096];
    char plugin_ref[4096];         /* what workers pass to --group: this plugin's file */
    char rsh_args[2048];           /* mpirun's plm_rsh_args: the ssh options */
    char **remote_workers;
    struct mpi_group *groups;
    struct cinfer_worker_handle *handles;
    pthread_mutex_t lock;
    pthread_t relay;
    int relay_started;
    volatile int stop;
};

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* ---- configuration -------------------------------------------------------------------- */

#define HAS(c, field) REMOTE_CONFIG_HAS(c, field)

/* "user@host" is ssh's spelling, not mpirun's: users belong in ~/.ssh/config. */
static int bad_host(const char *const *hosts, char *why, size_t why_bytes)
{
    for (const char *const *h = hosts; *h; h++) {
        if (strchr(*h, '@')) {
            snprintf(why, why_bytes, "launcher.hosts '%s': mpirun takes host names only (set the user in an ssh_config "
                     "file, launcher.ssh_args = \"-F FILE\")", *h);
            return 1;
        }
        if (strpbrk(*h, ",: \t")) {
            snprintf(why, why_bytes, "launcher.hosts '%s' is not a host name", *h);
            return 1;
        }
    }
    return 0;
}

static int mpi_query_config(const struct cinfer_launcher_config *config, struct cinfer_launcher_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    char mpirun[4096];
    const char *source = NULL;
    int hosts = HAS(config, hosts) && config->hosts && config->hosts[0];
    if (!remote_find_on_path("mpirun", mpirun, sizeof mpirun)) {
        snprintf(answer->why, sizeof answer->why, "no mpirun on PATH (Debian: apt-get install openmpi-bin)");
    } else if (hosts && bad_host(config->hosts, answer->why, sizeof answer->why)) {
        /* why says which */
    } else if (!hosts && cinfer_mpi_in_allocation(&source)) {
        answer->usable = 1;
        answer->priority = PRIORITY_IN_ALLOCATION;
    } else if (hosts) {
        answer->usable = 1;
        answer->priority = PRIORITY_WITH_HOSTS;
    } else {
        snprintf(answer->why, sizeof answer->why,
                 "no launcher.hosts and no allocation (SLURM_JOB_NODELIST, OMPI_MCA_orte_default_hostfile, "
                 "PBS_NODEFILE): launch-mpi starts ranks on hosts (launcher.hosts = \"localhost\" runs them here)");
    }
    return CINFER_OK;
}

static int mpi_query(int *priority)
{
    char mpirun[4096];
    *priority = PRIORITY_WITH_HOSTS;
    return remote_find_on_path("mpirun", mpirun, sizeof mpirun);
}

static int mpi_allocation_hosts(const struct cinfer_launcher_config *config, char ***hosts, struct cinfer_error *err)
{
    return cinfer_mpi_allocation_hosts(HAS(config, dp_size) ? config->dp_size : 1, hosts, err);
}

/* ---- the relay: settings in, lifelines watched, mpirun's words read ------------------- */

static void keep_line(struct mpi_group *g, const char *line)
{
    if (!strncmp(line, "-----", 5)) { /* mpirun's message frames */
        g->in_block = !g->in_block;
        return;
    }
    if (g->in_block) {
        size_t n = strlen(line);
        if (n + 2 > sizeof g->output)
            n = sizeof g->output - 2;
        if (g->output_len + n + 2 > sizeof g->output) { /* keep the tail */
            size_t drop = g->output_len + n + 2 - sizeof g->output;
            memmove(g->output, g->output + drop, g->output_len - drop);
            g->output_len -= drop;
        }
        memcpy(g->output + g->output_len, line, n);
        g->output_len += n;
        g->output[g->output_len++] = '\n';
        g->output[g->output_len] = '\0';
        return;
    }
    fprintf(stderr, "%s\n", line); /* a worker's own log line */
    if (!line[0])
        return;
    if (g->n_tail == TAIL_LINES) {
        memmove(g->tail[0], g->tail[1], sizeof g->tail[0] * (TAIL_LINES - 1));
        g->n_tail--;
    }
    /* a long line keeps its start (a copy, not snprintf: the cut is meant) */
    size_t keep = strnlen(line, sizeof g->tail[0] - 1);
    memcpy(g->tail[g->n_tail], line, keep);
    g->tail[g->n_tail++][keep] = '\0';
}

/* Reads what is there; lock held. */
static void drain(struct mpi_group *g)
{
    char buf[2048];
    ssize_t n = read(g->stderr_fd, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            if (g->partial_len) {
                g->partial[g->partial_len] = '\0';
                keep_line(g, g->partial);
                g->partial_len = 0;
            }
            g->eof = 1;
        }
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || g->partial_len == sizeof g->partial - 1) {
            g->partial[g->partial_len] = '\0';
            keep_line(g, g->partial);
            g->partial_len = 0;
            if (buf[i] == '\n')
                continue;
        }
        g->partial[g->partial_len++] = buf[i];
    }
}

static void close_stdin(struct mpi_group *g)
{
    if (g->stdin_w >= 0) {
        close(g->stdin_w);
        g->stdin_w = -1;
    }
}

/* Writes what fits of the settings; lock held. */
static void feed(struct mpi_group *g)
{
    while (g->stdin_w >= 0 && g->blob_sent < g->blob_len) {
        ssize_t n = write(g->stdin_w, g->blob + g->blob_sent, g->blob_len - g->blob_sent);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) { /* mpirun is gone: its end says why */
            close_stdin(g);
            return;
        }
        g->blob_sent += (size_t)n;
    }
}

enum { SLOT_STDERR, SLOT_STDIN, SLOT_LIFELINE };

static void *relay_thread(void *arg)
{
    struct cinfer_launcher *l = arg;
    enum { MAX_FDS = 512 };
    while (!l->stop) {
        struct pollfd fds[MAX_FDS];
        struct mpi_group *owners[MAX_FDS];
        int kinds[MAX_FDS];
        int n = 0;
        pthread_mutex_lock(&l->lock);
        for (struct mpi_group *g = l->groups; g; g = g->next) {
            if (g->local)
                continue;
            if (g->stderr_fd >= 0 && !g->eof && n < MAX_FDS) {
                fds[n] = (struct pollfd){.fd = g->stderr_fd, .events = POLLIN};
                owners[n] = g;
                kinds[n++] = SLOT_STDERR;
            }
            if (g->stdin_w >= 0 && g->blob_sent < g->blob_len && n < MAX_FDS) {
                fds[n] = (struct pollfd){.fd = g->stdin_w, .events = POLLOUT};
                owners[n] = g;
                kinds[n++] = SLOT_STDIN;
            }
            for (int r = 0; g->stdin_w >= 0 && r < g->n && n < MAX_FDS; r++) {
                fds[n] = (struct pollfd){.fd = g->lifelines[r], .events = POLLRDHUP};
                owners[n] = g;
                kinds[n++] = SLOT_LIFELINE;
            }
        }
        pthread_mutex_unlock(&l->lock);
        if (poll(fds, (nfds_t)n, 50) <= 0)
            continue;
        pthread_mutex_lock(&l->lock);
        for (int i = 0; i < n; i++) {
            struct mpi_group *g = owners[i];
            if (!fds[i].revents)
                continue;
            if (kinds[i] == SLOT_STDERR)
                drain(g);
            else if (kinds[i] == SLOT_STDIN)
                feed(g);
            else if (fds[i].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))
                close_stdin(g); /* the engine let go of a rank: rank 0 reads end of file */
        }
        pthread_mutex_unlock(&l->lock);
    }
    return NULL;
}

/* ---- init ------------------------------------------------------------------------------ */

static void mpi_fini(struct cinfer_launcher **lp);

/* The reference workers pass to --group: this plugin's file (or its name when built in). */
static void find_plugin_ref(char *out, size_t out_bytes)
{
#ifdef CINFER_PLUGIN_STATIC_ID
    snprintf(out, out_bytes, "launch-mpi");
#else
    Dl_info info;
    if (dladdr((const void *)&cinfer_launch_mpi_ops, &info) && info.dli_fname && info.dli_fname[0] == '/')
        snprintf(out, out_bytes, "%s", info.dli_fname);
    else
        snprintf(out, out_bytes, "launch-mpi");
#endif
}

static int mpi_init_config(const struct cinfer_launcher_config *config, struct cinfer_launcher **out,
                           struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_launcher *l = calloc(1, sizeof *l);
    if (!l)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
    pthread_mutex_init(&l->lock, NULL);
    int rc = CINFER_OK;
    if (!remote_find_on_path("mpirun", l->mpirun_path, sizeof l->mpirun_path))
        rc = cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "launch-mpi: no mpirun on PATH");
    snprintf(l->worker_path, sizeof l->worker_path, "%s", config && config->worker_path ? config->worker_path : "");
    find_plugin_ref(l->plugin_ref, sizeof l->plugin_ref);
    int connect_timeout_s = 10;
    if (HAS(config, connect_timeout_ms) && config->connect_timeout_ms > 0)
        connect_timeout_s = (config->connect_timeout_ms + 999) / 1000;
    /* mpirun reaches other hosts with ssh, as launch-ssh does: never a password prompt */
    int used = snprintf(l->rsh_args, sizeof l->rsh_args, "-o BatchMode=yes -o ConnectTimeout=%d", connect_timeout_s);
    if (rc == CINFER_OK && HAS(config, ssh_args) && config->ssh_args && config->ssh_args[0] &&
        snprintf(l->rsh_args + used, sizeof l->rsh_args - (size_t)used, " %s", config->ssh_args) >=
            (int)(sizeof l->rsh_args - (size_t)used))
        rc = cinfer_error_set(err, CINFER_ERR_RANGE, "launcher.ssh_args: longer than %zu bytes", sizeof l->rsh_args);
    if (rc == CINFER_OK && HAS(config, remote_workers) && config->remote_workers &&
        remote_workers_copy(config->remote_workers, &l->remote_workers) != 0)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
    if (rc == CINFER_OK) {
        if (pthread_create(&l->relay, NULL, relay_thread, l) != 0)
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: cannot start its relay thread");
        else
            l->relay_started = 1;
    }
    if (rc) {
        mpi_fini(&l);
        return rc;
    }
    *out = l;
    return CINFER_OK;
}

static int mpi_init(const struct cinfer_launcher_options *opts, struct cinfer_launcher **out, struct cinfer_error *err)
{
    struct cinfer_launcher_config config = {.struct_size = offsetof(struct cinfer_launcher_config, tp_size),
                                            .worker_path = opts ? opts->worker_path : NULL,
                                            .hosts = opts ? opts->hosts : NULL};
    return mpi_init_config(&config, out, err);
}

/* ---- starting ------------------------------------------------------------------------- */

/* The cinfer-worker path for host, from launcher.remote_worker (common/remote_hosts.h). */
static const char *worker_path_for(const struct cinfer_launcher *l, const char *host)
{
    return remote_worker_path(l->remote_workers, host, l->worker_path);
}

/* The settings the engine wrote on a request's standard input: the length word, then
 * the frame, into a malloc'd *out holding both. */
static int read_settings(const struct cinfer_spawn_request *req, uint8_t **out, size_t *len,
                         struct cinfer_error *err)
{
    const char *title = req->title ? req->title : "worker";
    uint8_t word[4];
    size_t want = 4, got = 0;
    uint8_t *buf = word;
    long deadline = now_ms() + SETTINGS_READ_MS;
    for (int stage = 0; stage < 2; stage++) {
        while (got < want) {
            struct pollfd p = {.fd = req->stdin_fd, .events = POLLIN};
            long left = deadline - now_ms();
            if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
                if (stage)
                    free(buf);
                return cinfer_error_set(err, CINFER_ERR_TIMEOUT,
                                        "launch-mpi: %s: no settings on its standard input (the engine writes them "
                                        "before the start)", title);
            }
            ssize_t n = read(req->stdin_fd, buf + got, want - got);
            if (n <= 0) {
                if (stage)
                    free(buf);
                return cinfer_error_set(err, CINFER_ERR_IO, "launch-mpi: %s: its settings ended after %zu bytes",
                                        title, got);
            }
            got += (size_t)n;
        }
        if (stage == 0) {
            size_t frame = (size_t)word[0] | (size_t)word[1] << 8 | (size_t)word[2] << 16 | (size_t)word[3] << 24;
            if (frame > GROUP_BLOB_MAX_RANK_BYTES - 4)
                return cinfer_error_set(err, CINFER_ERR_RANGE, "launch-mpi: %s: settings of %zu bytes", title, frame);
            if (!(buf = malloc(frame + 4)))
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
            memcpy(buf, word, 4);
            want = frame + 4;
        }
    }
    *out = buf;
    *len = want;
    return CINFER_OK;
}

/* The mpirun command for the group; strings it needs go in store (kept until the
 * start). */
#define MAX_EXPORTED 64
struct mpirun_command {
    const char **argv;
    size_t n, cap;
    char exported[MAX_EXPORTED][128]; /* names of the request's environment, for -x */
};

static int push(struct mpirun_command *c, const char *s)
{
    if (c->n + 2 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        const char **grown = realloc(c->argv, cap * sizeof *grown);
        if (!grown)
            return -1;
        c->argv = grown;
        c->cap = cap;
    }
    c->argv[c->n++] = s;
    c->argv[c->n] = NULL;
    return 0;
}

static int build_command(const struct cinfer_launcher *l, const struct cinfer_spawn_request *reqs, int n,
                         struct mpirun_command *c)
{
    int bad = push(c, l->mpirun_path);
    if (geteuid() == 0) /* containers run as root; mpirun refuses that unless told */
        bad |= push(c, "--allow-run-as-root");
    bad |= push(c, "--oversubscribe") | push(c, "--bind-to") | push(c, "none");
    bad |= push(c, "--mca") | push(c, "plm_rsh_args") | push(c, l->rsh_args);
    /* single-copy needs ptrace rights containers often lack; the copy-in/out path works everywhere */
    bad |= push(c, "--mca") | push(c, "btl_vader_single_copy_mechanism") | push(c, "none");
    /* when a rank dies the job ends: its peers wait in a collective for it and cannot stop
     * on SIGTERM, so kill them at once rather than after mpirun's default second (a clean
     * stop never gets here: the ranks leave by themselves when the engine lets go) */
    bad |= push(c, "--mca") | push(c, "odls_base_sigkill_timeout") | push(c, "0");
    for (size_t k = 0; reqs[0].envp && reqs[0].envp[k]; k++) { /* mpirun passes these on to the ranks */
        if (k == MAX_EXPORTED)
            return -1;
        snprintf(c->exported[k], sizeof c->exported[k], "%.*s", (int)strcspn(reqs[0].envp[k], "="), reqs[0].envp[k]);
        bad |= push(c, "-x") | push(c, c->exported[k]);
    }
    for (int i = 0; i < n; i++) {
        const char *host = reqs[i].host && reqs[i].host[0] ? reqs[i].host : "localhost";
        if (i)
            bad |= push(c, ":");
        bad |= push(c, "-np") | push(c, "1") | push(c, "--host") | push(c, host);
        bad |= push(c, worker_path_for(l, host));
        for (int a = 1; reqs[i].argv[a]; a++) {
            if (!strcmp(reqs[i].argv[a], "--tp-rank") && reqs[i].argv[a + 1]) { /* the job's rank is the tp rank */
                a++;
                continue;
            }
            bad |= push(c, reqs[i].argv[a]);
        }
        bad |= push(c, CINFER_WORKER_GROUP_FLAG) | push(c, l->plugin_ref);
    }
    return bad ? -1 : 0;
}

static void free_group(struct mpi_group *g)
{
    close_stdin(g);
    for (int r = 0; g->lifelines && r < g->n; r++)
        if (g->lifelines[r] >= 0)
            close(g->lifelines[r]);
    if (g->stderr_fd >= 0)
        close(g->stderr_fd);
    free(g->lifelines);
    free(g->blob);
    free(g);
}

static int add_handles(struct cinfer_launcher *l, struct mpi_group *g, const struct cinfer_spawn_request *reqs,
                       struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    struct cinfer_worker_handle **made = calloc((size_t)g->n, sizeof *made);
    for (int i = 0; made && i < g->n; i++) {
        if (!(made[i] = calloc(1, sizeof *made[i]))) {
            while (i--)
                free(made[i]);
            free(made);
            made = NULL;
            break;
        }
        made[i]->group = g;
        made[i]->rank = i;
        snprintf(made[i]->host, sizeof made[i]->host, "%s", reqs[i].host ? reqs[i].host : "");
    }
    if (!made)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < g->n; i++) {
        made[i]->next = l->handles;
        l->handles = made[i];
        out[i] = made[i];
    }
    g->next = l->groups;
    l->groups = g;
    pthread_mutex_unlock(&l->lock);
    free(made);
    return CINFER_OK;
}

/* A worker forked on this machine (the detokenizer), as launch-fork does. */
static int spawn_local(struct cinfer_launcher *l, const struct cinfer_spawn_request *req,
                       struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    const char *title = req->title ? req->title : "worker";
    struct mpi_group *g = calloc(1, sizeof *g);
    if (!g)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
    g->local = 1;
    g->n = 1;
    g->stdin_w = -1;
    g->stderr_fd = -1;
    if (local_process_start(&g->process, req->argv, req->envp, req->child_main, req->child_ctx, req->stdin_fd, -1,
                            0) != 0) {
        int e = errno;
        free(g);
        return cinfer_error_set(err, CINFER_ERR_CHILD, "launch-mpi: %s: fork failed: %s", title, strerror(e));
    }
    int rc = add_handles(l, g, req, out, err);
    if (rc) {
        local_process_stop(&g->process, 0);
        free(g);
    }
    return rc;
}

static int mpi_spawn_group(struct cinfer_launcher *l, const struct cinfer_spawn_request *reqs, int n,
                           struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    const char *title = reqs[0].title ? reqs[0].title : "worker";
    for (int i = 0; i < n; i++) {
        if (!reqs[i].argv)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "launch-mpi: %s: ranks run as cinfer-worker under mpirun (an embedder's own hooks "
                                    "need launch-fork)", reqs[i].title ? reqs[i].title : "worker");
        if (reqs[i].role != CINFER_ROLE_SCHEDULER)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "launch-mpi: %s: only scheduler ranks form "
                                    "groups", reqs[i].title ? reqs[i].title : "worker");
    }
    struct mpi_group *g = calloc(1, sizeof *g);
    uint8_t **parts = calloc((size_t)n, sizeof *parts);
    size_t *sizes = calloc((size_t)n, sizeof *sizes);
    struct mpirun_command *cmd = calloc(1, sizeof *cmd);
    int in_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int rc = g && parts && sizes && cmd ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM,
                                                                       "launch-mpi: out of memory");
    if (rc == CINFER_OK) {
        g->n = n;
        g->stdin_w = -1;
        g->stderr_fd = -1;
        if (!(g->lifelines = malloc((size_t)n * sizeof *g->lifelines)))
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
        for (int i = 0; g->lifelines && i < n; i++)
            g->lifelines[i] = -1;
    }
    for (int i = 0; rc == CINFER_OK && i < n; i++)
        rc = read_settings(&reqs[i], &parts[i], &sizes[i], err);
    if (rc == CINFER_OK)
        rc = cinfer_mpi_group_blob_encode((const void *const *)parts, sizes, n, (void **)&g->blob, &g->blob_len, err);
    for (int i = 0; rc == CINFER_OK && i < n; i++)
        if ((g->lifelines[i] = fcntl(reqs[i].stdin_fd, F_DUPFD_CLOEXEC, 3)) < 0)
            rc = cinfer_error_set(err, CINFER_ERR_IO, "launch-mpi: %s: %s", title, strerror(errno));
    if (rc == CINFER_OK && (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0))
        rc = cinfer_error_set(err, CINFER_ERR_IO, "launch-mpi: %s: cannot make pipes: %s", title, strerror(errno));
    if (rc == CINFER_OK && build_command(l, reqs, n, cmd) != 0)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory");
    if (rc == CINFER_OK) {
        /* mpirun dies with the engine's process, and takes its job with it */
        if (local_process_start(&g->process, cmd->argv, reqs[0].envp, NULL, NULL, in_pipe[0], err_pipe[1], 1) != 0)
            rc = cinfer_error_set(err, CINFER_ERR_CHILD, "launch-mpi: %s: fork failed: %s", title, strerror(errno));
    }
    if (in_pipe[0] >= 0)
        close(in_pipe[0]);
    if (err_pipe[1] >= 0)
        close(err_pipe[1]);
    if (rc == CINFER_OK) {
        g->stdin_w = in_pipe[1];
        g->stderr_fd = err_pipe[0];
        in_pipe[1] = err_pipe[0] = -1;
        fcntl(g->stdin_w, F_SETFL, fcntl(g->stdin_w, F_GETFL) | O_NONBLOCK);
        fcntl(g->stderr_fd, F_SETFL, fcntl(g->stderr_fd, F_GETFL) | O_NONBLOCK);
        if ((rc = add_handles(l, g, reqs, out, err)))
            local_process_stop(&g->process, KILL_GRACE_MS);
    }
    if (in_pipe[1] >= 0)
        close(in_pipe[1]);
    if (err_pipe[0] >= 0)
        close(err_pipe[0]);
    for (int i = 0; parts && i < n; i++)
        free(parts[i]);
    free(parts);
    free(sizes);
    if (cmd)
        free(cmd->argv);
    free(cmd);
    if (rc && g)
        free_group(g);
    return rc;
}

static int mpi_spawn(struct cinfer_launcher *l, const struct cinfer_spawn_request *req,
                     struct cinfer_worker_handle **out, struct cinfer_error *err)
{
    /* the detokenizer runs beside the engine; a scheduler rank alone is a job of one */
    if (req->role != CINFER_ROLE_SCHEDULER)
        return spawn_local(l, req, out, err);
    return mpi_spawn_group(l, req, 1, out, err);
}

/* ---- watching --------------------------------------------------------------------------- */

/* Once mpirun ended: its last words read to the end and what they say. */
static void read_end(struct cinfer_launcher *l, struct mpi_group *g)
{
    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < 200 && !g->eof && g->stderr_fd >= 0; i++) {
        drain(g);
        if (!g->eof) {
            pthread_mutex_unlock(&l->lock);
            struct timespec nap = {0, 5 * 1000000};
            nanosleep(&nap, NULL);
            pthread_mutex_lock(&l->lock);
        }
    }
    if (!g->end_read) {
        cinfer_mpi_job_output_scan(g->output, &g->end);
        g->end_read = 1;
    }
    pthread_mutex_unlock(&l->lock);
}

static void escalate(struct mpi_group *g)
{
    if (g->kill_deadline_ms && now_ms() > g->kill_deadline_ms) {
        local_process_signal(&g->process, SIGKILL);
        g->kill_deadline_ms = 0;
    }
}

static int mpi_status(struct cinfer_launcher *l, struct cinfer_worker_handle *w, struct cinfer_worker_status *out)
{
    struct mpi_group *g = w->group;
    escalate(g);
    local_process_status(&g->process, out);
    if (out->state == CINFER_WORKER_RUNNING || g->local)
        return CINFER_OK;
    read_end(l, g);
    if (g->end.known) { /* the rank that ended the job tells how; the others were ended by it */
        if (g->end.rank != w->rank)
            *out = (struct cinfer_worker_status){CINFER_WORKER_EXITED, 0};
        else if (g->end.signaled)
            *out = (struct cinfer_worker_status){CINFER_WORKER_SIGNALED, g->end.code};
        else
            *out = (struct cinfer_worker_status){CINFER_WORKER_EXITED, g->end.code};
    }
    return CINFER_OK;
}

static void mpi_describe(struct cinfer_launcher *l, struct cinfer_worker_handle *w, char *buf, size_t buf_bytes)
{
    struct mpi_group *g = w->group;
    buf[0] = '\0';
    if (g->local)
        return;
    pthread_mutex_lock(&l->lock);
    size_t used = 0;
    if (g->end.known && g->end.signaled) {
        /* the signal says it; where it ran, when mpirun said */
        if (g->end.node[0])
            snprintf(buf, buf_bytes, "mpirun: rank %d ran on node %s", g->end.rank, g->end.node);
    } else if (g->end.known || g->n_tail) {
        for (int i = 0; i < g->n_tail && used < buf_bytes; i++)
            used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%s", i ? "; " : "", g->tail[i]);
    } else {
        /* mpirun's own message (why it could not start the job), its lines joined */
        for (const char *p = g->output; *p && used + 1 < buf_bytes;) {
            size_t len = strcspn(p, "\n");
            if (len)
                used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%.*s", used ? " " : "mpirun: ", (int)len, p);
            p += len + (p[len] == '\n');
        }
    }
    pthread_mutex_unlock(&l->lock);
}

static int mpi_signal(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo)
{
    (void)l;
    struct mpi_group *g = w->group;
    if (g->local || signo != SIGKILL)
        return local_process_signal(&g->process, signo);
    /* SIGKILL for a rank means its whole job: mpirun ends it on every host on SIGTERM,
     * and gets SIGKILL itself if it has not within the grace (its ranks then die with
     * their MPI daemon). */
    if (!g->kill_deadline_ms) {
        g->kill_deadline_ms = now_ms() + KILL_GRACE_MS;
        return local_process_signal(&g->process, SIGTERM);
    }
    return CINFER_OK;
}

static int mpi_wait(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                    struct cinfer_worker_status *out)
{
    struct mpi_group *g = w->group;
    long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        mpi_status(l, w, out);
        if (out->state != CINFER_WORKER_RUNNING)
            return CINFER_OK;
        if (deadline >= 0 && now_ms() >= deadline)
            return CINFER_ERR_TIMEOUT;
        (void)g;
        struct timespec nap = {0, 5 * 1000000};
        nanosleep(&nap, NULL);
    }
}

static void mpi_fini(struct cinfer_launcher **lp)
{
    if (!lp || !*lp)
        return;
    struct cinfer_launcher *l = *lp;
    pthread_mutex_lock(&l->lock);
    for (struct mpi_group *g = l->groups; g; g = g->next)
        close_stdin(g); /* rank 0 reads end of file */
    pthread_mutex_unlock(&l->lock);
    for (struct mpi_group *g = l->groups; g; g = g->next)
        local_process_signal(&g->process, SIGTERM);
    for (struct mpi_group *g = l->groups; g; g = g->next)
        local_process_stop(&g->process, KILL_GRACE_MS);
    l->stop = 1;
    if (l->relay_started)
        pthread_join(l->relay, NULL);
    while (l->groups) {
        struct mpi_group *next = l->groups->next;
        free_group(l->groups);
        l->groups = next;
    }
    while (l->handles) {
        struct cinfer_worker_handle *next = l->handles->next;
        free(l->handles);
        l->handles = next;
    }
    remote_workers_free(l->remote_workers);
    pthread_mutex_destroy(&l->lock);
    free(l);
    *lp = NULL;
}

const struct cinfer_launcher_ops cinfer_launch_mpi_ops = {
    .version = CINFER_LAUNCHER_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_launcher_ops),
    .query = mpi_query,
    .init = mpi_init,
    .spawn = mpi_spawn,
    .status = mpi_status,
    .signal = mpi_signal,
    .wait = mpi_wait,
    .fini = mpi_fini,
    .query_config = mpi_query_config,
    .init_config = mpi_init_config,
    .spawn_group = mpi_spawn_group,
    .describe = mpi_describe,
    .group_join = cinfer_mpi_group_join,
    .allocation_hosts = mpi_allocation_hosts,
};
