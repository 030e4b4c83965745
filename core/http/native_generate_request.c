/* The body of POST /generate, read as SGLang's GenerateReqInput and SamplingParams:
 * text or input_ids (one prompt or a list), sampling_params, stream, return_logprob,
 * top_logprobs_num, return_text_in_logprobs, rid. Every refusal is a 400 naming the
 * field; unknown sampling parameters are refused as SGLang's SamplingParams(**d)
 * refuses them, unknown top-level fields are ignored as its request model does. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "http/native_api.h"
#include "http/request_fields.h"
#include "http/sampling_fields.h"

/* Sampling parameters SGLang defines that cinfer cannot honour: refused by name rather
 * than silently ignored (constrained decoding changes what comes out). */
static const char *const unsupported_sampling[] = {"structural_tag", "stop_regex", NULL};
/* Accepted and without effect here: spacing of special tokens in the text (cinfer's
 * detokenizer has one way), the streaming interval (every step streams), and the
 * custom logit processor's parameters (cinfer has none). */
static const char *const ignored_sampling[] = {"spaces_between_special_tokens", "stream_interval", "custom_params",
                                               NULL};
static const char *const known_sampling[] = {
    "max_new_tokens", "min_new_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
    "frequency_penalty", "presence_penalty", "stop", "stop_token_ids", "ignore_eos", "skip_special_tokens",
    "no_stop_trim", "n", "sampling_seed", "seed", "logit_bias", "json_schema", "regex", "ebnf", NULL};

static int in_list(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (strcmp(*list, key) == 0)
            return 1;
    return 0;
}

/* A list of token ids: each an integer in [0, INT32_MAX]. */
static int read_ids(const struct http_request *req, const char *field, const json_t *arr, int32_t **out,
                    size_t *n_out)
{
    size_t n = json_array_size(arr);
    if (n == 0)
        return cinfer_http_field_error(req, field, "expected a non-empty list of token ids, found an empty list");
    int32_t *ids = malloc(n * sizeof *ids);
    if (!ids) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory reading %zu token ids of %s", n,
                                field);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            free(ids);
            if (json_is_integer(v))
                return cinfer_http_field_error(req, field, "item %zu: expected a token id in [0, %d], found %lld", i,
                                               INT32_MAX, (long long)json_integer_value(v));
            return cinfer_http_field_error(req, field, "item %zu: expected a token id (an integer), found %s", i,
                                           cinfer_http_json_type_words(v));
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    *out = ids;
    *n_out = n;
    return 0;
}

static int alloc_prompts(const struct http_request *req, struct native_generate_spec *spec, size_t n)
{
    spec->prompts = calloc(n, sizeof *spec->prompts);
    if (!spec->prompts) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for %zu prompts", n);
        return -1;
    }
    spec->n_prompts = n;
    return 0;
}

/* text: a string or a list of strings; input_ids: a list of ids or a list of lists. */
static int read_prompts(const struct http_request *req, const json_t *body, struct native_generate_spec *spec)
{
    const json_t *text = json_object_get(body, "text");
    const json_t *ids = json_object_get(body, "input_ids");
    if (text && json_is_null(text))
        text = NULL;
    if (ids && json_is_null(ids))
        ids = NULL;
    if (json_object_get(body, "input_embeds") && !json_is_null(json_object_get(body, "input_embeds")))
        return cinfer_http_field_error(req, "input_embeds", "not supported by cinfer: give text or input_ids");
    if (!text == !ids)
        return cinfer_http_field_error(req, text ? "input_ids" : "text",
                                       text ? "give either text or input_ids, not both"
                                     : "expected text (a string or a list of strings) or input_ids, found neither");
    if (text) {
        if (json_is_string(text)) {
            if (alloc_prompts(req, spec, 1))
                return -1;
            spec->prompts[0].text = json_string_value(text);
            return 0;
        }
        if (!json_is_array(text))
            return cinfer_http_field_error(req, "text", "expected a string or a list of strings, found %s",
                                           cinfer_http_json_type_words(text));
        size_t n = json_array_size(text);
        if (n == 0 || n > NATIVE_MAX_GENERATIONS)
            return cinfer_http_field_error(req, "text", "expected a list of 1 to %d prompts, found %zu",
                                           NATIVE_MAX_GENERATIONS, n);
        if (alloc_prompts(req, spec, n))
            return -1;
        spec->batch = 1;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_array_get(text, i);
            if (!json_is_string(v))
                return cinfer_http_field_error(req, "text", "item %zu: expected a string, found %s", i,
                                               cinfer_http_json_type_words(v));
            spec->prompts[i].text = json_string_value(v);
        }
        return 0;
    }
    if (!json_is_array(ids))
        return cinfer_http_field_error(req, "input_ids",
                                       "expected a list of token ids or a list of such lists, found %s",
                                       cinfer_http_json_type_words(ids));
    if (json_array_size(ids) > 0 && json_is_array(json_array_get(ids, 0))) {
        size_t n = json_array_size(ids);
        if (n > NATIVE_MAX_GENERATIONS)
            return cinfer_http_field_error(req, "input_ids", "expected a list of 1 to %d prompts, found %zu",
                                           NATIVE_MAX_GENERATIONS, n);
        if (alloc_prompts(req, spec, n))
            return -1;
        spec->batch = 1;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_array_get(ids, i);
            if (!json_is_array(v))
                return cinfer_http_field_error(req, "input_ids", "item %zu: expected a list of token ids, found %s", i,
                                               cinfer_http_json_type_words(v));
            if (read_ids(req, "input_ids", v, &spec->prompts[i].ids, &spec->prompts[i].n_ids))
                return -1;
        }
        return 0;
    }
    if (alloc_prompts(req, spec, 1))
        return -1;
    return read_ids(req, "input_ids", ids, &spec->prompts[0].ids, &spec->prompts[0].n_ids);
}

static int read_sampling(const struct http_request *req, const json_t *body, struct native_generate_spec *spec)
{
    struct cinfer_sampling_params *s = &spec->sampling;
    const json_t *sp;
    int rc = cinfer_http_field_of_type(req, body, "sampling_params", JSON_OBJECT, &sp);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)sp, key, v) {
        if (in_list(unsupported_sampling, key) && !json_is_null(v))
            return cinfer_http_field_error(req, key, "not supported by cinfer (constrained decoding takes json_schema, "
                                                     "regex or ebnf)");
        if (!in_list(known_sampling, key) && !in_list(ignored_sampling, key) && !in_list(unsupported_sampling, key))
            return cinfer_http_field_error(req, key, "not a sampling parameter (sampling_params takes max_new_tokens, "
                                                     "temperature, top_p, top_k, min_p, stop, stop_token_ids, ...)");
    }
    long long i64;
    double d;
    if ((rc = cinfer_http_field_int(req, sp, "max_new_tokens", 0, INT32_MAX, &i64)) < 0)
        return -1;
    if (rc)
        s->max_new_tokens = (int)i64;
    if ((rc = cinfer_http_field_int(req, sp, "min_new_tokens", 0, s->max_new_tokens, &i64)) < 0)
        return -1;
    if (rc)
        s->min_new_tokens = (int)i64;
    /* SGLang sets no upper bound; one is needed so that the value stays a finite float. */
    if ((rc = cinfer_http_field_number(req, sp, "temperature", 0, 1e6, &d)) < 0)
        return -1;
    if (rc)
        s->temperature = (float)d;
    if (cinfer_http_read_shared_sampling(req, sp, 0, s) < 0)
        return -1;
    if (cinfer_http_read_constraint(req, sp, s, &spec->owned_constraint) < 0)
        return -1;
    if ((rc = cinfer_http_field_int(req, sp, "n", 1, NATIVE_MAX_GENERATIONS, &i64)) < 0)
        return -1;
    if (rc)
        spec->n = (int)i64;
    /* sampling_seed is SGLang's name; seed is OpenAI's, accepted too. */
    for (int k = 0; k < 2; k++) {
        const char *name = k == 0 ? "sampling_seed" : "seed";
        if ((rc = cinfer_http_field_int(req, sp, name, 0, LLONG_MAX, &i64)) < 0)
            return -1;
        if (rc) {
            s->seed = (uint64_t)i64;
            s->has_seed = 1;
        }
    }
    return 0;
}

/* rid: one string, or (for a list of prompts) a list with one string per prompt. */
static int read_rid(const struct http_request *req, const json_t *body, struct native_generate_spec *spec)
{
    const json_t *rid = json_object_get(body, "rid");
    if (!rid || json_is_null(rid))
        return 0;
    if (json_is_string(rid)) {
        if (json_string_length(rid) == 0 || json_string_length(rid) >= NATIVE_RID_BYTES)
            return cinfer_http_field_error(req, "rid", "expected a string of 1 to %d bytes, found %zu bytes",
                                           NATIVE_RID_BYTES - 1, json_string_length(rid));
        for (size_t i = 0; i < spec->n_prompts; i++)
            spec->prompts[i].rid = json_string_value(rid);
        return 0;
    }
    if (!json_is_array(rid) || !spec->batch)
        return cinfer_http_field_error(req, "rid", "expected a string%s, found %s",
                                       spec->batch ? " or a list of strings, one per prompt" : "",
                                       cinfer_http_json_type_words(rid));
    if (json_array_size(rid) != spec->n_prompts)
        return cinfer_http_field_error(req, "rid", "expected %zu strings (one per prompt), found %zu", spec->n_prompts,
                                       json_array_size(rid));
    for (size_t i = 0; i < spec->n_prompts; i++) {
        const json_t *v = json_array_get(rid, i);
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= NATIVE_RID_BYTES)
            return cinfer_http_field_error(req, "rid", "item %zu: expected a string of 1 to %d bytes, found %s", i,
                                           NATIVE_RID_BYTES - 1, json_is_string(v) ? "a string of another length"
                                                                            : cinfer_http_json_type_words(v));
        for (size_t j = 0; j < i; j++)
            if (strcmp(spec->prompts[j].rid, json_string_value(v)) == 0)
                return cinfer_http_field_error(req, "rid", "item %zu: \"%s\" repeats item %zu; rids must differ", i,
                                               json_string_value(v), j);
        spec->prompts[i].rid = json_string_value(v);
    }
    return 0;
}

int cinfer_native_generate_parse(const struct http_request *req, const json_t *body, struct native_generate_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    cinfer_sampling_params_init(&spec->sampling);
    spec->n = 1;
    long long top = 0;
    int rc = read_prompts(req, body, spec);
    if (rc == 0)
        rc = read_sampling(req, body, spec);
    if (rc == 0 && (cinfer_http_field_bool(req, body, "stream", &spec->stream) < 0 ||
                    cinfer_http_field_bool(req, body, "return_logprob", &spec->return_logprob) < 0 ||
                    cinfer_http_field_bool(req, body, "return_text_in_logprobs", &spec->return_text_in_logprobs) < 0 ||
                    cinfer_http_field_int(req, body, "top_logprobs_num", 0, CINFER_MAX_TOP_LOGPROBS, &top) < 0))
        rc = -1;
    if (rc == 0)
        rc = read_rid(req, body, spec);
    if (rc == 0 && spec->n_prompts * (size_t)spec->n > NATIVE_MAX_GENERATIONS)
        rc = cinfer_http_field_error(req, "n", "%zu prompts times n %d is %zu generations, expected at most %d",
                                     spec->n_prompts, spec->n, spec->n_prompts * (size_t)spec->n,
                                     NATIVE_MAX_GENERATIONS);
    if (rc) {
        cinfer_native_generate_spec_free(spec);
        return -1;
    }
    spec->top_logprobs_num = (int)top;
    spec->sampling.logprobs = spec->return_logprob;
    spec->sampling.top_logprobs = spec->return_logprob ? spec->top_logprobs_num : 0;
    return 0;
}

void cinfer_native_generate_spec_free(struct native_generate_spec *spec)
{
    for (size_t i = 0; spec->prompts && i < spec->n_prompts; i++)
        free(spec->prompts[i].ids);
    free(spec->prompts);
    spec->prompts = NULL;
    free(spec->owned_constraint);
    spec->owned_constraint = NULL;
    spec->n_prompts = 0;
}
