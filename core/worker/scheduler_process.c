/* The default run_scheduler_process hook: the body of a scheduler worker. It loads the
 * model, binds its input and RPC channels, reports READY with its limits, then loops:
 * take requests and aborts, answer RPCs, run one batching step, send the new tokens to
 * the detokenizer. It exits when told to shut down or when its lifeline breaks. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/config.h"
#include "engine/default_model.h"
#include "engine/port_args.h"
#include "ipc/channel.h"
#include "ipc/messages.h"
#include "model/model.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "util/log.h"
#include "worker/hooks.h"
#include "worker/worker_link.h"

struct scheduler_process {
    const struct cinfer_server_args *args;
    struct cinfer_worker_link link;
    struct cinfer_model *model;
    struct cinfer_runtime *rt;
    struct cinfer_scheduler *sched;
    void *input;      /* PULL, bound: GENERATE / ABORT / SHUTDOWN from the main process */
    void *rpc;        /* ROUTER, bound: collective RPC */
    void *detok;      /* PUSH to the detokenizer */
    int stop;
};

/* The KV budget: the configured tokens or bytes, else mem_fraction_static of the memory
 * that is available, but never more than every running request at full context needs;
 * a token counts the bytes of the chosen KV type (scheduler.kv_cache_dtype). */
static size_t kv_budget_bytes(const struct cinfer_server_args *args, const struct cinfer_model *m, int context,
                              int max_running)
{
    const struct cinfer_model_config *c = &m->config;
    size_t per_token = cinfer_runtime_kv_token_bytes(c, args->kv_cache_dtype);
    if (per_token == 0) /* a type this model cannot use: the runtime says why */
        per_token = cinfer_runtime_kv_token_bytes(c, CINFER_KV_CACHE_DTYPE_F32);
    if (args->max_total_tokens > 0)
        return (size_t)args->max_total_tokens * per_token;
    if (args->kv_cache_bytes > 0)
        return (size_t)args->kv_cache_bytes;
    long pages = sysconf(_SC_AVPHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    double available = pages > 0 && page_bytes > 0 ? (double)pages * (double)page_bytes : 1e9;
    double budget = available * (args->mem_fraction_static > 0 ? args->mem_fraction_static : 0.1);
    double needed = (double)per_token * (double)context * (double)max_running;
    return (size_t)fmin(budget, needed);
}

static int start(struct scheduler_process *sp, const struct cinfer_port_args *ports, int dp_rank, int tp_rank,
                 struct cinfer_error *err)
{
    const struct cinfer_server_args *args = sp->args;
    const char *model_path = args->model_path ? args->model_path : cinfer_default_model_path();
    struct cinfer_model_load_options load_opts = {.show_progress = 0, .dtype = args->dtype};
    int rc = cinfer_model_load(model_path, &load_opts, &sp->model, err);
    if (rc)
        return rc;
    const struct cinfer_model_config *c = &sp->model->config;
    int context = args->context_length > 0 ? args->context_length : c->max_position_embeddings;
    if (context <= 1)
        context = 2048;
    int max_running = args->max_running_requests > 0 ? args->max_running_requests : 64;
    struct cinfer_runtime_options ro = {
        .kv_cache_bytes = kv_budget_bytes(args, sp->model, context, max_running),
        .kv_page_tokens = args->page_size,
        .n_threads = args->num_threads,
        .max_batch_tokens = 0,
        .keep_stored_weights = args->no_repack,
        .kv_dtype = args->kv_cache_dtype,
    };
    int chunk = args->chunked_prefill_size > 0 ? args->chunked_prefill_size : 0;
    int prefill_budget = args->max_prefill_tokens > 0 ? args->max_prefill_tokens : 4096;
    ro.max_batch_tokens = (chunk > 0 && chunk < prefill_budget ? chunk : prefill_budget) + max_running;
    if (ro.max_batch_tokens > prefill_budget + max_running)
        ro.max_batch_tokens = prefill_budget + max_running;
    rc = cinfer_runtime_create(sp->model, &ro, &sp->rt, err);
    if (rc)
        return rc;
    struct cinfer_scheduler_options so = {
        .max_running_requests = max_running,
        .max_queued_requests = args->max_queued_requests,
        .max_prefill_tokens = ro.max_batch_tokens - max_running,
        .chunked_prefill_size = chunk,
        .context_length = context,
        .vocab_size = c->vocab_size,
        .eos_ids = c->eos_token_ids,
        .n_eos = c->n_eos,
        .default_seed = args->random_seed >= 0 ? (uint64_t)args->random_seed : (uint64_t)getpid(),
        .schedule_policy = args->schedule_policy,
        .disable_radix_cache = args->disable_radix_cache,
    };
    rc = cinfer_scheduler_create(sp->rt, &so, &sp->sched, err);
    if (rc)
        return rc;

    char rpc_endpoint[CINFER_ENDPOINT_BYTES], input_endpoint[CINFER_ENDPOINT_BYTES];
    cinfer_port_args_rpc(ports, dp_rank, tp_rank, rpc_endpoint, sizeof rpc_endpoint);
    cinfer_port_args_scheduler_input(ports, dp_rank, input_endpoint, sizeof input_endpoint);
    void *z = sp->link.zmq_context;
    if (!(sp->input = cinfer_channel_open(z, ZMQ_PULL, input_endpoint, 1, NULL, err)) ||
        !(sp->rpc = cinfer_channel_open(z, ZMQ_ROUTER, rpc_endpoint, 1, NULL, err)) ||
        !(sp->detok = cinfer_channel_open(z, ZMQ_PUSH, ports->detokenizer_input, 0, NULL, err)))
        return err->code;

    struct cinfer_msg_ready ready = {
        .max_total_tokens = (uint64_t)cinfer_scheduler_max_total_tokens(sp->sched),
        .max_request_len = (uint32_t)context,
        .max_running_requests = (uint32_t)max_running,
        .vocab_size = (uint32_t)c->vocab_size,
    };
    cinfer_worker_link_ready(&sp->link, &ready);
    cinfer_log(CINFER_LOG_SEV_INFO, "ready: %s, %lld KV tokens, context %d", model_path,
               (long long)ready.max_total_tokens, context);
    return CINFER_OK;
}

static void send_frame(void *socket, int rc, void *frame, size_t len, const char *what)
{
    struct cinfer_error err = {0};
    if (rc == CINFER_OK && cinfer_channel_send(socket, frame, len, 0, &err) != CINFER_OK)
        cinfer_log(CINFER_LOG_SEV_WARNING, "sending %s: %s", what, err.message);
    free(frame);
}

/* A request the scheduler refused (too long, queue full) finishes at once with the
 * refusal's code and words, through the detokenizer like any other. */
static void refuse(struct scheduler_process *sp, uint64_t rid, int n_prompt, const struct cinfer_error *why)
{
    struct cinfer_token_item item = {.rid = rid, .finish_reason = CINFER_FINISH_ERROR,
                                     .prompt_tokens = (uint32_t)n_prompt, .error = (char *)why->message,
                                     .code = why->code < 0 ? why->code : CINFER_ERR_INTERNAL};
    struct cinfer_msg_tokens msg = {.items = &item, .n_items = 1};
    void *frame = NULL;
    size_t len = 0;
    int encoded = cinfer_msg_encode_tokens(&msg, &frame, &len);
    send_frame(sp->detok, encoded, frame, len, "a refusal");
}

static void handle_generate(struct scheduler_process *sp, struct cinfer_msg_generate *g)
{
    /* Tell the detokenizer how to decode it before any of its tokens can arrive, and
     * what the prompt ends with, so the output reads as it does after the prompt. */
    uint32_t n_tail = g->n_ids < CINFER_IPC_MAX_PROMPT_TAIL ? g->n_ids : CINFER_IPC_MAX_PROMPT_TAIL;
    struct cinfer_msg_detok_request dr = {.rid = g->rid, .skip_special_tokens = (uint8_t)g->sampling.skip_special_tokens,
                                          .no_stop_trim = (uint8_t)g->sampling.no_stop_trim,
                                          .n_stop = (uint32_t)g->sampling.n_stop,
                                          .prompt_tail = g->ids ? g->ids + (g->n_ids - n_tail) : NULL,
                                          .n_prompt_tail = n_tail};
    for (int i = 0; i < g->sampling.n_stop; i++)
        dr.stop[i] = (char *)g->sampling.stop[i];
    void *frame = NULL;
    size_t len = 0;
    int encoded = cinfer_msg_encode_detok_request(&dr, &frame, &len);
    send_frame(sp->detok, encoded, frame, len, "DETOK_REQUEST");

    struct cinfer_error err = {0};
    if (cinfer_scheduler_add(sp->sched, g->rid, g->ids, (int)g->n_ids, &g->sampling, &err) != CINFER_OK)
        refuse(sp, g->rid, (int)g->n_ids, &err);
}

static void handle_input(struct scheduler_process *sp)
{
    void *frame;
    size_t len;
    struct cinfer_error err = {0};
    if (cinfer_channel_recv(sp->input, 0, &frame, &len, NULL, &err) != CINFER_OK)
        return;
    uint32_t type = 0;
    int rc = cinfer_msg_peek_type(frame, len, &type, &err);
    if (rc == CINFER_OK && type == CINFER_MSG_GENERATE) {
        struct cinfer_msg_generate g;
        if ((rc = cinfer_msg_decode_generate(frame, len, &g, &err)) == CINFER_OK) {
            handle_generate(sp, &g);
            cinfer_msg_generate_free(&g);
        }
    } else if (rc == CINFER_OK && type == CINFER_MSG_ABORT) {
        struct cinfer_msg_abort a;
        if ((rc = cinfer_msg_decode_abort(frame, len, &a, &err)) == CINFER_OK)
            cinfer_scheduler_abort(sp->sched, a.rid);
    } else if (rc == CINFER_OK && type == CINFER_MSG_SHUTDOWN) {
        sp->stop = 1;
    } else if (rc == CINFER_OK) {
        rc = cinfer_error_set(&err, CINFER_ERR_PARSE, "unexpected %s frame", cinfer_msg_type_name(type));
    }
    if (rc)
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the scheduler input (%zu bytes): %s", len,
                   err.message);
    free(frame);
}

/* RPC answers are JSON built with jansson, so any text inside (an error's words, a
 * method name) is escaped; NULL when out of memory. */
static char *server_info_json(struct scheduler_process *sp)
{
    struct cinfer_scheduler_stats st;
    cinfer_scheduler_get_stats(sp->sched, &st);
    json_t *o = json_pack("{s:i, s:i, s:I, s:i, s:i, s:I, s:I, s:i, s:b, s:I, s:I}",
                          "running_requests", cinfer_scheduler_running(sp->sched),
                          "queued_requests", cinfer_scheduler_queued(sp->sched),
                          "max_total_tokens", (json_int_t)cinfer_scheduler_max_total_tokens(sp->sched),
                          "kv_pages_free", cinfer_runtime_kv_pages_free(sp->rt),
                          "kv_pages_total", cinfer_runtime_kv_pages_total(sp->rt),
                          "prefix_cache_hit_tokens", (json_int_t)st.prefix_cache_hit_tokens,
                          "prefix_cache_query_tokens", (json_int_t)st.prefix_cache_query_tokens,
                          "prefix_cache_pages", st.cached_pages,
                          "prefix_cache_enabled", !sp->args->disable_radix_cache,
                          "prefill_tokens", (json_int_t)st.prefill_tokens,
                          "retractions", (json_int_t)st.retractions);
    char *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return json;
}

/* {"flushed": false, "error": why} or, with why NULL, {"flushed": true}. */
static char *flush_json(const char *why)
{
    json_t *o = why ? json_pack("{s:b, s:s}", "flushed", 0, "error", why) : json_pack("{s:b}", "flushed", 1);
    char *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return json;
}

/* {"error": "unknown method '<method>'"}; a name that is not UTF-8 is left out, as
 * JSON cannot carry it. */
static char *unknown_method_json(const char *method)
{
    char *why = NULL;
    json_t *o = NULL;
    if (asprintf(&why, "unknown method '%s'", method) >= 0)
        o = json_pack("{s:s}", "error", why);
    free(why);
    if (!o)
        o = json_pack("{s:s}", "error", "unknown method (its name is not UTF-8)");
    char *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return json;
}

static void handle_rpc(struct scheduler_process *sp)
{
    void *frame;
    size_t len;
    char peer[64] = "";
    struct cinfer_error err = {0};
    if (cinfer_channel_recv(sp->rpc, 0, &frame, &len, peer, &err) != CINFER_OK)
        return;
    struct cinfer_msg_rpc_call call;
    if (cinfer_msg_decode_rpc_call(frame, len, &call, &err) != CINFER_OK) {
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the RPC channel (%zu bytes): %s", len,
                   err.message);
        free(frame);
        return;
    }
    free(frame);
    struct cinfer_msg_rpc_reply reply = {.call_id = call.call_id, .tp_rank = (uint32_t)sp->link.tp_rank};
    char *owned = NULL;
    if (!strcmp(call.method, "ping") || !strcmp(call.method, "echo")) {
        reply.payload = call.payload;
    } else if (!strcmp(call.method, "server_info")) {
        reply.payload = owned = server_info_json(sp);
    } else if (!strcmp(call.method, "flush_cache")) {
        /* Refused while requests run or wait (scheduler.h says why). */
        struct cinfer_error ferr = {0};
        if (cinfer_scheduler_flush_cache(sp->sched, &ferr) != CINFER_OK)
            reply.status = ferr.code;
        reply.payload = owned = flush_json(reply.status ? ferr.message : NULL);
    } else {
        reply.status = CINFER_ERR_NOT_FOUND;
        reply.payload = owned = unknown_method_json(call.method);
    }
    if (!reply.payload) { /* out of memory building the answer: say so, still as JSON */
        reply.status = CINFER_ERR_NOMEM;
        reply.payload = "{\"error\":\"out of memory\"}";
    }
    void *out = NULL;
    size_t out_len = 0;
    if (cinfer_msg_encode_rpc_reply(&reply, &out, &out_len) == CINFER_OK) {
        if (cinfer_channel_send_to(sp->rpc, peer, out, out_len, &err) != CINFER_OK)
            cinfer_log(CINFER_LOG_SEV_WARNING, "RPC reply to %s: %s", peer, err.message);
        free(out);
    }
    free(owned);
    cinfer_msg_rpc_call_free(&call);
}

/* Runs one batching step and sends its tokens on. */
static int step(struct scheduler_process *sp, struct cinfer_error *err)
{
    const struct cinfer_step_item *items;
    int n;
    int rc = cinfer_scheduler_step(sp->sched, &items, &n, err);
    if (rc || n == 0)
        return rc;
    struct cinfer_token_item *out = calloc((size_t)n, sizeof *out);
    if (!out)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory sending a step");
    for (int i = 0; i < n; i++) {
        out[i].rid = items[i].rid;
        out[i].ids = (int32_t *)(items[i].token >= 0 ? &items[i].token : NULL);
        out[i].n_ids = items[i].token >= 0 ? 1 : 0;
        out[i].finish_reason = (uint8_t)items[i].finish_reason;
        out[i].prompt_tokens = (uint32_t)items[i].prompt_tokens;
        out[i].completion_tokens = (uint32_t)items[i].completion_tokens;
        out[i].error = (char *)items[i].error;
        out[i].logprobs = items[i].has_logprobs ? (struct cinfer_token_logprob *)&items[i].logprobs : NULL;
        out[i].code = items[i].finish_reason == CINFER_FINISH_ERROR
                          ? (items[i].code < 0 ? items[i].code : CINFER_ERR_INTERNAL)
                          : 0;
    }
    struct cinfer_msg_tokens msg = {.items = out, .n_items = (uint32_t)n};
    void *frame = NULL;
    size_t len = 0;
    int encoded = cinfer_msg_encode_tokens(&msg, &frame, &len);
    send_frame(sp->detok, encoded, frame, len, "TOKENS");
    free(out);
    return CINFER_OK;
}

int cinfer_default_run_scheduler_process(const struct cinfer_server_args *args, const struct cinfer_port_args *ports,
                                         int gpu_id, int tp_rank, int dp_rank)
{
    struct scheduler_process sp = {.args = args};
    struct cinfer_error err = {0};
    if (cinfer_worker_link_open(&sp.link, ports, CINFER_WORKER_SCHEDULER, tp_rank, dp_rank, args->dp_size, &err)) {
        fprintf(stderr, "scheduler tp%d: %s\n", tp_rank, err.message);
        return 1;
    }
    int status = 0;
    if (gpu_id >= 0) {
        cinfer_error_set(&err, CINFER_ERR_UNSUPPORTED, "GPU %d requested, but this build runs on the CPU only", gpu_id);
        status = cinfer_worker_link_failed(&sp.link, err.code, err.message);
    } else if (start(&sp, ports, dp_rank, tp_rank, &err) != CINFER_OK) {
        status = cinfer_worker_link_failed(&sp.link, err.code, err.message);
    } else {
        int idle_poll_ms = cinfer_worker_heartbeat_interval_ms(args->watchdog_timeout_ms);
        if (idle_poll_ms > 100)
            idle_poll_ms = 100;
        while (!sp.stop) {
            cinfer_worker_link_heartbeat(&sp.link, args->watchdog_timeout_ms);
            zmq_pollitem_t items[] = {
                {.socket = sp.input, .events = ZMQ_POLLIN},
                {.socket = sp.rpc, .events = ZMQ_POLLIN},
                {.fd = 0, .events = ZMQ_POLLIN},
            };
            int busy = cinfer_scheduler_has_work(sp.sched);
            if (zmq_poll(items, 3, busy ? 0 : idle_poll_ms) < 0 && zmq_errno() != EINTR)
                break;
            if (items[2].revents && cinfer_lifeline_gone()) {
                cinfer_log(CINFER_LOG_SEV_INFO, "the lifeline closed (engine shutdown or main process gone); exiting");
                break;
            }
            /* Take everything that is waiting before the next step. */
            while (items[0].revents & ZMQ_POLLIN) {
                handle_input(&sp);
                zmq_pollitem_t more = {.socket = sp.input, .events = ZMQ_POLLIN};
                if (zmq_poll(&more, 1, 0) <= 0)
                    break;
            }
            if (items[1].revents & ZMQ_POLLIN)
                handle_rpc(&sp);
            if (cinfer_scheduler_has_work(sp.sched) && step(&sp, &err) != CINFER_OK) {
                status = cinfer_worker_link_failed(&sp.link, err.code, err.message);
                break;
            }
        }
    }
    cinfer_scheduler_destroy(&sp.sched);
    cinfer_runtime_destroy(&sp.rt);
    cinfer_model_free(&sp.model);
    cinfer_channel_close(&sp.input);
    cinfer_channel_close(&sp.rpc);
    cinfer_channel_close(&sp.detok);
    cinfer_worker_link_close(&sp.link);
    return status;
}
