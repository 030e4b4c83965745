/* core/model/forward.c — the batched forward pass of a Llama-family model.
 *
 * Every chunk of every sequence in the call is laid end to end as rows of one
 * activation matrix (T = total new tokens), so each projection is one matmul per
 * weight per call; only attention looks at sequences separately, reading each one's
 * K/V through its page table. Reads top to bottom like llama2.c's run.c. */
#include <string.h>

#include "kernels.h"
#include "model/runtime_internal.h"

/* Checks the batch against the contract in runtime.h and lays out the per-token host
 * arrays: tokens, RoPE angles, K/V slots, attention sequences and asked logits rows.
 * Returns the total token count T, or a negative status. */
static int plan_batch(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs, int *n_logits_rows,
                      struct cinfer_error *err)
{
    if (n_seqs < 1 || !seqs)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "forward: the batch has no sequences (n_seqs %d)",
                                n_seqs);
    int page_tokens = rt->pages.page_tokens;
    int total = 0, n_logits = 0;
    for (int s = 0; s < n_seqs; s++) {
        const struct cinfer_seq_chunk *c = &seqs[s];
        if (c->n_tokens < 1 || c->start_pos < 0 || !c->tokens)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "forward: sequence %d has n_tokens %d and start_pos %d; expected n_tokens >= 1, "
                                    "start_pos >= 0 and a token array",
                                    s, c->n_tokens, c->start_pos);
        if (c->n_tokens > rt->max_batch_tokens - total)
            return cinfer_error_set(err, CINFER_ERR_RANGE,
                                    "forward: the batch carries more than max_batch_tokens %d tokens (sequence %d "
                                    "brings it past)",
                                    rt->max_batch_tokens, s);
        int64_t end_pos = (int64_t)c->start_pos + c->n_tokens;
        if (!c->page_table || c->n_pages < 0 || (int64_t)c->n_pages * page_tokens < end_pos)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "forward: sequence %d covers positions [0, %lld) but its page table has %d pages "
                                    "of %d tokens",
                                    s, (long long)end_pos, c->page_table ? c->n_pages : 0, page_tokens);
        int pages_used = (int)((end_pos + page_tokens - 1) / page_tokens);
        for (int p = 0; p < pages_used; p++) {
            int32_t page = c->page_table[p];
            if (page < 0 || page >= rt->pages.n_pages || rt->pages.refcount[page] <= 0)
                return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                        "forward: sequence %d page table entry %d is page %d, which is %s", s, p, page,
                                        page < 0 || page >= rt->pages.n_pages ? "out of range" : "not allocated");
        }
        if (c->logits != CINFER_LOGITS_NONE && c->logits != CINFER_LOGITS_LAST && c->logits != CINFER_LOGITS_ALL)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "forward: sequence %d asks logits mode %d", s,
                                    (int)c->logits);
        if (c->logits != CINFER_LOGITS_NONE && !c->logits_out)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "forward: sequence %d asks for logits but logits_out is NULL", s);
        for (int t = 0; t < c->n_tokens; t++) {
            int row = total + t;
            int32_t token = c->tokens[t];
            if (token < 0 || token >= rt->vocab)
                return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                        "forward: sequence %d token %d is id %d, outside the vocabulary [0, %d)", s, t,
                                        token, rt->vocab);
            int pos = c->start_pos + t;
            rt->tokens[row] = token;
            int half = rt->head_dim / 2;
            cinfer_kernel_rope_angles(pos, rt->inv_freq, rt->head_dim, rt->rope_cos + (size_t)row * half,
                                      rt->rope_sin + (size_t)row * half);
            rt->slots[row] = c->page_table[pos / page_tokens] * page_tokens + pos % page_tokens;
            int wants = c->logits == CINFER_LOGITS_ALL || (c->logits == CINFER_LOGITS_LAST && t == c->n_tokens - 1);
            if (wants) {
                rt->logits_rows[n_logits] = row;
                rt->logits_dst[n_logits] =
                    c->logits_out + (size_t)(c->logits == CINFER_LOGITS_ALL ? t : 0) * rt->vocab;
                n_logits++;
            }
        }
        rt->attn_seqs[s] = (struct cinfer_backend_attn_seq){total, c->n_tokens, c->start_pos, c->page_table,
                                                            c->n_pages};
        total += c->n_tokens;
    }
    *n_logits_rows = n_logits;
    return total;
}

/* One transformer block on the T rows of rt->x. */
static int layer_forward(struct cinfer_runtime *rt, int l, int T, int n_seqs, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    void *be = rt->backend;
    const struct cinfer_model_config *c = &rt->model->config;
    const struct runtime_layer *w = &rt->layers[l];
    int rc;

    /* attention */
    ops->rmsnorm(be, rt->xn, rt->x, T, rt->hidden, w->attn_norm, c->rms_norm_eps); /* (T, hidden) */
    struct cinfer_backend_matmul_out qkv[3] = {
        {&w->wq, w->bq, rt->q, 0}, /* (T, heads * head_dim) */
        {&w->wk, w->bk, rt->k, 0}, /* (T, kv_heads * head_dim) */
        {&w->wv, w->bv, rt->v, 0}, /* (T, kv_heads * head_dim) */
    };
    if ((rc = ops->matmul(be, rt->xn, T, qkv, 3, err)) < 0)
        return rc;
    if (w->q_norm) { /* Qwen3: RMSNorm over each head vector before RoPE */
        ops->rmsnorm(be, rt->q, rt->q, T * c->num_heads, rt->head_dim, w->q_norm, c->rms_norm_eps);
        ops->rmsnorm(be, rt->k, rt->k, T * c->num_kv_heads, rt->head_dim, w->k_norm, c->rms_norm_eps);
    }
    struct cinfer_backend_rope rope = {rt->rope_cos, rt->rope_sin, c->rope_interleaved};
    ops->rope(be, rt->q, T, c->num_heads, rt->head_dim, &rope);
    ops->rope(be, rt->k, T, c->num_kv_heads, rt->head_dim, &rope);
    /* every new token's K/V goes in its page first: tokens of a chunk attend to each other */
    ops->kv_write(be, rt->kv_storage, l, rt->k, rt->v, T, rt->slots);
    if ((rc = ops->attention(be, rt->kv_storage, l, rt->q, rt->attn, rt->attn_seqs, n_seqs, c->num_heads,
                             c->num_kv_heads, rt->head_dim, err)) < 0) /* (T, heads * head_dim) */
        return rc;
    struct cinfer_backend_matmul_out o = {&w->wo, NULL, rt->proj, 0}; /* (T, hidden) */
    if ((rc = ops->matmul(be, rt->attn, T, &o, 1, err)) < 0)
        return rc;
    ops->add(be, rt->x, rt->proj, (size_t)T * rt->hidden);

    /* SwiGLU MLP */
    ops->rmsnorm(be, rt->xn, rt->x, T, rt->hidden, w->ffn_norm, c->rms_norm_eps);
    struct cinfer_backend_matmul_out gate_up[2] = {
        {&w->w_gate, NULL, rt->gate, 0}, /* (T, intermediate) */
        {&w->w_up, NULL, rt->up, 0},   /* (T, intermediate) */
    };
    if ((rc = ops->matmul(be, rt->xn, T, gate_up, 2, err)) < 0)
        return rc;
    ops->silu_mul(be, rt->gate, rt->up, (size_t)T * rt->intermediate);
    struct cinfer_backend_matmul_out down = {&w->w_down, NULL, rt->proj, 0}; /* (T, hidden) */
    if ((rc = ops->matmul(be, rt->gate, T, &down, 1, err)) < 0)
        return rc;
    ops->add(be, rt->x, rt->proj, (size_t)T * rt->hidden);
    return 0;
}

/* Final norm and lm_head for the asked rows only, a block of rows per matmul. */
static int logits_forward(struct cinfer_runtime *rt, int n_logits, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    void *be = rt->backend;
    size_t hidden_bytes = (size_t)rt->hidden * sizeof(float);
    size_t vocab_bytes = (size_t)rt->vocab * sizeof(float);
    for (int first = 0; first < n_logits; first += CINFER_LOGITS_BLOCK_ROWS) {
        int n = n_logits - first < CINFER_LOGITS_BLOCK_ROWS ? n_logits - first : CINFER_LOGITS_BLOCK_ROWS;
        for (int i = 0; i < n; i++)
            ops->copy(be, rt->logits_x + (size_t)i * rt->hidden,
                      rt->x + (size_t)rt->logits_rows[first + i] * rt->hidden, hidden_bytes);
        ops->rmsnorm(be, rt->logits_x, rt->logits_x, n, rt->hidden, rt->output_norm,
                     rt->model->config.rms_norm_eps);                     /* (n, hidden) */
        /* (n, vocab); x unrounded: the logits decide greedy tokens, and this matmul is
         * run for the asked rows only, so its speed hardly shows in prefill */
        struct cinfer_backend_matmul_out head = {&rt->lm_head, NULL, rt->logits, 1};
        int rc = ops->matmul(be, rt->logits_x, n, &head, 1, err);
        if (rc < 0)
            return rc;
        for (int i = 0; i < n; i++)
            ops->download(be, rt->logits_dst[first + i], rt->logits + (size_t)i * rt->vocab, vocab_bytes);
    }
    return 0;
}

int cinfer_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                   struct cinfer_error *err)
{
    int n_logits = 0;
    int T = plan_batch(rt, seqs, n_seqs, &n_logits, err);
    if (T < 0)
        return T;
    rt->ops->embedding(rt->backend, &rt->tok_embeddings, rt->tokens, T, rt->x); /* (T, hidden) */
    for (int l = 0; l < rt->model->config.num_layers; l++) {
        int rc = layer_forward(rt, l, T, n_seqs, err);
        if (rc < 0)
            return rc;
    }
    return logits_forward(rt, n_logits, err);
}
