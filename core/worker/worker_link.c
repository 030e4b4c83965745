#include "worker/worker_link.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "ipc/channel.h"
#include "util/log.h"

int cinfer_worker_link_open(struct cinfer_worker_link *link, const struct cinfer_port_args *ports, int role,
                            int tp_rank, int dp_rank, int dp_size, struct cinfer_error *err)
{
    memset(link, 0, sizeof *link);
    link->role = role;
    link->tp_rank = tp_rank;
    link->dp_rank = dp_rank;
    if (role == CINFER_WORKER_SCHEDULER && dp_size > 1)
        snprintf(link->name, sizeof link->name, "scheduler dp%d tp%d", dp_rank, tp_rank);
    else if (role == CINFER_WORKER_SCHEDULER)
        snprintf(link->name, sizeof link->name, "scheduler tp%d", tp_rank);
    else
        snprintf(link->name, sizeof link->name, "detokenizer");
    cinfer_log_set_role(link->name);
    link->zmq_context = zmq_ctx_new();
    if (!link->zmq_context)
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: zmq_ctx_new failed", link->name);
    /* A worker that binds tcp channels admits only the engine's CURVE clients. */
    if (cinfer_zap_start(link->zmq_context, ports, &link->zap, err) != CINFER_OK) {
        zmq_ctx_term(link->zmq_context);
        link->zmq_context = NULL;
        return err->code;
    }
    link->status = cinfer_channel_open_keyed(link->zmq_context, ZMQ_PUSH, ports->status, 0, NULL, ports, err);
    if (link->status) {
        /* READY and FAILED must arrive even when the worker exits right after. */
        int linger_ms = 2000;
        zmq_setsockopt(link->status, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    } else {
        cinfer_zap_stop(&link->zap);
        zmq_ctx_term(link->zmq_context);
        link->zmq_context = NULL;
        return err ? err->code : CINFER_ERR_IO;
    }
    return CINFER_OK;
}

void cinfer_worker_link_ready(struct cinfer_worker_link *link, struct cinfer_msg_ready *ready)
{
    ready->role = (uint8_t)link->role;
    ready->tp_rank = (uint32_t)link->tp_rank;
    ready->dp_rank = (uint32_t)link->dp_rank;
    ready->pid = (uint32_t)getpid();
    void *frame;
    size_t len;
    if (cinfer_msg_encode_ready(ready, &frame, &len) == CINFER_OK) {
        cinfer_channel_send(link->status, frame, len, 0, NULL);
        free(frame);
    }
}

int cinfer_worker_link_failed(struct cinfer_worker_link *link, int code, const char *message)
{
    cinfer_log(CINFER_LOG_SEV_ERROR, "%s", message);
    if (link->status) {
        struct cinfer_msg_failed failed = {
            .role = (uint8_t)link->role, .tp_rank = (uint32_t)link->tp_rank, .dp_rank = (uint32_t)link->dp_rank,
            .pid = (uint32_t)getpid(), .message = (char *)message,
            /* a failure always has a status code: the decoder refuses one without */
            .code = code < 0 && code >= CINFER_STATUS_MIN ? code : CINFER_ERR_INTERNAL,
        };
        void *frame;
        size_t len;
        if (cinfer_msg_encode_failed(&failed, &frame, &len) == CINFER_OK) {
            cinfer_channel_send(link->status, frame, len, 0, NULL);
            free(frame);
        }
    }
    return 1;
}

int cinfer_worker_heartbeat_interval_ms(int watchdog_timeout_ms)
{
    int interval = watchdog_timeout_ms / 4;
    return interval < 25 ? 25 : interval > 1000 ? 1000 : interval;
}

void cinfer_worker_link_heartbeat(struct cinfer_worker_link *link, int watchdog_timeout_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long now = t.tv_sec * 1000L + t.tv_nsec / 1000000L;
    if (!link->status || now - link->last_heartbeat_ms < cinfer_worker_heartbeat_interval_ms(watchdog_timeout_ms))
        return;
    link->last_heartbeat_ms = now;
    struct cinfer_msg_heartbeat beat = {.role = (uint8_t)link->role, .tp_rank = (uint32_t)link->tp_rank,
                                        .dp_rank = (uint32_t)link->dp_rank, .pid = (uint32_t)getpid()};
    void *frame;
    size_t len;
    if (cinfer_msg_encode_heartbeat(&beat, &frame, &len) == CINFER_OK) {
        cinfer_channel_send(link->status, frame, len, 1, NULL);
        free(frame);
    }
}

void cinfer_worker_link_close(struct cinfer_worker_link *link)
{
    cinfer_channel_close(&link->status);
    if (link->zmq_context) {
        cinfer_zap_stop(&link->zap);
        zmq_ctx_term(link->zmq_context);
        link->zmq_context = NULL;
    }
}

/* Where the lifeline is: standard input (the engine's socket or pipe), or, for a rank
 * started by a launcher that gives only one rank the engine's input (mpirun), the
 * process that started it. */
static int lifeline_is_parent;
static pid_t lifeline_parent;

int cinfer_lifeline_gone(void)
{
    if (lifeline_is_parent)
        return getppid() != lifeline_parent;
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
        return 1;
    char byte;
    return read(0, &byte, 1) <= 0; /* the main process never writes; readable means EOF */
}

int cinfer_lifeline_use_parent(struct cinfer_error *err)
{
    /* Standard input becomes a pipe that never turns readable, so the loops that poll it
     * wait on their sockets alone; the parent's end kills this process. */
    int never[2];
    if (pipe(never) != 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "lifeline: cannot make a pipe: %s", strerror(errno));
    dup2(never[0], 0);
    close(never[0]); /* never[1] stays open, unused, for the life of the process */
    lifeline_parent = getppid();
    lifeline_is_parent = 1;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "lifeline: cannot ask to die with the parent: %s",
                                strerror(errno));
    if (getppid() != lifeline_parent) /* it died before the request took */
        return cinfer_error_set(err, CINFER_ERR_CHILD, "lifeline: the process that started this worker is gone");
    return CINFER_OK;
}

static int watch_grace_ms;

static void *lifeline_watcher(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p = {.fd = 0, .events = POLLRDHUP};
        if (poll(&p, 1, -1) < 0 && errno == EINTR)
            continue;
        if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))
            break;
        usleep(100 * 1000); /* readable without a hang-up: data the loop will read */
    }
    usleep((useconds_t)watch_grace_ms * 1000);
    cinfer_log(CINFER_LOG_SEV_WARNING, "the lifeline closed %d ms ago and the worker has not exited: ending it",
               watch_grace_ms);
    _exit(1);
    return NULL;
}

int cinfer_lifeline_watch(int grace_ms)
{
    if (lifeline_is_parent)
        return CINFER_OK; /* the kernel's parent-death signal watches */
    watch_grace_ms = grace_ms;
    pthread_t t;
    if (pthread_create(&t, NULL, lifeline_watcher, NULL) != 0)
        return CINFER_ERR_NOMEM;
    pthread_detach(t);
    return CINFER_OK;
}
