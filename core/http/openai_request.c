/* Reading an OpenAI request body; see openai_request.h. Field names, defaults and
 * ranges are OpenAI's, plus the sampling fields SGLang accepts beside them. Fields
 * this server cannot honour are refused by name rather than silently ignored. */
#include "http/openai_request.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_parsers.h"
#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "grammar/text_buf.h"
#include "http/request_fields.h"
#include "http/sampling_fields.h"

/* max_tokens when the request gives none: OpenAI's 16 for completions; for chat the
 * rest of the context (the scheduler stops at the context limit with "length"). */
#define COMPLETIONS_DEFAULT_MAX_TOKENS 16
#define CHAT_DEFAULT_MAX_TOKENS (1 << 30)

static int field_present(const json_t *body, const char *name)
{
    const json_t *v = json_object_get(body, name);
    return v && !json_is_null(v);
}

/* Fields whose meaning this server does not implement: a clear 400 beats output that
 * silently ignores what the client asked for. */
static int refuse_unsupported(const struct http_request *req, const json_t *body, enum openai_kind kind,
                              struct openai_request *out)
{
    static const struct {
        const char *name;
        const char *why;
    } never[] = {
        {"suffix", "suffix (fill-in-the-middle) is not supported by this server"},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (field_present(body, never[i].name))
            return cinfer_http_field_error(req, never[i].name, "%s; leave it out", never[i].why);
    if (kind == OPENAI_COMPLETIONS && cinfer_http_field_bool(req, body, "echo", &out->echo) < 0)
        return -1;
    /* echo with logprobs would need the prompt's logprobs, which are not computed */
    if (out->echo && field_present(body, "logprobs"))
        return cinfer_http_field_error(req, "echo", "echo together with logprobs is not supported by this server (the "
                                                    "prompt's logprobs are not computed); drop one of them");
    return 0;
}

/* response_format (OpenAI: text, json_object, json_schema) and SGLang's json_schema,
 * regex and ebnf beside it: at most one constraint, read into the sampling params. */
static int read_constraint(const struct http_request *req, const json_t *body, struct openai_request *out)
{
    if (cinfer_http_read_constraint(req, body, &out->sampling, &out->owned_constraint) < 0)
        return -1;
    const json_t *fmt = NULL;
    int rc = cinfer_http_field_of_type(req, body, "response_format", JSON_OBJECT, &fmt);
    if (rc <= 0)
        return rc;
    const char *type = NULL;
    if (cinfer_http_field_string(req, fmt, "type", &type) < 0)
        return -1;
    if (!type)
        return cinfer_http_field_error(req, "response_format", "expected a \"type\": \"text\", \"json_object\" or "
                                                               "\"json_schema\"");
    if (!strcmp(type, "text"))
        return 0;
    struct cinfer_sampling_params *p = &out->sampling;
    if (p->json_schema || p->regex || p->ebnf)
        return cinfer_http_field_error(req, "response_format", "cannot be combined with %s",
                                       p->json_schema ? "json_schema" : p->regex ? "regex" : "ebnf");
    if (!strcmp(type, "json_object")) {
        p->json_schema = "{\"type\":\"object\"}"; /* any JSON object */
    } else if (!strcmp(type, "json_schema")) {
        const json_t *js = json_object_get(fmt, "json_schema");
        if (!json_is_object(js))
            return cinfer_http_field_error(req, "response_format",
                                           "type \"json_schema\" needs a \"json_schema\" object ({\"name\": ..., "
                                           "\"schema\": {...}}), found %s",
                                           js ? cinfer_http_json_type_words(js) : "nothing");
        const json_t *schema = json_object_get(js, "schema");
        if (schema && !json_is_object(schema) && !json_is_boolean(schema))
            return cinfer_http_field_error(req, "response_format", "json_schema.schema: expected a schema object, found %s",
                                           cinfer_http_json_type_words(schema));
        out->owned_constraint = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
        if (!out->owned_constraint) {
            cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory reading response_format");
            return -1;
        }
        p->json_schema = out->owned_constraint;
    } else {
        return cinfer_http_field_error(req, "response_format",
                                       "type \"%.40s\" is not supported by this server; expected \"text\", "
                                       "\"json_object\" or \"json_schema\"",
                                       type);
    }
    return cinfer_http_check_constraint(req, p, "response_format");
}

static int read_sampling(const struct http_request *req, const json_t *body, enum openai_kind kind, int vocab_size,
                         struct openai_request *out)
{
    struct cinfer_sampling_params *p = &out->sampling;
    cinfer_sampling_params_init(p);
    double x;
    long long i;
    int b, rc;

    if ((rc = cinfer_http_field_number(req, body, "temperature", 0, 2, &x)) < 0)
        return -1;
    if (rc)
        p->temperature = (float)x;
    if (cinfer_http_read_shared_sampling(req, body, vocab_size, p) < 0)
        return -1;
    if ((rc = cinfer_http_field_int(req, body, "seed", LLONG_MIN, LLONG_MAX, &i)) < 0)
        return -1;
    if (rc) {
        p->seed = (uint64_t)i;
        p->has_seed = 1;
    }

    /* max_tokens; chat prefers max_completion_tokens, its newer name */
    p->max_new_tokens = kind == OPENAI_CHAT ? CHAT_DEFAULT_MAX_TOKENS : COMPLETIONS_DEFAULT_MAX_TOKENS;
    if ((rc = cinfer_http_field_int(req, body, "max_tokens", 1, CHAT_DEFAULT_MAX_TOKENS, &i)) < 0)
        return -1;
    if (rc)
        p->max_new_tokens = (int)i;
    if (kind == OPENAI_CHAT) {
        if ((rc = cinfer_http_field_int(req, body, "max_completion_tokens", 1, CHAT_DEFAULT_MAX_TOKENS, &i)) < 0)
            return -1;
        if (rc)
            p->max_new_tokens = (int)i;
    }
    if ((rc = cinfer_http_field_int(req, body, "min_tokens", 0, p->max_new_tokens, &i)) < 0)
        return -1;
    if (rc)
        p->min_new_tokens = (int)i;

    /* logprobs: an integer 0..5 in the legacy completions API, a boolean (with
     * top_logprobs 0..20 beside it) in chat */
    if (kind == OPENAI_COMPLETIONS) {
        if ((rc = cinfer_http_field_int(req, body, "logprobs", 0, 5, &i)) < 0)
            return -1;
        if (rc) {
            out->want_logprobs = 1;
            p->logprobs = 1;
            p->top_logprobs = (int)i;
        }
    } else {
        b = 0;
        if (cinfer_http_field_bool(req, body, "logprobs", &b) < 0)
            return -1;
        if ((rc = cinfer_http_field_int(req, body, "top_logprobs", 0, CINFER_MAX_TOP_LOGPROBS, &i)) < 0)
            return -1;
        if (rc && !b)
            return cinfer_http_field_error(req, "top_logprobs", "needs \"logprobs\": true (found %s)",
                                           field_present(body, "logprobs") ? "false" : "no logprobs field");
        if (b) {
            out->want_logprobs = 1;
            p->logprobs = 1;
            p->top_logprobs = rc ? (int)i : 0;
        }
    }

    const char *user = NULL; /* accepted: OpenAI uses it for abuse monitoring only */
    if (cinfer_http_field_string(req, body, "user", &user) < 0)
        return -1;
    return 0;
}

static int read_response_options(const struct http_request *req, const json_t *body, struct openai_request *out)
{
    long long i;
    int rc;
    out->n = 1;
    if ((rc = cinfer_http_field_int(req, body, "n", 1, CINFER_MAX_CHOICES, &i)) < 0)
        return -1;
    if (rc)
        out->n = (int)i;
    if ((rc = cinfer_http_field_int(req, body, "best_of", 1, CINFER_MAX_CHOICES, &i)) < 0)
        return -1;
    if (rc && i != out->n)
        return cinfer_http_field_error(req, "best_of",
                                       "expected the same as n (%d), found %lld: this server returns every choice it "
                                       "generates and does not rank them",
                                       out->n, i);
    if (cinfer_http_field_bool(req, body, "stream", &out->stream) < 0)
        return -1;
    const json_t *opts = NULL;
    if ((rc = cinfer_http_field_of_type(req, body, "stream_options", JSON_OBJECT, &opts)) < 0)
        return -1;
    if (rc) {
        if (!out->stream)
            return cinfer_http_field_error(req, "stream_options", "is only allowed when \"stream\" is true");
        if (cinfer_http_field_bool(req, opts, "include_usage", &out->include_usage) < 0)
            return -1;
    }
    return 0;
}

/* ---- completions: the prompt --------------------------------------------------------- */

/* An array of integers as token ids; returns 1 when arr is one, 0 when it is not an
 * array of integers at all, -1 after replying (an id out of range). */
static int read_ids(const struct http_request *req, const json_t *arr, const char *where, int vocab_size,
                    struct openai_prompt *out)
{
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n; i++)
        if (!json_is_integer(json_array_get(arr, i)))
            return 0;
    if (n == 0)
        return cinfer_http_field_error(req, "prompt", "%s: expected at least one token id, found an empty array",
                                       where);
    out->ids = malloc(n * sizeof *out->ids);
    if (!out->ids) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for %zu prompt ids", n);
        return -1;
    }
    long long hi = vocab_size > 0 ? vocab_size - 1 : INT32_MAX;
    for (size_t i = 0; i < n; i++) {
        long long id = (long long)json_integer_value(json_array_get(arr, i));
        if (id < 0 || id > hi)
            return cinfer_http_field_error(req, "prompt", "%s[%zu]: expected a token id in [0, %lld], found %lld",
                                           where, i,
                                           hi, id);
        out->ids[i] = (int32_t)id;
    }
    out->n_ids = n;
    return 1;
}

static int read_prompts(const struct http_request *req, const json_t *body, int vocab_size, struct openai_request *out)
{
    const json_t *v = json_object_get(body, "prompt");
    if (!v || json_is_null(v))
        return cinfer_http_field_error(req, "prompt",
                                       "is required: a string, an array of strings, an array of token ids "
                                                      "or an array of arrays of token ids");
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (json_is_array(v) && count == 0)
        return cinfer_http_field_error(req, "prompt", "expected at least one prompt, found an empty array");
    /* an array of integers is one prompt of ids */
    int ids_prompt = json_is_array(v) && json_is_integer(json_array_get(v, 0));
    if (ids_prompt)
        count = 1;
    if (count > OPENAI_MAX_PROMPTS)
        return cinfer_http_field_error(req, "prompt", "expected at most %d prompts, found %zu", OPENAI_MAX_PROMPTS,
                                       count);
    if (count * (size_t)out->n > OPENAI_MAX_GENERATIONS)
        return cinfer_http_field_error(req, "n", "%zu prompts with n %d make %zu choices, expected at most %d", count,
                                       out->n,
                                       count * (size_t)out->n, OPENAI_MAX_GENERATIONS);
    out->prompts = calloc(count, sizeof *out->prompts);
    if (!out->prompts) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for %zu prompts", count);
        return -1;
    }
    out->n_prompts = count;
    if (json_is_string(v)) {
        out->prompts[0].text = json_string_value(v);
        out->prompts[0].text_len = json_string_length(v);
        return 0;
    }
    if (!json_is_array(v))
        return cinfer_http_field_error(req, "prompt",
                                       "expected a string, an array of strings, an array of token ids or an array of "
                                       "arrays of token ids, found %s",
                                       cinfer_http_json_type_words(v));
    if (ids_prompt) {
        int rc = read_ids(req, v, "prompt", vocab_size, &out->prompts[0]);
        return rc == 1 ? 0 : rc < 0 ? -1
                                    : cinfer_http_field_error(req, "prompt",
                                                              "an array of token ids holds something other "
                                                                             "than integers");
    }
    for (size_t i = 0; i < count; i++) {
        const json_t *item = json_array_get(v, i);
        char where[32];
        snprintf(where, sizeof where, "prompt[%zu]", i);
        if (json_is_string(item)) {
            out->prompts[i].text = json_string_value(item);
            out->prompts[i].text_len = json_string_length(item);
            continue;
        }
        int rc = json_is_array(item) ? read_ids(req, item, where, vocab_size, &out->prompts[i]) : 0;
        if (rc < 0)
            return -1;
        if (rc == 0)
            return cinfer_http_field_error(req, "prompt", "%s: expected a string or an array of token ids, found %s",
                                           where, json_is_array(item) ? "an array holding other things"
                                                                      : cinfer_http_json_type_words(item));
    }
    return 0;
}

/* ---- chat: the messages ------------------------------------------------------------- */

/* content as the template sees it: a string (text parts joined by newlines, as vLLM's
 * "string" content format), or null for an assistant turn that only calls tools. */
static int normalize_content(const struct http_request *req, const json_t *content, size_t m, const char *role,
                             json_t **out)
{
    if (!content || json_is_null(content)) {
        if (strcmp(role, "assistant") != 0)
            return cinfer_http_field_error(req, "messages", "messages[%zu].content: required for role \"%s\"", m, role);
        *out = json_null();
        return 0;
    }
    if (json_is_string(content)) {
        *out = json_incref((json_t *)content);
        return 0;
    }
    if (!json_is_array(content))
        return cinfer_http_field_error(req, "messages",
                                       "messages[%zu].content: expected a string or an array of parts, found %s", m,
                                       cinfer_http_json_type_words(content));
    size_t j, total = 0;
    const json_t *part;
    json_array_foreach(content, j, part) {
        const char *type = json_is_object(part) ? json_string_value(json_object_get(part, "type")) : NULL;
        if (!type)
            return cinfer_http_field_error(req, "messages",
                                           "messages[%zu].content[%zu]: expected an object with a \"type\", found %s",
                                           m, j,
                                           cinfer_http_json_type_words(part));
        if (strcmp(type, "text") != 0)
            return cinfer_http_field_error(req, "messages",
                                           "messages[%zu].content[%zu]: part type \"%.40s\" is not supported: this "
                                           "server serves a text-only model (expected \"text\")",
                                           m, j, type);
        const json_t *t = json_object_get(part, "text");
        if (!json_is_string(t))
            return cinfer_http_field_error(req, "messages",
                                           "messages[%zu].content[%zu].text: expected a string, found %s", m,
                                           j, t ? cinfer_http_json_type_words(t) : "nothing");
        total += json_string_length(t) + 1;
    }
    char *text = malloc(total + 1);
    if (!text) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory joining message parts");
        return -1;
    }
    size_t len = 0;
    json_array_foreach(content, j, part) {
        const json_t *t = json_object_get(part, "text");
        if (j)
            text[len++] = '\n';
        memcpy(text + len, json_string_value(t), json_string_length(t));
        len += json_string_length(t);
    }
    *out = json_stringn(text, len);
    free(text);
    if (!*out) {
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory joining message parts");
        return -1;
    }
    return 0;
}

static int read_messages(const struct http_request *req, const json_t *body, json_t *messages_out)
{
    const json_t *msgs = NULL;
    int rc = cinfer_http_field_of_type(req, body, "messages", JSON_ARRAY, &msgs);
    if (rc < 0)
        return -1;
    if (rc == 0 || json_array_size(msgs) == 0)
        return cinfer_http_field_error(req, "messages", "expected a non-empty array of messages, found %s",
                                       rc ? "an empty array" : "nothing");
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    size_t m;
    const json_t *msg;
    json_array_foreach(msgs, m, msg) {
        if (!json_is_object(msg))
            return cinfer_http_field_error(req, "messages", "messages[%zu]: expected an object, found %s", m,
                                           cinfer_http_json_type_words(msg));
        const char *role = json_string_value(json_object_get(msg, "role"));
        size_t r = 0;
        while (role && r < sizeof roles / sizeof roles[0] && strcmp(role, roles[r]) != 0)
            r++;
        if (!role || r == sizeof roles / sizeof roles[0])
            return cinfer_http_field_error(req, "messages",
                                           "messages[%zu].role: expected \"system\", \"user\", \"assistant\", "
                                           "\"tool\" or \"developer\", found %s%.40s%s",
                                           m, role ? "\"" : "", role ? role : "nothing", role ? "\"" : "");
        json_t *copy = json_copy((json_t *)msg); /* other keys (name, tool_calls, tool_call_id) pass through */
        json_t *content = NULL;
        if (!copy || normalize_content(req, json_object_get(msg, "content"), m, role, &content) < 0) {
            if (!copy)
                cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory copying messages");
            json_decref(copy);
            return -1;
        }
        /* templates know "system"; OpenAI's "developer" is the same instruction role */
        if (!strcmp(role, "developer"))
            json_object_set_new(copy, "role", json_string("system"));
        json_object_set_new(copy, "content", content);
        json_array_append_new(messages_out, copy);
    }
    return 0;
}

/* The grammar of forced tool calls in the model's format: each call names one of the
 * allowed tools and its arguments follow that tool's parameters schema. */
static int tool_grammar(const struct http_request *req, const json_t *tools, const char *only, int parallel,
                        enum cinfer_tool_format format, char **out)
{
    struct text_buf g = {0}, calls = {0};
    size_t i;
    const json_t *t;
    int n = 0;
    json_array_foreach(tools, i, t) {
        const json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (only && strcmp(name, only) != 0)
            continue;
        json_t *params = json_object_get(fn, "parameters");
        json_t *any = NULL;
        if (!params)
            params = any = json_pack("{s:s}", "type", "object");
        char prefix[32], *rules = NULL, *root = NULL;
        snprintf(prefix, sizeof prefix, "tool%zu-", i);
        struct cinfer_error err = {0};
        int rc = cinfer_json_schema_to_rules(params, prefix, &rules, &root, &err);
        json_decref(any);
        if (rc) {
            cinfer_tb_free(&g);
            cinfer_tb_free(&calls);
            return cinfer_http_field_error(req, "tools", "tools[%zu].function.parameters: %s", i, err.message);
        }
        json_t *name_json = json_string(name);
        char *name_text = json_dumps(name_json, JSON_ENCODE_ANY);
        json_decref(name_json);
        struct text_buf head = {0};
        cinfer_tb_printf(&head, "{\"name\": %s, \"%s\": ", name_text ? name_text : "\"\"",
                         format == CINFER_TOOLS_LLAMA3 ? "parameters" : "arguments");
        free(name_text);
        cinfer_tb_printf(&calls, "%s", n++ ? " | " : "");
        cinfer_tb_literal(&calls, head.s, head.n);
        cinfer_tb_printf(&calls, " %s \"}\"", root);
        cinfer_tb_puts(&g, rules);
        cinfer_tb_free(&head);
        free(rules);
        free(root);
    }
    struct text_buf top = {0};
    const char *more = parallel ? "*" : "{0}";
    if (format == CINFER_TOOLS_HERMES)
        cinfer_tb_printf(&top, "root ::= call (\"\\n\" call)%s\ncall ::= \"<tool_call>\\n\" (%s) \"\\n</tool_call>\"\n",
                         more, calls.s ? calls.s : "");
    else if (format == CINFER_TOOLS_LLAMA3)
        cinfer_tb_printf(&top, "root ::= call (\"; \" call)%s\ncall ::= %s\n", more, calls.s ? calls.s : "");
    else /* Mistral's [TOOL_CALLS] is a control token: the bare array, which the parser takes when forced */
        cinfer_tb_printf(&top, "root ::= \"[\" call (\", \" call)%s \"]\"\ncall ::= %s\n", more, calls.s ? calls.s : "");
    cinfer_tb_put(&top, g.s ? g.s : "", g.n);
    cinfer_tb_free(&g);
    cinfer_tb_free(&calls);
    if (top.failed) {
        cinfer_tb_free(&top);
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory building the tool grammar");
        return -1;
    }
    *out = top.s;
    return 0;
}

/* tools go to the template, which lays them out as the model was trained to see them;
 * tool_choice "none" leaves them out, "auto" lets the model choose and reads calls out
 * of the output, "required" and a named function force a call with constrained
 * decoding (arguments valid under the tool's parameters), parallel_tool_calls false
 * allows one call. */
static int read_tools(const struct http_request *req, const json_t *body, struct openai_request *out)
{
    json_t *ctx = out->template_context;
    const json_t *tools = NULL;
    if (cinfer_http_field_of_type(req, body, "tools", JSON_ARRAY, &tools) < 0)
        return -1;
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *fn = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return cinfer_http_field_error(req, "tools", "tools[%zu]: expected {\"type\": \"function\", \"function\": "
                                                         "{\"name\": ..., \"parameters\": {...}}}", i);
        const json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_object(params))
            return cinfer_http_field_error(req, "tools", "tools[%zu].function.parameters: expected a JSON Schema object", i);
    }
    int parallel = 1;
    if (cinfer_http_field_bool(req, body, "parallel_tool_calls", &parallel) < 0)
        return -1;
    const json_t *choice = json_object_get(body, "tool_choice");
    const char *mode = "auto", *only = NULL;
    if (choice && !json_is_null(choice)) {
        if (json_is_string(choice)) {
            mode = json_string_value(choice);
            if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required"))
                return cinfer_http_field_error(req, "tool_choice",
                                               "expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                                               "\"function\": {\"name\": ...}}, found \"%.40s\"", mode);
        } else {
            only = json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
            if (!json_is_object(choice) || !only)
                return cinfer_http_field_error(req, "tool_choice",
                                               "expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                                               "\"function\": {\"name\": ...}}, found %s",
                                               cinfer_http_json_type_words(choice));
            mode = "named";
        }
    }
    if (!strcmp(mode, "none") || !tools)
        return 0;
    json_object_set(ctx, "tools", (json_t *)tools);
    out->tool_format = req->ctx ? req->ctx->tool_format : CINFER_TOOLS_NONE;
    if (!strcmp(mode, "auto"))
        return 0;
    if (only) {
        int found = 0;
        json_array_foreach(tools, i, t) found |= !strcmp(json_string_value(json_object_get(json_object_get(t, "function"),
                                                                                          "name")),
                                                        only);
        if (!found)
            return cinfer_http_field_error(req, "tool_choice", "names the function \"%.80s\", which tools does not list",
                                           only);
    }
    if (out->tool_format == CINFER_TOOLS_NONE)
        return cinfer_http_field_error(req, "tool_choice",
                                       "forcing a tool call needs to know the model's tool-call format, and this "
                                       "model's chat template shows none: start the server with --tool-call-parser "
                                       "(qwen25, llama3 or mistral)");
    struct cinfer_sampling_params *p = &out->sampling;
    if (p->json_schema || p->regex || p->ebnf)
        return cinfer_http_field_error(req, "tool_choice", "a forced tool call cannot be combined with %s",
                                       p->json_schema ? "response_format or json_schema" : p->regex ? "regex" : "ebnf");
    if (tool_grammar(req, tools, only, parallel && !only, (enum cinfer_tool_format)out->tool_format,
                     &out->tool_grammar) < 0)
        return -1;
    p->ebnf = out->tool_grammar;
    out->tools_forced = 1;
    return cinfer_http_check_constraint(req, p, "tools");
}

/* With a reasoning parser, a constraint holds for the answer only: the grammar lets the
 * model reason first (Qwen3: an optional <think>...</think>; R1: up to </think>, the
 * template opened it), reasoning that never spells "</" (so the first "</think>" ends
 * it, as the parser reads it). Not when thinking is off (chat_template_kwargs
 * enable_thinking false) or the constraint spells "</think>" itself. */
static int constrain_after_reasoning(const struct http_request *req, struct openai_request *out)
{
    struct cinfer_sampling_params *p = &out->sampling;
    if (!out->reasoning_format || !(p->json_schema || p->regex || p->ebnf))
        return 0;
    char *answer = NULL, *renamed = NULL;
    struct cinfer_error err = {0};
    if (cinfer_constraint_grammar(p, 0, &answer, &err))
        return cinfer_http_check_constraint(req, p, p->ebnf ? "ebnf" : p->regex ? "regex" : "response_format");
    if (strstr(answer, "</think>")) { /* a grammar that spells the reasoning itself decides it */
        free(answer);
        return 0;
    }
    int rc = cinfer_grammar_rename_root(answer, "answer-root", &renamed);
    free(answer);
    struct text_buf g = {0};
    if (rc == CINFER_OK) {
        if (out->reasoning_format == CINFER_REASONING_DEEPSEEK_R1)
            cinfer_tb_puts(&g, "root ::= reasoning-text \"</think>\" [ \\n]* answer-root\n");
        else
            cinfer_tb_puts(&g, "root ::= (\"<think>\" reasoning-text \"</think>\" [ \\n]*)? answer-root\n");
        cinfer_tb_puts(&g, "reasoning-text ::= ([^<] | \"<\" [^/])*\n");
        cinfer_tb_puts(&g, renamed);
    }
    free(renamed);
    if (rc || g.failed) {
        cinfer_tb_free(&g);
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory building the grammar");
        return -1;
    }
    out->reasoning_grammar = g.s;
    p->json_schema = p->regex = NULL;
    p->ebnf = out->reasoning_grammar;
    return cinfer_http_check_constraint(req, p, "response_format");
}

static int read_chat(const struct http_request *req, const json_t *body, struct openai_request *out)
{
    if (out->n > OPENAI_MAX_GENERATIONS)
        return cinfer_http_field_error(req, "n", "expected at most %d, found %d", OPENAI_MAX_GENERATIONS, out->n);
    json_t *ctx = json_object();
    json_t *messages = json_array();
    if (!ctx || !messages || json_object_set_new(ctx, "messages", messages)) {
        json_decref(ctx);
        cinfer_http_reply_error(req->conn, 500, "internal_error", NULL, "out of memory for the template variables");
        return -1;
    }
    out->template_context = ctx;
    out->reasoning_format = req->ctx ? req->ctx->reasoning_format : CINFER_REASONING_NONE;
    if (read_messages(req, body, messages) < 0)
        return -1;

    int add_generation_prompt = 1, rc;
    if (cinfer_http_field_bool(req, body, "continue_final_message", &out->continue_final_message) < 0)
        return -1;
    if ((rc = cinfer_http_field_bool(req, body, "add_generation_prompt", &add_generation_prompt)) < 0)
        return -1;
    if (out->continue_final_message) {
        if (rc && add_generation_prompt)
            return cinfer_http_field_error(req, "continue_final_message",
                                           "cannot be true together with \"add_generation_prompt\": true");
        add_generation_prompt = 0;
        const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
        if (strcmp(json_string_value(json_object_get(last, "role")), "assistant") != 0 ||
            !json_is_string(json_object_get(last, "content")))
            return cinfer_http_field_error(req, "continue_final_message",
                                           "needs the last message to be an assistant message with text content");
    }
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt));

    if (read_tools(req, body, out) < 0)
        return -1;

    const json_t *kwargs = NULL;
    if (cinfer_http_field_of_type(req, body, "chat_template_kwargs", JSON_OBJECT, &kwargs) < 0)
        return -1;
    if (kwargs) {
        if (json_object_get(kwargs, "messages"))
            return cinfer_http_field_error(req, "chat_template_kwargs",
                                           "may not set \"messages\" (use the messages field)");
        json_object_update(ctx, (json_t *)kwargs);
        /* Qwen3's switch: the template closes an empty <think> block itself */
        if (json_is_false(json_object_get(kwargs, "enable_thinking")))
            out->reasoning_format = CINFER_REASONING_NONE;
    }
    return constrain_after_reasoning(req, out);
}

/* ---- the whole request -------------------------------------------------------------- */

static int check_model(const struct http_request *req, const json_t *body)
{
    const char *model = NULL;
    if (cinfer_http_field_string(req, body, "model", &model) < 0)
        return -1;
    /* absent: the one model served (vLLM and SGLang accept that too) */
    if (model && req->ctx && req->ctx->model_name && strcmp(model, req->ctx->model_name) != 0) {
        cinfer_http_reply_error(req->conn, 404, "not_found_error", "model",
                                "The model '%.200s' does not exist (this server serves '%.200s')", model,
                                req->ctx->model_name);
        return -1;
    }
    return 0;
}

int cinfer_openai_request_parse(const struct http_request *req, json_t *body, enum openai_kind kind, int vocab_size,
                                struct openai_request *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->body = body;
    if (check_model(req, body) < 0 || refuse_unsupported(req, body, kind, out) < 0 ||
        read_response_options(req, body, out) < 0 || read_sampling(req, body, kind, vocab_size, out) < 0 ||
        read_constraint(req, body, out) < 0 ||
        (kind == OPENAI_COMPLETIONS ? read_prompts(req, body, vocab_size, out) : read_chat(req, body, out)) < 0) {
        cinfer_openai_request_free(out);
        return -1;
    }
    return 0;
}

void cinfer_openai_request_free(struct openai_request *r)
{
    for (size_t i = 0; r->prompts && i < r->n_prompts; i++)
        free(r->prompts[i].ids);
    free(r->prompts);
    json_decref(r->template_context);
    json_decref(r->body);
    free(r->owned_constraint);
    free(r->tool_grammar);
    free(r->reasoning_grammar);
    memset(r, 0, sizeof *r);
}
