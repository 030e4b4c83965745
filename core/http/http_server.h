/* http/http_server.h — what a route handler of the HTTP server gets and how it answers.
 *
 * The transport (http_server.c and friends, on libmicrohttpd) reads the whole request
 * body (refusing it with 413 past server.max_request_body_bytes before parsing),
 * checks the API key, finds the route and calls its handler once, from a thread of its
 * own that may block (generation). The handler answers exactly once: a JSON body
 * (cinfer_http_reply_json / cinfer_http_reply_error) or a server-sent-event stream (cinfer_http_reply_sse).
 *
 * The API layers live beside it, one file per group of endpoints:
 *   openai_*.c   /v1/completions, /v1/chat/completions, /v1/models
 *   native_*.c   /generate, /v1/tokenize, /v1/detokenize, /get_server_info, /flush_cache,
 *                /abort_request, /health_generate
 *   metrics.c    /metrics (Prometheus text) and the counters behind it
 * and every generation goes through http_generation_* so that timing (for metrics),
 * client-gone detection and abort are handled once. */
#ifndef CINFER_HTTP_SERVER_INTERNAL_H
#define CINFER_HTTP_SERVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cinfer/engine.h"
#include "cinfer/error.h"

struct cinfer_server_args;
struct cinfer_chat_template;
struct http_conn;              /* one HTTP request being answered (transport-owned) */
struct http_metrics;

/* What every handler can reach. Owned by the server; read-only for handlers. */
struct http_server_ctx {
    struct cinfer_engine *engine;
    const struct cinfer_server_args *args;
    struct cinfer_tokenizer_ctx *tokenizer;            /* the main process's own, for tokenize/detokenize */
    const struct cinfer_chat_template *chat_template;  /* NULL when the model has none and none was given */
    const char *model_name;       /* served model name: args->served_model_name or the model folder's name */
    int64_t created_unix_s;       /* when the server started ("created" of /v1/models) */
    struct http_metrics *metrics;
    int tool_format;              /* enum cinfer_tool_format of chat output (chat/output_parsers.h) */
    int reasoning_format;         /* enum cinfer_reasoning_format */
};

struct http_request {
    const char *method;          /* "GET", "POST", ... */
    const char *path;            /* without the query string */
    const char *body;            /* NUL-terminated; "" when there is none */
    size_t body_len;
    const struct http_server_ctx *ctx;
    struct http_conn *conn;
};

/* A route: exact path, method, handler. needs_auth is 0 only for /health. */
typedef void (*http_handler_fn)(const struct http_request *req);

/* ---- answering ------------------------------------------------------------------- */
/* Sends body (the reference is stolen) with Content-Type application/json. */
void cinfer_http_reply_json(struct http_conn *c, int status, json_t *body);
/* Sends a plain-text body (e.g. /metrics, with its own content type). */
void cinfer_http_reply_text(struct http_conn *c, int status, const char *content_type, const char *text, size_t len);
/* OpenAI's error shape:
 *   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}
 * type: "invalid_request_error" (400), "authentication_error" (401), "not_found_error"
 * (404), "request_too_large" (413), "server_overloaded" (503, queue full),
 * "service_unavailable" (503, engine down), "internal_error" (500). param may be NULL. */
void cinfer_http_reply_error(struct http_conn *c, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Maps an engine error to its status and type by its code alone (CINFER_ERR_OVERLOADED
 * -> 503 server_overloaded, CINFER_ERR_CHILD / CINFER_ERR_UNAVAILABLE -> 503
 * service_unavailable, CINFER_ERR_CONTEXT_LENGTH or a sampling parameter out of range
 * -> 400 invalid_request_error, ...; the table is in docs/http.md) and replies. */
void cinfer_http_reply_engine_error(struct http_conn *c, const struct cinfer_error *err);
/* The status and type cinfer_http_reply_engine_error would answer with (for tests and logs). */
int cinfer_http_engine_error_status(const struct cinfer_error *err, const char **type);

/* Parses req->body as a JSON object. On failure replies 400 with the position
 * ("malformed JSON at line 1, column 17: ...") or "expected a JSON object, found an
 * array" and returns NULL; the handler then just returns. */
json_t *cinfer_http_parse_json_object(const struct http_request *req);

/* ---- server-sent events ------------------------------------------------------------ */
/* A pull source: the transport calls next() from the connection's thread whenever it
 * can send; next() may block (e.g. in cinfer_http_generation_next). It appends one or more
 * whole events to *out (use cinfer_http_sse_event) and returns 0, or returns 1 when the
 * stream is over (after appending its last events, such as "data: [DONE]"), or a
 * negative cinfer_status to cut the connection. close() is called exactly once, when
 * the stream ends for any reason, including the client going away; it must abort
 * whatever generation is still running. */
struct http_buffer {
    char *data;
    size_t len, cap;
};
int cinfer_http_buffer_append(struct http_buffer *b, const char *data, size_t len);
/* Appends "data: <json>\n\n" (compact JSON, the reference is stolen), or the literal
 * "data: [DONE]\n\n" when json is NULL. */
int cinfer_http_sse_event(struct http_buffer *out, json_t *json);

struct http_sse_source {
    int (*next)(void *state, struct http_buffer *out);
    void (*close)(void *state);
    void *state;
};
/* Replies 200 with Content-Type text/event-stream, Cache-Control no-cache, and the
 * events of src. The transport checks for a departed client while next() waits (it
 * polls the socket), so a disconnect aborts the generation within ~100 ms. */
void cinfer_http_reply_sse(struct http_conn *c, struct http_sse_source src);

/* 1 once the client has closed its connection (for handlers that block without
 * streaming, e.g. a non-streaming completion). */
int cinfer_http_conn_client_gone(struct http_conn *c);

/* ---- generation -------------------------------------------------------------------- */
/* One engine request on behalf of an HTTP request: opens a cinfer_stream, records
 * timing into the metrics (time to first token, inter-token latency, end-to-end,
 * prompt and generated token counts), and aborts when the client goes away. */
struct http_generation;
int cinfer_http_generation_start(const struct http_server_ctx *ctx, struct http_conn *conn,
                                 const struct cinfer_generate_request *req, struct http_generation **out,
                                 struct cinfer_error *err);
/* Waits for the next chunk (valid until the next call). Returns CINFER_OK, or
 * CINFER_ERR_IO once the client is gone (the request is then aborted), or the
 * engine's error. A chunk with finish_reason != NONE is the last. */
int cinfer_http_generation_next(struct http_generation *g, struct cinfer_stream_chunk *chunk, struct cinfer_error *err);
/* The same, giving up after timeout_ms (-1: never) with CINFER_ERR_TIMEOUT and the
 * generation still running: for a handler that interleaves several (n > 1 streaming). */
int cinfer_http_generation_next_for(struct http_generation *g, struct cinfer_stream_chunk *chunk, int timeout_ms,
                                    struct cinfer_error *err);
uint64_t cinfer_http_generation_request_id(const struct http_generation *g);
/* Records the end in the metrics, aborts it if unfinished, frees; sets *g to NULL. */
void cinfer_http_generation_finish(struct http_generation **g);

/* ---- metrics (metrics.c) ----------------------------------------------------------- */
int cinfer_http_metrics_new(struct http_metrics **out);
void cinfer_http_metrics_free(struct http_metrics **m);
void cinfer_http_metrics_observe_first_token(struct http_metrics *m, double seconds_since_arrival);
void cinfer_http_metrics_observe_inter_token(struct http_metrics *m, double seconds);
void cinfer_http_metrics_observe_request(struct http_metrics *m, int prompt_tokens, int completion_tokens,
                                         double e2e_seconds, enum cinfer_finish_reason reason);
/* Prometheus text exposition format 0.0.4 of the counters and histograms above plus
 * the engine's server info (running, queued, KV usage, prefix-cache hit rate). */
int cinfer_http_metrics_render(struct http_metrics *m, struct cinfer_engine *engine, char **out, size_t *out_len);

/* ---- handlers (each in the file of its API) ---------------------------------------- */
void cinfer_openai_handle_completions(const struct http_request *req);
void cinfer_openai_handle_chat_completions(const struct http_request *req);
void cinfer_openai_handle_models(const struct http_request *req);
void cinfer_native_handle_generate(const struct http_request *req);
void cinfer_native_handle_tokenize(const struct http_request *req);
void cinfer_native_handle_detokenize(const struct http_request *req);
void cinfer_native_handle_server_info(const struct http_request *req);
void cinfer_native_handle_flush_cache(const struct http_request *req);
void cinfer_native_handle_abort_request(const struct http_request *req);
void cinfer_native_handle_health_generate(const struct http_request *req);
void cinfer_native_handle_metrics(const struct http_request *req);

#endif
