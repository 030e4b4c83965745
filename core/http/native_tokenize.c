/* POST /v1/tokenize and POST /v1/detokenize as SGLang serves them:
 *   {"prompt": "text" | ["text", ...], "add_special_tokens": true}
 *     -> {"tokens": [...], "count": N, "max_model_len": M} (lists of both for a list)
 *   {"tokens": [ids] | [[ids], ...], "skip_special_tokens": false} -> {"text": "..." | [...]}
 * with the main process's own tokenizer, the one the engine encodes prompts with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/tokenizer.h"
#include "http/native_api.h"
#include "http/request_fields.h"

/* "model", when given, must name the served model (404 otherwise, as OpenAI). */
static int check_model(const struct http_request *req, const json_t *body)
{
    const char *model = NULL;
    int rc = cinfer_http_field_string(req, body, "model", &model);
    if (rc <= 0)
        return rc;
    if (req->ctx->model_name && strcmp(model, req->ctx->model_name) != 0) {
        cinfer_http_reply_error(req->conn, 404, "not_found_error", "model",
                                "model \"%s\" does not exist; this server serves \"%s\"",
                                model, req->ctx->model_name);
        return -1;
    }
    return 0;
}

static json_t *encode_one(const struct http_request *req, const char *text, size_t len, int add_special, int *count)
{
    const struct cinfer_tokenizer_ctx *t = req->ctx->tokenizer;
    struct cinfer_token_ids ids = {0};
    struct cinfer_error err = {0};
    if (t->ops->encode(t->tok, text, len, add_special, &ids, &err)) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", "prompt", "tokenizing the prompt failed: %s",
                                err.message);
        cinfer_token_ids_free(&ids);
        return NULL;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < ids.len; i++)
        json_array_append_new(a, json_integer(ids.ids[i]));
    *count = (int)ids.len;
    cinfer_token_ids_free(&ids);
    if (!a)
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory");
    return a;
}

void cinfer_native_handle_tokenize(const struct http_request *req)
{
    json_t *body = cinfer_http_parse_json_object(req);
    if (!body)
        return;
    int add_special = 1;
    json_t *answer = NULL;
    if (check_model(req, body) < 0 || cinfer_http_field_bool(req, body, "add_special_tokens", &add_special) < 0)
        goto out;
    struct native_limits limits;
    struct cinfer_error err = {0};
    if (cinfer_native_engine_limits(req->ctx->engine, &limits, &err)) {
        cinfer_http_reply_engine_error(req->conn, &err);
        goto out;
    }
    const json_t *prompt = json_object_get(body, "prompt");
    int count = 0;
    if (prompt && json_is_string(prompt)) {
        json_t *tokens = encode_one(req, json_string_value(prompt), json_string_length(prompt), add_special, &count);
        if (!tokens)
            goto out;
        answer = json_pack("{s:o, s:i, s:i}", "tokens", tokens, "count", count, "max_model_len",
                           limits.max_request_len);
    } else if (prompt && json_is_array(prompt)) {
        json_t *all = json_array(), *counts = json_array();
        for (size_t i = 0; i < json_array_size(prompt); i++) {
            const json_t *p = json_array_get(prompt, i);
            if (!json_is_string(p)) {
                cinfer_http_field_error(req, "prompt", "item %zu: expected a string, found %s", i,
                                        cinfer_http_json_type_words(p));
                json_decref(all);
                json_decref(counts);
                goto out;
            }
            json_t *tokens = encode_one(req, json_string_value(p), json_string_length(p), add_special, &count);
            if (!tokens) {
                json_decref(all);
                json_decref(counts);
                goto out;
            }
            json_array_append_new(all, tokens);
            json_array_append_new(counts, json_integer(count));
        }
        answer = json_pack("{s:o, s:o, s:i}", "tokens", all, "count", counts, "max_model_len",
                           limits.max_request_len);
    } else {
        cinfer_http_field_error(req, "prompt", "expected a string or a list of strings, found %s",
                                prompt ? cinfer_http_json_type_words(prompt) : "none");
        goto out;
    }
    cinfer_native_reply_ok(req->conn, answer);
out:
    json_decref(body);
}

/* One list of ids -> its text; NULL after replying 400 (an id outside the vocabulary,
 * named with its place) or 500. field names the list in messages ("tokens", "tokens[2]"). */
static json_t *decode_one(const struct http_request *req, const char *field, const json_t *list, int skip_special)
{
    const struct cinfer_tokenizer_ctx *t = req->ctx->tokenizer;
    struct cinfer_tokenizer_info ti;
    t->ops->info(t->tok, &ti);
    size_t n = json_array_size(list);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for %zu token ids", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)ti.vocab_size) {
            if (json_is_integer(v))
                cinfer_http_field_error(req, "tokens",
                                        "%s[%zu]: expected a token id in [0, %u) (the vocabulary), found %lld",
                                        field, i, ti.vocab_size, (long long)json_integer_value(v));
            else
                cinfer_http_field_error(req, "tokens", "%s[%zu]: expected a token id (an integer), found %s", field, i,
                                        cinfer_http_json_type_words(v));
            free(ids);
            return NULL;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t text_len = 0;
    struct cinfer_error err = {0};
    int rc = t->ops->decode(t->tok, ids, n, skip_special, &text, &text_len, &err);
    free(ids);
    if (rc) {
        cinfer_http_reply_error(req->conn, 400, "invalid_request_error", "tokens", "%s: %s", field, err.message);
        return NULL;
    }
    json_t *s = json_stringn(text, text_len);
    free(text);
    if (!s) /* the tokenizer promises UTF-8; jansson checks it */
        cinfer_http_reply_error(req->conn, 500, "internal_error", "tokens", "%s: the decoded text is not valid UTF-8",
                                field);
    return s;
}

void cinfer_native_handle_detokenize(const struct http_request *req)
{
    json_t *body = cinfer_http_parse_json_object(req);
    if (!body)
        return;
    int skip_special = 0;
    const json_t *tokens = NULL;
    int rc = check_model(req, body);
    if (rc == 0)
        rc = cinfer_http_field_bool(req, body, "skip_special_tokens", &skip_special);
    if (rc >= 0 && (rc = cinfer_http_field_of_type(req, body, "tokens", JSON_ARRAY, &tokens)) == 0)
        rc = cinfer_http_field_error(req, "tokens",
                                     "expected a list of token ids (or a list of such lists), found none");
    if (rc < 0)
        goto out;
    json_t *answer;
    if (json_array_size(tokens) > 0 && json_is_array(json_array_get(tokens, 0))) {
        json_t *texts = json_array();
        for (size_t i = 0; i < json_array_size(tokens); i++) {
            char field[32];
            snprintf(field, sizeof field, "tokens[%zu]", i);
            const json_t *list = json_array_get(tokens, i);
            json_t *text = json_is_array(list) ? decode_one(req, field, list, skip_special) : NULL;
            if (!json_is_array(list))
                cinfer_http_field_error(req, "tokens", "%s: expected a list of token ids, found %s", field,
                                        cinfer_http_json_type_words(list));
            if (!text) {
                json_decref(texts);
                goto out;
            }
            json_array_append_new(texts, text);
        }
        answer = json_pack("{s:o}", "text", texts);
    } else {
        json_t *text = decode_one(req, "tokens", tokens, skip_special);
        if (!text)
            goto out;
        answer = json_pack("{s:o}", "text", text);
    }
    cinfer_native_reply_ok(req->conn, answer);
out:
    json_decref(body);
}
