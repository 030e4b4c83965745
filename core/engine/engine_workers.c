/* Starting, watching and stopping the worker processes of an engine: one detokenizer
 * and one scheduler per tensor-parallel rank, through the configured launcher plugin.
 * Start waits for every READY (or a FAILED with the worker's reason, or its death) up
 * to the start deadline; stop closes the lifeline so every worker exits, then lets the
 * launcher reap them (SIGKILL after a grace period). The watchdog (check_workers, on
 * the engine thread) sees a worker that ended, and one whose loop stopped turning: no
 * heartbeat for engine.watchdog_timeout, a forward step that long included. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/plugins.h"
#include "engine/engine_internal.h"
#include "engine/hooks.h"
#include "engine/port_args.h"
#include "ipc/channel.h"
#include "util/log.h"

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* In a forked child (custom hooks): run the hook for the role with the engine's
 * settings, which the fork copied. */
struct child_job {
    struct cinfer_engine *engine;
    int role;
    int tp_rank;
};

static int run_child_job(void *ctx)
{
    struct child_job *job = ctx;
    struct cinfer_engine *e = job->engine;
    cinfer_worker_set_hooks(&e->hooks);
    const struct cinfer_engine_hooks *h = cinfer_worker_hooks();
    if (job->role == CINFER_WORKER_SCHEDULER)
        return h->run_scheduler_process(&e->args, &e->ports, -1, job->tp_rank, 0);
    return h->run_detokenizer_process(&e->args, &e->ports);
}

static int spawn_one(struct cinfer_engine *e, int role, int tp_rank, struct cinfer_error *err)
{
    struct engine_worker *w = &e->workers[e->n_workers];
    memset(w, 0, sizeof *w);
    w->role = role;
    w->tp_rank = tp_rank;
    if (role == CINFER_WORKER_SCHEDULER)
        snprintf(w->name, sizeof w->name, "scheduler tp%d", tp_rank);
    else
        snprintf(w->name, sizeof w->name, "detokenizer");

    /* Everything the child needs is built here, before the launcher forks. */
    char rank_tag[16], rank[16];
    snprintf(rank_tag, sizeof rank_tag, "tp%d", tp_rank);
    snprintf(rank, sizeof rank, "%d", tp_rank);
    const char *argv_sched[] = {e->worker_path, "scheduler", rank_tag, "--run-dir", e->ports.run_dir,
                                "--tp-rank", rank, "--dp-rank", "0", "--gpu-id", "-1", NULL};
    const char *argv_detok[] = {e->worker_path, "detokenizer", "--run-dir", e->ports.run_dir, NULL};
    static struct child_job jobs[ENGINE_MAX_WORKERS]; /* read only by the forked child */
    struct child_job *job = &jobs[e->n_workers];
    *job = (struct child_job){e, role, tp_rank};
    struct cinfer_spawn_request req = {
        .role = role == CINFER_WORKER_SCHEDULER ? CINFER_ROLE_SCHEDULER : CINFER_ROLE_DETOKENIZER,
        .tp_rank = tp_rank,
        .gpu_id = -1,
        .argv = e->custom_hooks ? NULL : (role == CINFER_WORKER_SCHEDULER ? argv_sched : argv_detok),
        .child_main = e->custom_hooks ? run_child_job : NULL,
        .child_ctx = job,
        .stdin_fd = e->lifeline[0],
        .title = w->name,
    };
    int rc = e->launcher->spawn(e->launch, &req, &w->handle, err);
    if (rc)
        return rc;
    e->n_workers++;
    return CINFER_OK;
}

static void describe_end(const struct engine_worker *w, const struct cinfer_worker_status *st, char *buf, size_t n)
{
    if (st->state == CINFER_WORKER_SIGNALED)
        snprintf(buf, n, "%s was killed by signal %d (%s)", w->name, st->code, strsignal(st->code));
    else
        snprintf(buf, n, "%s exited with status %d", w->name, st->code);
}

/* Waits for READY from every worker; a FAILED, a death or the deadline ends it. */
static int wait_ready(struct cinfer_engine *e, struct cinfer_error *err)
{
    long deadline = now_ms() + (e->args.start_timeout_ms > 0 ? e->args.start_timeout_ms : 60000);
    int n_ready = 0;
    while (n_ready < e->n_workers) {
        void *frame;
        size_t len;
        struct cinfer_error rerr = {0};
        int rc = cinfer_channel_recv(e->status, 50, &frame, &len, NULL, &rerr);
        if (rc == CINFER_OK) {
            uint32_t type = 0;
            struct cinfer_msg_ready ready;
            struct cinfer_msg_failed failed;
            if (cinfer_msg_peek_type(frame, len, &type, &rerr) == CINFER_OK && type == CINFER_MSG_READY &&
                cinfer_msg_decode_ready(frame, len, &ready, &rerr) == CINFER_OK) {
                for (int i = 0; i < e->n_workers; i++) {
                    struct engine_worker *w = &e->workers[i];
                    if (!w->ready && w->role == ready.role && (uint32_t)w->tp_rank == ready.tp_rank) {
                        w->ready = 1;
                        w->limits = ready;
                        w->last_heartbeat_ms = now_ms();
                        n_ready++;
                    }
                }
            } else if (type == CINFER_MSG_HEARTBEAT) {
                cinfer_engine_note_heartbeat(e, frame, len); /* one that is ready already */
            } else if (type == CINFER_MSG_FAILED && cinfer_msg_decode_failed(frame, len, &failed, &rerr) == CINFER_OK) {
                const char *who = failed.role == CINFER_WORKER_SCHEDULER ? "scheduler" : "detokenizer";
                if (failed.role == CINFER_WORKER_SCHEDULER)
                    cinfer_error_set(err, CINFER_ERR_CHILD, "%s tp%u failed to start: %s", who, failed.tp_rank,
                                     failed.message);
                else
                    cinfer_error_set(err, CINFER_ERR_CHILD, "%s failed to start: %s", who, failed.message);
                cinfer_msg_failed_free(&failed);
                free(frame);
                return CINFER_ERR_CHILD;
            } else {
                cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the status channel: %s", rerr.message);
            }
            free(frame);
            continue;
        }
        char why[256];
        if (cinfer_engine_check_workers(e, why, sizeof why))
            return cinfer_error_set(err, CINFER_ERR_CHILD, "%s before it was ready", why);
        if (now_ms() > deadline) {
            /* Name every worker still silent and every one that did answer: which side
             * of the status channel failed is the first question on a report. */
            enum { LIST_BYTES = 256 };
            char silent[LIST_BYTES] = "", answered[LIST_BYTES] = "";
            for (int i = 0; i < e->n_workers; i++) {
                char *list = e->workers[i].ready ? answered : silent;
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
    e->n_workers = 0;
    if (pipe2(e->lifeline, O_CLOEXEC) != 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "cannot create the workers' lifeline pipe: %s", strerror(errno));
    int rc = spawn_one(e, CINFER_WORKER_DETOKENIZER, 0, err);
    for (int rank = 0; rc == CINFER_OK && rank < e->args.tp_size; rank++)
        rc = spawn_one(e, CINFER_WORKER_SCHEDULER, rank, err);
    /* The engine's own sockets are bound after the first spawn: a worker forked without
     * exec (custom hooks) then copies a process without zmq's threads, whose locks it
     * could otherwise inherit held. The workers connect before the bind and zmq retries
     * (cinfer_channel_open keeps that interval short). A restart finds them open. */
    if (rc == CINFER_OK && !e->status &&
        !(e->status = cinfer_channel_open(e->zmq_context, ZMQ_PULL, e->ports.status, 1, NULL, err)))
        rc = err->code;
    if (rc == CINFER_OK && !e->from_detokenizer &&
        !(e->from_detokenizer = cinfer_channel_open(e->zmq_context, ZMQ_PULL, e->ports.tokenizer_input, 1, NULL, err)))
        rc = err->code;
    if (rc == CINFER_OK)
        rc = wait_ready(e, err);
    /* Callers' threads use these sockets under send_lock / rpc_lock; the watchdog
     * thread replaces them on a restart, so it takes the same locks. */
    if (rc == CINFER_OK) {
        pthread_mutex_lock(&e->send_lock);
        pthread_mutex_lock(&e->rpc_lock);
        e->to_scheduler = cinfer_channel_open(e->zmq_context, ZMQ_PUSH, e->ports.scheduler_input, 0, NULL, err);
        for (int rank = 0; e->to_scheduler && rank < e->args.tp_size; rank++) {
            char endpoint[CINFER_ENDPOINT_BYTES];
            cinfer_port_args_rpc_endpoint(&e->ports, rank, endpoint, sizeof endpoint);
            /* A printable identity: the scheduler's ROUTER addresses its reply by it. */
            e->rpc[rank] = cinfer_channel_open(e->zmq_context, ZMQ_DEALER, endpoint, 0, "engine", err);
            if (!e->rpc[rank]) {
                rc = err->code;
            } else { /* a send waits for the connection, but not forever */
                int send_timeout_ms = 2000;
                zmq_setsockopt(e->rpc[rank], ZMQ_SNDTIMEO, &send_timeout_ms, sizeof send_timeout_ms);
            }
        }
        if (!e->to_scheduler)
            rc = err->code;
        pthread_mutex_unlock(&e->rpc_lock);
        pthread_mutex_unlock(&e->send_lock);
    }
    if (rc)
        cinfer_engine_stop_workers(e);
    return rc;
}

void cinfer_engine_stop_workers(struct cinfer_engine *e)
{
    /* Closing our end of the lifeline is the signal: every worker sees EOF and exits. */
    if (e->lifeline[1] >= 0) {
        close(e->lifeline[1]);
        e->lifeline[1] = -1;
    }
    if (e->lifeline[0] >= 0) {
        close(e->lifeline[0]);
        e->lifeline[0] = -1;
    }
    long deadline = now_ms() + 2000;
    for (int i = 0; i < e->n_workers; i++) {
        struct cinfer_worker_status st;
        long left = deadline - now_ms();
        if (e->workers[i].handle &&
            e->launcher->wait(e->launch, e->workers[i].handle, left > 0 ? (int)left : 0, &st) == CINFER_ERR_TIMEOUT)
            e->launcher->signal(e->launch, e->workers[i].handle, SIGKILL);
    }
    for (int i = 0; i < e->n_workers; i++) {
        struct cinfer_worker_status st;
        if (e->workers[i].handle)
            e->launcher->wait(e->launch, e->workers[i].handle, -1, &st);
    }
    pthread_mutex_lock(&e->send_lock);
    pthread_mutex_lock(&e->rpc_lock);
    cinfer_channel_close(&e->to_scheduler);
    for (int rank = 0; rank < ENGINE_MAX_WORKERS; rank++)
        cinfer_channel_close(&e->rpc[rank]);
    pthread_mutex_unlock(&e->rpc_lock);
    pthread_mutex_unlock(&e->send_lock);
}

void cinfer_engine_note_heartbeat(struct cinfer_engine *e, const void *frame, size_t len)
{
    struct cinfer_msg_heartbeat beat;
    struct cinfer_error err = {0};
    if (cinfer_msg_decode_heartbeat(frame, len, &beat, &err) != CINFER_OK) {
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the status channel: %s", err.message);
        return;
    }
    for (int i = 0; i < e->n_workers; i++) {
        struct engine_worker *w = &e->workers[i];
        if (w->ready && w->role == beat.role && (uint32_t)w->tp_rank == beat.tp_rank && w->limits.pid == beat.pid)
            w->last_heartbeat_ms = now_ms();
    }
}

int cinfer_engine_check_workers(struct cinfer_engine *e, char *why, size_t why_bytes)
{
    long now = now_ms();
    for (int i = 0; i < e->n_workers; i++) {
        struct engine_worker *w = &e->workers[i];
        if (w->exited || !w->handle)
            continue;
        struct cinfer_worker_status st;
        e->launcher->status(e->launch, w->handle, &st);
        if (st.state != CINFER_WORKER_RUNNING) {
            w->exited = 1;
            describe_end(w, &st, why, why_bytes);
            return 1;
        }
        long silent_ms = now - w->last_heartbeat_ms;
        if (w->ready && silent_ms > e->args.watchdog_timeout_ms) {
            /* Hung (a step that never ends, a stopped process): it will not answer, so it
             * is killed rather than asked; the launcher reaps it with the others. */
            e->launcher->signal(e->launch, w->handle, SIGKILL);
            w->exited = 1;
            snprintf(why, why_bytes, "%s stopped responding: no heartbeat for %ld ms (engine.watchdog_timeout is %d "
                     "ms); killed it", w->name, silent_ms, e->args.watchdog_timeout_ms);
            return 1;
        }
    }
    return 0;
}
