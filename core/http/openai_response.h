/* http/openai_response.h — the JSON pieces of OpenAI's responses: finish reasons,
 * usage, and logprobs in both shapes (chat's {content: [{token, logprob, bytes,
 * top_logprobs}]} and the legacy completions' {tokens, token_logprobs, top_logprobs,
 * text_offset}). */
#ifndef CINFER_HTTP_OPENAI_RESPONSE_H
#define CINFER_HTTP_OPENAI_RESPONSE_H

#include <stddef.h>

#include <jansson.h>

#include "cinfer/engine.h"

/* "stop" (a stop token or string), "length", "abort"; NULL while unfinished. */
const char *cinfer_openai_finish_reason(enum cinfer_finish_reason r);

/* {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
 * {"cached_tokens"}}: cached_tokens are prompt tokens the prefix cache held. */
json_t *cinfer_openai_usage(long long prompt_tokens, long long completion_tokens, long long cached_tokens);

/* A logprob as JSON: -inf (an impossible token) becomes -9999.0, as OpenAI's API
 * shows one. */
json_t *cinfer_openai_logprob_value(float logprob);

/* Appends one entry per token of lp[0..n) to content (chat's logprobs.content). */
int cinfer_openai_chat_logprobs_append(json_t *content, const struct cinfer_tokenizer_ctx *tok,
                                       const struct cinfer_token_logprob *lp, size_t n);

/* {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []} */
json_t *cinfer_openai_legacy_logprobs_new(void);
/* Appends lp[0..n) to a legacy logprobs object; *text_offset (characters of the
 * choice's text before the first token) advances by each token's characters. */
int cinfer_openai_legacy_logprobs_append(json_t *obj, const struct cinfer_tokenizer_ctx *tok,
                                         const struct cinfer_token_logprob *lp, size_t n, size_t *text_offset);

#endif
