/* The default run_scheduler_process hook: the body of a scheduler worker. It loads the
 * model, binds its input and RPC channels, reports READY with its limits, then loops:
 * take requests and aborts, answer RPCs, run one batching step, send the new tokens to
 * the detokenizer. It exits when told to shut down or when its lifeline breaks.
 *
 * Under tensor parallelism (tp_size > 1) every rank of the replica joins the replica's
 * communicator (shared memory on one host, MPI from launch-mpi, tcp across hosts:
 * worker_comm.h) and holds its shard of the model. Rank 0 runs
 * the scheduler as above; each forward call's plan goes to the other ranks over the
 * plan channel (rank 0's ROUTER, which each follower's DEALER joins with a hello) before
 * the call computes. The other ranks
 * (followers) batch nothing: they run each plan with rank 0, answer RPCs and heartbeat. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "backend/backend_select.h"
#include "cinfer/config.h"
#include "engine/default_model.h"
#include "engine/port_args.h"
#include "grammar/constraint.h"
#include "ipc/channel.h"
#include "ipc/messages.h"
#include "model/model.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "util/log.h"
#include "worker/hooks.h"
#include "worker/worker_comm.h"
#include "worker/worker_link.h"

struct scheduler_process {
    const struct cinfer_server_args *args;
    struct cinfer_worker_link link;
    int tp_rank, tp_size;
    struct cinfer_model *model;
    struct cinfer_runtime *rt;
    struct cinfer_scheduler *sched; /* rank 0 only */
    struct cinfer_token_table *tokens; /* rank 0: the vocabulary's bytes, for constrained decoding */
    struct cinfer_comm *comm;       /* tp_size > 1 */
    struct cinfer_plugin *backend;  /* engine.device's backend; open while rt lives */
    int device;                     /* its device index */
    void *input;      /* rank 0: PULL, bound: GENERATE / ABORT / SHUTDOWN from the main process */
    void *rpc;        /* ROUTER, bound: collective RPC */
    void *detok;      /* rank 0: PUSH to the detokenizer */
    void *plan_router; /* rank 0: ROUTER, bound: each forward's plan to every follower */
    void *plan_in;    /* followers: DEALER (identity "tp<n>") to rank 0's plan channel */
    int stop;
};

/* The KV budget of one rank: the configured tokens or bytes, else mem_fraction_static
 * of the memory that is available, but never more than every running request at full
 * context needs. device_measures: the backend measures its device once the weights are
 * on it (the runtime's mem_fraction_static), so this is that cap alone. A token counts
 * the bytes of the chosen KV type (scheduler.kv_cache_dtype) for the KV heads a rank
 * holds (a shared head where tp_size exceeds them). */
static size_t kv_budget_bytes(const struct cinfer_server_args *args, const struct cinfer_model *m, int context,
                              int max_running, int tp_size, int device_measures)
{
    const struct cinfer_model_config *c = &m->config;
    int kv_heads = tp_size > 1 ? (c->num_kv_heads >= tp_size ? c->num_kv_heads / tp_size : 1) : c->num_kv_heads;
    size_t per_token = cinfer_runtime_kv_token_bytes(c, args->kv_cache_dtype);
    if (per_token == 0) /* a type this model cannot use: the runtime says why */
        per_token = cinfer_runtime_kv_token_bytes(c, CINFER_KV_CACHE_DTYPE_F32);
    per_token = per_token / (size_t)c->num_kv_heads * (size_t)kv_heads; /* every head takes the same bytes */
    if (args->max_total_tokens > 0)
        return (size_t)args->max_total_tokens * per_token;
    if (args->kv_cache_bytes > 0)
        return (size_t)args->kv_cache_bytes;
    double needed = (double)per_token * (double)context * (double)max_running;
    if (device_measures)
        return (size_t)needed;
    long pages = sysconf(_SC_AVPHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    double available = pages > 0 && page_bytes > 0 ? (double)pages * (double)page_bytes : 1e9;
    double budget = available * (args->mem_fraction_static > 0 ? args->mem_fraction_static : 0.1);
    return (size_t)fmin(budget, needed);
}

/* Rank 0's plan of a forward call, to every follower before the call computes. A send
 * that fails leaves a follower behind: the forward fails and the group is aborted. */
/* What tp0 sends its followers on the plan channel when it stops cleanly (no plan is
 * this short). */
#define GROUP_STOP "stop"

static int publish_plan(void *ctx, const void *plan, size_t plan_bytes, struct cinfer_error *err)
{
    struct scheduler_process *sp = ctx;
    for (int r = 1; r < sp->tp_size; r++) {
        char follower[16];
        snprintf(follower, sizeof follower, "tp%d", r);
        int rc = cinfer_channel_send_to(sp->plan_router, follower, plan, plan_bytes, err);
        if (rc) {
            cinfer_error_prefix(err, "sending the plan to tp%d", r);
            return rc;
        }
    }
    return CINFER_OK;
}

/* Every rank must size its KV cache alike (rank 0's page ids are used by all): rank 0's
 * budget, which depends on the memory available when it asks, goes to the others. */
static int agree_on_kv_bytes(struct scheduler_process *sp, size_t *kv_bytes, struct cinfer_error *err)
{
    if (sp->tp_size <= 1)
        return CINFER_OK;
    uint64_t v = (uint64_t)*kv_bytes;
    int rc = sp->comm->ops->broadcast(sp->comm->state, &v, sizeof v, 0, err);
    *kv_bytes = (size_t)v;
    return rc;
}

/* Rank 0 waits for a hello from every follower on its plan channel before it starts:
 * a ROUTER drops what it sends to a peer it has not heard from. */
static int await_followers(struct scheduler_process *sp, struct cinfer_error *err)
{
    int heard = 1; /* rank 0 itself */
    char *seen = calloc((size_t)sp->tp_size, 1);
    if (!seen)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory");
    int timeout_ms = sp->args->start_timeout_ms > 0 ? sp->args->start_timeout_ms : 60000;
    int rc = CINFER_OK;
    while (heard < sp->tp_size && rc == CINFER_OK) {
        void *frame;
        size_t len;
        char peer[64] = "";
        if (cinfer_channel_recv(sp->plan_router, timeout_ms, &frame, &len, peer, err) != CINFER_OK) {
            rc = cinfer_error_set(err, CINFER_ERR_TIMEOUT, "%d of %d followers said hello on the plan channel "
                                  "within the start deadline of %d ms", heard - 1, sp->tp_size - 1, timeout_ms);
            break;
        }
        free(frame);
        int r = !strncmp(peer, "tp", 2) ? atoi(peer + 2) : 0;
        if (r > 0 && r < sp->tp_size && !seen[r]) {
            seen[r] = 1;
            heard++;
        }
    }
    free(seen);
    return rc;
}

static int open_channels(struct scheduler_process *sp, const struct cinfer_port_args *ports,
                         struct cinfer_error *err)
{
    void *z = sp->link.zmq_context;
    if (!(sp->rpc = cinfer_channel_open_keyed(z, ZMQ_ROUTER, ports->rpc, 1, NULL, ports, err)))
        return err->code;
    if (sp->tp_rank > 0) {
        /* A follower names itself by its rank and says hello, so rank 0 can address it. */
        char identity[16];
        snprintf(identity, sizeof identity, "tp%d", sp->tp_rank);
        if (!(sp->plan_in = cinfer_channel_open_keyed(z, ZMQ_DEALER, ports->plan, 0, identity, ports, err)))
            return err->code;
        static const char hello[] = "hello";
        return cinfer_channel_send(sp->plan_in, hello, sizeof hello - 1, 0, err);
    }
    if (!(sp->input = cinfer_channel_open_keyed(z, ZMQ_PULL, ports->scheduler_input, 1, NULL, ports, err)) ||
        !(sp->detok = cinfer_channel_open_keyed(z, ZMQ_PUSH, ports->detokenizer_input, 0, NULL, ports, err)))
        return err->code;
    if (sp->tp_size > 1) {
        if (!(sp->plan_router = cinfer_channel_open_keyed(z, ZMQ_ROUTER, ports->plan, 1, NULL, ports, err)))
            return err->code;
        return await_followers(sp, err);
    }
    return CINFER_OK;
}

/* engine.device's backend, before the model loads so a missing device fails fast.
 * Device: the launcher's gpu_id when it gave one, else the ranks of a group spread
 * over the backend's devices. */
static int choose_backend(struct scheduler_process *sp, int gpu_id, struct cinfer_error *err)
{
    int rc = cinfer_backend_select(sp->args->device, sp->args->plugin_path, &sp->backend, err);
    if (rc)
        return rc;
    struct cinfer_backend_answer a;
    if ((rc = cinfer_backend_query(sp->backend, &a)) < 0)
        return cinfer_error_set(err, rc, "backend %s stopped answering its query", cinfer_plugin_file(sp->backend));
    sp->device = gpu_id >= 0 ? gpu_id : a.device_count > 1 ? sp->tp_rank % a.device_count : 0;
    cinfer_log(CINFER_LOG_SEV_INFO, "tp rank %d: backend %s (%s), device %d", sp->tp_rank,
               cinfer_plugin_descriptor_of(sp->backend)->name, cinfer_plugin_file(sp->backend), sp->device);
    return CINFER_OK;
}

static int start(struct scheduler_process *sp, const struct cinfer_port_args *ports, int gpu_id,
                 struct cinfer_error *err)
{
    const struct cinfer_server_args *args = sp->args;
    const char *model_path = args->model_path ? args->model_path : cinfer_default_model_path();
    int rc;
    if ((rc = choose_backend(sp, gpu_id, err)))
        return rc;
    if (sp->tp_size > 1 && (rc = cinfer_worker_comm_attach(ports, sp->tp_rank, sp->tp_size, sp->link.zmq_context,
                                                           args->start_timeout_ms, &sp->comm, err)))
        return rc;
    /* A rank reads only its shard: no page of the file is read at load. */
    struct cinfer_model_load_options load_opts = {.show_progress = 0, .dtype = args->dtype,
                                                  .no_prefault = sp->tp_size > 1};
    if ((rc = cinfer_model_load(model_path, &load_opts, &sp->model, err)))
        return rc;
    if (sp->tp_size > 1 && (rc = cinfer_runtime_parallel_check(sp->model, sp->tp_size, args->ep_size, err)))
        return rc;
    const struct cinfer_model_config *c = &sp->model->config;
    int context = args->context_length > 0 ? args->context_length : c->max_position_embeddings;
    if (context <= 1)
        context = 2048;
    int max_running = args->max_running_requests > 0 ? args->max_running_requests : 64;
    const struct cinfer_backend_ops *bops = cinfer_plugin_vtable(sp->backend);
    /* a device backend sizes the KV cache from its own memory (SGLang's rule) */
    int device_measures = args->max_total_tokens == 0 && args->kv_cache_bytes == 0 && bops->version >= 9 &&
                          bops->struct_size >= offsetof(struct cinfer_backend_ops, memory_info) +
                                                   sizeof bops->memory_info &&
                          bops->memory_info != NULL;
    struct cinfer_runtime_options ro = {
        .kv_cache_bytes = kv_budget_bytes(args, sp->model, context, max_running, sp->tp_size, device_measures),
        .mem_fraction_static = device_measures ? args->mem_fraction_static : 0.0,
        .kv_page_tokens = args->page_size,
        .n_threads = args->num_threads,
        .max_batch_tokens = 0,
        .keep_stored_weights = args->no_repack,
        .kv_dtype = args->kv_cache_dtype,
        .keep_window_pages = args->disable_hybrid_swa_memory,
        .context_length = context,
        .tp_rank = sp->tp_rank,
        .tp_size = sp->tp_size,
        .ep_size = args->ep_size,
        .comm = sp->comm,
        .publish_plan = sp->tp_size > 1 && sp->tp_rank == 0 ? publish_plan : NULL,
        .publish_ctx = sp,
        .backend = bops,
        .device = sp->device,
    };
    int chunk = args->chunked_prefill_size > 0 ? args->chunked_prefill_size : 0;
    int prefill_budget = args->max_prefill_tokens > 0 ? args->max_prefill_tokens : 4096;
    ro.max_batch_tokens = (chunk > 0 && chunk < prefill_budget ? chunk : prefill_budget) + max_running;
    if (ro.max_batch_tokens > prefill_budget + max_running)
        ro.max_batch_tokens = prefill_budget + max_running;
    if ((rc = agree_on_kv_bytes(sp, &ro.kv_cache_bytes, err)) ||
        (rc = cinfer_runtime_create(sp->model, &ro, &sp->rt, err)))
        return rc;
    if (sp->tp_rank == 0) {
        /* Constrained decoding matches grammars against the tokens' bytes: rank 0, which
         * samples, opens the model's tokenizer once (as the detokenizer does) to read
         * them. Without one, constrained requests are refused and everything else runs. */
        struct cinfer_tokenizer_ctx *tok = NULL;
        struct cinfer_error tok_err = {0};
        if (cinfer_worker_hooks()->init_tokenizer(args, &tok, &tok_err) != CINFER_OK ||
            cinfer_token_table_from_tokenizer(tok, c->vocab_size, &sp->tokens, &tok_err) != CINFER_OK)
            cinfer_log(CINFER_LOG_SEV_WARNING, "constrained decoding is off: %s", tok_err.message);
        cinfer_tokenizer_ctx_free(&tok);
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
            .token_table = sp->tokens,
        };
        if ((rc = cinfer_scheduler_create(sp->rt, &so, &sp->sched, err)))
            return rc;
    }
    if ((rc = open_channels(sp, ports, err)))
        return rc;

    int64_t kv_tokens = sp->sched ? cinfer_scheduler_max_total_tokens(sp->sched)
                                  : (int64_t)cinfer_runtime_kv_pages_total(sp->rt) *
                                        cinfer_runtime_kv_page_tokens(sp->rt);
    struct cinfer_msg_ready ready = {
        .max_total_tokens = (uint64_t)kv_tokens,
        .max_request_len = (uint32_t)context,
        .max_running_requests = (uint32_t)max_running,
        .vocab_size = (uint32_t)c->vocab_size,
    };
    cinfer_worker_link_ready(&sp->link, &ready);
    cinfer_log(CINFER_LOG_SEV_INFO, "ready: %s, %lld KV tokens, context %d%s%s%s", model_path, (long long)kv_tokens,
               context, sp->tp_size > 1 ? (sp->tp_rank ? ", following tp0's plans" : ", leading the group") : "",
               sp->comm ? " over the communicator " : "", sp->comm ? sp->comm->ops->name : "");
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
    struct cinfer_msg_detok_request dr = {.rid = g->rid,
    .skip_special_tokens = (uint8_t)g->sampling.skip_special_tokens,
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
    g->sampling.ebnf = g->grammar; /* the main process turned any constraint into grammar text */
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
/* What this rank holds for the weights: its own copies (its shard, widened vectors,
 * repacked panels) and what it reads in place from the model file's mapping. */
static void add_memory(json_t *o, const struct scheduler_process *sp)
{
    struct cinfer_runtime_memory m;
    cinfer_runtime_memory(sp->rt, &m);
    json_object_set_new(o, "weight_copy_bytes", json_integer((json_int_t)m.weight_copy_bytes));
    json_object_set_new(o, "weight_in_place_bytes", json_integer((json_int_t)m.weight_in_place_bytes));
    json_object_set_new(o, "kv_cache_bytes", json_integer((json_int_t)m.kv_cache_bytes));
}

static char *server_info_json(struct scheduler_process *sp)
{
    if (!sp->sched) { /* a follower: its own cache's pages; requests are tp0's to count */
        json_t *f = json_pack("{s:i, s:i, s:i, s:i}", "tp_rank", sp->tp_rank, "kv_pages_free",
                              cinfer_runtime_kv_pages_free(sp->rt), "kv_pages_total",
                              cinfer_runtime_kv_pages_total(sp->rt), "running_requests", 0);
        if (f)
            add_memory(f, sp);
        char *json = f ? json_dumps(f, JSON_COMPACT) : NULL;
        json_decref(f);
        return json;
    }
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
    if (o)
        add_memory(o, sp);
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
        if (sp->sched && cinfer_scheduler_flush_cache(sp->sched, &ferr) != CINFER_OK) /* followers cache nothing */
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
        out[i].cached_tokens = (uint32_t)items[i].cached_tokens;
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

/* Rank 0 (and the only rank without tensor parallelism): requests in, steps, tokens out. */
static int lead(struct scheduler_process *sp)
{
    const struct cinfer_server_args *args = sp->args;
    struct cinfer_error err = {0};
    int idle_poll_ms = cinfer_worker_heartbeat_interval_ms(args->watchdog_timeout_ms);
    if (idle_poll_ms > 100)
        idle_poll_ms = 100;
    while (!sp->stop) {
        cinfer_worker_link_heartbeat(&sp->link, args->watchdog_timeout_ms);
        zmq_pollitem_t items[] = {
            {.socket = sp->input, .events = ZMQ_POLLIN},
            {.socket = sp->rpc, .events = ZMQ_POLLIN},
            {.fd = 0, .events = ZMQ_POLLIN},
        };
        int busy = cinfer_scheduler_has_work(sp->sched);
        if (zmq_poll(items, 3, busy ? 0 : idle_poll_ms) < 0 && zmq_errno() != EINTR)
            break;
        if (items[2].revents && cinfer_lifeline_gone()) {
            cinfer_log(CINFER_LOG_SEV_INFO, "the lifeline closed (engine shutdown or main process gone); exiting");
            break;
        }
        /* Take everything that is waiting before the next step. */
        while (items[0].revents & ZMQ_POLLIN) {
            handle_input(sp);
            zmq_pollitem_t more = {.socket = sp->input, .events = ZMQ_POLLIN};
            if (zmq_poll(&more, 1, 0) <= 0)
                break;
        }
        if (items[1].revents & ZMQ_POLLIN)
            handle_rpc(sp);
        if (cinfer_scheduler_has_work(sp->sched) && step(sp, &err) != CINFER_OK)
            return cinfer_worker_link_failed(&sp->link, err.code, err.message);
    }
    return 0;
}

/* A rank > 0: runs each of rank 0's plans with it, in order. */
static int follow(struct scheduler_process *sp)
{
    const struct cinfer_server_args *args = sp->args;
    int idle_poll_ms = cinfer_worker_heartbeat_interval_ms(args->watchdog_timeout_ms);
    if (idle_poll_ms > 100)
        idle_poll_ms = 100;
    for (;;) {
        cinfer_worker_link_heartbeat(&sp->link, args->watchdog_timeout_ms);
        zmq_pollitem_t items[] = {
            {.socket = sp->plan_in, .events = ZMQ_POLLIN},
            {.socket = sp->rpc, .events = ZMQ_POLLIN},
            {.fd = 0, .events = ZMQ_POLLIN},
        };
        if (zmq_poll(items, 3, idle_poll_ms) < 0 && zmq_errno() != EINTR)
            break;
        if (items[2].revents && cinfer_lifeline_gone()) {
            cinfer_log(CINFER_LOG_SEV_INFO, "the lifeline closed (engine shutdown or main process gone); exiting");
            break;
        }
        if (items[1].revents & ZMQ_POLLIN)
            handle_rpc(sp);
        if (items[0].revents & ZMQ_POLLIN) {
            void *plan;
            size_t len;
            struct cinfer_error err = {0};
            if (cinfer_channel_recv(sp->plan_in, 0, &plan, &len, NULL, &err) != CINFER_OK)
                continue;
            if (len == sizeof GROUP_STOP - 1 && !memcmp(plan, GROUP_STOP, len)) {
                free(plan);
                cinfer_log(CINFER_LOG_SEV_INFO, "tp0 stopped the group; exiting");
                break;
            }
            int rc = cinfer_runtime_forward_plan(sp->rt, plan, len, &err);
            free(plan);
            if (rc) /* the group is aborted: rank 0's forward fails too, and the engine tears it down */
                return cinfer_worker_link_failed(&sp->link, err.code, err.message);
        }
    }
    return 0;
}

int cinfer_default_run_scheduler_process(const struct cinfer_server_args *args, const struct cinfer_port_args *ports,
                                         int gpu_id, int tp_rank, int dp_rank)
{
    struct scheduler_process sp = {.args = args, .tp_rank = tp_rank, .tp_size = args->tp_size > 0 ? args->tp_size : 1};
    struct cinfer_error err = {0};
    if (cinfer_worker_link_open(&sp.link, ports, CINFER_WORKER_SCHEDULER, tp_rank, dp_rank, args->dp_size, &err)) {
        fprintf(stderr, "scheduler tp%d: %s\n", tp_rank, err.message);
        return 1;
    }
    int status = 0;
    if (tp_rank < 0 || tp_rank >= sp.tp_size) {
        cinfer_error_set(&err, CINFER_ERR_INVALID_ARGUMENT, "tp rank %d outside launcher.tp_size %d", tp_rank,
                         sp.tp_size);
        status = cinfer_worker_link_failed(&sp.link, err.code, err.message);
    } else if (start(&sp, ports, gpu_id, &err) != CINFER_OK) {
        status = cinfer_worker_link_failed(&sp.link, err.code, err.message);
    } else {
        status = tp_rank == 0 ? lead(&sp) : follow(&sp);
        /* A clean stop takes the followers along, so the whole group leaves together
         * (an MPI job then ends without an abort). */
        struct cinfer_error ignored = {0};
        if (status == 0 && tp_rank == 0 && sp.tp_size > 1)
            publish_plan(&sp, GROUP_STOP, sizeof GROUP_STOP - 1, &ignored);
    }
    cinfer_scheduler_destroy(&sp.sched);
    cinfer_token_table_free(&sp.tokens);
    cinfer_runtime_destroy(&sp.rt);
    cinfer_plugin_close(&sp.backend);
    cinfer_model_free(&sp.model);
    cinfer_comm_destroy(&sp.comm);
    cinfer_channel_close(&sp.input);
    cinfer_channel_close(&sp.rpc);
    cinfer_channel_close(&sp.detok);
    cinfer_channel_close(&sp.plan_in);
    cinfer_channel_close(&sp.plan_router);
    cinfer_worker_link_close(&sp.link);
    return status;
}
