/* JSON pieces of OpenAI responses; see openai_response.h. */
#include "http/openai_response.h"

#include <math.h>

#include "http/openai_token_text.h"

const char *cinfer_openai_finish_reason(enum cinfer_finish_reason r)
{
    switch (r) {
    case CINFER_FINISH_NONE: return NULL;
    case CINFER_FINISH_LENGTH: return "length";
    case CINFER_FINISH_STOP_TOKEN:
    case CINFER_FINISH_STOP_STRING: return "stop";
    case CINFER_FINISH_ABORT: return "abort";
    case CINFER_FINISH_ERROR: return "error";
    }
    return "error";
}

json_t *cinfer_openai_usage(long long prompt_tokens, long long completion_tokens, long long cached_tokens)
{
    return json_pack("{sIsIsIs{sI}}", "prompt_tokens", (json_int_t)prompt_tokens, "completion_tokens",
                     (json_int_t)completion_tokens, "total_tokens", (json_int_t)(prompt_tokens + completion_tokens),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)cached_tokens);
}

json_t *cinfer_openai_logprob_value(float logprob)
{
    return json_real(isfinite(logprob) ? (double)logprob : -9999.0);
}

/* {"token": ..., "logprob": ..., "bytes": [...]} */
static json_t *chat_token(const struct cinfer_tokenizer_ctx *tok, int32_t id, float logprob)
{
    char bytes[OPENAI_TOKEN_MAX_BYTES];
    size_t len;
    cinfer_openai_token_bytes(tok, id, bytes, &len);
    return json_pack("{sososo}", "token", cinfer_openai_token_string(bytes, len), "logprob",
                     cinfer_openai_logprob_value(logprob),
                     "bytes", cinfer_openai_token_byte_array(bytes, len));
}

int cinfer_openai_chat_logprobs_append(json_t *content, const struct cinfer_tokenizer_ctx *tok,
                                       const struct cinfer_token_logprob *lp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_t *entry = chat_token(tok, lp[i].token, lp[i].logprob);
        json_t *top = json_array();
        for (int k = 0; top && k < lp[i].n_top; k++)
            json_array_append_new(top, chat_token(tok, lp[i].top_ids[k], lp[i].top_logprobs[k]));
        if (!entry || !top || json_object_set_new(entry, "top_logprobs", top) ||
            json_array_append_new(content, entry)) {
            json_decref(entry);
            return CINFER_ERR_NOMEM;
        }
    }
    return CINFER_OK;
}

json_t *cinfer_openai_legacy_logprobs_new(void)
{
    return json_pack("{s[]s[]s[]s[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

int cinfer_openai_legacy_logprobs_append(json_t *obj, const struct cinfer_tokenizer_ctx *tok,
                                         const struct cinfer_token_logprob *lp, size_t n, size_t *text_offset)
{
    json_t *tokens = json_object_get(obj, "tokens"), *values = json_object_get(obj, "token_logprobs");
    json_t *tops = json_object_get(obj, "top_logprobs"), *offsets = json_object_get(obj, "text_offset");
    for (size_t i = 0; i < n; i++) {
        char bytes[OPENAI_TOKEN_MAX_BYTES];
        size_t len;
        cinfer_openai_token_bytes(tok, lp[i].token, bytes, &len);
        json_t *text = cinfer_openai_token_string(bytes, len);
        json_t *top = json_object();
        if (!text || !top) {
            json_decref(text);
            json_decref(top);
            return CINFER_ERR_NOMEM;
        }
        for (int k = 0; k < lp[i].n_top; k++) {
            char alt[OPENAI_TOKEN_MAX_BYTES];
            size_t alt_len;
            cinfer_openai_token_bytes(tok, lp[i].top_ids[k], alt, &alt_len);
            json_t *key = cinfer_openai_token_string(alt, alt_len);
            /* two ids that print alike share a key: the likelier (earlier) one stays */
            if (key && !json_object_get(top, json_string_value(key)))
                json_object_set_new(top, json_string_value(key), cinfer_openai_logprob_value(lp[i].top_logprobs[k]));
            json_decref(key);
        }
        /* OpenAI always reports the sampled token too: up to logprobs + 1 entries */
        if (!json_object_get(top, json_string_value(text)))
            json_object_set_new(top, json_string_value(text), cinfer_openai_logprob_value(lp[i].logprob));
        size_t chars = utf8_chars(json_string_value(text));
        if (json_array_append_new(tokens, text) || json_array_append_new(values,
                                                                         cinfer_openai_logprob_value(lp[i].logprob)) ||
            json_array_append_new(tops, top) || json_array_append_new(offsets, json_integer((json_int_t)*text_offset)))
            return CINFER_ERR_NOMEM;
        *text_offset += chars;
    }
    return CINFER_OK;
}
