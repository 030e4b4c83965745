/* http/http_generation.c — one engine request on behalf of an HTTP request.
 *
 * It waits on the engine in short slices and looks at the client between them, so a
 * client that goes away (or a server that stops) aborts the request within one slice;
 * closing the engine stream early is what aborts it there and frees its KV pages.
 * Timing starts when the HTTP request arrived: time to first token, the gap between
 * chunks spread over their tokens, and the end to end latency go to the metrics,
 * with the token counts and the finish reason, once per request. */
#include <stdlib.h>

#include "http/http_transport.h"

#define WAIT_SLICE_MS 50

struct http_generation {
    const struct http_server_ctx *ctx;
    struct http_conn *conn;          /* NULL: no client to watch (internal use) */
    struct cinfer_stream *stream;
    uint64_t request_id;
    double arrival_s, last_chunk_s;
    int seen_token;
    int prompt_tokens, completion_tokens;
    int recorded;
};

int cinfer_http_generation_start(const struct http_server_ctx *ctx, struct http_conn *conn,
                                 const struct cinfer_generate_request *req, struct http_generation **out,
                                 struct cinfer_error *err)
{
    *out = NULL;
    struct http_generation *g = calloc(1, sizeof *g);
    if (!g)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory starting a generation");
    g->ctx = ctx;
    g->conn = conn;
    g->arrival_s = conn ? cinfer_http_conn_arrival_s(conn) : cinfer_http_now_s();
    int rc = cinfer_engine_stream_open(ctx->engine, req, &g->stream, err);
    if (rc != CINFER_OK) {
        free(g);
        return rc;
    }
    g->request_id = cinfer_stream_request_id(g->stream);
    *out = g;
    return CINFER_OK;
}

uint64_t cinfer_http_generation_request_id(const struct http_generation *g)
{
    return g->request_id;
}

static void record(struct http_generation *g, enum cinfer_finish_reason reason)
{
    if (g->recorded)
        return;
    g->recorded = 1;
    if (g->ctx->metrics)
        cinfer_http_metrics_observe_request(g->ctx->metrics, g->prompt_tokens, g->completion_tokens,
                                            cinfer_http_now_s() - g->arrival_s, reason);
}

static void observe_chunk(struct http_generation *g, const struct cinfer_stream_chunk *chunk)
{
    double now = cinfer_http_now_s();
    if (chunk->prompt_tokens > 0)
        g->prompt_tokens = chunk->prompt_tokens;
    if (chunk->completion_tokens > 0)
        g->completion_tokens = chunk->completion_tokens;
    if (chunk->n_ids == 0 || !g->ctx->metrics)
        return;
    if (!g->seen_token) {
        g->seen_token = 1;
        cinfer_http_metrics_observe_first_token(g->ctx->metrics, now - g->arrival_s);
    } else {
        /* Tokens that arrive together shared the interval: each gets its part. */
        double per_token = (now - g->last_chunk_s) / (double)chunk->n_ids;
        for (size_t i = 0; i < chunk->n_ids; i++)
            cinfer_http_metrics_observe_inter_token(g->ctx->metrics, per_token);
    }
    g->last_chunk_s = now;
}

int cinfer_http_generation_next_for(struct http_generation *g, struct cinfer_stream_chunk *chunk, int timeout_ms,
                                    struct cinfer_error *err)
{
    if (!g->stream)
        return cinfer_error_set(err, CINFER_ERR_STATE, "the generation has already finished");
    double deadline = timeout_ms < 0 ? 0 : cinfer_http_now_s() + timeout_ms / 1000.0;
    for (;;) {
        if (cinfer_http_conn_should_stop(g->conn)) {
            int gone = cinfer_http_conn_client_gone(g->conn);
            record(g, CINFER_FINISH_ABORT);
            cinfer_stream_close(&g->stream); /* aborts it in the engine */
            return cinfer_error_set(err, CINFER_ERR_IO, "request %llu aborted: %s", (unsigned long long)g->request_id,
                                    gone ? "the client closed the connection" : "the server is stopping");
        }
        int slice = WAIT_SLICE_MS;
        if (timeout_ms >= 0) {
            double left_ms = (deadline - cinfer_http_now_s()) * 1000.0;
            if (left_ms <= 0)
                return cinfer_error_set(err, CINFER_ERR_TIMEOUT, "no output within %d ms", timeout_ms);
            if (left_ms < slice)
                slice = (int)left_ms + 1;
        }
        int rc = cinfer_stream_next(g->stream, chunk, slice, err);
        if (rc == CINFER_ERR_TIMEOUT)
            continue;
        if (rc != CINFER_OK) {
            record(g, CINFER_FINISH_ERROR);
            return rc;
        }
        observe_chunk(g, chunk);
        if (chunk->finish_reason != CINFER_FINISH_NONE)
            record(g, chunk->finish_reason);
        return CINFER_OK;
    }
}

int cinfer_http_generation_next(struct http_generation *g, struct cinfer_stream_chunk *chunk, struct cinfer_error *err)
{
    return cinfer_http_generation_next_for(g, chunk, -1, err);
}

void cinfer_http_generation_finish(struct http_generation **gp)
{
    if (!gp || !*gp)
        return;
    struct http_generation *g = *gp;
    record(g, CINFER_FINISH_ABORT); /* unfinished: closing the stream aborts it */
    cinfer_stream_close(&g->stream);
    free(g);
    *gp = NULL;
}
