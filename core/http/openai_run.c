/* Running an OpenAI request; see cinfer_openai_run.h. */
#include "http/openai_run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/output_parsers.h"
#include "cinfer/tokenizer.h"
#include "http/openai_response.h"

/* One choice: one engine request. */
struct openai_choice {
    int index;                    /* in the response: prompt * n + k, as OpenAI numbers them */
    size_t prompt;
    struct http_generation *gen;  /* NULL once finished */
    struct http_buffer text;      /* JSON answer: the whole text */
    json_t *logprobs;             /* JSON answer: chat's content array or the legacy object */
    size_t text_offset;           /* legacy logprobs: characters so far */
    enum cinfer_finish_reason finish;
    char *matched_stop;
    int32_t last_id;
    int prompt_tokens;
    int completion_tokens;
    int cached_tokens;            /* prompt tokens the prefix cache held */
    int role_sent;                /* chat stream: the {"role": "assistant"} delta went out */
    struct cinfer_reasoning_parser reasoning; /* chat: reasoning_content apart from content */
    struct cinfer_tool_parser tools;          /* chat: tool_calls out of the content */
    int echoed;                   /* completions stream with echo: the prompt went out */
};

struct openai_run {
    const struct http_server_ctx *ctx;
    struct openai_request r;
    char id[64];
    int64_t created;
    struct openai_choice *choices; /* (n_choices) */
    size_t n_choices;
    size_t next;                   /* stream: the choice to read next, round robin */
    struct http_buffer pending;    /* stream: events read before the reply began */
};

int cinfer_openai_vocab_size(const struct http_server_ctx *ctx)
{
    if (!ctx->tokenizer)
        return 0;
    struct cinfer_tokenizer_info info;
    ctx->tokenizer->ops->info(ctx->tokenizer->tok, &info);
    return (int)info.vocab_size;
}

int cinfer_openai_tokenize_prompt(const struct http_request *req, const char *text, size_t len, int add_special,
                                  const char *field, struct openai_prompt *prompt)
{
    const struct cinfer_tokenizer_ctx *tok = req->ctx->tokenizer;
    if (!tok) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "the server has no tokenizer for %s", field);
        return -1;
    }
    struct cinfer_token_ids ids = {0};
    struct cinfer_error err = {0};
    if (tok->ops->encode(tok->tok, text, len, add_special, &ids, &err)) {
        cinfer_token_ids_free(&ids);
        cinfer_http_reply_error(req->conn, 500, "internal_error", field, "tokenizing %s: %s", field, err.message);
        return -1;
    }
    if (ids.len == 0) {
        cinfer_token_ids_free(&ids);
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", field,
                                "%s: the prompt tokenizes to no tokens; expected at least one", field);
        return -1;
    }
    free(prompt->ids);
    prompt->ids = ids.ids;
    prompt->n_ids = ids.len;
    return 0;
}

static void run_free(struct openai_run *run)
{
    if (!run)
        return;
    for (size_t i = 0; i < run->n_choices; i++) {
        struct openai_choice *c = &run->choices[i];
        if (c->gen)
            cinfer_http_generation_finish(&c->gen);
        free(c->text.data);
        json_decref(c->logprobs);
        free(c->matched_stop);
        cinfer_reasoning_parser_free(&c->reasoning);
        cinfer_tool_parser_free(&c->tools);
    }
    free(run->choices);
    free(run->pending.data);
    cinfer_openai_request_free(&run->r);
    free(run);
}

/* ---- JSON of choices and chunks --------------------------------------------------- */

/* echo: the prompt as text, a token-id prompt decoded; appended to out. */
static int append_prompt_text(const struct openai_run *run, size_t p, struct http_buffer *out)
{
    const struct openai_prompt *pr = &run->r.prompts[p];
    if (pr->text)
        return cinfer_http_buffer_append(out, pr->text, pr->text_len);
    const struct cinfer_tokenizer_ctx *tok = run->ctx->tokenizer;
    char *text = NULL;
    size_t len = 0;
    struct cinfer_error err = {0};
    int rc = tok ? tok->ops->decode(tok->tok, pr->ids, pr->n_ids, run->r.sampling.skip_special_tokens, &text, &len,
                                    &err)
                 : CINFER_ERR_STATE;
    if (rc == CINFER_OK)
        rc = cinfer_http_buffer_append(out, text, len);
    free(text);
    return rc;
}

static json_t *matched_stop_json(const struct openai_choice *c)
{
    if (c->finish == CINFER_FINISH_STOP_STRING && c->matched_stop)
        return json_string(c->matched_stop);
    if (c->finish == CINFER_FINISH_STOP_TOKEN)
        return json_integer(c->last_id);
    return json_null();
}

static json_t *finish_json(const struct openai_choice *c)
{
    const char *why = cinfer_openai_finish_reason(c->finish);
    if (why && c->tools.n_calls > 0 && !strcmp(why, "stop"))
        why = "tool_calls"; /* as OpenAI says when the turn ended in calls */
    return why ? json_string(why) : json_null();
}

static int parses_output(const struct openai_run *run)
{
    return run->r.kind == OPENAI_CHAT && (run->r.reasoning_format || run->r.tool_format);
}

/* Runs text through the choice's reasoning and tool parsers: reasoning and content
 * pieces (arrays of strings) and complete calls. */
static int parse_output(struct openai_choice *c, const char *text, size_t len, int last, json_t *reasoning,
                        json_t *content, json_t *calls)
{
    json_t *answer = json_array();
    if (!answer || cinfer_reasoning_parser_feed(&c->reasoning, text, len, last, reasoning, answer)) {
        json_decref(answer);
        return CINFER_ERR_NOMEM;
    }
    size_t n = json_array_size(answer);
    for (size_t i = 0; i < n; i++) {
        const json_t *piece = json_array_get(answer, i);
        if (cinfer_tool_parser_feed(&c->tools, json_string_value(piece), json_string_length(piece),
                                    last && i + 1 == n, content, calls)) {
            json_decref(answer);
            return CINFER_ERR_NOMEM;
        }
    }
    if (n == 0 && last && cinfer_tool_parser_feed(&c->tools, "", 0, 1, content, calls)) {
        json_decref(answer);
        return CINFER_ERR_NOMEM;
    }
    json_decref(answer);
    return CINFER_OK;
}

/* The pieces joined, or NULL when there are none. */
static json_t *joined(const json_t *pieces)
{
    size_t n = json_array_size(pieces), total = 0;
    if (n == 0)
        return NULL;
    for (size_t i = 0; i < n; i++)
        total += json_string_length(json_array_get(pieces, i));
    char *s = malloc(total + 1);
    if (!s)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(pieces, i);
        memcpy(s + at, json_string_value(p), json_string_length(p));
        at += json_string_length(p);
    }
    json_t *v = json_stringn(s, total);
    free(s);
    return v;
}

static json_t *envelope(const struct openai_run *run, const char *object, json_t *choices)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", run->id, "object", object, "created",
                     (json_int_t)run->created, "model", run->ctx->model_name ? run->ctx->model_name : "", "choices",
                     choices);
}

static void usage_totals(const struct openai_run *run, long long *prompt, long long *completion, long long *cached)
{
    *prompt = *completion = *cached = 0;
    for (size_t i = 0; i < run->n_choices; i++) {
        const struct openai_choice *c = &run->choices[i];
        if (c->index % run->r.n == 0) { /* each prompt counts once, however many choices */
            *prompt += c->prompt_tokens;
            *cached += c->cached_tokens;
        }
        *completion += c->completion_tokens;
    }
}

/* The whole answer (no streaming). */
static json_t *response_json(struct openai_run *run)
{
    int chat = run->r.kind == OPENAI_CHAT;
    json_t *choices = json_array();
    for (size_t i = 0; choices && i < run->n_choices; i++) {
        struct openai_choice *c = &run->choices[i];
        json_t *text = json_stringn(c->text.data ? c->text.data : "", c->text.len);
        json_t *reasoning = NULL, *calls = NULL;
        if (parses_output(run)) { /* the message read back: reasoning, content, tool calls */
            json_t *rs = json_array(), *cs = json_array();
            calls = json_array();
            if (!rs || !cs || !calls ||
                parse_output(c, c->text.data ? c->text.data : "", c->text.len, 1, rs, cs, calls)) {
                json_decref(rs);
                json_decref(cs);
                json_decref(calls);
                json_decref(text);
                json_decref(choices);
                return NULL;
            }
            json_decref(text);
            text = joined(cs);
            if (!text)
                text = json_array_size(calls) ? json_null() : json_string("");
            reasoning = joined(rs);
            json_decref(rs);
            json_decref(cs);
            json_t *whole = cinfer_tool_calls_merge(calls); /* the streamed deltas joined */
            json_decref(calls);
            calls = whole;
            if (calls && json_array_size(calls) == 0) {
                json_decref(calls);
                calls = NULL;
            }
        }
        json_t *logprobs = c->logprobs ? json_incref(c->logprobs) : json_null();
        if (chat && c->logprobs)
            logprobs = json_pack("{s:o, s:n}", "content", logprobs, "refusal");
        json_t *choice =
            chat ? json_pack("{s:I, s:{s:s, s:o}, s:o, s:o, s:o}", "index", (json_int_t)c->index, "message", "role",
                             "assistant", "content", text, "logprobs", logprobs, "finish_reason", finish_json(c),
                             "matched_stop", matched_stop_json(c))
                 : json_pack("{s:I, s:o, s:o, s:o, s:o}", "index", (json_int_t)c->index, "text", text, "logprobs",
                             logprobs, "finish_reason", finish_json(c), "matched_stop", matched_stop_json(c));
        if (choice && chat && reasoning)
            json_object_set_new(json_object_get(choice, "message"), "reasoning_content", reasoning);
        else
            json_decref(reasoning);
        if (choice && chat && calls)
            json_object_set_new(json_object_get(choice, "message"), "tool_calls", calls);
        else
            json_decref(calls);
        if (!choice || json_array_append_new(choices, choice)) {
            json_decref(choices);
            return NULL;
        }
    }
    long long prompt, completion, cached;
    usage_totals(run, &prompt, &completion, &cached);
    json_t *out = envelope(run, chat ? "chat.completion" : "text_completion", choices);
    if (out && json_object_set_new(out, "usage", cinfer_openai_usage(prompt, completion, cached))) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* One streamed chunk of choice c: its new text, logprobs and, on the last, the finish. */
static int chunk_event(const struct openai_run *run, struct openai_choice *c, const struct cinfer_stream_chunk *ch,
                       struct http_buffer *out)
{
    int chat = run->r.kind == OPENAI_CHAT;
    json_t *logprobs = json_null();
    if (run->r.want_logprobs && ch->logprobs && ch->n_logprobs) {
        if (chat) {
            json_t *content = json_array();
            if (!content || cinfer_openai_chat_logprobs_append(content, run->ctx->tokenizer, ch->logprobs,
                                                               ch->n_logprobs)) {
                json_decref(content);
                return CINFER_ERR_NOMEM;
            }
            logprobs = json_pack("{s:o, s:n}", "content", content, "refusal");
        } else {
            logprobs = cinfer_openai_legacy_logprobs_new();
            if (!logprobs || cinfer_openai_legacy_logprobs_append(logprobs, run->ctx->tokenizer, ch->logprobs,
                                                                  ch->n_logprobs, &c->text_offset)) {
                json_decref(logprobs);
                return CINFER_ERR_NOMEM;
            }
        }
    }
    int last = ch->finish_reason != CINFER_FINISH_NONE;
    int echo_now = run->r.echo && !c->echoed;
    if (!last && ch->text_len == 0 && json_is_null(logprobs) && !echo_now)
        return CINFER_OK; /* nothing to say yet (a character still being spelled) */
    struct http_buffer echoed = {0}; /* the prompt, then this chunk's text */
    if (echo_now) {
        c->echoed = 1;
        if (append_prompt_text(run, c->prompt, &echoed) || cinfer_http_buffer_append(&echoed, ch->text, ch->text_len)) {
            free(echoed.data);
            json_decref(logprobs);
            return CINFER_ERR_NOMEM;
        }
    }
    const char *text = echo_now ? echoed.data : ch->text;
    size_t text_len = echo_now ? echoed.len : ch->text_len;
    json_t *choice;
    if (chat && parses_output(run)) {
        /* reasoning_content and content apart; each tool call as OpenAI streams one:
         * its id, type and name with empty arguments, then the arguments */
        json_t *rs = json_array(), *cs = json_array(), *calls = json_array();
        if (!rs || !cs || !calls || parse_output(c, ch->text, ch->text_len, last, rs, cs, calls)) {
            json_decref(rs);
            json_decref(cs);
            json_decref(calls);
            json_decref(logprobs);
            return CINFER_ERR_NOMEM;
        }
        size_t k;
        json_t *d;
        int rc = CINFER_OK;
        json_array_foreach(calls, k, d) { /* each delta its own event, as OpenAI sends them */
            json_t *one = json_pack("{s:I, s:{s:[O]}, s:n, s:n}", "index", (json_int_t)c->index, "delta",
                                    "tool_calls", d, "logprobs", "finish_reason");
            json_t *ev = one ? envelope(run, "chat.completion.chunk", json_pack("[o]", one)) : NULL;
            if (!ev || cinfer_http_sse_event(out, ev))
                rc = CINFER_ERR_NOMEM;
        }
        json_t *delta = json_object();
        json_t *r = joined(rs), *t = joined(cs);
        if (delta && r)
            json_object_set_new(delta, "reasoning_content", r);
        else
            json_decref(r);
        if (delta && t)
            json_object_set_new(delta, "content", t);
        else
            json_decref(t);
        json_decref(rs);
        json_decref(cs);
        json_decref(calls);
        free(echoed.data);
        if (rc)
            return rc;
        if (!last && json_object_size(delta) == 0 && json_is_null(logprobs)) {
            json_decref(delta);
            return CINFER_OK;
        }
        choice = json_pack("{s:I, s:o, s:o, s:o}", "index", (json_int_t)c->index, "delta", delta, "logprobs", logprobs,
                           "finish_reason", finish_json(c));
        if (choice && last)
            json_object_set_new(choice, "matched_stop", matched_stop_json(c));
        json_t *event = choice ? envelope(run, "chat.completion.chunk", json_pack("[o]", choice)) : NULL;
        return event ? cinfer_http_sse_event(out, event) : CINFER_ERR_NOMEM;
    }
    if (chat) {
        json_t *delta = json_object();
        if (delta && ch->text_len)
            json_object_set_new(delta, "content", json_stringn(ch->text, ch->text_len));
        choice = json_pack("{s:I, s:o, s:o, s:o}", "index", (json_int_t)c->index, "delta", delta, "logprobs", logprobs,
                           "finish_reason", finish_json(c));
    } else {
        choice = json_pack("{s:I, s:s#, s:o, s:o}", "index", (json_int_t)c->index, "text", text ? text : "",
                           (int)text_len, "logprobs", logprobs, "finish_reason", finish_json(c));
    }
    free(echoed.data);
    if (choice && last)
        json_object_set_new(choice, "matched_stop", matched_stop_json(c));
    json_t *event = choice ? envelope(run, chat ? "chat.completion.chunk" : "text_completion", json_pack("[o]", choice))
                           : NULL;
    return event ? cinfer_http_sse_event(out, event) : CINFER_ERR_NOMEM;
}

/* chat's first chunk of a choice: the assistant's role, empty content */
static int role_event(const struct openai_run *run, struct openai_choice *c, struct http_buffer *out)
{
    c->role_sent = 1;
    json_t *choice = json_pack("{s:I, s:{s:s, s:s}, s:n, s:n}", "index", (json_int_t)c->index, "delta", "role",
                               "assistant", "content", "", "logprobs", "finish_reason");
    json_t *event = choice ? envelope(run, "chat.completion.chunk", json_pack("[o]", choice)) : NULL;
    return event ? cinfer_http_sse_event(out, event) : CINFER_ERR_NOMEM;
}

/* Takes in one chunk of choice c: into its totals, and into events when streaming
 * (out != NULL) or its whole text and logprobs when not. */
static int take_chunk(struct openai_run *run, struct openai_choice *c, const struct cinfer_stream_chunk *ch,
                      struct http_buffer *out)
{
    if (ch->prompt_tokens > 0)
        c->prompt_tokens = ch->prompt_tokens;
    if (ch->completion_tokens > c->completion_tokens)
        c->completion_tokens = ch->completion_tokens;
    if (ch->cached_tokens > c->cached_tokens)
        c->cached_tokens = ch->cached_tokens;
    if (ch->n_ids)
        c->last_id = ch->ids[ch->n_ids - 1];
    if (ch->finish_reason != CINFER_FINISH_NONE) {
        c->finish = ch->finish_reason;
        if (ch->matched_stop && !(c->matched_stop = strdup(ch->matched_stop)))
            return CINFER_ERR_NOMEM;
    }
    int rc = CINFER_OK;
    if (out) {
        if (run->r.kind == OPENAI_CHAT && !c->role_sent)
            rc = role_event(run, c, out);
        if (rc == CINFER_OK)
            rc = chunk_event(run, c, ch, out);
    } else {
        rc = cinfer_http_buffer_append(&c->text, ch->text, ch->text_len);
        if (rc == CINFER_OK && run->r.want_logprobs && ch->logprobs && ch->n_logprobs) {
            if (!c->logprobs)
                c->logprobs = run->r.kind == OPENAI_CHAT ? json_array() : cinfer_openai_legacy_logprobs_new();
            if (!c->logprobs)
                rc = CINFER_ERR_NOMEM;
            else if (run->r.kind == OPENAI_CHAT)
                rc = cinfer_openai_chat_logprobs_append(c->logprobs, run->ctx->tokenizer, ch->logprobs, ch->n_logprobs);
            else
                rc = cinfer_openai_legacy_logprobs_append(c->logprobs, run->ctx->tokenizer, ch->logprobs,
                                                          ch->n_logprobs,
                                                          &c->text_offset);
        }
    }
    if (c->finish != CINFER_FINISH_NONE)
        cinfer_http_generation_finish(&c->gen); /* free the engine's side now, not at the end */
    return rc;
}

/* ---- starting -------------------------------------------------------------------- */

static int start_all(const struct http_request *req, struct openai_run *run, struct cinfer_error *err)
{
    const struct openai_request *r = &run->r;
    run->n_choices = r->n_prompts * (size_t)r->n;
    run->choices = calloc(run->n_choices, sizeof *run->choices);
    if (!run->choices)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %zu choices", run->n_choices);
    /* every choice is sent before any is read, so they run in one batch */
    for (size_t p = 0; p < r->n_prompts; p++) {
        for (int k = 0; k < r->n; k++) {
            struct openai_choice *c = &run->choices[p * (size_t)r->n + (size_t)k];
            c->index = (int)(p * (size_t)r->n + (size_t)k);
            char id_prefix[48];
            snprintf(id_prefix, sizeof id_prefix, "call_%" PRIx64 "_%d_", (uint64_t)run->created, c->index);
            cinfer_reasoning_parser_init(&c->reasoning, (enum cinfer_reasoning_format)r->reasoning_format);
            cinfer_tool_parser_init(&c->tools, (enum cinfer_tool_format)r->tool_format, r->tools_forced, id_prefix);
            c->prompt = p;
            c->prompt_tokens = (int)r->prompts[p].n_ids;
            if (r->echo && !r->stream && append_prompt_text(run, p, &c->text))
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory echoing prompt %zu", p);
            struct cinfer_generate_request g = {.input_ids = r->prompts[p].ids,
                                                .n_input_ids = r->prompts[p].n_ids,
                                                .sampling = r->sampling,
                                                .n = 1};
            if (r->sampling.has_seed) /* choice k alone with seed + k gives the same output */
                g.sampling.seed = r->sampling.seed + (uint64_t)k;
            int rc = cinfer_http_generation_start(run->ctx, req->conn, &g, &c->gen, err);
            if (rc)
                return rc;
        }
    }
    uint64_t rid = cinfer_http_generation_request_id(run->choices[0].gen);
    snprintf(run->id, sizeof run->id, "%s-%" PRIx64 "%08" PRIx64, r->kind == OPENAI_CHAT ? "chatcmpl" : "cmpl",
             (uint64_t)run->created, rid);
    return CINFER_OK;
}

/* ---- streaming ------------------------------------------------------------------- */

/* An error after the headers went out: OpenAI's error object as an event, with the
 * status the request would have had as its code. */
static int error_event(struct http_buffer *out, const struct cinfer_error *err)
{
    const char *type = "internal_error";
    int status = cinfer_http_engine_error_status(err, &type);
    json_t *e = json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", err->message, "type", type, "param", "code",
                          status);
    return e ? cinfer_http_sse_event(out, e) : CINFER_ERR_NOMEM;
}

static int sse_next(void *state, struct http_buffer *out)
{
    struct openai_run *run = state;
    if (run->pending.len) {
        int rc = cinfer_http_buffer_append(out, run->pending.data, run->pending.len);
        run->pending.len = 0;
        return rc;
    }
    struct openai_choice *c = NULL;
    for (size_t tried = 0; tried < run->n_choices && !c; tried++) {
        struct openai_choice *x = &run->choices[(run->next + tried) % run->n_choices];
        if (x->finish == CINFER_FINISH_NONE)
            c = x;
    }
    if (!c) {
        if (run->r.include_usage) {
            long long prompt, completion, cached;
            usage_totals(run, &prompt, &completion, &cached);
            json_t *chunk = envelope(run, run->r.kind == OPENAI_CHAT ? "chat.completion.chunk" : "text_completion",
                                     json_array());
            if (!chunk || json_object_set_new(chunk, "usage", cinfer_openai_usage(prompt, completion, cached)) ||
                cinfer_http_sse_event(out, chunk))
                return CINFER_ERR_NOMEM;
        }
        return cinfer_http_sse_event(out, NULL) ? CINFER_ERR_NOMEM : 1;
    }
    run->next = (size_t)(c - run->choices + 1) % run->n_choices;
    struct cinfer_stream_chunk ch;
    struct cinfer_error err = {0};
    int rc = cinfer_http_generation_next(c->gen, &ch, &err);
    if (rc == CINFER_ERR_IO)
        return rc; /* the client left; close() cleans up */
    if (rc) {
        /* headers are out: the error goes in the stream, as OpenAI's API sends one */
        if (error_event(out, &err) || cinfer_http_sse_event(out, NULL))
            return CINFER_ERR_NOMEM;
        return 1;
    }
    return take_chunk(run, c, &ch, out);
}

static void sse_close(void *state)
{
    run_free(state);
}

/* ---- the request ----------------------------------------------------------------- */

void cinfer_openai_run(const struct http_request *req, struct openai_request *r)
{
    struct openai_run *run = calloc(1, sizeof *run);
    if (!run) {
        cinfer_openai_request_free(r);
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for the request");
        return;
    }
    run->ctx = req->ctx;
    run->r = *r;
    memset(r, 0, sizeof *r);
    run->created = (int64_t)time(NULL);
    struct cinfer_error err = {0};
    int rc = start_all(req, run, &err);
    /* read until every choice finished (JSON answer), or each choice's first chunk
     * (streaming): a refusal (prompt too long, queue full) then still gets its status */
    for (size_t i = 0; rc == CINFER_OK && i < run->n_choices; i++) {
        struct openai_choice *c = &run->choices[i];
        do {
            struct cinfer_stream_chunk ch;
            rc = cinfer_http_generation_next(c->gen, &ch, &err);
            if (rc == CINFER_OK)
                rc = take_chunk(run, c, &ch, run->r.stream ? &run->pending : NULL);
        } while (rc == CINFER_OK && !run->r.stream && c->finish == CINFER_FINISH_NONE);
    }
    if (rc) { /* CINFER_ERR_IO: the client is gone or the server stopping; say so anyway */
        if (rc == CINFER_ERR_NOMEM && !err.message[0])
            cinfer_error_set(&err, rc, "out of memory building the response");
        run_free(run);
        cinfer_http_reply_engine_error(req->conn, &err);
        return;
    }
    if (run->r.stream) {
        cinfer_http_reply_sse(req->conn, (struct http_sse_source){.next = sse_next, .close = sse_close, .state = run});
        return;
    }
    json_t *body = response_json(run);
    run_free(run);
    if (body)
        cinfer_http_reply_json(req->conn, 200, body);
    else
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory building the response");
}
