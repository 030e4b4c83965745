/* http/openai_request.h — the body of an OpenAI request (/v1/completions or
 * /v1/chat/completions) read into engine terms: sampling parameters, prompts (text or
 * token ids) or chat messages, and the response options (n, stream, logprobs).
 *
 * Reading needs no live connection: a bad field is answered through the typed field
 * readers (cinfer_http_reply_error on req->conn), so a test or fuzz target that supplies its
 * own cinfer_http_reply_error drives it with any bytes. */
#ifndef CINFER_HTTP_OPENAI_REQUEST_H
#define CINFER_HTTP_OPENAI_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cinfer/engine.h"
#include "http/http_server.h"

enum openai_kind {
    OPENAI_COMPLETIONS = 0,
    OPENAI_CHAT = 1,
};

/* Prompts of one completions request at most (an array of prompts), and engine
 * requests (prompts x n) at most. */
#define OPENAI_MAX_PROMPTS 256
#define OPENAI_MAX_GENERATIONS 512

/* One prompt: text (borrowed from the body, may hold NUL) or token ids (owned); a
 * text prompt keeps its text once tokenized (for echo). */
struct openai_prompt {
    const char *text;
    size_t text_len;
    int32_t *ids;
    size_t n_ids;
};

struct openai_request {
    enum openai_kind kind;
    json_t *body;                          /* owned; the strings below point into it */
    struct cinfer_sampling_params sampling;
    int n;                                 /* choices per prompt, 1..CINFER_MAX_CHOICES */
    int stream;
    int include_usage;                     /* stream_options.include_usage */
    /* completions: logprobs 0..5 as legacy {tokens, token_logprobs, top_logprobs,
     * text_offset} (want_logprobs set); chat: logprobs true plus top_logprobs 0..20 */
    int want_logprobs;
    int echo;                              /* completions: the prompt's text before each choice's text */
    /* completions */
    struct openai_prompt *prompts;         /* (n_prompts) */
    size_t n_prompts;
    /* chat: the template's variables (messages with text parts joined, roles mapped,
     * tools, add_generation_prompt, chat_template_kwargs merged in); owned */
    json_t *template_context;
    int continue_final_message;            /* cut the rendering after the last message */
    char *owned_constraint;                /* sampling.json_schema when made here (malloc'd) */
    /* chat: how the output is read back (chat/output_parsers.h) */
    int tool_format;                       /* enum cinfer_tool_format; NONE: tool calls stay text */
    int tools_forced;                      /* tool_choice required or a named function */
    int reasoning_format;                  /* enum cinfer_reasoning_format */
    char *tool_grammar;                    /* sampling.ebnf for a forced tool call (malloc'd) */
    char *reasoning_grammar;               /* sampling.ebnf: a constraint after the reasoning (malloc'd) */
};

/* Reads body (the reference is stolen, also on failure) into *out. Returns 0, or -1
 * after replying 400/404 (the handler then just returns). vocab_size > 0 bounds
 * prompt token ids. */
int cinfer_openai_request_parse(const struct http_request *req, json_t *body, enum openai_kind kind, int vocab_size,
                                struct openai_request *out);
void cinfer_openai_request_free(struct openai_request *r);

#endif
