/* http/native_api.h — what the files of SGLang's native API share: the parsed body of
 * a /generate request, the map from the client's request id ("rid") to the engine's
 * request ids (for /abort_request), and the engine's fixed limits.
 *
 *   native_generate_request.c  the /generate body -> struct native_generate_spec (fuzzed)
 *   native_generate.c          POST /generate, blocking and streaming
 *   native_rid_map.c           rid -> engine request ids, for /abort_request
 *   native_tokenize.c          POST /v1/tokenize, POST /v1/detokenize
 *   native_control.c           GET /get_server_info, POST /flush_cache, POST /abort_request,
 *                              GET /health_generate, and the limits below */
#ifndef CINFER_HTTP_NATIVE_API_H
#define CINFER_HTTP_NATIVE_API_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cinfer/engine.h"
#include "http/http_server.h"

/* Prompts times choices in one /generate: as OpenAI's cap on n. */
#define NATIVE_MAX_GENERATIONS CINFER_MAX_CHOICES
#define NATIVE_RID_BYTES 128

/* One prompt of a /generate: text (borrowed from the body) or token ids (malloc'd). */
struct native_prompt {
    const char *text;
    int32_t *ids;
    size_t n_ids;
    const char *rid;  /* the client's rid for this prompt (borrowed), or NULL */
};

/* A /generate body as SGLang's GenerateReqInput reads it. */
struct native_generate_spec {
    struct native_prompt *prompts; /* (n_prompts) malloc'd */
    size_t n_prompts;
    int batch;                     /* text / input_ids was a list: the answer is a list */
    int n;                         /* choices per prompt (sampling_params.n), 1 or more */
    struct cinfer_sampling_params sampling; /* stop strings point into the body */
    int stream;
    int return_logprob;
    int top_logprobs_num;
    int return_text_in_logprobs;
    char *owned_constraint;        /* a json_schema object as text (sampling.json_schema), or NULL */
};

/* Reads body (a JSON object) into spec. Returns 0, or -1 after replying 400 naming the
 * field (through request_fields.h); spec is then already freed. Needs no live
 * connection beyond cinfer_http_reply_error, so the fuzzer can call it. The strings in spec
 * point into body, which must outlive it. */
int cinfer_native_generate_parse(const struct http_request *req, const json_t *body, struct native_generate_spec *spec);
void cinfer_native_generate_spec_free(struct native_generate_spec *spec);

/* ---- rid -> engine request ids ------------------------------------------------------ */
/* Registers rid for engine's requests ids[0..n). Returns 0, or CINFER_ERR_STATE when
 * the rid is already in flight on that engine, CINFER_ERR_NOMEM. */
int cinfer_native_rid_register(const struct cinfer_engine *engine, const char *rid, const uint64_t *ids, size_t n);
void cinfer_native_rid_unregister(const struct cinfer_engine *engine, const char *rid);
/* Aborts every engine request registered under rid (every rid on the engine when rid
 * is NULL); returns how many engine requests were asked to stop. */
int cinfer_native_rid_abort(struct cinfer_engine *engine, const char *rid);
/* A fresh rid as SGLang makes one: 32 lowercase hex digits of randomness. */
void cinfer_native_rid_new(char out[NATIVE_RID_BYTES]);

/* 200 with body, or 500 when body is NULL (jansson ran out of memory building it). */
void cinfer_native_reply_ok(struct http_conn *c, json_t *body);

/* ---- limits ------------------------------------------------------------------------ */
/* The engine's limits that never change while it runs, asked once per engine. */
struct native_limits {
    int max_request_len; /* context length in tokens */
    int vocab_size;
};
int cinfer_native_engine_limits(struct cinfer_engine *engine, struct native_limits *out, struct cinfer_error *err);
/* Forgets what was cached for engine: a server starting on it calls this, since an
 * engine shut down earlier may have had the same address. */
void cinfer_native_engine_limits_forget(const struct cinfer_engine *engine);

#endif
