/* The engine's lifecycle and generation API (cinfer/engine.h): the main process side
 * of the pipeline. The caller's thread tokenizes and sends; the engine thread receives
 * text from the detokenizer and watches the workers; callers wait on their request. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "backend/backend_select.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "engine/engine_internal.h"
#include "engine/launcher_select.h"
#include "engine/port_args.h"
#include "engine/router.h"
#include "engine/run_dir.h"
#include "grammar/constraint.h"
#include "ipc/channel.h"
#include "ipc/curve.h"
#include "scheduler/sampling_validate.h"
#include "util/log.h"
#include "worker/hooks.h"

#ifndef CINFER_BINDIR_FROM_LIBDIR
#define CINFER_BINDIR_FROM_LIBDIR "../bin"
#endif

/* cinfer-worker: $CINFER_WORKER, else beside the install (bin/ next to lib/). */
static int find_worker(char *out, size_t out_bytes, struct cinfer_error *err)
{
    const char *env = getenv("CINFER_WORKER");
    if (env && env[0]) {
        snprintf(out, out_bytes, "%s", env);
        return CINFER_OK;
    }
    const char *plugins = cinfer_plugin_install_dir(); /* <libdir>/cinfer/plugins */
    char candidate[PATH_MAX + 64];
    if (plugins) {
        snprintf(candidate, sizeof candidate, "%s/../../%s/cinfer-worker", plugins, CINFER_BINDIR_FROM_LIBDIR);
        if (realpath(candidate, out) && access(out, X_OK) == 0)
            return CINFER_OK;
    }
    /* Beside the running executable (an appliance links everything into bin/). */
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(candidate, sizeof candidate, "%s/cinfer-worker", self);
            if (access(candidate, X_OK) == 0) {
                snprintf(out, out_bytes, "%s", candidate);
                return CINFER_OK;
            }
        }
    }
    return cinfer_error_set(err, CINFER_ERR_NOT_FOUND,
                            "cannot find the cinfer-worker executable "
                            "(looked beside libcinfer and in %s; set CINFER_WORKER)",
                            n > 0 ? self : "the executable's folder");
}

static void *engine_thread(void *arg);

static void destroy(struct cinfer_engine *e)
{
    if (e->thread_started) {
        e->stopping = 1;
        pthread_join(e->thread, NULL);
    }
    if (e->launch)
        cinfer_engine_stop_workers(e);
    if (e->launcher && e->launch)
        e->launcher->fini(&e->launch);
    cinfer_plugin_close(&e->launcher_plugin);
    cinfer_channel_close(&e->from_detokenizer);
    cinfer_channel_close(&e->status);
    cinfer_zap_stop(&e->zap);
    if (e->zmq_context)
        zmq_ctx_term(e->zmq_context);
    cinfer_endpoints_free(&e->endpoints);
    cinfer_run_dir_remove(e->endpoints.run_dir);
    cinfer_tokenizer_ctx_free(&e->tok);
    for (int b = 0; b < ENGINE_BUCKETS; b++)
        while (e->buckets[b])
            cinfer_engine_request_unregister(e, e->buckets[b]);
    for (int r = 0; e->replicas && r < e->n_replicas; r++)
        free(e->replicas[r].rpc);
    free(e->replicas);
    free(e->workers);
    cinfer_router_free(&e->router);
    cinfer_server_args_free(&e->args);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->send_lock);
    pthread_mutex_destroy(&e->rpc_lock);
    pthread_cond_destroy(&e->idle);
    free(e);
}

/* Workers: the detokenizer, then replica 0's ranks, replica 1's... and the replicas
 * that own them. */
static int make_worker_table(struct cinfer_engine *e, struct cinfer_error *err)
{
    int tp = e->args.tp_size, dp = e->args.dp_size;
    e->n_workers = 1 + dp * tp;
    e->n_replicas = dp;
    e->workers = calloc((size_t)e->n_workers, sizeof *e->workers);
    e->replicas = calloc((size_t)dp, sizeof *e->replicas);
    e->router = cinfer_router_new(dp, 65536); /* a million tokens of prompts per replica */
    if (!e->workers || !e->replicas || !e->router)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d workers", e->n_workers);
    struct engine_worker *w = &e->workers[0];
    snprintf(w->name, sizeof w->name, "detokenizer");
    w->role = CINFER_WORKER_DETOKENIZER;
    for (int r = 0; r < dp; r++) {
        struct engine_replica *rep = &e->replicas[r];
        rep->dp_rank = r;
        rep->first_worker = 1 + r * tp;
        rep->state = REPLICA_DOWN;
        if (!(rep->rpc = calloc((size_t)tp, sizeof *rep->rpc)))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for replica dp%d", r);
        for (int t = 0; t < tp; t++) {
            w = &e->workers[rep->first_worker + t];
            w->role = CINFER_WORKER_SCHEDULER;
            w->dp_rank = r;
            w->tp_rank = t;
            if (dp > 1)
                snprintf(w->name, sizeof w->name, "scheduler dp%d tp%d", r, t);
            else
                snprintf(w->name, sizeof w->name, "scheduler tp%d", t);
        }
    }
    for (int i = 0; i < e->n_workers; i++) {
        e->workers[i].lifeline = -1;
        e->workers[i].phase = CINFER_WORKER_DOWN;
        snprintf(e->workers[i].host, sizeof e->workers[i].host, "localhost");
    }
    return CINFER_OK;
}

static void launcher_config(const struct cinfer_engine *e, struct cinfer_launcher_config *c)
{
    *c = (struct cinfer_launcher_config){
        .struct_size = sizeof *c, .worker_path = e->worker_path,
        .hosts = (const char *const *)e->args.hosts.items, .tp_size = e->args.tp_size, .dp_size = e->args.dp_size,
        .ssh_args = e->args.ssh_args, .connect_timeout_ms = e->args.connect_timeout_ms,
        .remote_workers = (const char *const *)e->args.remote_workers.items};
}

static int launcher_brings_comm(const struct cinfer_launcher_ops *ops)
{
    return ops->version >= 3 && ops->group_join != NULL;
}

/* The launcher plugin (launcher.plugin, or the best usable one for "auto"); with no
 * launcher.hosts, the hosts of the allocation it finds (Slurm's nodes, a hostfile)
 * become the engine's hosts. */
static int choose_launcher(struct cinfer_engine *e, struct cinfer_error *err)
{
    struct cinfer_launcher_config lconfig;
    launcher_config(e, &lconfig);
    int rc = cinfer_launcher_select(&e->args, &lconfig, &e->launcher_plugin, err);
    if (rc)
        return rc;
    e->launcher = cinfer_plugin_vtable(e->launcher_plugin);
    if (e->args.hosts.count > 0 || e->launcher->version < 3 || !e->launcher->allocation_hosts)
        return CINFER_OK;
    char **hosts = NULL;
    if ((rc = e->launcher->allocation_hosts(&lconfig, &hosts, err))) {
        cinfer_error_prefix(err, "launcher %s", cinfer_plugin_descriptor_of(e->launcher_plugin)->name);
        return rc;
    }
    if (!hosts)
        return CINFER_OK;
    size_t n = 0;
    while (hosts[n])
        n++;
    e->args.hosts.items = hosts; /* the args own them from here */
    e->args.hosts.count = (int)n;
    cinfer_log(CINFER_LOG_SEV_INFO, "hosts from the allocation: %zu (first %s)", n, n ? hosts[0] : "none");
    return CINFER_OK;
}

/* The backend the local schedulers will choose (engine.device), asked here so that an
 * unusable device fails at start with its reason rather than from a dead worker.
 * Schedulers on other hosts answer for their own devices when they start. */
static int check_device(const struct cinfer_engine *e, struct cinfer_error *err)
{
    if (e->args.hosts.count > 0 || e->args.remote_workers.count > 0)
        return CINFER_OK;
    struct cinfer_plugin *backend = NULL;
    int rc = cinfer_backend_select(e->args.device, e->args.plugin_path, &backend, err);
    if (rc)
        return rc;
    cinfer_log(CINFER_LOG_SEV_INFO, "compute backend: %s (%s)", cinfer_plugin_descriptor_of(backend)->name,
               cinfer_plugin_file(backend));
    cinfer_plugin_close(&backend);
    return CINFER_OK;
}

int cinfer_engine_create(const struct cinfer_server_args *args, const struct cinfer_engine_hooks *hooks,
                         struct cinfer_engine **out, struct cinfer_error *err)
{
    *out = NULL;
    int rc = cinfer_hooks_check(hooks, err);
    if (rc)
        return rc;
    struct cinfer_engine *e = calloc(1, sizeof *e);
    if (!e)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory creating the engine");
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->send_lock, NULL);
    pthread_mutex_init(&e->rpc_lock, NULL);
    pthread_cond_init(&e->idle, NULL);
    rc = cinfer_server_args_copy(&e->args, args, err);
    if (rc) {
        free(e);
        return rc;
    }
    cinfer_log_set_level((int)e->args.log_level);
    e->custom_hooks = cinfer_hooks_merge(&e->hooks, hooks);
    if ((rc = make_worker_table(e, err))) {
        destroy(e);
        return rc;
    }

    char run_dir[192] = "";
    if ((rc = check_device(e, err)) || (rc = e->hooks.init_tokenizer(&e->args, &e->tok, err)) ||
        (rc = find_worker(e->worker_path, sizeof e->worker_path, err)) ||
        (rc = choose_launcher(e, err)) ||
        (rc = cinfer_run_dir_create(run_dir, sizeof run_dir, err)) ||
        (rc = cinfer_endpoints_init(&e->endpoints, run_dir, &e->args, launcher_brings_comm(e->launcher), err))) {
        if (run_dir[0] && !e->endpoints.run_dir[0])
            cinfer_run_dir_remove(run_dir);
        destroy(e);
        return rc;
    }
    for (int i = 0; i < e->n_workers; i++) {
        struct engine_worker *w = &e->workers[i];
        cinfer_endpoints_of_worker(&e->endpoints, w->role, w->dp_rank, w->tp_rank, &w->ports);
        /* Every message about a worker on a host names the host. */
        const char *host = w->role == CINFER_WORKER_SCHEDULER
                               ? cinfer_endpoints_host_of(&e->endpoints, w->dp_rank, w->tp_rank)
                               : NULL;
        if (host) {
            w->listed_host = 1;
            snprintf(w->host, sizeof w->host, "%s", host);
            size_t used = strlen(w->name);
            snprintf(w->name + used, sizeof w->name - used, " on host %s", host);
        }
    }
    /* No socket yet: zmq starts its threads with the first one, and the workers are
     * forked before that (cinfer_engine_start_workers opens the engine's sockets). */
    e->zmq_context = zmq_ctx_new();
    if (!e->zmq_context) {
        rc = cinfer_error_set(err, CINFER_ERR_IO, "zmq_ctx_new failed");
        destroy(e);
        return rc;
    }
    struct cinfer_launcher_config lconfig;
    launcher_config(e, &lconfig);
    if ((rc = cinfer_launcher_start(e->launcher, &lconfig, &e->launch, err)) ||
        (rc = cinfer_engine_start_workers(e, err))) {
        destroy(e);
        return rc;
    }
    e->healthy = 1;
    e->accepting = 1;
    if (pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "cannot start the engine thread");
        destroy(e);
        return rc;
    }
    e->thread_started = 1;
    *out = e;
    return CINFER_OK;
}

static void *engine_thread(void *arg)
{
    struct cinfer_engine *e = arg;
    while (!e->stopping) {
        zmq_pollitem_t items[] = {
            {.socket = e->from_detokenizer, .events = ZMQ_POLLIN},
            {.socket = e->status, .events = ZMQ_POLLIN},
        };
        int n = zmq_poll(items, 2, 20);
        if (n < 0 && zmq_errno() != EINTR)
            break;
        /* Drain what came, then look at the workers. */
        while (items[0].revents & ZMQ_POLLIN) {
            void *frame;
            size_t len;
            if (cinfer_channel_recv(e->from_detokenizer, 0, &frame, &len, NULL, NULL) != CINFER_OK)
                break;
            uint32_t type = 0;
            struct cinfer_error err = {0};
            if (cinfer_msg_peek_type(frame, len, &type, &err) == CINFER_OK && type == CINFER_MSG_TEXT)
                cinfer_engine_handle_text_frame(e, frame, len);
            else
                cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the tokenizer input (%zu bytes): %s",
                           len, err.message[0] ? err.message : "not a TEXT frame");
            free(frame);
        }
        cinfer_engine_watch(e); /* status frames, lost workers, restarts */
    }
    return NULL;
}

/* Some replica can still finish requests (lock held). */
static int serving(const struct cinfer_engine *e)
{
    for (int r = 0; r < e->n_replicas; r++)
        if (e->replicas[r].state == REPLICA_UP)
            return 1;
    return 0;
}

int cinfer_engine_healthy(struct cinfer_engine *e)
{
    pthread_mutex_lock(&e->lock);
    int healthy = e->healthy;
    pthread_mutex_unlock(&e->lock);
    return healthy;
}

struct cinfer_tokenizer_ctx *cinfer_engine_tokenizer(struct cinfer_engine *e)
{
    return e->tok;
}

void cinfer_engine_shutdown(struct cinfer_engine **ep, int drain_timeout_ms)
{
    if (!ep || !*ep)
        return;
    struct cinfer_engine *e = *ep;
    pthread_mutex_lock(&e->lock);
    e->accepting = 0;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += drain_timeout_ms / 1000;
    deadline.tv_nsec += (long)(drain_timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    while (e->n_inflight > 0 && serving(e))
        if (pthread_cond_timedwait(&e->idle, &e->lock, &deadline) == ETIMEDOUT)
            break;
    cinfer_engine_fail_all(e, CINFER_ERR_UNAVAILABLE, "the engine is shutting down");
    /* Callers still inside generate() take their error chunk and leave. */
    while (e->n_inflight > 0) {
        struct timespec brief;
        clock_gettime(CLOCK_REALTIME, &brief);
        brief.tv_nsec += 50 * 1000000L;
        if (brief.tv_nsec >= 1000000000L) {
            brief.tv_sec++;
            brief.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&e->idle, &e->lock, &brief) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&e->lock);
    destroy(e);
    *ep = NULL;
}

/* ---- generation ------------------------------------------------------------------ */

struct cinfer_stream {
    struct cinfer_engine *engine;
    struct engine_request *req;
    struct engine_chunk *current; /* handed out by the last next() */
    int done;
};

static int validate(const struct cinfer_engine *e, const struct cinfer_generate_request *req,
                    struct cinfer_error *err)
{
    if (!req->prompt && (!req->input_ids || req->n_input_ids == 0))
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "request has neither a prompt nor input_ids");
    if (req->n < 0 || req->n > CINFER_MAX_CHOICES)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "request n is %d, expected 0..%d choices", req->n,
                                CINFER_MAX_CHOICES);
    /* From a scheduler's READY (every replica runs the same model); bounds
     * stop_token_ids and logit_bias. */
    int vocab_size = 0;
    for (int i = 0; i < e->n_workers && !vocab_size; i++)
        if (e->workers[i].role == CINFER_WORKER_SCHEDULER)
            vocab_size = (int)e->workers[i].limits.vocab_size;
    return cinfer_sampling_validate(&req->sampling, vocab_size, err);
}

static int open_request(struct cinfer_engine *e, const struct cinfer_generate_request *req,
                        struct engine_request **out, struct cinfer_error *err)
{
    int rc = validate(e, req, err);
    if (rc)
        return rc;
    /* A constraint travels as grammar text, checked here so that a schema or regex
     * the grammar cannot honour is refused before anything runs. */
    char *grammar = NULL;
    rc = cinfer_constraint_grammar(&req->sampling, 1, &grammar, err);
    if (rc)
        return rc;
    struct cinfer_token_ids ids = {0};
    const int32_t *prompt_ids = req->input_ids;
    size_t n_ids = req->n_input_ids;
    if (req->prompt) {
        rc = e->tok->ops->encode(e->tok->tok, req->prompt, strlen(req->prompt), 1, &ids, err);
        if (rc) {
            free(grammar);
            return rc;
        }
        prompt_ids = ids.ids;
        n_ids = ids.len;
    }
    if (n_ids == 0) {
        cinfer_token_ids_free(&ids);
        free(grammar);
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "the prompt tokenizes to no tokens");
    }
    struct cinfer_msg_generate g = {.ids = (int32_t *)prompt_ids, .n_ids = (uint32_t)n_ids, .sampling = req->sampling,
                                    .stream = 1, .grammar = grammar};
    pthread_mutex_lock(&e->lock);
    int replica = e->accepting ? cinfer_engine_route(e, prompt_ids, n_ids) : -1;
    if (replica < 0) {
        rc = !e->accepting ? cinfer_error_set(err, CINFER_ERR_UNAVAILABLE, "the engine is shutting down")
                           : cinfer_error_set(err, CINFER_ERR_CHILD, "the engine is not healthy: %s", e->failure);
        pthread_mutex_unlock(&e->lock);
        cinfer_token_ids_free(&ids);
        free(grammar);
        return rc;
    }
    struct engine_request *r = cinfer_engine_request_register(e);
    if (r)
        r->replica = replica; /* counted in flight there by the route */
    else
        e->replicas[replica].in_flight--;
    pthread_mutex_unlock(&e->lock);
    if (!r) {
        cinfer_token_ids_free(&ids);
        free(grammar);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory registering a request");
    }
    g.rid = r->rid;
    void *frame;
    size_t len;
    rc = cinfer_msg_encode_generate(&g, &frame, &len);
    cinfer_token_ids_free(&ids);
    free(grammar);
    if (rc == CINFER_OK) {
        rc = cinfer_engine_send_to_scheduler(e, replica, frame, len, err);
        free(frame);
    } else {
        cinfer_error_set(err, rc, "out of memory encoding a request");
    }
    if (rc) {
        pthread_mutex_lock(&e->lock);
        cinfer_engine_request_unregister(e, r);
        pthread_mutex_unlock(&e->lock);
        return rc;
    }
    *out = r;
    return CINFER_OK;
}

/* Takes the next chunk; waits up to timeout_ms (-1 forever). Lock not held. */
static int take_chunk(struct cinfer_engine *e, struct engine_request *r, int timeout_ms, struct engine_chunk **out)
{
    pthread_mutex_lock(&e->lock);
    struct timespec deadline;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    while (!r->head) {
        if (timeout_ms < 0)
            pthread_cond_wait(&r->ready, &e->lock);
        else if (pthread_cond_timedwait(&r->ready, &e->lock, &deadline) == ETIMEDOUT)
            break;
    }
    struct engine_chunk *c = r->head;
    if (c) {
        r->head = c->next;
        if (!r->head)
            r->tail = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    *out = c;
    return c ? CINFER_OK : CINFER_ERR_TIMEOUT;
}

static void close_request(struct cinfer_engine *e, struct engine_request *r, int finished)
{
    if (!finished) { /* the caller left early: the scheduler frees its pages at once */
        struct cinfer_msg_abort a = {.rid = r->rid, .quiet = 1};
        void *frame;
        size_t len;
        struct cinfer_error err = {0};
        if (cinfer_msg_encode_abort(&a, &frame, &len) == CINFER_OK) {
            cinfer_engine_send_to_scheduler(e, r->replica, frame, len, &err);
            free(frame);
        }
    }
    pthread_mutex_lock(&e->lock);
    cinfer_engine_request_unregister(e, r);
    pthread_mutex_unlock(&e->lock);
}

static void fill_chunk_view(const struct engine_chunk *c, uint64_t rid, struct cinfer_stream_chunk *view)
{
    view->request_id = rid;
    view->text = c->text ? c->text : "";
    view->text_len = c->text_len;
    view->ids = c->ids;
    view->n_ids = c->n_ids;
    view->logprobs = c->logprobs;
    view->n_logprobs = c->logprobs ? c->n_ids : 0;
    view->finish_reason = c->finish_reason;
    view->matched_stop = c->matched_stop;
    view->prompt_tokens = c->prompt_tokens;
    view->completion_tokens = c->completion_tokens;
    view->cached_tokens = c->cached_tokens;
}

/* A failed request's chunk as the caller's status: the code of the worker (or the
 * engine) that failed it, with its words. */
static int chunk_error(const struct engine_chunk *c, struct cinfer_error *err)
{
    int code = c->code < 0 ? c->code : CINFER_ERR_INTERNAL; /* every error chunk has one */
    return cinfer_error_set(err, code, "%s", c->error ? c->error : cinfer_strerror(code));
}

/* The single-choice entry points refuse n > 1 rather than return one of n. */
static int one_choice(const struct cinfer_generate_request *req, const char *function, struct cinfer_error *err)
{
    if (req->n > 1)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "request n is %d: %s returns one choice; use cinfer_engine_generate_n", req->n,
                                function);
    return CINFER_OK;
}

/* Hands an opened request's chunks to fn until it finishes (or fn stops it), then
 * closes it. */
static int run_stream(struct cinfer_engine *e, struct engine_request *r, cinfer_stream_fn fn, void *ctx,
                      struct cinfer_error *err)
{
    for (;;) {
        struct engine_chunk *c;
        take_chunk(e, r, -1, &c);
        if (c->finish_reason == CINFER_FINISH_ERROR) {
            int rc = chunk_error(c, err);
            cinfer_engine_chunk_free(c);
            close_request(e, r, 1);
            return rc;
        }
        struct cinfer_stream_chunk view;
        fill_chunk_view(c, r->rid, &view);
        int stop = fn(&view, ctx);
        int finished = c->finish_reason != CINFER_FINISH_NONE;
        cinfer_engine_chunk_free(c);
        if (finished || stop) {
            close_request(e, r, finished);
            return CINFER_OK;
        }
    }
}

int cinfer_engine_generate_stream(struct cinfer_engine *e, const struct cinfer_generate_request *req,
                                  cinfer_stream_fn fn, void *ctx, struct cinfer_error *err)
{
    struct engine_request *r;
    int rc = one_choice(req, "cinfer_engine_generate_stream", err);
    if (rc || (rc = open_request(e, req, &r, err)))
        return rc;
    return run_stream(e, r, fn, ctx, err);
}

struct collect {
    struct cinfer_generate_result *out;
    size_t text_cap, ids_cap, logprobs_cap;
    int failed;
};

static int collect_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    struct collect *k = ctx;
    struct cinfer_generate_result *out = k->out;
    if (out->text_len + c->text_len + 1 > k->text_cap) {
        size_t cap = (out->text_len + c->text_len + 1) * 2;
        char *grown = realloc(out->text, cap);
        if (!grown)
            return k->failed = 1;
        out->text = grown;
        k->text_cap = cap;
    }
    memcpy(out->text + out->text_len, c->text, c->text_len);
    out->text_len += c->text_len;
    out->text[out->text_len] = '\0';
    if (out->n_output_ids + c->n_ids > k->ids_cap) {
        size_t cap = (out->n_output_ids + c->n_ids) * 2 + 16;
        int32_t *grown = realloc(out->output_ids, cap * sizeof *grown);
        if (!grown)
            return k->failed = 1;
        out->output_ids = grown;
        k->ids_cap = cap;
    }
    if (c->n_ids)
        memcpy(out->output_ids + out->n_output_ids, c->ids, c->n_ids * sizeof *c->ids);
    out->n_output_ids += c->n_ids;
    if (c->n_logprobs) {
        if (out->n_logprobs + c->n_logprobs > k->logprobs_cap) {
            size_t cap = (out->n_logprobs + c->n_logprobs) * 2 + 16;
            struct cinfer_token_logprob *grown = realloc(out->logprobs, cap * sizeof *grown);
            if (!grown)
                return k->failed = 1;
            out->logprobs = grown;
            k->logprobs_cap = cap;
        }
        memcpy(out->logprobs + out->n_logprobs, c->logprobs, c->n_logprobs * sizeof *c->logprobs);
        out->n_logprobs += c->n_logprobs;
    }
    out->request_id = c->request_id;
    out->finish_reason = c->finish_reason;
    out->prompt_tokens = c->prompt_tokens;
    out->completion_tokens = c->completion_tokens;
    out->cached_tokens = c->cached_tokens;
    if (c->matched_stop)
        out->matched_stop = strdup(c->matched_stop);
    return 0;
}

/* Waits for an opened request to finish and gathers its chunks into *out (zeroed
 * first, left empty on failure). */
static int collect_request(struct cinfer_engine *e, struct engine_request *r, struct cinfer_generate_result *out,
                           struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    struct collect k = {.out = out};
    out->text = calloc(1, 1);
    if (!out->text) {
        close_request(e, r, 0);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory");
    }
    k.text_cap = 1;
    int rc = run_stream(e, r, collect_chunk, &k, err);
    if (rc == CINFER_OK && k.failed)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory collecting the output");
    if (rc)
        cinfer_generate_result_free(out);
    return rc;
}

int cinfer_engine_generate(struct cinfer_engine *e, const struct cinfer_generate_request *req,
                           struct cinfer_generate_result *out, struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    struct engine_request *r;
    int rc = one_choice(req, "cinfer_engine_generate", err);
    if (rc || (rc = open_request(e, req, &r, err)))
        return rc;
    return collect_request(e, r, out, err);
}

int cinfer_engine_generate_n(struct cinfer_engine *e, const struct cinfer_generate_request *req,
                             struct cinfer_generate_result *results, size_t n_results, struct cinfer_error *err)
{
    if (req->n < 0 || req->n > CINFER_MAX_CHOICES)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "request n is %d, expected 0..%d choices", req->n,
                                CINFER_MAX_CHOICES);
    int n = req->n > 1 ? req->n : 1;
    if (n_results < (size_t)n)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "request n is %d but results has room for %zu", n,
                                n_results);
    memset(results, 0, (size_t)n * sizeof *results);
    /* Tokenize once: every choice sends the same ids. */
    struct cinfer_generate_request choice = *req;
    choice.n = 1;
    struct cinfer_token_ids ids = {0};
    int rc = CINFER_OK;
    if (req->prompt) {
        if ((rc = e->tok->ops->encode(e->tok->tok, req->prompt, strlen(req->prompt), 1, &ids, err)))
            return rc;
        if (ids.len == 0) {
            cinfer_token_ids_free(&ids);
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "the prompt tokenizes to no tokens");
        }
        choice.prompt = NULL;
        choice.input_ids = ids.ids;
        choice.n_input_ids = ids.len;
    }
    struct engine_request **open = calloc((size_t)n, sizeof *open);
    if (!open) {
        cinfer_token_ids_free(&ids);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d choices", n);
    }
    /* All are sent before any is awaited, so they run in one batch. */
    int n_open = 0;
    while (n_open < n) {
        if (req->sampling.has_seed)
            choice.sampling.seed = req->sampling.seed + (uint64_t)n_open;
        if ((rc = open_request(e, &choice, &open[n_open], err)))
            break;
        n_open++;
    }
    cinfer_token_ids_free(&ids);
    int n_closed = 0; /* collect_request closes its request, whatever the outcome */
    while (rc == CINFER_OK && n_closed < n_open) {
        rc = collect_request(e, open[n_closed], &results[n_closed], err);
        n_closed++;
    }
    if (rc) {
        for (int i = n_closed; i < n_open; i++)
            close_request(e, open[i], 0); /* aborts it in the scheduler */
        for (int i = 0; i < n; i++)
            cinfer_generate_result_free(&results[i]);
    }
    free(open);
    return rc;
}

void cinfer_generate_result_free(struct cinfer_generate_result *r)
{
    free(r->text);
    free(r->output_ids);
    free(r->matched_stop);
    free(r->logprobs);
    memset(r, 0, sizeof *r);
}

int cinfer_engine_stream_open(struct cinfer_engine *e, const struct cinfer_generate_request *req,
                              struct cinfer_stream **out, struct cinfer_error *err)
{
    *out = NULL;
    int rc = one_choice(req, "cinfer_engine_stream_open", err);
    if (rc)
        return rc;
    struct cinfer_stream *s = calloc(1, sizeof *s);
    if (!s)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory opening a stream");
    rc = open_request(e, req, &s->req, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->engine = e;
    *out = s;
    return CINFER_OK;
}

int cinfer_stream_next(struct cinfer_stream *s, struct cinfer_stream_chunk *chunk, int timeout_ms,
                       struct cinfer_error *err)
{
    cinfer_engine_chunk_free(s->current);
    s->current = NULL;
    if (s->done)
        return cinfer_error_set(err, CINFER_ERR_STATE, "the stream has already finished");
    struct engine_chunk *c;
    if (take_chunk(s->engine, s->req, timeout_ms, &c) != CINFER_OK)
        return cinfer_error_set(err, CINFER_ERR_TIMEOUT, "no output within %d ms", timeout_ms);
    s->current = c;
    if (c->finish_reason != CINFER_FINISH_NONE)
        s->done = 1;
    if (c->finish_reason == CINFER_FINISH_ERROR)
        return chunk_error(c, err);
    fill_chunk_view(c, s->req->rid, chunk);
    return CINFER_OK;
}

uint64_t cinfer_stream_request_id(const struct cinfer_stream *s)
{
    return s->req->rid;
}

void cinfer_stream_close(struct cinfer_stream **sp)
{
    if (!sp || !*sp)
        return;
    struct cinfer_stream *s = *sp;
    cinfer_engine_chunk_free(s->current);
    close_request(s->engine, s->req, s->done);
    free(s);
    *sp = NULL;
}

int cinfer_engine_abort(struct cinfer_engine *e, uint64_t rid)
{
    pthread_mutex_lock(&e->lock);
    struct engine_request *r = cinfer_engine_request_find(e, rid);
    int replica = r ? r->replica : -1;
    if (r) {
        struct engine_chunk *c = calloc(1, sizeof *c);
        if (c) {
            c->finish_reason = CINFER_FINISH_ABORT;
            cinfer_engine_request_push(r, c);
        }
    }
    pthread_mutex_unlock(&e->lock);
    if (!r)
        return CINFER_ERR_NOT_FOUND;
    struct cinfer_msg_abort a = {.rid = rid, .quiet = 0};
    void *frame;
    size_t len;
    struct cinfer_error err = {0};
    if (cinfer_msg_encode_abort(&a, &frame, &len) == CINFER_OK) {
        cinfer_engine_send_to_scheduler(e, replica, frame, len, &err);
        free(frame);
    }
    return CINFER_OK;
}
