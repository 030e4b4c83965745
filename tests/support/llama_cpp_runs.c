#include "support/llama_cpp_runs.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "support/greedy_reference.h"

#define MAX_IDS 512

static void ids_of(json_t *array, int32_t *out, int *n)
{
    size_t i;
    json_t *v;
    *n = 0;
    json_array_foreach(array, i, v) {
        ck_assert_int_lt(*n, MAX_IDS);
        out[(*n)++] = (int32_t)json_integer_value(v);
    }
}

/* "q4_K (22), f32 (9), ..." of a loaded model's weights, matrices and vectors as bound. */
static void type_census(const struct cinfer_model *m, char *out, size_t cap)
{
    int counts[32] = {0};
    const struct cinfer_weight *all[2 + 14 * 64];
    int n = 0;
    all[n++] = &m->tok_embeddings;
    if (m->lm_head.data != m->tok_embeddings.data)
        all[n++] = &m->lm_head;
    for (int l = 0; l < m->config.num_layers && l < 64; l++) {
        const struct cinfer_layer_weights *w = &m->layers[l];
        const struct cinfer_weight *mats[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int k = 0; k < 7; k++)
            all[n++] = mats[k];
    }
    for (int i = 0; i < n; i++)
        if (all[i]->data && (unsigned)all[i]->dtype < 32)
            counts[all[i]->dtype]++;
    size_t used = 0;
    out[0] = 0;
    for (int t = 0; t < 32; t++)
        if (counts[t] && used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s %d", used ? ", " : "",
                                     cinfer_dtype_name((enum cinfer_dtype)t), counts[t]);
}

struct llama_cpp_runs_result cinfer_test_llama_cpp_runs(const char *dir, int min_runs,
                                                        const struct cinfer_tokenizer_ops *tok_ops)
{
    char expected[512];
    snprintf(expected, sizeof expected, "%s/expected.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(expected, 0, &jerr);
    ck_assert_msg(root, "%s: line %d: %s", expected, jerr.line, jerr.text);
    json_t *runs = json_object_get(root, "runs");
    ck_assert_msg(json_is_array(runs) && (int)json_array_size(runs) >= min_runs, "%s: expected %d runs or more",
                  expected, min_runs);
    int n_new = (int)json_integer_value(json_object_get(root, "n_new"));
    double near_tie = json_real_value(json_object_get(root, "near_tie_logit_gap"));
    ck_assert(near_tie > 0 && near_tie <= 0.5);
    printf("llama.cpp: %s\n", json_string_value(json_object_get(root, "llama_cpp_build")));
    struct cinfer_error err = {0};
    struct llama_cpp_runs_result r = {0};
    size_t i;
    json_t *run;
    char last_file[256] = "";
    json_array_foreach(runs, i, run) {
        const char *file = json_string_value(json_object_get(run, "file"));
        const char *prompt = json_string_value(json_object_get(run, "prompt"));
        json_t *want = json_object_get(run, "llama_cpp");
        const char *want_text = json_string_value(json_object_get(want, "text"));
        ck_assert_msg(file && want && (!prompt || want_text), "%s: run %zu lacks file, llama_cpp or text", expected,
                      i);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        int32_t prompt_ids[MAX_IDS], want_ids[MAX_IDS], got[MAX_IDS];
        int n_prompt, n_want;
        ids_of(json_object_get(want, "prompt_ids"), prompt_ids, &n_prompt);
        ids_of(json_object_get(want, "greedy_ids"), want_ids, &n_want);
        ck_assert_int_eq(n_want, n_new);
        char label[64]; /* the prompt's text, or its length where it was given as ids */
        if (prompt)
            snprintf(label, sizeof label, "\"%.50s\"", prompt);
        else
            snprintf(label, sizeof label, "%d-id prompt", n_prompt);

        if (strcmp(file, last_file) != 0) { /* what the file holds, as cinfer binds it */
            struct cinfer_model *m = NULL;
            struct cinfer_model_load_options lo = {0};
            ck_assert_msg(cinfer_model_load(path, &lo, &m, &err) == 0, "%s: %s", path, err.message);
            char census[256];
            type_census(m, census, sizeof census);
            printf("%s: matrices %s\n", file, census);
            cinfer_model_free(&m);
            snprintf(last_file, sizeof last_file, "%s", file);
            r.files++;
        }
        int n_got = cinfer_test_greedy_reference(path, prompt_ids, n_prompt, n_new, 0, got);
        ck_assert_int_eq(n_got, n_new);
        int same = 0;
        while (same < n_new && got[same] == want_ids[same])
            same++;
        double gap = same < n_new ? json_real_value(json_array_get(json_object_get(run, "reference_gaps"), same)) : 0;
        ck_assert_msg(same == n_new || gap < near_tie,
                      "%s, %s: greedy token %d is %d, llama.cpp's %d, where the exact top two are %.4f apart "
                      "(a near tie is under %.2f)",
                      file, label, same, got[same], want_ids[same], gap, near_tie);
        r.full += same == n_new;

        if (tok_ops && prompt && same == n_new) {
            struct cinfer_tokenizer *tok = NULL;
            ck_assert_msg(tok_ops->open(path, &tok, &err) == 0, "%s: tokenizer: %s", path, err.message);
            struct cinfer_token_ids ids = {0};
            ck_assert_msg(tok_ops->encode(tok, prompt, strlen(prompt), 1, &ids, &err) == 0, "encode: %s",
                          err.message);
            ck_assert_msg((int)ids.len == n_prompt && !memcmp(ids.ids, prompt_ids, sizeof(int32_t) * ids.len),
                          "%s: \"%s\" encodes to %zu ids, llama.cpp's %d differ", file, prompt, ids.len, n_prompt);
            cinfer_token_ids_free(&ids);
            int32_t all[2 * MAX_IDS];
            memcpy(all, prompt_ids, sizeof(int32_t) * (size_t)n_prompt);
            memcpy(all + n_prompt, got, sizeof(int32_t) * (size_t)n_new);
            char *text = NULL;
            size_t len = 0;
            ck_assert_msg(tok_ops->decode(tok, all, (size_t)(n_prompt + n_new), 1, &text, &len, &err) == 0,
                          "decode: %s", err.message);
            const char *llama_text = want_text[0] == ' ' && (len == 0 || text[0] != ' ') ? want_text + 1 : want_text;
            ck_assert_msg(len == strlen(llama_text) && !memcmp(text, llama_text, len),
                          "%s, \"%s\": text\n  cinfer:    %.*s\n  llama.cpp: %s", file, prompt, (int)len, text,
                          llama_text);
            free(text);
            tok_ops->close(tok);
        }
        if (same == n_new)
            printf("  %s: all %d greedy tokens as llama.cpp%s\n", label, n_new,
                   tok_ops && prompt ? "; prompt ids and text too" : "");
        else
            printf("  %s: the first %d greedy tokens as llama.cpp, then a near tie (the exact top two %.4f "
                   "apart): cinfer %d, llama.cpp %d\n", label, same, gap, got[same], want_ids[same]);
        r.checked++;
    }
    json_decref(root);
    return r;
}
