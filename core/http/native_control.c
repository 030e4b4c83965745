/* SGLang's operator endpoints: GET /get_server_info, POST /flush_cache, POST
 * /abort_request, GET /health_generate; and the engine's fixed limits that the other
 * native endpoints check requests against. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cinfer/config.h"
#include "cinfer/tokenizer.h"
#include "config/options.h"
#include "http/native_api.h"
#include "http/request_fields.h"

/* How long /health_generate waits for its one token (SGLang's HEALTH_CHECK_TIMEOUT). */
#define HEALTH_GENERATE_TIMEOUT_MS 20000

/* ---- limits ------------------------------------------------------------------------ */
/* One entry per engine seen (servers in a process are few); the limits come from the
 * scheduler's READY and never change, so one server-info call each is enough. */
#define LIMITS_SLOTS 8
static pthread_mutex_t limits_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const struct cinfer_engine *engine;
    struct native_limits limits;
} limits_cache[LIMITS_SLOTS];
static unsigned limits_next;

int cinfer_native_engine_limits(struct cinfer_engine *engine, struct native_limits *out, struct cinfer_error *err)
{
    pthread_mutex_lock(&limits_lock);
    for (int i = 0; i < LIMITS_SLOTS; i++)
        if (limits_cache[i].engine == engine) {
            *out = limits_cache[i].limits;
            pthread_mutex_unlock(&limits_lock);
            return CINFER_OK;
        }
    pthread_mutex_unlock(&limits_lock);
    struct cinfer_server_info info;
    int rc = cinfer_engine_server_info(engine, &info, err);
    if (rc)
        return rc;
    out->max_request_len = info.max_request_len;
    out->vocab_size = info.vocab_size;
    pthread_mutex_lock(&limits_lock);
    unsigned slot = limits_next++ % LIMITS_SLOTS;
    limits_cache[slot].engine = engine;
    limits_cache[slot].limits = *out;
    pthread_mutex_unlock(&limits_lock);
    return CINFER_OK;
}

void cinfer_native_engine_limits_forget(const struct cinfer_engine *engine)
{
    pthread_mutex_lock(&limits_lock);
    for (int i = 0; i < LIMITS_SLOTS; i++)
        if (limits_cache[i].engine == engine)
            limits_cache[i].engine = NULL;
    pthread_mutex_unlock(&limits_lock);
}

void cinfer_native_reply_ok(struct http_conn *c, json_t *body)
{
    if (body)
        cinfer_http_reply_json(c, 200, body);
    else
        cinfer_http_reply_error(c, 500, "internal_error", NULL, "out of memory building the answer");
}

/* ---- /get_server_info -------------------------------------------------------------- */
/* "--max-running-requests" -> "max_running_requests", SGLang's server-args spelling. */
static void arg_key(const struct option *opt, char *out, size_t out_bytes)
{
    snprintf(out, out_bytes, "%s", opt->flag + 2);
    for (char *p = out; *p; p++)
        if (*p == '-')
            *p = '_';
}

static json_t *option_json(const struct cinfer_server_args *args, const struct option *opt)
{
    const void *field = cinfer_option_field_const(args, opt);
    switch (opt->type) {
    case OPTION_STRING: {
        const char *s = *(char *const *)field;
        if (s && strcmp(opt->name, "api_key") == 0)
            return json_string("(set, not shown)");
        return s ? json_string(s) : json_null();
    }
    case OPTION_STRING_LIST: {
        const struct cinfer_string_list *l = field;
        json_t *a = json_array();
        for (int i = 0; a && i < l->count; i++)
            json_array_append_new(a, json_string(l->items[i]));
        return a;
    }
    case OPTION_INT:
    case OPTION_DURATION_MS: return json_integer(*(const int *)field);
    case OPTION_INT64:
    case OPTION_BYTES: return json_integer(*(const int64_t *)field);
    case OPTION_DOUBLE: return json_real(*(const double *)field);
    case OPTION_BOOL: return json_boolean(*(const int *)field);
    case OPTION_ENUM: {
        int v = *(const int *)field;
        int n = 0;
        while (opt->choices && opt->choices[n])
            n++;
        return v >= 0 && v < n ? json_string(opt->choices[v]) : json_integer(v);
    }
    }
    return json_null();
}

static json_t *server_args_json(const struct cinfer_server_args *args)
{
    json_t *o = json_object();
    for (int i = 0; o && i < cinfer_options_count; i++) {
        char key[96];
        arg_key(&cinfer_options[i], key, sizeof key);
        json_object_set_new(o, key, option_json(args, &cinfer_options[i]));
    }
    return o;
}

void cinfer_native_handle_server_info(const struct http_request *req)
{
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    struct cinfer_worker_info *worker_list = NULL;
    struct cinfer_replica_info *replica_list = NULL;
    int n_workers = 0, n_replicas = 0;
    if (cinfer_engine_server_info(req->ctx->engine, &info, &err) ||
        cinfer_engine_workers(req->ctx->engine, &worker_list, &n_workers, &err) ||
        cinfer_engine_replicas(req->ctx->engine, &replica_list, &n_replicas, &err)) {
        free(worker_list);
        cinfer_http_reply_engine_error(req->conn, &err);
        return;
    }
    static const char *const phase_words[] = {[CINFER_WORKER_STARTING] = "starting", [CINFER_WORKER_UP] = "up",
                                              [CINFER_WORKER_DOWN] = "down"};
    json_t *pids = json_array(), *workers = json_array(), *replicas = json_array();
    for (int i = 0; i < n_workers; i++) {
        const struct cinfer_worker_info *w = &worker_list[i];
        json_array_append_new(pids, json_integer(w->pid));
        json_array_append_new(workers, json_pack("{s:s, s:i, s:i, s:s, s:i, s:s}", "role", w->role, "dp_rank",
                                                 w->dp_rank, "tp_rank", w->tp_rank, "host", w->host, "pid", w->pid,
                                                 "state", phase_words[w->phase]));
    }
    for (int r = 0; r < n_replicas; r++) {
        const struct cinfer_replica_info *ri = &replica_list[r];
        json_array_append_new(
            replicas, json_pack("{s:i, s:b, s:i, s:i, s:i, s:i, s:I, s:I, s:i, s:i, s:I, s:I}", "dp_rank", ri->dp_rank,
                                "up", ri->up, "running_requests", ri->running_requests, "queued_requests",
                                ri->queued_requests, "routed_requests", ri->routed_requests, "in_flight",
                                ri->in_flight, "prefix_cache_hit_tokens", (json_int_t)ri->prefix_cache_hit_tokens,
                                "prefix_cache_query_tokens", (json_int_t)ri->prefix_cache_query_tokens,
                                "kv_pages_total", ri->kv_pages_total, "kv_pages_free", ri->kv_pages_free,
                                "prefill_tokens", (json_int_t)ri->prefill_tokens, "retractions",
                                (json_int_t)ri->retractions));
    }
    double hit_rate = info.prefix_cache_query_tokens > 0
                          ? (double)info.prefix_cache_hit_tokens / (double)info.prefix_cache_query_tokens
                          : 0.0;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:i, s:I, s:I, s:i, s:i, s:I, s:I, s:f, s:i, s:i,"
                          " s:i, s:i, s:i, s:I, s:I, s:b, s:o}",
                          "version", info.version, "model_path", info.model_path, "served_model_name",
                          req->ctx->model_name ? req->ctx->model_name : "", "architecture", info.architecture,
                          "worker_pids", pids, "tp_size", info.tp_size, "dp_size", info.dp_size, "vocab_size",
                          info.vocab_size, "max_total_num_tokens", (json_int_t)info.max_total_tokens,
                          "max_total_tokens", (json_int_t)info.max_total_tokens, "max_request_len",
                          info.max_request_len, "max_running_requests", info.max_running_requests,
                          "prefix_cache_hit_tokens", (json_int_t)info.prefix_cache_hit_tokens,
                          "prefix_cache_query_tokens", (json_int_t)info.prefix_cache_query_tokens,
                          "prefix_cache_hit_rate", hit_rate, "running_requests", info.running_requests,
                          "queued_requests", info.queued_requests, "kv_pages_total", info.kv_pages_total,
                          "kv_pages_free", info.kv_pages_free, "kv_page_size", info.kv_page_size, "prefill_tokens",
                          (json_int_t)info.prefill_tokens, "retractions", (json_int_t)info.retractions, "healthy",
                          cinfer_engine_healthy(req->ctx->engine), "server_args", server_args_json(req->ctx->args));
    free(worker_list);
    free(replica_list);
    if (!o) {
        json_decref(workers);
        json_decref(replicas);
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory building the server info");
        return;
    }
    json_object_set_new(o, "workers", workers);
    json_object_set_new(o, "replicas", replicas);
    json_object_set_new(o, "run_dir", json_string(info.run_dir));
    json_object_set_new(o, "created", json_integer(req->ctx->created_unix_s));
    cinfer_native_reply_ok(req->conn, o);
}

/* ---- /flush_cache ------------------------------------------------------------------ */
/* As SGLang: 200 with a line of text, or 400 with the scheduler's reason when requests
 * still run or wait (CINFER_ERR_STATE); any other failure by its code. */
void cinfer_native_handle_flush_cache(const struct http_request *req)
{
    struct cinfer_error err = {0};
    int rc = cinfer_engine_flush_cache(req->ctx->engine, &err);
    if (rc == CINFER_OK) {
        static const char done[] = "Cache flushed.\n";
        cinfer_http_reply_text(req->conn, 200, "text/plain; charset=utf-8", done, sizeof done - 1);
        return;
    }
    cinfer_error_prefix(&err, "cache not flushed");
    cinfer_http_reply_engine_error(req->conn, &err);
}

/* ---- /abort_request ---------------------------------------------------------------- */
/* {"rid": "..."} aborts that /generate; {"abort_all": true} every one on this engine.
 * SGLang answers an empty 200 either way; here the body says how many engine requests
 * were asked to stop (0 when the rid is unknown or already finished). */
void cinfer_native_handle_abort_request(const struct http_request *req)
{
    json_t *body = cinfer_http_parse_json_object(req);
    if (!body)
        return;
    const char *rid = NULL;
    int all = 0;
    if (cinfer_http_field_string(req, body, "rid", &rid) < 0 || cinfer_http_field_bool(req, body, "abort_all",
                                                                                       &all) < 0) {
        json_decref(body);
        return;
    }
    if (!rid && !all) {
        cinfer_http_field_error(req, "rid",
                                "expected the rid of a /generate request (or \"abort_all\": true), found none");
        json_decref(body);
        return;
    }
    int n = cinfer_native_rid_abort(req->ctx->engine, all ? NULL : rid);
    json_t *o = json_pack("{s:s?, s:i}", "rid", all ? NULL : rid, "aborted", n);
    json_decref(body);
    cinfer_native_reply_ok(req->conn, o);
}

/* ---- /health_generate -------------------------------------------------------------- */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs one token through the whole pipeline (scheduler and detokenizer): 200 when it
 * comes back within the deadline, 503 otherwise. It goes straight to the engine, not
 * through http_generation_*, so health probes stay out of the serving metrics (as
 * SGLang keeps its health-check requests out). */
void cinfer_native_handle_health_generate(const struct http_request *req)
{
    struct cinfer_engine *engine = req->ctx->engine;
    if (!cinfer_engine_healthy(engine)) {
        cinfer_http_reply_error(req->conn, 503, "service_unavailable", NULL,
                                "the engine is not healthy (a worker is down)");
        return;
    }
    int32_t id = 0;
    if (req->ctx->tokenizer) {
        struct cinfer_tokenizer_info ti;
        req->ctx->tokenizer->ops->info(req->ctx->tokenizer->tok, &ti);
        if (ti.bos_id >= 0)
            id = ti.bos_id;
    }
    struct cinfer_generate_request g = {.input_ids = &id, .n_input_ids = 1};
    cinfer_sampling_params_init(&g.sampling);
    g.sampling.temperature = 0;
    g.sampling.max_new_tokens = 1;
    g.sampling.ignore_eos = 1;
    double start = now_s();
    struct cinfer_stream *s = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_engine_stream_open(engine, &g, &s, &err);
    struct cinfer_stream_chunk chunk = {0};
    while (rc == CINFER_OK) {
        int left_ms = HEALTH_GENERATE_TIMEOUT_MS - (int)((now_s() - start) * 1000.0);
        if (left_ms <= 0) {
            rc = cinfer_error_set(&err, CINFER_ERR_TIMEOUT, "no token within %d ms", HEALTH_GENERATE_TIMEOUT_MS);
            break;
        }
        rc = cinfer_stream_next(s, &chunk, left_ms, &err);
        if (rc == CINFER_OK && chunk.finish_reason != CINFER_FINISH_NONE)
            break;
    }
    cinfer_stream_close(&s);
    if (rc == CINFER_OK && chunk.finish_reason == CINFER_FINISH_ABORT)
        rc = cinfer_error_set(&err, CINFER_ERR_STATE, "the probe request was aborted");
    if (rc) {
        cinfer_http_reply_error(req->conn, 503, "service_unavailable", NULL, "health_generate failed: %s", err.message);
        return;
    }
    cinfer_native_reply_ok(req->conn,
                           json_pack("{s:b, s:i, s:f}", "healthy", 1, "generated_tokens", chunk.completion_tokens,
                                     "latency_s", now_s() - start));
}
