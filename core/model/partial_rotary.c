/* Partial rotary (Phi-4-mini's partial_rotary_factor, GGUF rope.dimension_count below
 * the head size): each head's q and k dims reordered once at load so the backend's
 * full-head rope turns the right pairs (see cinfer_model_arrange_partial_rotary). */
#include <stdlib.h>
#include <string.h>

#include "model/model_load_internal.h"

/* Where row j of the arranged head comes from, for a head of d dims whose first r turn
 * in rotate_half pairs (i, i + r/2): the rope pairs (j, j + d/2), so dim i < r/2 stays
 * at i and its partner i + r/2 moves to i + d/2; the d - r unturned dims fill the
 * places after each half's turned ones, where the angles are zero. */
static int source_dim(int j, int d, int r)
{
    int half = d / 2, rh = r / 2, rest = half - rh; /* each half: rh turned, rest unturned */
    if (j < rh)
        return j;
    if (j < half)
        return r + (j - rh);
    if (j < half + rh)
        return rh + (j - half);
    return r + rest + (j - half - rh);
}

/* w's rows, head by head, reordered into a copy the storage owns. */
static int arrange_rows(struct cinfer_model_storage *s, struct cinfer_weight *w, int head_dim, int rotary_dim,
                        struct cinfer_error *err)
{
    if (!w->data)
        return CINFER_OK;
    uint8_t *copy = malloc((size_t)w->rows * w->row_bytes); /* (rows, row_bytes) */
    if (!copy)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "partial rotary: out of memory arranging q/k rows");
    for (int64_t row = 0; row < w->rows; row++) {
        int64_t head = row / head_dim;
        int64_t from = head * head_dim + source_dim((int)(row % head_dim), head_dim, rotary_dim);
        memcpy(copy + (size_t)row * w->row_bytes, (const uint8_t *)w->data + (size_t)from * w->row_bytes,
               w->row_bytes);
    }
    w->data = copy;
    return cinfer_storage_own(s, copy, err);
}

/* A vector over heads (a bias: heads * head_dim f32) or over one head (a q/k norm). */
static int arrange_vector(struct cinfer_model_storage *s, struct cinfer_weight *w, int head_dim, int rotary_dim,
                          struct cinfer_error *err)
{
    if (!w->data)
        return CINFER_OK;
    if (w->dtype != CINFER_DTYPE_F32 || w->cols % head_dim)
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "partial rotary: a q/k vector of %lld values is not f32 heads",
                                (long long)w->cols);
    float *copy = malloc((size_t)w->cols * sizeof *copy); /* (cols,) */
    if (!copy)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "partial rotary: out of memory arranging q/k vectors");
    const float *from = w->data;
    for (int64_t i = 0; i < w->cols; i++)
        copy[i] = from[i / head_dim * head_dim + source_dim((int)(i % head_dim), head_dim, rotary_dim)];
    w->data = copy;
    return cinfer_storage_own(s, copy, err);
}

int cinfer_model_arrange_partial_rotary(struct cinfer_model *m, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    int d = c->head_dim, r = cinfer_model_rotary_dim(c);
    if (r == d)
        return CINFER_OK;
    struct cinfer_model_storage *s = m->storage;
    for (int l = 0; l < c->num_layers; l++) {
        struct cinfer_layer_weights *w = &m->layers[l];
        int rc;
        if ((rc = arrange_rows(s, &w->wq, d, r, err)) || (rc = arrange_rows(s, &w->wk, d, r, err)) ||
            (rc = arrange_vector(s, &w->bq, d, r, err)) || (rc = arrange_vector(s, &w->bk, d, r, err)) ||
            (rc = arrange_vector(s, &w->q_norm, d, r, err)) || (rc = arrange_vector(s, &w->k_norm, d, r, err)))
            return rc;
    }
    m->matrices_mapped = 0; /* wq and wk are owned copies now: dropping their pages would zero them */
    return CINFER_OK;
}
