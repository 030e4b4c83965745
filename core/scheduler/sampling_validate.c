/* Ranges as OpenAI's API and SGLang's SamplingParams.verify() state them; where the
 * two differ, the one a sampler can honour (a repetition penalty of 0 would divide by
 * zero, so it must be above 0). */
#include "scheduler/sampling_validate.h"

#include <math.h>
#include <string.h>

static int in_closed(float v, float lo, float hi) { return v >= lo && v <= hi; } /* false for NaN */

static int check_token_id(const char *what, int index, int32_t id, int vocab_size, struct cinfer_error *err)
{
    if (id < 0)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "%s[%d] %d: expected a token id of 0 or more", what, index,
                                (int)id);
    if (vocab_size > 0 && id >= vocab_size)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "%s[%d] %d: expected a token id in [0, %d) (the vocabulary)",
                                what, index, (int)id, vocab_size);
    return CINFER_OK;
}

static int check_stops(const struct cinfer_sampling_params *p, int vocab_size, struct cinfer_error *err)
{
    if (p->n_stop < 0 || p->n_stop > CINFER_MAX_STOP_STRINGS)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "stop: %d strings, expected 0 to %d", p->n_stop,
                                CINFER_MAX_STOP_STRINGS);
    for (int i = 0; i < p->n_stop; i++) {
        if (!p->stop[i] || !p->stop[i][0])
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "stop[%d] is %s: expected a string of 1 to %d bytes", i,
                                    p->stop[i] ? "empty" : "NULL", CINFER_MAX_STOP_STRING_BYTES);
        size_t len = strnlen(p->stop[i], CINFER_MAX_STOP_STRING_BYTES + 1);
        if (len > CINFER_MAX_STOP_STRING_BYTES)
            return cinfer_error_set(err, CINFER_ERR_RANGE, "stop[%d] is longer than %d bytes: expected 1 to %d bytes",
                                    i, CINFER_MAX_STOP_STRING_BYTES, CINFER_MAX_STOP_STRING_BYTES);
    }
    if (p->n_stop_token_ids < 0 || p->n_stop_token_ids > CINFER_MAX_STOP_TOKEN_IDS)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "stop_token_ids: %d ids, expected 0 to %d",
                                p->n_stop_token_ids, CINFER_MAX_STOP_TOKEN_IDS);
    for (int i = 0; i < p->n_stop_token_ids; i++) {
        int rc = check_token_id("stop_token_ids", i, p->stop_token_ids[i], vocab_size, err);
        if (rc)
            return rc;
    }
    return CINFER_OK;
}

static int check_logit_bias(const struct cinfer_sampling_params *p, int vocab_size, struct cinfer_error *err)
{
    if (p->n_logit_bias < 0 || p->n_logit_bias > CINFER_MAX_LOGIT_BIAS)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "logit_bias: %d entries, expected 0 to %d", p->n_logit_bias,
                                CINFER_MAX_LOGIT_BIAS);
    for (int i = 0; i < p->n_logit_bias; i++) {
        int rc = check_token_id("logit_bias", i, p->logit_bias_ids[i], vocab_size, err);
        if (rc)
            return rc;
        float v = p->logit_bias_values[i];
        if (!in_closed(v, -100.0f, 100.0f))
            return cinfer_error_set(err, CINFER_ERR_RANGE, "logit_bias for token %d: %g, expected a value in [-100, 100]",
                                    (int)p->logit_bias_ids[i], (double)v);
        for (int j = 0; j < i; j++) /* a map: one bias per token */
            if (p->logit_bias_ids[j] == p->logit_bias_ids[i])
                return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                        "logit_bias: token %d appears at entries %d and %d, expected once",
                                        (int)p->logit_bias_ids[i], j, i);
    }
    return CINFER_OK;
}

int cinfer_sampling_validate(const struct cinfer_sampling_params *p, int vocab_size, struct cinfer_error *err)
{
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return cinfer_error_set(err, CINFER_ERR_RANGE, "temperature %g: expected a finite value of 0 or more (0 is greedy)",
                                (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return cinfer_error_set(err, CINFER_ERR_RANGE, "top_p %g: expected a value in (0, 1] (1 is off)",
                                (double)p->top_p);
    if (p->top_k < -1)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "top_k %d: expected -1 or 0 (off) or 1 or more", p->top_k);
    if (!in_closed(p->min_p, 0.0f, 1.0f))
        return cinfer_error_set(err, CINFER_ERR_RANGE, "min_p %g: expected a value in [0, 1] (0 is off)",
                                (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f && p->repetition_penalty <= 2.0f))
        return cinfer_error_set(err, CINFER_ERR_RANGE, "repetition_penalty %g: expected a value in (0, 2] (1 is off)",
                                (double)p->repetition_penalty);
    if (!in_closed(p->frequency_penalty, -2.0f, 2.0f))
        return cinfer_error_set(err, CINFER_ERR_RANGE, "frequency_penalty %g: expected a value in [-2, 2] (0 is off)",
                                (double)p->frequency_penalty);
    if (!in_closed(p->presence_penalty, -2.0f, 2.0f))
        return cinfer_error_set(err, CINFER_ERR_RANGE, "presence_penalty %g: expected a value in [-2, 2] (0 is off)",
                                (double)p->presence_penalty);
    if (p->max_new_tokens < 0)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "max_new_tokens %d: expected 0 or more", p->max_new_tokens);
    if (p->min_new_tokens < 0 || p->min_new_tokens > p->max_new_tokens)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "min_new_tokens %d: expected a value in [0, %d] (max_new_tokens)",
                                p->min_new_tokens, p->max_new_tokens);
    int rc = check_stops(p, vocab_size, err);
    if (rc)
        return rc;
    rc = check_logit_bias(p, vocab_size, err);
    if (rc)
        return rc;
    if (p->top_logprobs < 0 || p->top_logprobs > CINFER_MAX_TOP_LOGPROBS)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "top_logprobs %d: expected a value in [0, %d]", p->top_logprobs,
                                CINFER_MAX_TOP_LOGPROBS);
    if (p->top_logprobs > 0 && !p->logprobs)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "top_logprobs %d: expected 0 unless logprobs is on (it is off)", p->top_logprobs);
    return CINFER_OK;
}
