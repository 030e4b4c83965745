/* test_chat_template: cinfer's chat-template renderer against the official one.
 *
 * Every real template in tests/data/chat_templates (Qwen3, Qwen2.5, Llama 3.0 and 3.2,
 * Mistral 7B v0.1, v0.2 and v0.3, Mistral Nemo, SmolLM2, TinyLlama, cinfer's default model)
 * is rendered with every conversation of conversations.json (the common ones and the
 * template's own: tools, tool calls, reasoning, broken role orders), with and without
 * the generation prompt; each small template of features.json exercises one part of
 * the language. The same cases go through @huggingface/jinja (the renderer of
 * transformers.js) under node, installed by the chat_template_reference fixture; the
 * outputs must be equal byte for byte, and where the official renderer fails cinfer
 * must fail too, with raise_exception()'s text unchanged.
 *
 * Unit checks that need no node: error messages with line:col, bounds on output,
 * steps and recursion, rendering from several threads. Where node or npm is absent the
 * reference checks cannot run: the unit checks still do, then the test exits 77
 * (ctest SKIP) and says why. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/jinja.h"
#include "cinfer/chat_template.h"
#include "support/run_command.h"
#include "support/runner.h"
#include "support/tmp_dir.h"

#define SKIP_EXIT_CODE 77
#define DATA_DIR CINFER_SOURCE_DIR "/tests/data/chat_templates"
#define REFERENCE_DIR CINFER_BINARY_DIR "/chat-template-reference"

/* The real templates and the special tokens their tokenizer_config.json sets. */
struct real_template {
    const char *file;
    const char *context_json; /* merged into every context */
};
static const struct real_template real_templates[] = {
    {"qwen3.jinja", "{\"bos_token\": null, \"eos_token\": \"<|im_end|>\"}"},
    {"qwen2_5.jinja", "{\"bos_token\": null, \"eos_token\": \"<|im_end|>\"}"},
    {"llama3.jinja", "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": \"<|end_of_text|>\"}"},
    /* a fixed date: the template would otherwise call strftime_now() */
    {"llama3_2.jinja", "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": \"<|eot_id|>\", "
                       "\"date_string\": \"26 Jul 2024\"}"},
    {"mistral_v0_1.jinja", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}"},
    {"mistral_v0_2.jinja", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}"},
    {"mistral_v0_3.jinja", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}"},
    {"mistral_nemo.jinja", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}"},
    {"smollm2.jinja", "{\"bos_token\": \"<|im_start|>\", \"eos_token\": \"<|im_end|>\"}"},
    {"tinyllama.jinja", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}"},
    {"cinfer_default.jinja", "{\"bos_token\": \"<|endoftext|>\", \"eos_token\": \"<|endoftext|>\"}"},
    {"gemma2.jinja", "{\"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\"}"},
    {"gemma3.jinja", "{\"bos_token\": \"<bos>\", \"eos_token\": \"<end_of_turn>\"}"},
    {"phi3_5.jinja", "{\"bos_token\": \"<s>\", \"eos_token\": \"<|endoftext|>\"}"},
    /* calls strftime_now("%Y-%m-%d"): both renderers read the same clock */
    {"gpt_oss.jinja", "{\"bos_token\": \"<|startoftext|>\", \"eos_token\": \"<|return|>\"}"},
};
#define N_REAL_TEMPLATES (sizeof(real_templates) / sizeof(real_templates[0]))

struct render_case {
    char *name;
    char *template_src; /* owned */
    size_t template_len;
    char *context; /* JSON text, owned */
};

struct case_list {
    struct render_case *items;
    size_t n, cap;
};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    ck_assert_uint_eq(got, (size_t)size);
    buf[got] = 0;
    if (len)
        *len = got;
    return buf;
}

static void add_case(struct case_list *l, const char *name, const char *src, size_t src_len, json_t *context)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->items = realloc(l->items, l->cap * sizeof(*l->items));
        ck_assert_ptr_nonnull(l->items);
    }
    struct render_case *c = &l->items[l->n++];
    c->name = strdup(name);
    c->template_src = malloc(src_len + 1);
    ck_assert_ptr_nonnull(c->template_src);
    memcpy(c->template_src, src, src_len);
    c->template_src[src_len] = 0;
    c->template_len = src_len;
    c->context = json_dumps(context, JSON_COMPACT | JSON_PRESERVE_ORDER);
    ck_assert_ptr_nonnull(c->context);
}

static void free_cases(struct case_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].name);
        free(l->items[i].template_src);
        free(l->items[i].context);
    }
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static json_t *load_json(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(j != NULL, "%s:%d: %s", path, jerr.line, jerr.text);
    return j;
}

/* Every real template x (common conversations + its own) x add_generation_prompt. */
static void real_template_cases(struct case_list *l)
{
    json_t *convs = load_json(DATA_DIR "/conversations.json");
    json_t *common = json_object_get(convs, "common");
    for (size_t t = 0; t < N_REAL_TEMPLATES; t++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", DATA_DIR, real_templates[t].file);
        size_t len;
        char *src = read_file(path, &len);
        json_t *tokens = json_loads(real_templates[t].context_json, 0, NULL);
        ck_assert_ptr_nonnull(tokens);
        json_t *own = json_object_get(json_object_get(convs, "by_template"), real_templates[t].file);
        json_t *lists[2] = {common, own};
        for (int li = 0; li < 2; li++) {
            size_t i;
            json_t *conv;
            json_array_foreach(lists[li], i, conv)
            {
                for (int agp = 1; agp >= 0; agp--) {
                    json_t *ctx = json_deep_copy(json_object_get(conv, "context"));
                    json_object_update(ctx, tokens);
                    json_object_set_new(ctx, "add_generation_prompt", json_boolean(agp));
                    char name[256];
                    snprintf(name, sizeof(name), "%s / %s / add_generation_prompt=%s", real_templates[t].file,
                             json_string_value(json_object_get(conv, "name")), agp ? "true" : "false");
                    add_case(l, name, src, len, ctx);
                    json_decref(ctx);
                }
            }
        }
        json_decref(tokens);
        free(src);
    }
    json_decref(convs);
}

static void feature_cases(struct case_list *l)
{
    json_t *features = load_json(DATA_DIR "/features.json");
    json_t *dflt = load_json(DATA_DIR "/feature_context.json");
    size_t i;
    json_t *f;
    json_array_foreach(features, i, f)
    {
        const char *src = json_string_value(json_object_get(f, "template"));
        json_t *ctx = json_object_get(f, "context");
        char name[256];
        snprintf(name, sizeof(name), "features.json / %s", json_string_value(json_object_get(f, "name")));
        add_case(l, name, src, json_string_length(json_object_get(f, "template")), ctx ? ctx : dflt);
    }
    json_decref(dflt);
    json_decref(features);
}

/* The official renderer's results, one per case. */
static json_t *reference_results(const struct case_list *l)
{
    cinfer_test_make_tmp_dir("chat_template");
    json_t *cases = json_array();
    for (size_t i = 0; i < l->n; i++)
        json_array_append_new(cases, json_pack("{s:s%, s:s}", "template", l->items[i].template_src,
                                               l->items[i].template_len, "context", l->items[i].context));
    char cases_path[512], results_path[512];
    snprintf(cases_path, sizeof(cases_path), "%s", cinfer_test_tmp_path("cases.json"));
    snprintf(results_path, sizeof(results_path), "%s", cinfer_test_tmp_path("results.json"));
    ck_assert_int_eq(json_dump_file(cases, cases_path, JSON_COMPACT), 0);
    json_decref(cases);
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof(cmd), "cd '%s' && node render.mjs '%s' '%s'", REFERENCE_DIR, cases_path, results_path);
    int status = cinfer_test_run(cmd, out, sizeof(out));
    ck_assert_msg(status == 0, "the official renderer failed (%d): %s\n%s", status, cmd, out);
    json_t *results = load_json(results_path);
    cinfer_test_remove_tmp_dir();
    ck_assert_uint_eq(json_array_size(results), l->n);
    return results;
}

static void print_first_difference(const char *want, size_t want_len, const char *got, size_t got_len)
{
    size_t at = 0;
    while (at < want_len && at < got_len && want[at] == got[at])
        at++;
    size_t from = at > 60 ? at - 60 : 0;
    printf("  first difference at byte %zu (official %zu bytes, cinfer %zu bytes)\n", at, want_len, got_len);
    printf("  official: \"%.*s\"\n", (int)((want_len - from) > 160 ? 160 : want_len - from), want + from);
    printf("  cinfer:   \"%.*s\"\n", (int)((got_len - from) > 160 ? 160 : got_len - from), got + from);
}

struct compare_stats {
    size_t cases, outputs_equal, both_failed, raise_messages_equal, mismatches;
};

/* Renders every case with cinfer and compares with the official result. */
static struct compare_stats compare_with_reference(const struct case_list *l, json_t *results)
{
    struct compare_stats st = {.cases = l->n};
    const char *compiled_src = NULL;
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error compile_err = {0};
    int compile_rc = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct render_case *c = &l->items[i];
        if (c->template_src != compiled_src && (!compiled_src || strcmp(compiled_src, c->template_src) != 0)) {
            cinfer_chat_template_free(&t);
            compile_rc = cinfer_chat_template_compile(c->template_src, c->template_len, "template.jinja", &t,
                                                      &compile_err);
            compiled_src = c->template_src;
        }
        struct cinfer_error err = compile_err;
        char *out = NULL;
        size_t out_len = 0;
        int rc = compile_rc ? compile_rc : cinfer_chat_template_render(t, c->context, strlen(c->context), &out,
                                                                       &out_len, &err);
        json_t *r = json_array_get(results, i);
        bool ref_ok = json_is_true(json_object_get(r, "ok"));
        const char *problem = NULL;
        char *want = NULL;
        size_t want_len = 0;
        if (ref_ok) {
            const char *b64 = json_string_value(json_object_get(r, "output_b64"));
            /* decode base64 */
            size_t n = strlen(b64);
            want = malloc(n + 1);
            ck_assert_ptr_nonnull(want);
            static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            unsigned acc = 0;
            int bits = 0;
            for (size_t k = 0; k < n && b64[k] != '='; k++) {
                const char *p = strchr(alphabet, b64[k]);
                ck_assert_ptr_nonnull(p);
                acc = (acc << 6) | (unsigned)(p - alphabet);
                bits += 6;
                if (bits >= 8) {
                    bits -= 8;
                    want[want_len++] = (char)((acc >> bits) & 0xff);
                }
            }
            if (rc)
                problem = "the official renderer succeeded, cinfer failed";
            else if (out_len != want_len || memcmp(out, want, want_len) != 0)
                problem = "the outputs differ";
            else
                st.outputs_equal++;
        } else {
            const char *ref_err = json_string_value(json_object_get(r, "error"));
            if (!rc) {
                problem = "the official renderer failed, cinfer succeeded";
            } else {
                st.both_failed++;
                /* An error the template raises itself carries text of the template:
                 * cinfer's message is "name:line:col: " and that same text. */
                if (ref_err[0] && strstr(c->template_src, ref_err)) {
                    size_t ml = strlen(err.message), rl = strlen(ref_err);
                    if (ml >= rl + 2 && strcmp(err.message + ml - rl, ref_err) == 0 &&
                        err.message[ml - rl - 2] == ':' && err.message[ml - rl - 1] == ' ')
                        st.raise_messages_equal++;
                    else
                        problem = "raise_exception() messages differ";
                }
            }
        }
        if (problem) {
            if (st.mismatches == 0) {
                printf("MISMATCH %s: %s\n  context: %.300s\n", c->name, problem, c->context);
                if (rc)
                    printf("  cinfer error: %s\n", err.message);
                if (!ref_ok)
                    printf("  official error: %s\n", json_string_value(json_object_get(r, "error")));
                if (ref_ok && !rc)
                    print_first_difference(want, want_len, out, out_len);
                else if (!rc)
                    printf("  cinfer output: \"%.200s\"\n", out);
            }
            st.mismatches++;
        }
        free(want);
        free(out);
    }
    cinfer_chat_template_free(&t);
    return st;
}

START_TEST(real_templates_match_official_renderer)
{
    struct case_list l = {0};
    real_template_cases(&l);
    json_t *results = reference_results(&l);
    struct compare_stats st = compare_with_reference(&l, results);
    printf("real templates: %zu templates, %zu cases compared: %zu outputs equal, %zu failing in both "
           "(%zu raise_exception messages equal), %zu mismatches\n",
           N_REAL_TEMPLATES, st.cases, st.outputs_equal, st.both_failed, st.raise_messages_equal, st.mismatches);
    ck_assert_msg(st.mismatches == 0, "%zu of %zu cases differ from the official renderer", st.mismatches, st.cases);
    ck_assert_uint_gt(st.outputs_equal, 150);
    ck_assert_uint_gt(st.raise_messages_equal, 5);
    json_decref(results);
    free_cases(&l);
}
END_TEST

START_TEST(features_match_official_renderer)
{
    struct case_list l = {0};
    feature_cases(&l);
    json_t *results = reference_results(&l);
    struct compare_stats st = compare_with_reference(&l, results);
    printf("language features: %zu cases compared: %zu outputs equal, %zu failing in both (%zu raise_exception "
           "messages equal), %zu mismatches\n",
           st.cases, st.outputs_equal, st.both_failed, st.raise_messages_equal, st.mismatches);
    ck_assert_msg(st.mismatches == 0, "%zu of %zu cases differ from the official renderer", st.mismatches, st.cases);
    ck_assert_uint_gt(st.outputs_equal, 100);
    json_decref(results);
    free_cases(&l);
}
END_TEST

/* ---- unit checks (no node needed) ------------------------------------------------------ */

static int render_str(const char *src, const char *context, char **out, struct cinfer_error *err)
{
    struct cinfer_chat_template *t = NULL;
    int rc = cinfer_chat_template_compile(src, strlen(src), "chat.jinja", &t, err);
    if (rc)
        return rc;
    rc = cinfer_chat_template_render(t, context, context ? strlen(context) : 0, out, NULL, err);
    cinfer_chat_template_free(&t);
    ck_assert_ptr_null(t);
    return rc;
}

START_TEST(syntax_errors_name_line_and_column)
{
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error err;
    const char *src = "line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}";
    ck_assert_int_eq(cinfer_chat_template_compile(src, strlen(src), "chat.jinja", &t, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.message, "chat.jinja:3:10: expected an expression, found '}}'") != NULL, "%s",
                  err.message);
    src = "{% for m in messages %}\n{{ m }}\n";
    ck_assert_int_eq(cinfer_chat_template_compile(src, strlen(src), "loop.jinja", &t, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "loop.jinja:1:4: 'for' is never closed") != NULL &&
                      strstr(err.message, "endfor") != NULL,
                  "%s", err.message);
    src = "{% for m in messages %}{% endif %}";
    ck_assert_int_eq(cinfer_chat_template_compile(src, strlen(src), "x.jinja", &t, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "x.jinja:1:27: expected 'endfor' to close 'for' (line 1), found 'endif'") != NULL,
                  "%s", err.message);
    src = "ok\n\n   {{ 'unterminated }}";
    ck_assert_int_eq(cinfer_chat_template_compile(src, strlen(src), "s.jinja", &t, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "s.jinja:3:7: unterminated string literal") != NULL, "%s", err.message);
    src = "{% frobnicate %}";
    ck_assert_int_eq(cinfer_chat_template_compile(src, strlen(src), "s.jinja", &t, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "s.jinja:1:4: unknown statement 'frobnicate'") != NULL, "%s", err.message);
}
END_TEST

START_TEST(runtime_errors_name_what_failed)
{
    char *out = NULL;
    struct cinfer_error err;
    ck_assert_int_ne(render_str("x\n  {{ 'a'|frobnicate }}", "{}", &out, &err), 0);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.message, "chat.jinja:2:9: unknown StringValue filter: frobnicate") != NULL, "%s",
                  err.message);
    ck_assert_int_ne(render_str("{{ x is prime }}", "{}", &out, &err), 0);
    ck_assert_msg(strstr(err.message, "unknown test: prime") != NULL, "%s", err.message);
    ck_assert_int_eq(render_str("{{ raise_exception('Roles must alternate') }}", "{}", &out, &err),
                     CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err.message, "chat.jinja:1:4: Roles must alternate");
    ck_assert_int_eq(render_str("{{ messages }}", "[1, 2]", &out, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "context JSON: expected an object") != NULL, "%s", err.message);
    ck_assert_int_eq(render_str("{{ messages }}", "{\"messages\": ", &out, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "context JSON") != NULL, "%s", err.message);
}
END_TEST

START_TEST(renders_without_context)
{
    char *out = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(render_str("a{{ missing }}b{{ missing.x }}", NULL, &out, &err), 0);
    ck_assert_str_eq(out, "ab");
    free(out);
}
END_TEST

START_TEST(output_and_memory_are_bounded)
{
    char *out = NULL;
    struct cinfer_error err;
    /* doubling a string: 2^40 bytes if nothing stopped it */
    int rc = render_str("{% set ns = namespace(v='xxxxxxxx') %}{% for i in range(40) %}{% set ns.v = ns.v ~ ns.v %}"
                        "{% endfor %}{{ ns.v }}",
                        "{}", &out, &err);
    ck_assert_int_eq(rc, CINFER_ERR_RANGE);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.message, "exceed") != NULL || strstr(err.message, "MiB") != NULL, "%s", err.message);
}
END_TEST

START_TEST(steps_and_recursion_are_bounded)
{
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error err;
    struct jinja_limits lim;
    cinfer_jinja_default_limits(&lim);
    lim.max_steps = 100000;
    const char *loops = "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}";
    ck_assert_int_eq(cinfer_chat_template_compile(loops, strlen(loops), "loops.jinja", &t, &err), 0);
    char *out = NULL;
    ck_assert_int_eq(cinfer_jinja_render_with_limits(t, "{}", 2, &lim, &out, NULL, &err), CINFER_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "steps") != NULL, "%s", err.message);
    cinfer_chat_template_free(&t);

    const char *rec = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    ck_assert_int_eq(cinfer_chat_template_compile(rec, strlen(rec), "rec.jinja", &t, &err), 0);
    ck_assert_int_eq(cinfer_chat_template_render(t, "{}", 2, &out, NULL, &err), CINFER_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "deeper than") != NULL, "%s", err.message);
    cinfer_chat_template_free(&t);

    /* nesting in the source is bounded at compile time */
    char deep[4000];
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        deep[n++] = '(';
    memcpy(deep + n, "1", 2);
    char src[4100];
    snprintf(src, sizeof(src), "{{ %s }}", deep);
    ck_assert_int_eq(cinfer_chat_template_compile(src, strlen(src), "deep.jinja", &t, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "deeper than") != NULL, "%s", err.message);
}
END_TEST

struct thread_job {
    const struct cinfer_chat_template *t;
    const char *context;
    char *out;
};

static void *render_thread(void *arg)
{
    struct thread_job *j = arg;
    struct cinfer_error err;
    for (int i = 0; i < 20; i++) {
        free(j->out);
        j->out = NULL;
        if (cinfer_chat_template_render(j->t, j->context, strlen(j->context), &j->out, NULL, &err) != 0)
            return NULL;
    }
    return NULL;
}

START_TEST(one_template_renders_from_many_threads)
{
    size_t len;
    char *src = read_file(DATA_DIR "/qwen3.jinja", &len);
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(cinfer_chat_template_compile(src, len, "qwen3.jinja", &t, &err), 0);
    const char *ctx = "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
                      "\"Q\"}], \"add_generation_prompt\": true, \"enable_thinking\": false}";
    struct thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct thread_job){t, ctx, NULL};
        ck_assert_int_eq(pthread_create(&th[i], NULL, render_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(jobs[i].out);
        ck_assert_str_eq(jobs[i].out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
                                      "<|im_start|>assistant\n<think>\n\n</think>\n\n");
        free(jobs[i].out);
    }
    cinfer_chat_template_free(&t);
    free(src);
}
END_TEST

static bool reference_available(char *why, size_t why_bytes)
{
    FILE *f = fopen(REFERENCE_DIR "/SKIP", "r");
    if (f) {
        size_t n = fread(why, 1, why_bytes - 1, f);
        fclose(f);
        why[n] = 0;
        return false;
    }
    if (access(REFERENCE_DIR "/node_modules/@huggingface/jinja/package.json", R_OK) != 0) {
        snprintf(why, why_bytes, "%s has no @huggingface/jinja: run the test through ctest, whose "
                 "chat_template_reference fixture installs it", REFERENCE_DIR);
        return false;
    }
    return true;
}

static Suite *suite_chat_template(bool with_reference)
{
    Suite *s = suite_create("chat_template");
    TCase *unit = tcase_create("unit");
    tcase_set_timeout(unit, 120);
    tcase_add_test(unit, syntax_errors_name_line_and_column);
    tcase_add_test(unit, runtime_errors_name_what_failed);
    tcase_add_test(unit, renders_without_context);
    tcase_add_test(unit, output_and_memory_are_bounded);
    tcase_add_test(unit, steps_and_recursion_are_bounded);
    tcase_add_test(unit, one_template_renders_from_many_threads);
    suite_add_tcase(s, unit);
    if (with_reference) {
        TCase *ref = tcase_create("official_renderer");
        tcase_set_timeout(ref, 300);
        tcase_add_test(ref, real_templates_match_official_renderer);
        tcase_add_test(ref, features_match_official_renderer);
        suite_add_tcase(s, ref);
    }
    return s;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[512];
    bool with_reference = reference_available(why, sizeof(why));
    int rc = cinfer_test_run_suite(suite_chat_template(with_reference));
    if (rc == 0 && !with_reference) {
        printf("test_chat_template: SKIP (the comparisons with the official renderer): %s\n", why);
        return SKIP_EXIT_CODE;
    }
    return rc;
}
