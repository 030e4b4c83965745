/* Starting, watching and stopping the worker processes of an engine: one detokenizer,
 * and dp_size replicas of tp_size scheduler ranks, through the chosen launcher plugin.
 *
 * Each worker's standard input is one end of a socket pair: the engine writes the
 * worker's settings and endpoints there, then keeps its end open as the worker's
 * lifeline (end of file tells the worker the engine is gone). The first start waits for
 * every READY (or a FAILED with the worker's reason, or its death) up to the start
 * deadline. After that the watchdog (cinfer_engine_watch, on the engine thread) sees a
 * worker that ended and one whose loop stopped turning (no heartbeat for
 * engine.watchdog_timeout, a forward step that long included). A scheduler's end costs
 * its replica only: its requests fail with the worker named, its other ranks stop, and
 * the restart policy starts the replica again while the others keep serving. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/plugins.h"
#include "comm/comm_shm.h"
#include "engine/engine_internal.h"
#include "engine/router.h"
#include "engine/run_dir.h"
#include "ipc/channel.h"
#include "ipc/worker_settings.h"
#include "util/log.h"
#include "worker/hooks.h"

#define STOP_GRACE_MS 2000 /* a stopped worker's time to exit before SIGKILL */

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static int start_timeout_ms(const struct cinfer_engine *e)
{
    return e->args.start_timeout_ms > 0 ? e->args.start_timeout_ms : 60000;
}

/* ---- one worker -------------------------------------------------------------------- */

/* In a forked child (custom hooks): run the hook for the role with the engine's
 * settings, which the fork copied. */
static int run_child_job(void *ctx)
{
    struct engine_child_job *job = ctx;
    struct cinfer_engine *e = job->engine;
    cinfer_worker_set_hooks(&e->hooks);
    const struct cinfer_engine_hooks *h = cinfer_worker_hooks();
    const struct cinfer_port_args *ports = &e->workers[job->index].ports;
    if (job->role == CINFER_WORKER_SCHEDULER)
        return h->run_scheduler_process(&e->args, ports, -1, job->tp_rank, job->dp_rank);
    return h->run_detokenizer_process(&e->args, ports);
}

static void close_lifeline(struct engine_worker *w)
{
    if (w->lifeline >= 0) {
        close(w->lifeline);
        w->lifeline = -1;
    }
}

/* The request that starts w, with its argv in the caller's buffers (built before any
 * fork) and its standard input on *child_end. */
struct spawn_buffers {
    char dp[16], tp[16];
    const char *argv[12];
};

static int prepare_spawn(struct cinfer_engine *e, struct engine_worker *w, struct spawn_buffers *b,
                         struct cinfer_spawn_request *req, int *child_end, struct cinfer_error *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot create its standard input: %s", w->name,
                                strerror(errno));
    w->lifeline = sv[0];
    *child_end = sv[1];
    /* The settings are written before the worker exists: room for them in the socket,
     * and never a wait (a frame that does not fit is an error, not a hang). */
    int room = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    snprintf(b->dp, sizeof b->dp, "%d", w->dp_rank);
    snprintf(b->tp, sizeof b->tp, "%d", w->tp_rank);
    int n = 0;
    b->argv[n++] = e->worker_path;
    if (w->role == CINFER_WORKER_SCHEDULER) {
        b->argv[n++] = "scheduler";
        b->argv[n++] = "--dp-rank";
        b->argv[n++] = b->dp;
        b->argv[n++] = "--tp-rank";
        b->argv[n++] = b->tp;
        b->argv[n++] = "--gpu-id";
        b->argv[n++] = "-1";
    } else {
        b->argv[n++] = "detokenizer";
    }
    b->argv[n] = NULL;
    w->job = (struct engine_child_job){e, (int)(w - e->workers), w->role, w->dp_rank, w->tp_rank};
    *req = (struct cinfer_spawn_request){
        .role = w->role == CINFER_WORKER_SCHEDULER ? CINFER_ROLE_SCHEDULER : CINFER_ROLE_DETOKENIZER,
        .tp_rank = w->tp_rank,
        .dp_rank = w->dp_rank,
        .gpu_id = -1,
        .host = w->listed_host ? w->host : NULL, /* NULL: this machine */
        .argv = e->custom_hooks ? NULL : b->argv,
        .child_main = e->custom_hooks ? run_child_job : NULL,
        .child_ctx = &w->job,
        .stdin_fd = sv[1],
        .title = w->name,
    };
    return CINFER_OK;
}

/* Starts workers [first, first + n): as one group where the launcher can (a replica's
 * ranks), else one by one. Each one's settings are on its standard input before its
 * launcher runs (a launcher that delivers them its own way, like launch-mpi, reads them
 * from there); a worker that is slow to read them holds no one up. On failure none of
 * them is left running. */
static int spawn_workers(struct cinfer_engine *e, int first, int n, struct cinfer_error *err)
{
    struct spawn_buffers *bufs = calloc((size_t)n, sizeof *bufs);
    struct cinfer_spawn_request *reqs = calloc((size_t)n, sizeof *reqs);
    struct cinfer_worker_handle **handles = calloc((size_t)n, sizeof *handles);
    int *child_ends = malloc((size_t)n * sizeof *child_ends);
    int rc = bufs && reqs && handles && child_ends ? CINFER_OK
                                                   : cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory");
    int prepared = 0;
    for (; rc == CINFER_OK && prepared < n; prepared++) {
        struct engine_worker *w = &e->workers[first + prepared];
        w->phase = CINFER_WORKER_STARTING;
        w->handle = NULL;
        memset(&w->limits, 0, sizeof w->limits);
        rc = prepare_spawn(e, w, &bufs[prepared], &reqs[prepared], &child_ends[prepared], err);
        if (rc == CINFER_OK && !e->custom_hooks &&
            (rc = cinfer_worker_settings_send(w->lifeline, &e->args, &w->ports, err)))
            cinfer_error_prefix(err, "%s", w->name);
    }
    if (rc == CINFER_OK) {
        if (e->launcher->version >= 2 && e->launcher->spawn_group && n > 1) {
            rc = e->launcher->spawn_group(e->launch, reqs, n, handles, err);
        } else {
            for (int i = 0; rc == CINFER_OK && i < n; i++)
                rc = e->launcher->spawn(e->launch, &reqs[i], &handles[i], err);
        }
    }
    for (int i = 0; i < prepared; i++) {
        close(child_ends[i]); /* the worker holds its own copy now */
        e->workers[first + i].handle = handles[i];
    }
    if (rc) {
        for (int i = 0; i < prepared; i++) {
            struct engine_worker *w = &e->workers[first + i];
            close_lifeline(w);
            if (w->handle) {
                struct cinfer_worker_status st;
                e->launcher->signal(e->launch, w->handle, SIGKILL);
                e->launcher->wait(e->launch, w->handle, -1, &st);
                w->handle = NULL;
            }
            w->phase = CINFER_WORKER_DOWN;
        }
    }
    free(bufs);
    free(reqs);
    free(handles);
    free(child_ends);
    return rc;
}

/* Stops workers [first, first + n): lifelines closed (each worker exits on end of
 * file), then SIGKILL for any still running after grace_ms; all reaped. */
static void stop_workers(struct cinfer_engine *e, int first, int n, int grace_ms)
{
    for (int i = first; i < first + n; i++)
        close_lifeline(&e->workers[i]);
    long deadline = now_ms() + grace_ms;
    for (int i = first; i < first + n; i++) {
        struct engine_worker *w = &e->workers[i];
        struct cinfer_worker_status st;
        long left = deadline - now_ms();
        if (w->handle && e->launcher->wait(e->launch, w->handle, left > 0 ? (int)left : 0, &st) == CINFER_ERR_TIMEOUT)
            e->launcher->signal(e->launch, w->handle, SIGKILL);
    }
    for (int i = first; i < first + n; i++) {
        struct engine_worker *w = &e->workers[i];
        struct cinfer_worker_status st;
        if (w->handle)
            e->launcher->wait(e->launch, w->handle, -1, &st);
        w->handle = NULL;
        w->phase = CINFER_WORKER_DOWN;
    }
}

/* "scheduler dp1 tp0 on host b was killed by signal 9 (Killed)<when>: <what the
 * launcher adds>". */
static void describe_end(struct cinfer_engine *e, const struct engine_worker *w, const struct cinfer_worker_status *st,
                         const char *when, char *buf, size_t n)
{
    if (st->state == CINFER_WORKER_SIGNALED)
        snprintf(buf, n, "%s was killed by signal %d (%s)%s", w->name, st->code, strsignal(st->code), when);
    else
        snprintf(buf, n, "%s exited with status %d%s", w->name, st->code, when);
    char more[512] = "";
    if (e->launcher->version >= 2 && e->launcher->describe && w->handle)
        e->launcher->describe(e->launch, w->handle, more, sizeof more);
    size_t used = strlen(buf);
    if (more[0] && used < n)
        snprintf(buf + used, n - used, ": %s", more);
}

/* ---- a replica's communicator ----------------------------------------------------------- */

/* A replica of several ranks on this machine shares a shared-memory communicator, made
 * fresh for every start (a dead group's counters may be mid-collective) before its
 * ranks attach. One whose ranks share another host gets a segment its rank 0 makes
 * there, under a name fresh for every start; one spread over hosts, or started by a
 * launcher with its own transport, needs nothing made here. */
static int create_replica_comm(struct cinfer_engine *e, struct engine_replica *r, struct cinfer_error *err)
{
    if (e->args.tp_size <= 1)
        return CINFER_OK;
    r->starts++;
    struct cinfer_port_args fresh;
    const struct engine_worker *tp0 = &e->workers[r->first_worker];
    cinfer_endpoints_of_worker(&e->endpoints, tp0->role, tp0->dp_rank, tp0->tp_rank, &fresh);
    if (!strncmp(fresh.comm, CINFER_COMM_SHM_BY_RANK0, strlen(CINFER_COMM_SHM_BY_RANK0))) {
        for (int t = 0; t < e->args.tp_size; t++) {
            struct cinfer_port_args *ports = &e->workers[r->first_worker + t].ports;
            snprintf(ports->comm, sizeof ports->comm, "%.100s-s%d", fresh.comm, r->starts);
        }
        return CINFER_OK;
    }
    if (fresh.comm[0] != '/')
        return CINFER_OK;
    snprintf(r->comm_name, sizeof r->comm_name, "%s", fresh.comm);
    struct cinfer_error ignored = {0};
    cinfer_comm_shm_unlink(r->comm_name, &ignored); /* a previous start's */
    int rc = cinfer_comm_shm_create(r->comm_name, e->args.tp_size, 0, err);
    if (rc)
        cinfer_error_prefix(err, "replica dp%d", r->dp_rank);
    return rc;
}

static void remove_replica_comm(struct engine_replica *r)
{
    if (!r->comm_name[0])
        return;
    struct cinfer_error ignored = {0};
    cinfer_comm_shm_unlink(r->comm_name, &ignored);
    r->comm_name[0] = '\0';
}

/* Starts a replica's ranks: its communicator, then its workers (as one group where the
 * launcher can). */
static int spawn_replica(struct cinfer_engine *e, struct engine_replica *r, struct cinfer_error *err)
{
    int rc = create_replica_comm(e, r, err);
    if (rc == CINFER_OK && (rc = spawn_workers(e, r->first_worker, e->args.tp_size, err)))
        remove_replica_comm(r);
    return rc;
}

/* ---- a replica's sockets ------------------------------------------------------------- */

static void close_replica_sockets(struct cinfer_engine *e, struct engine_replica *r)
{
    pthread_mutex_lock(&e->send_lock);
    cinfer_channel_close(&r->to_scheduler);
    pthread_mutex_unlock(&e->send_lock);
    pthread_mutex_lock(&e->rpc_lock);
    for (int t = 0; r->rpc && t < e->args.tp_size; t++)
        cinfer_channel_close(&r->rpc[t]);
    pthread_mutex_unlock(&e->rpc_lock);
}

/* Callers' threads use these sockets under send_lock / rpc_lock, and a restart replaces
 * them from the engine thread, so both take the same locks. */
static int open_replica_sockets(struct cinfer_engine *e, struct engine_replica *r, struct cinfer_error *err)
{
    int rc = CINFER_OK;
    const struct engine_worker *tp0 = &e->workers[r->first_worker];
    pthread_mutex_lock(&e->send_lock);
    if (!(r->to_scheduler = cinfer_channel_open_keyed(e->zmq_context, ZMQ_PUSH, tp0->ports.scheduler_input, 0, NULL,
                                                      &tp0->ports, err)))
        rc = err->code;
    pthread_mutex_unlock(&e->send_lock);
    pthread_mutex_lock(&e->rpc_lock);
    for (int t = 0; rc == CINFER_OK && t < e->args.tp_size; t++) {
        /* A printable identity: the scheduler's ROUTER addresses its reply by it. */
        const struct engine_worker *w = &e->workers[r->first_worker + t];
        if (!(r->rpc[t] = cinfer_channel_open_keyed(e->zmq_context, ZMQ_DEALER, w->ports.rpc, 0, "engine", &w->ports,
                                                    err))) {
            rc = err->code;
        } else { /* a send waits for the connection, but not forever */
            int send_timeout_ms = 2000;
            zmq_setsockopt(r->rpc[t], ZMQ_SNDTIMEO, &send_timeout_ms, sizeof send_timeout_ms);
        }
    }
    pthread_mutex_unlock(&e->rpc_lock);
    if (rc)
        close_replica_sockets(e, r);
    return rc;
}

/* ---- status frames ------------------------------------------------------------------- */

static struct engine_worker *find_worker(struct cinfer_engine *e, int role, uint32_t dp_rank, uint32_t tp_rank)
{
    for (int i = 0; i < e->n_workers; i++) {
        struct engine_worker *w = &e->workers[i];
        if (w->role == role && (role != CINFER_WORKER_SCHEDULER || ((uint32_t)w->dp_rank == dp_rank &&
                                                                     (uint32_t)w->tp_rank == tp_rank)))
            return w;
    }
    return NULL;
}

/* A READY, HEARTBEAT or FAILED frame. A FAILED one is returned in *failed (else its
 * code is 0) so that the start can report it. */
static void handle_status_frame(struct cinfer_engine *e, const void *frame, size_t len,
                                struct cinfer_msg_failed *failed)
{
    uint32_t type = 0;
    struct cinfer_error err = {0};
    if (cinfer_msg_peek_type(frame, len, &type, &err) != CINFER_OK) {
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the status channel: %s", err.message);
        return;
    }
    if (type == CINFER_MSG_READY) {
        struct cinfer_msg_ready ready;
        if (cinfer_msg_decode_ready(frame, len, &ready, &err) != CINFER_OK) {
            cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed READY frame: %s", err.message);
            return;
        }
        struct engine_worker *w = find_worker(e, ready.role, ready.dp_rank, ready.tp_rank);
        if (w && w->phase == CINFER_WORKER_STARTING) {
            w->phase = CINFER_WORKER_UP;
            w->limits = ready;
            w->last_heartbeat_ms = now_ms();
        }
    } else if (type == CINFER_MSG_HEARTBEAT) {
        struct cinfer_msg_heartbeat beat;
        if (cinfer_msg_decode_heartbeat(frame, len, &beat, &err) != CINFER_OK) {
            cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed HEARTBEAT frame: %s", err.message);
            return;
        }
        struct engine_worker *w = find_worker(e, beat.role, beat.dp_rank, beat.tp_rank);
        if (w && w->phase == CINFER_WORKER_UP && w->limits.pid == beat.pid)
            w->last_heartbeat_ms = now_ms();
    } else if (type == CINFER_MSG_FAILED) {
        struct cinfer_msg_failed f;
        if (cinfer_msg_decode_failed(frame, len, &f, &err) != CINFER_OK) {
            cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed FAILED frame: %s", err.message);
            return;
        }
        struct engine_worker *w = find_worker(e, f.role, f.dp_rank, f.tp_rank);
        cinfer_log(CINFER_LOG_SEV_ERROR, "%s reported a failure: %s", w ? w->name : "a worker", f.message);
        if (failed && !failed->code)
            *failed = f;
        else
            cinfer_msg_failed_free(&f);
    } else {
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a %s frame on the status channel", cinfer_msg_type_name(type));
    }
}

/* Every frame waiting on the status channel (timeout_ms for the first). */
static void drain_status(struct cinfer_engine *e, int timeout_ms, struct cinfer_msg_failed *failed)
{
    void *frame;
    size_t len;
    while (cinfer_channel_recv(e->status, timeout_ms, &frame, &len, NULL, NULL) == CINFER_OK) {
        handle_status_frame(e, frame, len, failed);
        free(frame);
        timeout_ms = 0;
    }
}

/* ---- the first start ----------------------------------------------------------------- */

/* The main process's status channel, with the ZAP handler that admits the engine's
 * CURVE clients when the workers are on hosts. */
static int open_status(struct cinfer_engine *e, struct cinfer_error *err)
{
    int rc = cinfer_zap_start(e->zmq_context, &e->endpoints.keys, &e->zap, err);
    if (rc)
        return rc;
    char endpoint[CINFER_ENDPOINT_BYTES];
    cinfer_endpoints_status_bind(&e->endpoints, endpoint, sizeof endpoint);
    e->status = cinfer_channel_open_keyed(e->zmq_context, ZMQ_PULL, endpoint, 1, NULL, &e->endpoints.keys, err);
    return e->status ? CINFER_OK : err->code;
}

static int all_up(const struct cinfer_engine *e, int first, int n)
{
    for (int i = first; i < first + n; i++)
        if (e->workers[i].phase != CINFER_WORKER_UP)
            return 0;
    return 1;
}

/* A worker of [first, first + n) that has ended, described in why. */
static int any_ended(struct cinfer_engine *e, int first, int n, char *why, size_t why_bytes)
{
    for (int i = first; i < first + n; i++) {
        struct engine_worker *w = &e->workers[i];
        struct cinfer_worker_status st;
        if (!w->handle || e->launcher->status(e->launch, w->handle, &st) != CINFER_OK ||
            st.state == CINFER_WORKER_RUNNING)
            continue;
        describe_end(e, w, &st, " before it was ready", why, why_bytes);
        return 1;
    }
    return 0;
}

/* Waits for READY from every worker; a FAILED, a death or the deadline ends it. */
static int wait_ready(struct cinfer_engine *e, struct cinfer_error *err)
{
    long deadline = now_ms() + start_timeout_ms(e);
    while (!all_up(e, 0, e->n_workers)) {
        struct cinfer_msg_failed failed = {0};
        drain_status(e, 50, &failed);
        if (failed.code) {
            struct engine_worker *w = find_worker(e, failed.role, failed.dp_rank, failed.tp_rank);
            cinfer_error_set(err, CINFER_ERR_CHILD, "%s failed to start: %s", w ? w->name : "a worker",
                             failed.message);
            cinfer_msg_failed_free(&failed);
            return CINFER_ERR_CHILD;
        }
        char why[1024];
        if (any_ended(e, 0, e->n_workers, why, sizeof why))
            return cinfer_error_set(err, CINFER_ERR_CHILD, "%s", why);
        if (now_ms() > deadline) {
            /* Name every worker still silent and every one that did answer: which side
             * of the status channel failed is the first question on a report. */
            enum { LIST_BYTES = 512 };
            char silent[LIST_BYTES] = "", answered[LIST_BYTES] = "";
            for (int i = 0; i < e->n_workers; i++) {
                char *list = e->workers[i].phase == CINFER_WORKER_UP ? answered : silent;
                size_t used = strlen(list);
                snprintf(list + used, LIST_BYTES - used, "%s%s", used ? ", " : "", e->workers[i].name);
            }
            return cinfer_error_set(err, CINFER_ERR_TIMEOUT,
                                    "%s did not report READY within the start deadline of %d ms (READY came from: %s)",
                                    silent, e->args.start_timeout_ms, answered[0] ? answered : "none");
        }
    }
    return CINFER_OK;
}

int cinfer_engine_start_workers(struct cinfer_engine *e, struct cinfer_error *err)
{
    int rc = spawn_workers(e, 0, 1, err); /* the detokenizer */
    for (int r = 0; rc == CINFER_OK && r < e->n_replicas; r++)
        rc = spawn_replica(e, &e->replicas[r], err);
    /* The engine's own sockets are bound after the workers start: a worker forked
     * without exec (custom hooks) then copies a process without zmq's threads, whose
     * locks it could otherwise inherit held. The workers connect before the bind and zmq
     * retries (cinfer_channel_open keeps that interval short). A restart finds them open. */
    if (rc == CINFER_OK && !e->status)
        rc = open_status(e, err);
    if (rc == CINFER_OK && !e->from_detokenizer &&
        !(e->from_detokenizer =
              cinfer_channel_open(e->zmq_context, ZMQ_PULL, e->workers[0].ports.tokenizer_input, 1, NULL, err)))
        rc = err->code;
    if (rc == CINFER_OK)
        rc = wait_ready(e, err);
    for (int r = 0; rc == CINFER_OK && r < e->n_replicas; r++)
        if ((rc = open_replica_sockets(e, &e->replicas[r], err)) == CINFER_OK)
            e->replicas[r].state = REPLICA_UP;
    if (rc)
        cinfer_engine_stop_workers(e);
    return rc;
}

void cinfer_engine_stop_workers(struct cinfer_engine *e)
{
    stop_workers(e, 0, e->n_workers, STOP_GRACE_MS);
    for (int r = 0; r < e->n_replicas; r++) {
        close_replica_sockets(e, &e->replicas[r]);
        remove_replica_comm(&e->replicas[r]);
        e->replicas[r].state = REPLICA_DOWN;
    }
}

/* ---- the watchdog ---------------------------------------------------------------------- */

static int replica_of(const struct cinfer_engine *e, const struct engine_worker *w)
{
    return w->role == CINFER_WORKER_SCHEDULER ? w->dp_rank : -1;
}

/* Every worker up and every replica serving. Lock held. */
static void update_health(struct cinfer_engine *e)
{
    int healthy = all_up(e, 0, e->n_workers);
    for (int r = 0; r < e->n_replicas; r++)
        healthy &= e->replicas[r].state == REPLICA_UP;
    if (healthy && !e->healthy)
        e->failure[0] = '\0';
    e->healthy = healthy;
}

/* Starts a replica's ranks again; the watchdog sees them to READY. */
static void restart_replica(struct cinfer_engine *e, struct engine_replica *r)
{
    struct cinfer_error err = {0};
    if (spawn_replica(e, r, &err) != CINFER_OK) {
        cinfer_log(CINFER_LOG_SEV_ERROR, "restarting replica dp%d failed: %s", r->dp_rank, err.message);
        return;
    }
    pthread_mutex_lock(&e->lock);
    r->state = REPLICA_STARTING;
    r->start_deadline_ms = now_ms() + start_timeout_ms(e);
    pthread_mutex_unlock(&e->lock);
}

/* The whole engine stops serving (the detokenizer, or the last replica without a
 * restart policy): every caller gets why at once, every worker stops, the run folder
 * goes; with restart policy on-failure everything starts again. */
static void engine_failed(struct cinfer_engine *e, const char *why)
{
    cinfer_log(CINFER_LOG_SEV_ERROR, "%s; failing every request in flight", why);
    char message[1200];
    snprintf(message, sizeof message, "the engine lost a worker: %s", why);
    pthread_mutex_lock(&e->lock);
    e->healthy = 0;
    snprintf(e->failure, sizeof e->failure, "%s", why);
    cinfer_engine_fail_all(e, CINFER_ERR_CHILD, message);
    for (int r = 0; r < e->n_replicas; r++)
        e->replicas[r].state = REPLICA_DOWN;
    pthread_mutex_unlock(&e->lock);

    cinfer_engine_stop_workers(e);
    if (e->args.restart_policy == CINFER_RESTART_ON_FAILURE && !e->stopping) {
        struct cinfer_error err = {0};
        if (cinfer_engine_start_workers(e, &err) == CINFER_OK) {
            pthread_mutex_lock(&e->lock);
            for (int r = 0; r < e->n_replicas; r++)
                cinfer_router_forget(e->router, r);
            update_health(e);
            pthread_mutex_unlock(&e->lock);
            cinfer_log(CINFER_LOG_SEV_WARNING, "workers restarted after: %s", why);
            return;
        }
        cinfer_log(CINFER_LOG_SEV_ERROR, "restarting the workers failed: %s", err.message);
    }
    cinfer_run_dir_remove(e->endpoints.run_dir);
}

/* A replica lost a rank: its requests fail with why, its other ranks stop; the others
 * keep serving. */
static void replica_failed(struct cinfer_engine *e, struct engine_replica *r, const char *why)
{
    int was_starting = r->state == REPLICA_STARTING;
    cinfer_log(CINFER_LOG_SEV_ERROR, "%s; %s", why,
               was_starting ? "the replica's restart failed" : "failing the replica's requests in flight");
    char message[1200];
    snprintf(message, sizeof message, "the engine lost a worker: %s", why);
    pthread_mutex_lock(&e->lock);
    r->state = REPLICA_DOWN;
    e->healthy = 0;
    snprintf(e->failure, sizeof e->failure, "%s", why);
    cinfer_engine_fail_replica(e, r->dp_rank, CINFER_ERR_CHILD, message);
    cinfer_router_forget(e->router, r->dp_rank);
    int serving = 0;
    for (int i = 0; i < e->n_replicas; i++)
        serving += e->replicas[i].state != REPLICA_DOWN;
    pthread_mutex_unlock(&e->lock);

    close_replica_sockets(e, r);
    /* The ranks left of a tensor-parallel group may wait in a collective for the one
     * that is gone: they cannot exit by themselves, so no grace. */
    stop_workers(e, r->first_worker, e->args.tp_size, e->args.tp_size > 1 ? 0 : STOP_GRACE_MS);
    remove_replica_comm(r);
    if (e->args.restart_policy == CINFER_RESTART_ON_FAILURE && !e->stopping && !was_starting) {
        restart_replica(e, r);
        return;
    }
    if (!serving)
        engine_failed(e, why);
}

/* How telling an ended worker's status is: a launcher that starts a group as one job
 * (mpirun) sees the whole group end when one rank does, and gives that rank its real
 * status and the others an exit status of 0. */
static int end_rank(const struct cinfer_worker_status *st)
{
    return st->state == CINFER_WORKER_SIGNALED ? 2 : st->code != 0 ? 1 : 0;
}

/* A worker that ended (the one whose end tells the most, when several did) or stopped
 * heartbeating; describes it in why. */
static struct engine_worker *lost_worker(struct cinfer_engine *e, char *why, size_t why_bytes)
{
    long now = now_ms();
    struct engine_worker *ended = NULL;
    struct cinfer_worker_status ended_status = {0};
    for (int i = 0; i < e->n_workers; i++) {
        struct engine_worker *w = &e->workers[i];
        if (w->phase == CINFER_WORKER_DOWN || !w->handle)
            continue;
        struct cinfer_worker_status st;
        e->launcher->status(e->launch, w->handle, &st);
        if (st.state != CINFER_WORKER_RUNNING) {
            if (!ended || end_rank(&st) > end_rank(&ended_status)) {
                ended = w;
                ended_status = st;
            }
            continue;
        }
        long silent_ms = now - w->last_heartbeat_ms;
        if (!ended && w->phase == CINFER_WORKER_UP && silent_ms > e->args.watchdog_timeout_ms) {
            /* Hung (a step that never ends, a stopped process): it will not answer, so it
             * is killed rather than asked; stopping it reaps it. */
            e->launcher->signal(e->launch, w->handle, SIGKILL);
            w->phase = CINFER_WORKER_DOWN;
            snprintf(why, why_bytes, "%s stopped responding: no heartbeat for %ld ms (engine.watchdog_timeout is %d "
                     "ms); killed it", w->name, silent_ms, e->args.watchdog_timeout_ms);
            return w;
        }
    }
    if (ended) {
        describe_end(e, ended, &ended_status, "", why, why_bytes);
        ended->phase = CINFER_WORKER_DOWN;
    }
    return ended;
}

/* A restarting replica whose ranks are all READY starts serving; one past its deadline
 * fails. */
static void finish_restarts(struct cinfer_engine *e)
{
    for (int i = 0; i < e->n_replicas; i++) {
        struct engine_replica *r = &e->replicas[i];
        if (r->state != REPLICA_STARTING)
            continue;
        if (all_up(e, r->first_worker, e->args.tp_size)) {
            struct cinfer_error err = {0};
            if (open_replica_sockets(e, r, &err) != CINFER_OK) {
                replica_failed(e, r, err.message);
                continue;
            }
            pthread_mutex_lock(&e->lock);
            r->state = REPLICA_UP;
            update_health(e);
            pthread_mutex_unlock(&e->lock);
            cinfer_log(CINFER_LOG_SEV_WARNING, "replica dp%d restarted and serving", r->dp_rank);
        } else if (now_ms() > r->start_deadline_ms) {
            char why[256];
            snprintf(why, sizeof why, "replica dp%d did not report READY within the start deadline of %d ms",
                     r->dp_rank, e->args.start_timeout_ms);
            replica_failed(e, r, why);
        }
    }
}

void cinfer_engine_watch(struct cinfer_engine *e)
{
    struct cinfer_msg_failed failed = {0};
    drain_status(e, 0, &failed);
    cinfer_msg_failed_free(&failed); /* logged; the worker's end tells the rest */
    int engine_up = 0;
    for (int r = 0; r < e->n_replicas; r++)
        engine_up |= e->replicas[r].state != REPLICA_DOWN;
    if (!engine_up)
        return; /* stopped for good: nothing left to watch */
    char why[1024];
    struct engine_worker *w;
    while ((w = lost_worker(e, why, sizeof why)) != NULL) {
        int r = replica_of(e, w);
        if (r < 0)
            engine_failed(e, why);
        else
            replica_failed(e, &e->replicas[r], why);
    }
    finish_restarts(e);
}

int cinfer_engine_route(struct cinfer_engine *e, const int32_t *ids, size_t n_ids)
{
    int *up = malloc(2 * (size_t)e->n_replicas * sizeof *up), *load = up + e->n_replicas;
    if (!up)
        return -1;
    for (int r = 0; r < e->n_replicas; r++) {
        up[r] = e->replicas[r].state == REPLICA_UP;
        load[r] = e->replicas[r].in_flight;
    }
    size_t matched;
    int chosen = cinfer_router_choose(e->router, ids, n_ids, up, load, &matched);
    free(up);
    if (chosen >= 0) {
        e->replicas[chosen].in_flight++;
        e->replicas[chosen].routed++;
    }
    return chosen;
}
