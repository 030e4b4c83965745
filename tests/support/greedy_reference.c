#include "support/greedy_reference.h"

#include <stdlib.h>

#include "model/model.h"
#include "model/runtime.h"

int cinfer_test_greedy_reference(const char *model_path, const int32_t *prompt, int n_prompt, int max_new,
                                 int stop_at_eos, int32_t *out)
{
    struct cinfer_error err = {0};
    struct cinfer_model *m = NULL;
    struct cinfer_model_load_options lo = {0};
    int rc = cinfer_model_load(model_path, &lo, &m, &err);
    if (rc)
        return rc;
    int total = n_prompt + max_new;
    struct cinfer_runtime_options ro = {.kv_cache_bytes = 0, .kv_page_tokens = 16, .n_threads = 0,
                                        .max_batch_tokens = n_prompt + 1};
    const struct cinfer_model_config *c = &m->config;
    ro.kv_cache_bytes = (size_t)(total + 32) * 2 * (size_t)c->num_layers * (size_t)c->num_kv_heads *
                        (size_t)c->head_dim * sizeof(float);
    struct cinfer_runtime *rt = NULL;
    rc = cinfer_runtime_create(m, &ro, &rt, &err);
    if (rc) {
        cinfer_model_free(&m);
        return rc;
    }
    int page_tokens = cinfer_runtime_kv_page_tokens(rt);
    int n_pages = (total + page_tokens - 1) / page_tokens;
    int32_t *pages = malloc((size_t)n_pages * sizeof *pages);
    int32_t *tokens = malloc((size_t)total * sizeof *tokens);
    float *logits = malloc((size_t)c->vocab_size * sizeof *logits);
    int produced = 0;
    if (!pages || !tokens || !logits)
        rc = CINFER_ERR_NOMEM;
    for (int i = 0; rc == 0 && i < n_pages; i++)
        rc = cinfer_runtime_kv_page_alloc(rt, &pages[i]);
    for (int i = 0; rc == 0 && i < n_prompt; i++)
        tokens[i] = prompt[i];
    int n = n_prompt, computed = 0;
    while (rc == 0 && produced < max_new) {
        struct cinfer_seq_chunk chunk = {.tokens = tokens + computed, .n_tokens = n - computed, .start_pos = computed,
                                         .page_table = pages, .n_pages = n_pages, .logits = CINFER_LOGITS_LAST,
                                         .logits_out = logits};
        rc = cinfer_runtime_forward(rt, &chunk, 1, &err);
        if (rc)
            break;
        computed = n;
        int32_t best = 0;
        for (int v = 1; v < c->vocab_size; v++)
            if (logits[v] > logits[best])
                best = v;
        out[produced++] = best;
        tokens[n++] = best;
        int is_eos = 0;
        for (int e = 0; e < c->n_eos; e++)
            is_eos |= c->eos_token_ids[e] == best;
        if (stop_at_eos && is_eos)
            break;
    }
    free(pages);
    free(tokens);
    free(logits);
    cinfer_runtime_destroy(&rt);
    cinfer_model_free(&m);
    return rc ? rc : produced;
}
