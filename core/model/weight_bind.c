/* Binding one stored tensor to one cinfer_weight, after checking its shape against
 * the configuration and its type against what the forward pass reads. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model/model_load_internal.h"

int cinfer_storage_own(struct cinfer_model_storage *s, void *p, struct cinfer_error *err)
{
    if (s->n_owned == s->cap_owned) {
        size_t cap = s->cap_owned ? 2 * s->cap_owned : 16;
        void **grown = realloc(s->owned, cap * sizeof *grown);
        if (!grown) {
            free(p);
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "model loader: out of memory");
        }
        s->owned = grown;
        s->cap_owned = cap;
    }
    s->owned[s->n_owned++] = p;
    return CINFER_OK;
}

static void format_dims(char *out, size_t out_bytes, int n_dims, const int64_t *dims)
{
    size_t n = (size_t)snprintf(out, out_bytes, "[");
    for (int d = 0; d < n_dims && n < out_bytes; d++)
        n += (size_t)snprintf(out + n, out_bytes - n, "%s%" PRId64, d ? ", " : "", dims[d]);
    if (n < out_bytes)
        snprintf(out + n, out_bytes - n, "]");
}

static int shape_matches(const struct cinfer_stored_tensor *t, const struct cinfer_weight_expect *want,
                         int64_t expect[2], int *expect_dims)
{
    if (want->vector) {
        expect[0] = want->cols;
        *expect_dims = 1;
        return t->n_dims == 1 && t->dims[0] == want->cols;
    }
    /* In ggml order the row length comes first. */
    expect[0] = t->ggml_order ? want->cols : want->rows;
    expect[1] = t->ggml_order ? want->rows : want->cols;
    *expect_dims = 2;
    return t->n_dims == 2 && t->dims[0] == expect[0] && t->dims[1] == expect[1];
}

/* 1-D weights end up f32: the stored f16/bf16 values are widened exactly, quantized
 * ones dequantized (kernels/quant.c). */
static int widen_vector(struct cinfer_model_storage *s, const struct cinfer_stored_tensor *t, int64_t n,
                        const void **out, struct cinfer_error *err)
{
    float *v = malloc((size_t)n * sizeof *v); /* (n,) */
    if (!v)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory widening tensor %s", t->file, t->name);
    cinfer_kernel_dequantize_row((enum cinfer_kernel_wtype)t->dtype, t->data, n, v);
    *out = v;
    return cinfer_storage_own(s, v, err);
}

int cinfer_bind_weight(struct cinfer_model_storage *s, const struct cinfer_stored_tensor *t,
                       const struct cinfer_weight_expect *want, struct cinfer_weight *w, struct cinfer_error *err)
{
    int64_t expect[2];
    int expect_dims;
    if (!shape_matches(t, want, expect, &expect_dims)) {
        char found[160], wanted[80];
        format_dims(found, sizeof found, t->n_dims, t->dims);
        format_dims(wanted, sizeof wanted, expect_dims, expect);
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tensor %s has shape %s%s, expected %s from %s", t->file,
                                t->name, found, t->ggml_order ? " (ggml order)" : "", wanted, want->from);
    }
    if (!t->supported)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: tensor %s is stored as %s; cinfer reads f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                                "q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs and mxfp4 weights",
                                t->file, t->name, t->dtype_name);
    int block = cinfer_dtype_block_values(t->dtype);
    if (block > 1 && want->cols % block != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tensor %s is %s with rows of %" PRId64
                                " values, not a multiple of its block of %d", t->file, t->name,
                                cinfer_dtype_name(t->dtype), want->cols, block);
    int64_t rows = want->vector ? 1 : want->rows;
    size_t row_bytes = cinfer_dtype_row_bytes(t->dtype, want->cols);
    if ((uint64_t)rows * row_bytes != t->nbytes)
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s: tensor %s holds %" PRIu64 " bytes, expected %" PRIu64,
                                t->file, t->name, t->nbytes, (uint64_t)rows * row_bytes);
    w->dtype = t->dtype;
    w->rows = rows;
    w->cols = want->cols;
    w->data = t->data;
    w->row_bytes = row_bytes;
    s->stored_bytes += t->nbytes;
    if (want->vector && t->dtype != CINFER_DTYPE_F32) {
        int rc = widen_vector(s, t, want->cols, &w->data, err);
        if (rc)
            return rc;
        w->dtype = CINFER_DTYPE_F32;
        w->row_bytes = (size_t)want->cols * 4;
    }
    return CINFER_OK;
}
