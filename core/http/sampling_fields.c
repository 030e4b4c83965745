/* Reading the sampling fields both HTTP APIs share; see sampling_fields.h. */
#include "http/sampling_fields.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/constraint.h"
#include "http/request_fields.h"

static int add_stop(const struct http_request *req, const json_t *s, const char *where,
                    struct cinfer_sampling_params *p)
{
    size_t len = json_string_length(s);
    if (len == 0 || len > CINFER_MAX_STOP_STRING_BYTES)
        return cinfer_http_field_error(req, "stop", "%s: expected a string of 1 to %d bytes, found %zu bytes", where,
                                       CINFER_MAX_STOP_STRING_BYTES, len);
    if (strlen(json_string_value(s)) != len)
        return cinfer_http_field_error(req, "stop", "%s: expected text without NUL characters", where);
    p->stop[p->n_stop++] = json_string_value(s);
    return 0;
}

/* stop: a string or an array of strings, each 1 to CINFER_MAX_STOP_STRING_BYTES bytes. */
static int read_stop(const struct http_request *req, const json_t *obj, struct cinfer_sampling_params *p)
{
    const json_t *v = json_object_get(obj, "stop");
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v))
        return add_stop(req, v, "stop", p);
    if (!json_is_array(v))
        return cinfer_http_field_error(req, "stop", "expected a string or an array of strings, found %s",
                                       cinfer_http_json_type_words(v));
    if (json_array_size(v) > CINFER_MAX_STOP_STRINGS)
        return cinfer_http_field_error(req, "stop", "expected at most %d strings, found %zu", CINFER_MAX_STOP_STRINGS,
                                       json_array_size(v));
    size_t i;
    const json_t *s;
    json_array_foreach(v, i, s) {
        char where[32];
        snprintf(where, sizeof where, "stop[%zu]", i);
        if (!json_is_string(s))
            return cinfer_http_field_error(req, "stop", "%s: expected a string, found %s", where,
                                           cinfer_http_json_type_words(s));
        if (add_stop(req, s, where, p) < 0)
            return -1;
    }
    return 0;
}

static int read_stop_token_ids(const struct http_request *req, const json_t *obj, long long max_id,
                               struct cinfer_sampling_params *p)
{
    const json_t *v = NULL;
    int rc = cinfer_http_field_of_type(req, obj, "stop_token_ids", JSON_ARRAY, &v);
    if (rc <= 0)
        return rc;
    if (json_array_size(v) > CINFER_MAX_STOP_TOKEN_IDS)
        return cinfer_http_field_error(req, "stop_token_ids", "expected at most %d token ids, found %zu",
                                       CINFER_MAX_STOP_TOKEN_IDS, json_array_size(v));
    size_t i;
    const json_t *id;
    json_array_foreach(v, i, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > max_id)
            return cinfer_http_field_error(req, "stop_token_ids",
                                           "item %zu: expected a token id in [0, %lld], found %s", i,
                                           max_id,
                                           json_is_integer(id) ? "an id outside it" : cinfer_http_json_type_words(id));
        p->stop_token_ids[p->n_stop_token_ids++] = (int32_t)json_integer_value(id);
    }
    return 0;
}

/* logit_bias: {"token id as a string": bias in [-100, 100]}, as OpenAI and SGLang write it. */
static int read_logit_bias(const struct http_request *req, const json_t *obj, long long max_id,
                           struct cinfer_sampling_params *p)
{
    const json_t *v = NULL;
    int rc = cinfer_http_field_of_type(req, obj, "logit_bias", JSON_OBJECT, &v);
    if (rc <= 0)
        return rc;
    if (json_object_size(v) > CINFER_MAX_LOGIT_BIAS)
        return cinfer_http_field_error(req, "logit_bias", "expected at most %d entries, found %zu",
                                       CINFER_MAX_LOGIT_BIAS,
                                       json_object_size(v));
    const char *key;
    const json_t *bias;
    json_object_foreach((json_t *)v, key, bias) {
        long long id = 0;
        size_t digits = strspn(key, "0123456789");
        if (digits > 0 && digits <= 10 && !key[digits])
            id = strtoll(key, NULL, 10);
        if (digits == 0 || digits > 10 || key[digits] || id > max_id)
            return cinfer_http_field_error(req, "logit_bias", "key \"%.64s\": expected a token id in [0, %lld]", key,
                                           max_id);
        for (int j = 0; j < p->n_logit_bias; j++)
            if (p->logit_bias_ids[j] == id) /* "7" and "07" */
                return cinfer_http_field_error(req, "logit_bias", "token %lld appears twice (as \"%.64s\" too)", id,
                                               key);
        if (!json_is_number(bias) || json_number_value(bias) < -100 || json_number_value(bias) > 100)
            return cinfer_http_field_error(req, "logit_bias", "token %lld: expected a number in [-100, 100], found %s",
                                           id, json_is_number(bias) ? "a number outside it"
                                                                   : cinfer_http_json_type_words(bias));
        p->logit_bias_ids[p->n_logit_bias] = (int32_t)id;
        p->logit_bias_values[p->n_logit_bias++] = (float)json_number_value(bias);
    }
    return 0;
}

/* A number in (0, hi]: the range check is cinfer_http_field_number's, then a value that is
 * zero as the engine's float is refused too (1e-50 would reach the sampler as 0). */
static int read_positive(const struct http_request *req, const json_t *obj, const char *name, double hi, float *out)
{
    double x;
    int rc = cinfer_http_field_number(req, obj, name, 0, hi, &x);
    if (rc < 0)
        return -1;
    if (rc && (float)x == 0.0f)
        return cinfer_http_field_error(req, name, "expected a number in (0, %g], found %g", hi, x);
    if (rc)
        *out = (float)x;
    return 0;
}

static int read_float(const struct http_request *req, const json_t *obj, const char *name, double lo, double hi,
                      float *out)
{
    double x;
    int rc = cinfer_http_field_number(req, obj, name, lo, hi, &x);
    if (rc > 0)
        *out = (float)x;
    return rc < 0 ? -1 : 0;
}

int cinfer_http_read_shared_sampling(const struct http_request *req, const json_t *obj, int vocab_size,
                                     struct cinfer_sampling_params *s)
{
    long long max_id = vocab_size > 0 ? vocab_size - 1 : INT32_MAX;
    long long k;
    int rc;
    if (read_positive(req, obj, "top_p", 1, &s->top_p) < 0)
        return -1;
    if ((rc = cinfer_http_field_int(req, obj, "top_k", -1, INT32_MAX, &k)) < 0)
        return -1;
    if (rc)
        s->top_k = (int)k;
    if (read_float(req, obj, "min_p", 0, 1, &s->min_p) < 0 ||
        read_float(req, obj, "presence_penalty", -2, 2, &s->presence_penalty) < 0 ||
        read_float(req, obj, "frequency_penalty", -2, 2, &s->frequency_penalty) < 0 ||
        read_positive(req, obj, "repetition_penalty", 2, &s->repetition_penalty) < 0)
        return -1;
    if (cinfer_http_field_bool(req, obj, "ignore_eos", &s->ignore_eos) < 0 ||
        cinfer_http_field_bool(req, obj, "skip_special_tokens", &s->skip_special_tokens) < 0 ||
        cinfer_http_field_bool(req, obj, "no_stop_trim", &s->no_stop_trim) < 0)
        return -1;
    if (read_stop(req, obj, s) < 0 || read_stop_token_ids(req, obj, max_id, s) < 0 ||
        read_logit_bias(req, obj, max_id, s) < 0)
        return -1;
    return 0;
}

int cinfer_http_check_constraint(const struct http_request *req, const struct cinfer_sampling_params *s,
                                 const char *param)
{
    char *text = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_constraint_grammar(s, 1, &text, &err);
    free(text);
    if (rc == CINFER_OK)
        return 0;
    if (rc == CINFER_ERR_NOMEM) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "%s", err.message);
        return -1;
    }
    return cinfer_http_field_error(req, param, "%s", err.message);
}

int cinfer_http_read_constraint(const struct http_request *req, const json_t *obj, struct cinfer_sampling_params *s,
                                char **owned)
{
    static const char *const names[] = {"json_schema", "regex", "ebnf"};
    const char **slots[] = {&s->json_schema, &s->regex, &s->ebnf};
    const char *given = NULL;
    for (int i = 0; i < 3; i++) {
        const json_t *v = json_object_get(obj, names[i]);
        if (!v || json_is_null(v))
            continue;
        if (given)
            return cinfer_http_field_error(req, names[i], "give at most one of json_schema, regex and ebnf (found %s "
                                                          "too)", given);
        given = names[i];
        if (i == 0 && (json_is_object(v) || json_is_boolean(v))) {
            *owned = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!*owned) {
                cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory reading json_schema");
                return -1;
            }
            *slots[i] = *owned;
            continue;
        }
        if (!json_is_string(v))
            return cinfer_http_field_error(req, names[i], "expected a string%s, found %s",
                                           i == 0 ? " (JSON text) or a schema object" : "",
                                           cinfer_http_json_type_words(v));
        if (strlen(json_string_value(v)) != json_string_length(v))
            return cinfer_http_field_error(req, names[i], "expected text without NUL characters");
        *slots[i] = json_string_value(v);
    }
    return given ? cinfer_http_check_constraint(req, s, given) : 0;
}
