/* backend-cuda: KV page storage on the device and attention over it. The sequences and
 * their page tables (host memory) are packed into one upload (cuda_pack_seq_lists), or
 * were at step_begin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_backend.h"

static size_t kv_row_bytes(const struct cinfer_backend_kv_layout *l)
{
    switch (l->dtype) {
    case CINFER_KV_F32: return (size_t)l->kv_dim * 4;
    case CINFER_KV_F16:
    case CINFER_KV_BF16: return (size_t)l->kv_dim * 2;
    case CINFER_KV_Q8_0: return (size_t)l->kv_dim / 32 * 34;
    default: return 0;
    }
}

int cuda_pack_seq_lists(const struct cinfer_backend_attn_seq *const *lists, int n_lists, int n_seqs,
                        struct cinfer_cuda_attn_seq **packed, int32_t **tables, size_t *n_entries)
{
    size_t entries = 0, n = (size_t)n_lists * (size_t)n_seqs;
    for (int l = 0; l < n_lists; l++)
        for (int i = 0; i < n_seqs; i++)
            entries += (size_t)lists[l][i].n_pages;
    *packed = malloc(sizeof **packed * (n ? n : 1));
    *tables = malloc(sizeof **tables * (entries ? entries : 1));
    if (!*packed || !*tables)
        return -1;
    size_t at = 0;
    for (int l = 0; l < n_lists; l++)
        for (int i = 0; i < n_seqs; i++) {
            const struct cinfer_backend_attn_seq *s = &lists[l][i];
            (*packed)[(size_t)l * n_seqs + i] =
                (struct cinfer_cuda_attn_seq){s->row, s->n_tokens, s->start_pos, s->n_pages, (int)at};
            for (int p = 0; p < s->n_pages; p++)
                (*tables)[at++] = s->page_table[p];
        }
    *n_entries = entries;
    return 0;
}

int cuda_kv_create(void *state, const struct cinfer_backend_kv_layout *layout, void **kv, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    *kv = NULL;
    size_t row_bytes = kv_row_bytes(layout);
    if (!row_bytes || layout->head_dim <= 0 || layout->kv_dim % layout->head_dim != 0 ||
        (layout->dtype == CINFER_KV_Q8_0 && layout->head_dim % 32 != 0))
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "cuda device %d: KV storage of type %u, kv_dim %d, head_dim %d: expected type f32, "
                                "f16, bf16 or q8_0 (q8_0 with head_dim a multiple of 32)",
                                be->device, layout->dtype, layout->kv_dim, layout->head_dim);
    struct cuda_kv_storage *s = calloc(1, sizeof *s);
    if (!s)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cuda backend: out of memory");
    s->d = (struct cinfer_cuda_kv){.n_layers = layout->n_layers,
                                   .n_pages = layout->n_pages,
                                   .page_tokens = layout->page_tokens,
                                   .kv_dim = layout->kv_dim,
                                   .head_dim = layout->head_dim,
                                   .dtype = layout->dtype,
                                   .row_bytes = row_bytes};
    size_t bytes = (size_t)layout->n_layers * (size_t)layout->n_pages * (size_t)layout->page_tokens * row_bytes;
    char call[128];
    snprintf(call, sizeof call, "cudaMalloc of 2 x %zu bytes for the KV cache", bytes);
    int rc = cuda_enter(be) ? cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s", be->first_error.message) : 0;
    if (!rc)
        rc = cuda_fail(be, cudaMalloc(&s->d.k, bytes ? bytes : 1), call, err);
    if (!rc)
        rc = cuda_fail(be, cudaMalloc(&s->d.v, bytes ? bytes : 1), call, err);
    /* zeros, not garbage, in slots no token wrote yet */
    if (!rc)
        rc = cuda_fail(be, cudaMemsetAsync(s->d.k, 0, bytes, be->stream), "cudaMemsetAsync (KV)", err);
    if (!rc)
        rc = cuda_fail(be, cudaMemsetAsync(s->d.v, 0, bytes, be->stream), "cudaMemsetAsync (KV)", err);
    if (rc < 0) {
        cuda_kv_destroy(be, s);
        return rc;
    }
    *kv = s;
    return 0;
}

void cuda_kv_destroy(void *state, void *kv)
{
    struct cuda_backend *be = state;
    struct cuda_kv_storage *s = kv;
    if (!s)
        return;
    cuda_step_flush(be);
    be->generation++; /* no graph may write into it again */
    if (!cuda_enter(be)) {
        if (s->d.k)
            cuda_note(be, cudaFree(s->d.k), "cudaFree (KV)");
        if (s->d.v)
            cuda_note(be, cudaFree(s->d.v), "cudaFree (KV)");
    }
    free(s);
}

void cuda_kv_write(void *state, void *kv, int layer, const float *k, const float *v, int n, const int32_t *slots)
{
    struct cuda_backend *be = state;
    struct cuda_kv_storage *s = kv;
    if (n <= 0)
        return;
    size_t bytes = (size_t)n * sizeof(int32_t);
    void *dev_slots = cuda_step_device(be, slots, bytes); /* copied at step_begin, or staged here */
    struct step_op op = step_record_kv_write(kv, layer, k, v, n, slots);
    if (cuda_step_take(be, &op, dev_slots != NULL) || cuda_enter(be))
        return;
    struct cuda_host_part part = {slots, bytes};
    if (dev_slots || !cuda_stage_parts(be, &part, 1, &dev_slots))
        cuda_note(be, cinfer_cuda_kv_write(be->stream, &s->d, layer, k, v, n, dev_slots), "cinfer_cuda_kv_write");
}

int cuda_attention_windowed(void *state, void *kv, int layer, const float *q, float *out,
                            const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                            int head_dim, const struct cinfer_backend_attn_options *opts, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    struct cuda_kv_storage *s = kv;
    if (n_seqs <= 0)
        return 0;
    int window = opts && opts->window > 0 ? opts->window : 0;
    void *dev[2] = {NULL, NULL};
    int staged = cuda_step_seq_list(be, seqs, n_seqs, &dev[0], &dev[1]); /* copied at step_begin */
    struct step_op op = step_record_attention(kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, opts);
    int max_tokens = (int)op.i[5], seen_class = (int)op.i[6], max_context;
    if (cuda_step_take(be, &op, staged))
        return 0; /* a failure shows at status() */
    if (cuda_enter(be))
        return cuda_status(be, err);
    if (!staged) {
        struct cinfer_cuda_attn_seq *packed = NULL;
        int32_t *tables = NULL;
        size_t entries = 0;
        int failed = cuda_pack_seq_lists(&seqs, 1, n_seqs, &packed, &tables, &entries) < 0;
        if (failed) {
            free(packed);
            free(tables);
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "cuda backend: out of memory packing %d sequences",
                                    n_seqs);
        }
        struct cuda_host_part parts[2] = {{packed, sizeof *packed * (size_t)n_seqs},
                                          {tables, sizeof *tables * entries}};
        failed = cuda_stage_parts(be, parts, 2, dev);
        free(packed);
        free(tables);
        if (failed)
            return cuda_status(be, err);
    }
    /* the kernel takes the context only to pick its warps per block: the class's smallest
     * span picks what the real one does (with or without the window), so a replayed graph
     * launches what the record says whatever this step's context */
    max_context = seen_class == 2 ? 512 : seen_class == 1 ? 128 : 1;
    float scale = opts && opts->scale > 0.0f ? opts->scale : 1.0f / sqrtf((float)head_dim);
    float softcap = opts && opts->softcap > 0.0f ? opts->softcap : 0.0f;
    const float *sinks = opts ? opts->sinks : NULL;
    if (cuda_note(be, cinfer_cuda_attention(be->stream, &s->d, layer, q, out, dev[0], dev[1], n_seqs, max_tokens,
                                            max_context, n_heads, n_kv_heads, head_dim, window, scale, softcap, sinks),
                  "cinfer_cuda_attention"))
        return cuda_status(be, err);
    return 0;
}

int cuda_attention(void *state, void *kv, int layer, const float *q, float *out,
                   const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads, int head_dim,
                   struct cinfer_error *err)
{
    struct cinfer_backend_attn_options plain = {0, 0.0f, 0.0f, NULL};
    return cuda_attention_windowed(state, kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, &plain,
                                   err);
}
