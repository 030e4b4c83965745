/* POST /generate, SGLang's native generation endpoint.
 *
 * Answer of one generation (a list of them for a list of prompts or n > 1):
 *   {"text": "...", "output_ids": [...], "index": i (lists only),
 *    "meta_info": {"id": rid, "finish_reason": {"type": "length", "length": N} |
 *                  {"type": "stop", "matched": "str" | id} | {"type": "abort", "message": "..."},
 *                  "prompt_tokens": P, "completion_tokens": C, "cached_tokens": K (prompt
 *                  tokens the prefix cache held), "e2e_latency": seconds,
 *                  "output_token_logprobs": [[logprob, id, text|null], ...],
 *                  "output_top_logprobs": [[[logprob, id, text|null], ...], ...]}}
 * Streaming ("stream": true) sends that object after every engine step as
 * "data: {...}\n\n" and ends with "data: [DONE]\n\n". As SGLang does by default (without
 * --incremental-streaming-output), each event carries the text, output_ids and logprobs
 * so far, not just what is new; finish_reason is null until the last event of a
 * generation. The generations of a list stream interleaved, each event with its
 * "index".
 *
 * Text prompts are tokenized here, with the tokenizer the engine uses, so a prompt too
 * long for the context is refused with a 400 naming both numbers before it is queued. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer/tokenizer.h"
#include "http/native_api.h"
#include "http/request_fields.h"

struct slot {
    struct http_generation *g;
    const char *rid;
    int index;
    struct http_buffer text;       /* all text so far */
    int32_t *ids;                  /* (n_ids) all output ids so far */
    size_t n_ids, cap_ids;
    json_t *token_logprobs;        /* [[logprob, id, text|null], ...] when return_logprob */
    json_t *top_logprobs;          /* [[[logprob, id, text|null], ...], ...] when top_logprobs_num */
    int prompt_tokens, completion_tokens;
    int cached_tokens;             /* prompt tokens found in the prefix cache */
    enum cinfer_finish_reason finish;
    char *matched_stop;
    int unsent;                    /* streaming: absorbed a chunk not yet sent */
};

/* One /generate in flight; owned by the handler, then by the event stream. */
struct run {
    const struct http_server_ctx *ctx;
    struct http_conn *conn;
    json_t *body;
    struct native_generate_spec spec;
    char (*rids)[NATIVE_RID_BYTES]; /* (n_prompts) */
    int *rid_registered;            /* (n_prompts) */
    struct slot *slots;             /* (n_slots): prompt p, choice c at p * n + c */
    size_t n_slots;
    double arrival_s;
    size_t cursor;                  /* streaming: the slot whose turn it is */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_free(struct run *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_slots; i++) {
        struct slot *s = &r->slots[i];
        cinfer_http_generation_finish(&s->g);
        free(s->text.data);
        free(s->ids);
        json_decref(s->token_logprobs);
        json_decref(s->top_logprobs);
        free(s->matched_stop);
    }
    for (size_t p = 0; r->rid_registered && p < r->spec.n_prompts; p++)
        if (r->rid_registered[p])
            cinfer_native_rid_unregister(r->ctx->engine, r->rids[p]);
    free(r->slots);
    free(r->rids);
    free(r->rid_registered);
    cinfer_native_generate_spec_free(&r->spec);
    json_decref(r->body);
    free(r);
}

/* ---- building the answer ------------------------------------------------------------ */
/* A logprob as JSON: -inf (an impossible token) has no JSON number, so it is null. */
static json_t *logprob_json(float lp)
{
    return isfinite(lp) ? json_real(lp) : json_null();
}

/* [logprob, id, text|null] as SGLang writes a token's logprob. */
static json_t *logprob_entry(const struct run *r, float lp, int32_t id)
{
    json_t *text = json_null();
    if (r->spec.return_text_in_logprobs && r->ctx->tokenizer) {
        char *piece = NULL;
        size_t len = 0;
        struct cinfer_error err = {0};
        const struct cinfer_tokenizer_ctx *t = r->ctx->tokenizer;
        if (t->ops->decode(t->tok, &id, 1, 0, &piece, &len, &err) == CINFER_OK) {
            json_t *s = json_stringn(piece, len);
            if (s) {
                json_decref(text);
                text = s;
            }
        }
        free(piece);
    }
    return json_pack("[o, i, o]", logprob_json(lp), (int)id, text);
}

static json_t *finish_reason_json(const struct slot *s)
{
    switch (s->finish) {
    case CINFER_FINISH_NONE: return json_null();
    case CINFER_FINISH_LENGTH: return json_pack("{s:s, s:i}", "type", "length", "length", s->completion_tokens);
    case CINFER_FINISH_STOP_TOKEN:
        return s->n_ids ? json_pack("{s:s, s:i}", "type", "stop", "matched", (int)s->ids[s->n_ids - 1])
                        : json_pack("{s:s, s:n}", "type", "stop", "matched");
    case CINFER_FINISH_STOP_STRING:
        return json_pack("{s:s, s:s?}", "type", "stop", "matched", s->matched_stop);
    case CINFER_FINISH_ABORT: return json_pack("{s:s, s:s}", "type", "abort", "message", "the request was aborted");
    case CINFER_FINISH_ERROR: return json_pack("{s:s, s:s}", "type", "abort", "message", "the request failed");
    }
    return json_null();
}

static json_t *slot_json(const struct run *r, const struct slot *s)
{
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < s->n_ids; i++)
        json_array_append_new(ids, json_integer(s->ids[i]));
    json_t *meta = json_pack("{s:s, s:o, s:i, s:i, s:i}", "id", s->rid, "finish_reason", finish_reason_json(s),
                             "prompt_tokens", s->prompt_tokens, "completion_tokens", s->completion_tokens,
                             "cached_tokens", s->cached_tokens);
    if (meta && s->finish != CINFER_FINISH_NONE)
        json_object_set_new(meta, "e2e_latency", json_real(now_s() - r->arrival_s));
    if (meta && s->token_logprobs)
        json_object_set(meta, "output_token_logprobs", s->token_logprobs);
    if (meta && s->top_logprobs)
        json_object_set(meta, "output_top_logprobs", s->top_logprobs);
    json_t *o = json_pack("{s:s%, s:o, s:o}", "text", s->text.data ? s->text.data : "", s->text.len, "output_ids", ids,
                          "meta_info", meta);
    if (o && (r->spec.batch || r->spec.n > 1))
        json_object_set_new(o, "index", json_integer(s->index));
    return o;
}

/* Takes a chunk's new text, ids and logprobs into the slot. */
static int absorb(const struct run *r, struct slot *s, const struct cinfer_stream_chunk *c)
{
    if (c->text_len && cinfer_http_buffer_append(&s->text, c->text, c->text_len))
        return CINFER_ERR_NOMEM;
    if (s->n_ids + c->n_ids > s->cap_ids) {
        size_t cap = (s->n_ids + c->n_ids) * 2 + 16;
        int32_t *grown = realloc(s->ids, cap * sizeof *grown);
        if (!grown)
            return CINFER_ERR_NOMEM;
        s->ids = grown;
        s->cap_ids = cap;
    }
    if (c->n_ids) /* an abort chunk has no ids (NULL) */
        memcpy(s->ids + s->n_ids, c->ids, c->n_ids * sizeof *c->ids);
    s->n_ids += c->n_ids;
    for (size_t i = 0; s->token_logprobs && c->logprobs && i < c->n_logprobs; i++) {
        const struct cinfer_token_logprob *lp = &c->logprobs[i];
        json_array_append_new(s->token_logprobs, logprob_entry(r, lp->logprob, lp->token));
        if (s->top_logprobs) {
            json_t *top = json_array();
            for (int k = 0; top && k < lp->n_top; k++)
                json_array_append_new(top, logprob_entry(r, lp->top_logprobs[k], lp->top_ids[k]));
            json_array_append_new(s->top_logprobs, top);
        }
    }
    /* An abort chunk made in the main process carries no counts: keep what came before. */
    if (c->prompt_tokens > 0)
        s->prompt_tokens = c->prompt_tokens;
    if (c->cached_tokens > 0)
        s->cached_tokens = c->cached_tokens;
    s->completion_tokens = c->completion_tokens > (int)s->n_ids ? c->completion_tokens : (int)s->n_ids;
    s->finish = c->finish_reason;
    if (c->matched_stop && !s->matched_stop)
        s->matched_stop = strdup(c->matched_stop);
    return CINFER_OK;
}

/* ---- preparing the prompts ---------------------------------------------------------- */
/* Tokenizes text prompts and checks every prompt against the vocabulary and the
 * context length. Returns 0 or -1 after replying. */
static int prepare_prompts(const struct http_request *req, struct native_generate_spec *spec)
{
    struct native_limits limits;
    struct cinfer_error err = {0};
    if (cinfer_native_engine_limits(req->ctx->engine, &limits, &err)) {
        cinfer_http_reply_engine_error(req->conn, &err);
        return -1;
    }
    const struct cinfer_tokenizer_ctx *t = req->ctx->tokenizer;
    for (size_t p = 0; p < spec->n_prompts; p++) {
        struct native_prompt *np = &spec->prompts[p];
        const char *field = np->text ? "text" : "input_ids";
        char where[48] = "";
        if (spec->batch)
            snprintf(where, sizeof where, " (prompt %zu)", p);
        if (np->text) {
            struct cinfer_token_ids ids = {0};
            if (t->ops->encode(t->tok, np->text, strlen(np->text), 1, &ids, &err)) {
                cinfer_token_ids_free(&ids);
                cinfer_http_reply_error(req->conn, 500, "internal_error", field, "tokenizing the prompt%s failed: %s",
                                        where,
                                        err.message);
                return -1;
            }
            np->ids = ids.ids;
            np->n_ids = ids.len;
            if (np->n_ids == 0)
                return cinfer_http_field_error(req, field, "the prompt%s tokenizes to no tokens; expected at least one",
                                               where);
        }
        for (size_t i = 0; limits.vocab_size > 0 && i < np->n_ids; i++)
            if (np->ids[i] >= limits.vocab_size)
                return cinfer_http_field_error(req, field,
                                               "token %zu%s: expected a token id in [0, %d) (the vocabulary), "
                                                           "found %d", i, where, limits.vocab_size, np->ids[i]);
        if (limits.max_request_len > 0 && np->n_ids >= (size_t)limits.max_request_len)
            return cinfer_http_field_error(req, field,
                                           "the prompt%s is %zu tokens, but the context length is %d tokens; a prompt "
                                           "may have at most %d tokens to leave room for output",
                                           where, np->n_ids, limits.max_request_len, limits.max_request_len - 1);
    }
    return 0;
}

/* Registers the rids: one entry per prompt, or one for the whole list when the client
 * gave a single rid for all of its prompts. Returns 0 or -1 after replying. */
static int register_rids(const struct http_request *req, struct run *r, const uint64_t *engine_ids)
{
    const struct native_generate_spec *spec = &r->spec;
    size_t n = (size_t)spec->n;
    int shared = spec->n_prompts > 1 && spec->prompts[0].rid && spec->prompts[0].rid == spec->prompts[1].rid;
    for (size_t p = 0; p < (shared ? 1 : spec->n_prompts); p++) {
        int rc = cinfer_native_rid_register(r->ctx->engine, r->rids[p], engine_ids + p * n, shared ? r->n_slots : n);
        if (rc == CINFER_ERR_STATE)
            return cinfer_http_field_error(req, "rid", "\"%s\" is already in flight; a rid names one request at a time",
                                           r->rids[p]);
        if (rc) {
            cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory registering rid %s",
                                    r->rids[p]);
            return -1;
        }
        r->rid_registered[p] = 1;
    }
    return 0;
}

/* Starts every generation and registers the rids. Returns 0 or -1 after replying. */
static int start_all(const struct http_request *req, struct run *r)
{
    const struct native_generate_spec *spec = &r->spec;
    r->n_slots = spec->n_prompts * (size_t)spec->n;
    r->slots = calloc(r->n_slots, sizeof *r->slots);
    r->rids = calloc(spec->n_prompts, sizeof *r->rids);
    r->rid_registered = calloc(spec->n_prompts, sizeof *r->rid_registered);
    uint64_t *engine_ids = calloc(r->n_slots, sizeof *engine_ids);
    if (!r->slots || !r->rids || !r->rid_registered || !engine_ids) {
        free(engine_ids);
        r->n_slots = 0;
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory starting %zu generations",
                                spec->n_prompts * (size_t)spec->n);
        return -1;
    }
    for (size_t p = 0; p < spec->n_prompts; p++) {
        if (spec->prompts[p].rid)
            snprintf(r->rids[p], NATIVE_RID_BYTES, "%s", spec->prompts[p].rid);
        else
            cinfer_native_rid_new(r->rids[p]);
        for (int c = 0; c < spec->n; c++) {
            size_t i = p * (size_t)spec->n + (size_t)c;
            struct slot *s = &r->slots[i];
            s->rid = r->rids[p];
            s->index = (int)i;
            if (spec->return_logprob) {
                s->token_logprobs = json_array();
                if (spec->top_logprobs_num > 0)
                    s->top_logprobs = json_array();
            }
            struct cinfer_generate_request g = {.input_ids = spec->prompts[p].ids,
                                                .n_input_ids = spec->prompts[p].n_ids,
                                                .sampling = spec->sampling};
            if (g.sampling.has_seed) /* choice c samples with seed + c, as cinfer_engine_generate_n */
                g.sampling.seed += (uint64_t)c;
            struct cinfer_error err = {0};
            if (cinfer_http_generation_start(r->ctx, r->conn, &g, &s->g, &err)) {
                free(engine_ids);
                cinfer_http_reply_engine_error(req->conn, &err);
                return -1;
            }
            engine_ids[i] = cinfer_http_generation_request_id(s->g);
        }
    }
    int rc = register_rids(req, r, engine_ids);
    free(engine_ids);
    return rc;
}

/* Waits for the slot's next chunk up to timeout_ms (-1: no limit) and absorbs it. */
static int step_for(struct run *r, struct slot *s, int timeout_ms, struct cinfer_error *err)
{
    struct cinfer_stream_chunk chunk;
    int rc = cinfer_http_generation_next_for(s->g, &chunk, timeout_ms, err);
    if (rc)
        return rc;
    rc = absorb(r, s, &chunk);
    if (rc)
        return cinfer_error_set(err, rc, "out of memory collecting the output of request %s", s->rid);
    return CINFER_OK;
}

/* ---- streaming ---------------------------------------------------------------------- */
static json_t *error_event(const struct cinfer_error *err)
{
    const char *type = "internal_error";
    cinfer_http_engine_error_status(err, &type);
    return json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", err->message, "type", type, "param", "code");
}

/* Generations of a list advance together in the engine, so their chunks arrive in the
 * same steps: wait (in slices) for the next unfinished one in turn, then pick up what
 * the others already have with a short wait each. Returns 0 with some slot unsent, 1
 * when all are finished and sent, or a step's error. */
#define STREAM_WAIT_MS 50
#define STREAM_PEEK_MS 1
static int advance(struct run *r, struct cinfer_error *err)
{
    for (;;) {
        int waiting = 0;
        for (size_t k = 0; k < r->n_slots; k++) {
            const struct slot *s = &r->slots[(r->cursor + k) % r->n_slots];
            if (s->unsent)
                return 0;
            waiting += s->finish == CINFER_FINISH_NONE;
        }
        if (!waiting)
            return 1;
        int got = 0;
        for (size_t k = 0; k < r->n_slots; k++) {
            struct slot *s = &r->slots[(r->cursor + k) % r->n_slots];
            if (s->finish != CINFER_FINISH_NONE)
                continue;
            int rc = step_for(r, s, r->n_slots == 1 ? -1 : got ? STREAM_PEEK_MS : STREAM_WAIT_MS, err);
            if (rc == CINFER_OK)
                s->unsent = got = 1;
            else if (rc != CINFER_ERR_TIMEOUT)
                return rc;
        }
        if (got)
            return 0;
    }
}

/* One event per call, taking the generations of a list in turn. */
static int stream_next(void *state, struct http_buffer *out)
{
    struct run *r = state;
    struct cinfer_error err = {0};
    int rc = advance(r, &err);
    if (rc == 1)
        return cinfer_http_sse_event(out, NULL) ? CINFER_ERR_NOMEM : 1;
    if (rc == CINFER_ERR_IO)
        return rc; /* the client has gone: the transport cuts, close() aborts */
    if (rc) {      /* the engine failed mid-stream: say so in-band, as SGLang does */
        if (cinfer_http_sse_event(out, error_event(&err)) || cinfer_http_sse_event(out, NULL))
            return CINFER_ERR_NOMEM;
        for (size_t i = 0; i < r->n_slots; i++) { /* nothing more to send */
            r->slots[i].unsent = 0;
            r->slots[i].finish = CINFER_FINISH_ERROR;
        }
        return 1;
    }
    for (size_t k = 0; k < r->n_slots; k++) {
        size_t i = (r->cursor + k) % r->n_slots;
        struct slot *s = &r->slots[i];
        if (!s->unsent)
            continue;
        s->unsent = 0;
        r->cursor = (i + 1) % r->n_slots;
        json_t *ev = slot_json(r, s);
        return !ev || cinfer_http_sse_event(out, ev) ? CINFER_ERR_NOMEM : 0;
    }
    return CINFER_ERR_INTERNAL; /* advance() said a slot was unsent */
}

static void stream_close(void *state)
{
    run_free(state);
}

/* ---- the handler ------------------------------------------------------------------- */
void cinfer_native_handle_generate(const struct http_request *req)
{
    struct run *r = calloc(1, sizeof *r);
    if (!r) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory");
        return;
    }
    r->arrival_s = now_s();
    r->ctx = req->ctx;
    r->conn = req->conn;
    r->body = cinfer_http_parse_json_object(req);
    if (!r->body) {
        free(r);
        return;
    }
    if (cinfer_native_generate_parse(req, r->body, &r->spec)) {
        json_decref(r->body);
        free(r);
        return;
    }
    if (prepare_prompts(req, &r->spec) || start_all(req, r)) {
        run_free(r);
        return;
    }
    /* Wait for every generation's first chunk before answering, so that a refusal
     * (queue full, engine down) is a status code rather than an event in a 200 stream. */
    for (size_t i = 0; i < r->n_slots; i++) {
        struct cinfer_error err = {0};
        if (step_for(r, &r->slots[i], -1, &err)) {
            cinfer_http_reply_engine_error(req->conn, &err);
            run_free(r);
            return;
        }
        r->slots[i].unsent = 1;
        if (!r->spec.stream)
            while (r->slots[i].finish == CINFER_FINISH_NONE)
                if (step_for(r, &r->slots[i], -1, &err)) {
                    cinfer_http_reply_engine_error(req->conn, &err);
                    run_free(r);
                    return;
                }
    }
    if (r->spec.stream) {
        cinfer_http_reply_sse(req->conn, (struct http_sse_source){.next = stream_next, .close = stream_close,
                              .state = r});
        return;
    }
    json_t *answer = NULL;
    if (r->spec.batch || r->spec.n > 1) {
        answer = json_array();
        for (size_t i = 0; answer && i < r->n_slots; i++)
            json_array_append_new(answer, slot_json(r, &r->slots[i]));
    } else {
        answer = slot_json(r, &r->slots[0]);
    }
    if (answer)
        cinfer_http_reply_json(req->conn, 200, answer);
    else
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory building the answer");
    run_free(r);
}
