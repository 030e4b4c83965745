/* http/metrics.c — /metrics: counters and latency histograms of the HTTP requests
 * that generated, plus the engine's live gauges, in the Prometheus text exposition
 * format 0.0.4. Names follow SGLang's sglang_* with the prefix cinfer_, so its
 * dashboards carry over. One mutex guards the numbers: updates are a few additions. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_server.h"

/* Upper bounds in seconds; +Inf is implicit. */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                     1.0,   2.5,   5.0,  7.5,  10.0, 15.0, 20.0, 25.0, 30.0};
static const double itl_bounds[] = {0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04,
                                    0.06,  0.08,  0.1,  0.25,  0.5,  0.75,  1.0,  2.5};
static const double e2e_bounds[] = {0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0};
#define MAX_BUCKETS 24

struct histogram {
    const char *name, *help;
    const double *bounds;
    int n_bounds;
    uint64_t counts[MAX_BUCKETS]; /* per bucket, not cumulative; [n_bounds] is +Inf */
    double sum;
    uint64_t count;
};

/* The finish reasons as OpenAI names them, in the order they are printed. */
static const char *const reason_labels[] = {"length", "stop", "abort", "error"};
#define N_REASONS 4

struct metric_values {
    uint64_t prompt_tokens, generation_tokens;
    uint64_t requests[N_REASONS];
    struct histogram ttft, itl, e2e;
};

struct http_metrics {
    pthread_mutex_t lock;
    struct metric_values v;
};

static void histogram_init(struct histogram *h, const char *name, const char *help, const double *bounds, int n)
{
    h->name = name;
    h->help = help;
    h->bounds = bounds;
    h->n_bounds = n;
}

int cinfer_http_metrics_new(struct http_metrics **out)
{
    struct http_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return CINFER_ERR_NOMEM;
    pthread_mutex_init(&m->lock, NULL);
    histogram_init(&m->v.ttft, "cinfer_time_to_first_token_seconds",
                   "Time from the HTTP request's arrival to its first generated token.", ttft_bounds,
                   (int)(sizeof ttft_bounds / sizeof ttft_bounds[0]));
    histogram_init(&m->v.itl, "cinfer_inter_token_latency_seconds", "Time between consecutive generated tokens.",
                   itl_bounds, (int)(sizeof itl_bounds / sizeof itl_bounds[0]));
    histogram_init(&m->v.e2e, "cinfer_e2e_request_latency_seconds",
                   "Time from the HTTP request's arrival to the end of its generation.", e2e_bounds,
                   (int)(sizeof e2e_bounds / sizeof e2e_bounds[0]));
    *out = m;
    return CINFER_OK;
}

void cinfer_http_metrics_free(struct http_metrics **mp)
{
    if (!mp || !*mp)
        return;
    pthread_mutex_destroy(&(*mp)->lock);
    free(*mp);
    *mp = NULL;
}

static void observe(struct histogram *h, double v)
{
    if (v < 0)
        v = 0;
    int b = 0;
    while (b < h->n_bounds && v > h->bounds[b])
        b++;
    h->counts[b]++;
    h->sum += v;
    h->count++;
}

void cinfer_http_metrics_observe_first_token(struct http_metrics *m, double seconds_since_arrival)
{
    pthread_mutex_lock(&m->lock);
    observe(&m->v.ttft, seconds_since_arrival);
    pthread_mutex_unlock(&m->lock);
}

void cinfer_http_metrics_observe_inter_token(struct http_metrics *m, double seconds)
{
    pthread_mutex_lock(&m->lock);
    observe(&m->v.itl, seconds);
    pthread_mutex_unlock(&m->lock);
}

static int reason_index(enum cinfer_finish_reason r)
{
    switch (r) {
    case CINFER_FINISH_LENGTH: return 0;
    case CINFER_FINISH_STOP_TOKEN:
    case CINFER_FINISH_STOP_STRING: return 1;
    case CINFER_FINISH_ABORT: return 2;
    default: return 3;
    }
}

void cinfer_http_metrics_observe_request(struct http_metrics *m, int prompt_tokens, int completion_tokens,
                                         double e2e_seconds, enum cinfer_finish_reason reason)
{
    pthread_mutex_lock(&m->lock);
    m->v.prompt_tokens += prompt_tokens > 0 ? (uint64_t)prompt_tokens : 0;
    m->v.generation_tokens += completion_tokens > 0 ? (uint64_t)completion_tokens : 0;
    m->v.requests[reason_index(reason)]++;
    observe(&m->v.e2e, e2e_seconds);
    pthread_mutex_unlock(&m->lock);
}

/* ---- rendering ------------------------------------------------------------------------ */

static int put(struct http_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put(struct http_buffer *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return CINFER_ERR_INTERNAL;
    return cinfer_http_buffer_append(b, line, (size_t)n);
}

static int family(struct http_buffer *b, const char *name, const char *type, const char *help)
{
    return put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int put_histogram(struct http_buffer *b, const struct histogram *h)
{
    int rc = family(b, h->name, "histogram", h->help);
    uint64_t cumulative = 0;
    for (int i = 0; i <= h->n_bounds && !rc; i++) {
        cumulative += h->counts[i];
        if (i < h->n_bounds)
            rc = put(b, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->bounds[i], (unsigned long long)cumulative);
        else
            rc = put(b, "%s_bucket{le=\"+Inf\"} %llu\n", h->name, (unsigned long long)cumulative);
    }
    if (!rc)
        rc = put(b, "%s_sum %.9g\n%s_count %llu\n", h->name, h->sum, h->name, (unsigned long long)h->count);
    return rc;
}

static int put_counters(struct http_buffer *b, const struct metric_values *m)
{
    int rc = family(b, "cinfer_prompt_tokens_total", "counter", "Prompt tokens of the requests served.");
    if (!rc)
        rc = put(b, "cinfer_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    if (!rc)
        rc = family(b, "cinfer_generation_tokens_total", "counter", "Tokens generated for the requests served.");
    if (!rc)
        rc = put(b, "cinfer_generation_tokens_total %llu\n", (unsigned long long)m->generation_tokens);
    if (!rc)
        rc = family(b, "cinfer_requests_total", "counter", "Generation requests finished, by finish reason.");
    for (int i = 0; i < N_REASONS && !rc; i++)
        rc = put(b, "cinfer_requests_total{finish_reason=\"%s\"} %llu\n", reason_labels[i],
                 (unsigned long long)m->requests[i]);
    if (!rc)
        rc = put_histogram(b, &m->ttft);
    if (!rc)
        rc = put_histogram(b, &m->itl);
    if (!rc)
        rc = put_histogram(b, &m->e2e);
    return rc;
}

static double ratio(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

/* One gauge: the engine's total, then one sample per replica (label dp_rank) when there
 * is more than one. */
#define PUT_GAUGE(name, help, format, total, of_replica)                                         \
    do {                                                                                        \
        if (!rc)                                                                                \
            rc = family(b, name, "gauge", help);                                                \
        if (!rc && have)                                                                        \
            rc = put(b, name " " format "\n", total);                                           \
        for (int r = 0; !rc && have && n_replicas > 1 && r < n_replicas; r++) {                 \
            const struct cinfer_replica_info *ri = &replicas[r];                                \
            if (ri->up)                                                                         \
                rc = put(b, name "{dp_rank=\"%d\"} " format "\n", ri->dp_rank, of_replica);     \
        }                                                                                       \
    } while (0)

/* The engine's gauges; families without a sample when the engine cannot answer. */
static int put_gauges(struct http_buffer *b, struct cinfer_engine *engine)
{
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    struct cinfer_replica_info *replicas = NULL;
    int n_replicas = 0;
    int have = engine && cinfer_engine_server_info(engine, &info, &err) == CINFER_OK &&
               cinfer_engine_replicas(engine, &replicas, &n_replicas, &err) == CINFER_OK;
    int rc = 0;
    PUT_GAUGE("cinfer_num_running_reqs", "Requests in the running batch.", "%d", info.running_requests,
              ri->running_requests);
    PUT_GAUGE("cinfer_num_queue_reqs", "Requests waiting for a batch slot.", "%d", info.queued_requests,
              ri->queued_requests);
    PUT_GAUGE("cinfer_kv_cache_usage_ratio",
              "Share of the KV cache pages in use (pages held by the prefix cache count).",
              "%.6g", ratio(info.kv_pages_total - info.kv_pages_free, info.kv_pages_total),
              ratio(ri->kv_pages_total - ri->kv_pages_free, ri->kv_pages_total));
    PUT_GAUGE("cinfer_cache_hit_rate", "Share of prompt tokens found in the prefix cache since start.", "%.6g",
              ratio(info.prefix_cache_hit_tokens, info.prefix_cache_query_tokens),
              ratio(ri->prefix_cache_hit_tokens, ri->prefix_cache_query_tokens));
    free(replicas);
    return rc;
}

int cinfer_http_metrics_render(struct http_metrics *m, struct cinfer_engine *engine, char **out, size_t *out_len)
{
    struct http_buffer b = {0};
    /* Copy under the lock, print without it. */
    pthread_mutex_lock(&m->lock);
    struct metric_values snapshot = m->v;
    pthread_mutex_unlock(&m->lock);
    int rc = put_counters(&b, &snapshot);
    if (!rc)
        rc = put_gauges(&b, engine);
    if (rc) {
        free(b.data);
        return rc;
    }
    *out = b.data;
    *out_len = b.len;
    return CINFER_OK;
}

void cinfer_native_handle_metrics(const struct http_request *req)
{
    char *text = NULL;
    size_t len = 0;
    if (!req->ctx->metrics || cinfer_http_metrics_render(req->ctx->metrics, req->ctx->engine, &text,
                                                         &len) != CINFER_OK) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory rendering the metrics");
        return;
    }
    cinfer_http_reply_text(req->conn, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}
