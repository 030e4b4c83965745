/* model.dtype (--dtype): the weight matrices held in another type than the checkpoint
 * stores them in, converted once at load. Widening (f16/bf16/Q8_0 to f32, f16 or bf16 to
 * f32) is exact; narrowing rounds to nearest even, and a finite value beyond the
 * narrower type's range is refused (it would become infinite). Vectors (norms, biases)
 * are f32 already and stay so; the converted matrices are owned copies, not file
 * mappings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "model/model_load_internal.h"

static size_t element_bytes(enum cinfer_dtype t)
{
    return t == CINFER_DTYPE_F32 ? 4 : 2;
}

/* Converts one matrix in place of its binding; a weight already of the target type, or
 * absent, is left alone. */
static int convert_matrix(struct cinfer_model_storage *s, struct cinfer_weight *w, const char *what,
                          enum cinfer_dtype target, struct cinfer_error *err)
{
    if (!w->data || w->dtype == target)
        return CINFER_OK;
    size_t row_bytes = (size_t)w->cols * element_bytes(target);
    unsigned char *out = malloc((size_t)w->rows * row_bytes); /* (rows, cols) of target */
    float *row = malloc((size_t)w->cols * sizeof *row);       /* (cols) */
    if (!out || !row) {
        free(out);
        free(row);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "model.dtype: out of memory converting a %lld x %lld matrix "
                                "to %s", (long long)w->rows, (long long)w->cols, cinfer_dtype_name(target));
    }
    for (int64_t r = 0; r < w->rows; r++) {
        cinfer_kernel_weight_row_to_f32(w->data, (enum cinfer_kernel_wtype)w->dtype, w->row_bytes, r, (int)w->cols,
                                        row);
        unsigned char *dst = out + (size_t)r * row_bytes;
        for (int64_t c = 0; c < w->cols; c++) {
            if (target == CINFER_DTYPE_F32) {
                ((float *)(void *)dst)[c] = row[c];
                continue;
            }
            uint16_t h = target == CINFER_DTYPE_F16 ? cinfer_kernel_f32_to_f16(row[c])
                                                    : cinfer_kernel_f32_to_bf16(row[c]);
            float back = target == CINFER_DTYPE_F16 ? cinfer_kernel_f16_to_f32(h) : cinfer_kernel_bf16_to_f32(h);
            if (isinf(back) && isfinite(row[c])) {
                double value = row[c];
                free(out);
                free(row);
                return cinfer_error_set(err, CINFER_ERR_RANGE, "model.dtype (--dtype) %s: %s holds %g at [%lld][%lld], "
                                        "beyond the range of %s; keep the checkpoint's type (auto) or choose f32",
                                        cinfer_dtype_name(target), what, value, (long long)r, (long long)c,
                                        cinfer_dtype_name(target));
            }
            ((uint16_t *)(void *)dst)[c] = h;
        }
    }
    free(row);
    int rc = cinfer_storage_own(s, out, err);
    if (rc)
        return rc;
    w->data = out;
    w->dtype = target;
    w->row_bytes = row_bytes;
    return CINFER_OK;
}

int cinfer_model_convert_matrices(struct cinfer_model *m, enum cinfer_dtype target, int *converted,
                                  struct cinfer_error *err)
{
    *converted = 0;
    struct cinfer_model_storage *s = m->storage;
    int tied = m->lm_head.data == m->tok_embeddings.data;
    struct cinfer_weight before = m->tok_embeddings;
    int rc = convert_matrix(s, &m->tok_embeddings, "the token embedding matrix", target, err);
    if (rc == CINFER_OK && tied)
        m->lm_head = m->tok_embeddings;
    *converted |= m->tok_embeddings.data != before.data;
    if (rc == CINFER_OK && !tied) {
        const void *was = m->lm_head.data;
        rc = convert_matrix(s, &m->lm_head, "the LM head", target, err);
        *converted |= m->lm_head.data != was;
    }
    for (int l = 0; rc == CINFER_OK && l < m->config.num_layers; l++)
        for (size_t k = 0; rc == CINFER_OK && k < cinfer_layer_weight_spec_count; k++) {
            const struct cinfer_layer_weight_spec *spec = &cinfer_layer_weight_specs[k];
            if (spec->rows == DIM_ONE)
                continue; /* a vector */
            struct cinfer_weight *w = (struct cinfer_weight *)((char *)&m->layers[l] + spec->offset);
            if (!w->data)
                continue; /* a sparse layer's dense MLP */
            const void *was = w->data;
            char what[96];
            snprintf(what, sizeof what, "layer %d %s", l, spec->hf_name);
            rc = convert_matrix(s, w, what, target, err);
            *converted |= w->data != was;
        }
    for (int l = 0; rc == CINFER_OK && l < m->config.num_layers; l++) {
        struct cinfer_layer_weights *layer = &m->layers[l];
        for (int e = 0; rc == CINFER_OK && layer->experts && e < m->config.n_experts; e++) {
            struct cinfer_weight *parts[3] = {&layer->experts[e].gate, &layer->experts[e].up, &layer->experts[e].down};
            for (int p = 0; rc == CINFER_OK && p < 3; p++) {
                const void *was = parts[p]->data;
                char what[96];
                snprintf(what, sizeof what, "layer %d expert %d", l, e);
                rc = convert_matrix(s, parts[p], what, target, err);
                *converted |= parts[p]->data != was;
            }
        }
        if (rc == CINFER_OK && layer->router.data) {
            const void *was = layer->router.data;
            rc = convert_matrix(s, &layer->router, "a router", target, err);
            *converted |= layer->router.data != was;
        }
        struct cinfer_weight *shared[4] = {&layer->shared_expert.gate, &layer->shared_expert.up,
                                           &layer->shared_expert.down, &layer->shared_expert_gate};
        for (int p = 0; rc == CINFER_OK && p < 4; p++) {
            if (!shared[p]->data)
                continue; /* no shared expert (all but Qwen2-MoE) */
            const void *was = shared[p]->data;
            char what[96];
            snprintf(what, sizeof what, "layer %d shared expert", l);
            rc = convert_matrix(s, shared[p], what, target, err);
            *converted |= shared[p]->data != was;
        }
    }
    return rc;
}
