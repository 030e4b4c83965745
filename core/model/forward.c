/* core/model/forward.c — the batched forward pass of a Llama-family model.
 *
 * Every chunk of every sequence in the call is laid end to end as rows of one
 * activation matrix (T = total new tokens), so each projection is one matmul per
 * weight per call; only attention looks at sequences separately, reading each one's
 * K/V through its page table. Reads top to bottom like llama2.c's run.c.
 *
 * Tensor parallelism (runtime_shard.c says who holds what): every rank runs this same
 * pass on its shard, rank 0 on the caller's batch after publishing its plan, the others
 * on the decoded plan. Four kinds of points join the ranks, each a collective of the
 * communicator: the embedding (all-reduce: each rank filled only its vocabulary's
 * rows), the outputs of wo and w_down (all-reduce of the partial sums), and the logits
 * (all-gather of each rank's vocabulary rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model/runtime_internal.h"

/* Row row's RoPE tables for position pos (and the local ones of a model that has them). */
static void row_angles(struct cinfer_runtime *rt, int row, int pos)
{
    int half = rt->head_dim / 2;
    cinfer_kernel_rope_angles(pos, rt->inv_freq, rt->head_dim, rt->rope_cos + (size_t)row * half,
                              rt->rope_sin + (size_t)row * half);
    for (int i = 0; rt->rope_attention_factor != 1.0f && i < rt->rope_turned_pairs; i++) {
        rt->rope_cos[(size_t)row * half + i] *= rt->rope_attention_factor;
        rt->rope_sin[(size_t)row * half + i] *= rt->rope_attention_factor;
    }
    if (rt->inv_freq_local)
        cinfer_kernel_rope_angles(pos, rt->inv_freq_local, rt->head_dim, rt->rope_cos_local + (size_t)row * half,
                                  rt->rope_sin_local + (size_t)row * half);
}

/* Checks the batch against the contract in runtime.h and lays out the per-token host
 * arrays: tokens, RoPE angles, K/V slots, attention sequences and asked logits rows.
 * A follower (a decoded plan) does no page bookkeeping and keeps no logits: its pages
 * are only checked to lie in the cache. Returns the total token count T, or a negative
 * status. */
static int plan_batch(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs, int follower,
                      int *n_logits_rows, struct cinfer_error *err)
{
    if (n_seqs < 1 || !seqs)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "forward: the batch has no sequences (n_seqs %d)",
                                n_seqs);
    int page_tokens = rt->pages.page_tokens;
    int total = 0, n_logits = 0;
    size_t window_tables_used = 0;
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
            if (page < 0 || page >= rt->pages.n_pages || (!follower && rt->pages.refcount[page] <= 0))
                return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                        "forward: sequence %d page table entry %d is page %d, which is %s", s, p, page,
                                        page < 0 || page >= rt->pages.n_pages ? "out of range" : "not allocated");
        }
        if (c->logits != CINFER_LOGITS_NONE && c->logits != CINFER_LOGITS_LAST && c->logits != CINFER_LOGITS_ALL)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "forward: sequence %d asks logits mode %d", s,
                                    (int)c->logits);
        if (!follower && c->top_k != 0 &&
            (c->logits != CINFER_LOGITS_LAST || c->top_k < 1 || c->top_k > CINFER_LOGITS_TOP_MAX || !c->top_out))
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "forward: sequence %d asks for its top %d tokens (logits mode %d, top_out %s); "
                                    "expected logits mode LAST, a top_k in [1, %d] and a top_out",
                                    s, c->top_k, (int)c->logits, c->top_out ? "set" : "NULL", CINFER_LOGITS_TOP_MAX);
        if (!follower && c->sample &&
            (c->logits != CINFER_LOGITS_LAST || !c->sampled_out || !cinfer_runtime_samples(rt)))
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "forward: sequence %d asks for a token drawn by the backend (logits mode %d, "
                                    "sampled_out %s, backend %s %s); expected logits mode LAST, a sampled_out and a "
                                    "backend with sample on whole rows (cinfer_runtime_samples)",
                                    s, (int)c->logits, c->sampled_out ? "set" : "NULL", rt->ops->name,
                                    cinfer_runtime_samples(rt) ? "that samples" : "that cannot sample here");
        if (!follower && c->logits != CINFER_LOGITS_NONE && c->top_k == 0 && !c->sample && !c->logits_out)
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
            /* the row of this rank's tok_embeddings, or -1 (zeros) for another rank's */
            int32_t local = token - rt->shard.first_vocab;
            rt->tokens[row] = local >= 0 && local < rt->shard.vocab_rows ? local : -1;
            row_angles(rt, row, pos);
            rt->slots[row] = c->page_table[pos / page_tokens] * page_tokens + pos % page_tokens;
            int wants = c->logits == CINFER_LOGITS_ALL || (c->logits == CINFER_LOGITS_LAST && t == c->n_tokens - 1);
            if (wants) {
                rt->logits_rows[n_logits] = row;
                /* a top-k row's whole logits, where they come to the host, go to logits_rank_host */
                rt->logits_dst[n_logits] =
                    follower || c->top_k || c->sample ? NULL
                                         : c->logits_out + (size_t)(c->logits == CINFER_LOGITS_ALL ? t : 0) * rt->vocab;
                rt->logits_chunk[n_logits] = follower ? NULL : c;
                n_logits++;
            }
        }
        rt->attn_seqs[s] = (struct cinfer_backend_attn_seq){total, c->n_tokens, c->start_pos, c->page_table,
                                                            c->n_pages};
        if (rt->window.active) {
            int rc = cinfer_kv_window_plan_seq(rt, s, c, total, pages_used, &window_tables_used, err);
            if (rc < 0)
                return rc;
        }
        total += c->n_tokens;
    }
    if (rt->window.active)
        cinfer_kv_window_plan_done(rt, n_seqs);
    *n_logits_rows = n_logits;
    return total;
}

/* A decode step (every sequence one token, asking for its logits) of T rows padded to the
 * backend's bucket (ops->decode_bucket): rows T.. are token 0 at position 0 of pad_page,
 * each its own sequence, their logits computed and kept nowhere. Every row's logits are
 * asked, in row order, so the step's ops depend on the bucket only. Returns the rows (T
 * where the step is not padded); *n_seqs and *n_logits grow with them. */
static int pad_decode_step(struct cinfer_runtime *rt, int T, int *n_seqs, int *n_logits)
{
    /* as many rows as sequences: one token each; as many logits rows: each asks for its one */
    if (rt->pad_page < 0 || T != *n_seqs || *n_logits != T)
        return T;
    int rows = rt->ops->decode_bucket(rt->backend, T);
    if (rows <= T || rows > rt->max_batch_tokens)
        return T;
    for (int row = T; row < rows; row++) {
        rt->tokens[row] = 0;
        row_angles(rt, row, 0);
        rt->slots[row] = rt->pad_page * rt->pages.page_tokens;
        rt->attn_seqs[row] = (struct cinfer_backend_attn_seq){row, 1, 0, &rt->pad_page, 1};
        rt->logits_rows[row] = row;
        rt->logits_dst[row] = NULL;
        rt->logits_chunk[row] = NULL;
    }
    *n_seqs = rows;
    *n_logits = rows;
    return rows;
}

/* x (n) = the sum of every rank's x; nothing to do on a single rank. */
static int sum_over_ranks(struct cinfer_runtime *rt, float *x, size_t n, struct cinfer_error *err)
{
    if (rt->shard.size == 1)
        return 0;
    if (rt->backend_reduces) /* device buffers: the backend's own collective (NCCL) */
        return rt->ops->all_reduce_sum(rt->backend, x, n, err);
    return rt->comm->ops->all_reduce_sum_f32(rt->comm->state, x, n, err);
}

void cinfer_activate(struct cinfer_runtime *rt, float *gate, const float *up, size_t n)
{
    const struct cinfer_model_config *c = &rt->model->config;
    switch (c->activation) {
    case CINFER_ACTIVATION_GELU_TANH: rt->ops->gelu_tanh_mul(rt->backend, gate, up, n); return;
    case CINFER_ACTIVATION_SWIGLU_OAI: /* the slot was checked at runtime creation */
        rt->ops->swiglu_oai(rt->backend, gate, up, n, c->swiglu_alpha, c->swiglu_limit);
        return;
    case CINFER_ACTIVATION_SILU: break;
    }
    rt->ops->silu_mul(rt->backend, gate, up, n);
}

/* One transformer block on the T rows of rt->x. */
static int layer_forward(struct cinfer_runtime *rt, int l, int T, int n_seqs, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    void *be = rt->backend;
    const struct cinfer_model_config *c = &rt->model->config;
    const struct runtime_layer *w = &rt->layers[l];
    int heads = rt->shard.heads, kv_heads = rt->shard.kv_heads; /* this rank's */
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
        ops->rmsnorm(be, rt->q, rt->q, T * heads, rt->head_dim, w->q_norm, c->rms_norm_eps);
        ops->rmsnorm(be, rt->k, rt->k, T * kv_heads, rt->head_dim, w->k_norm, c->rms_norm_eps);
    }
    int slides = cinfer_model_layer_slides(c, l);
    int local_rope = slides && rt->inv_freq_local;
    struct cinfer_backend_rope rope = {local_rope ? rt->rope_cos_local : rt->rope_cos,
                                       local_rope ? rt->rope_sin_local : rt->rope_sin, c->rope_interleaved};
    ops->rope(be, rt->q, T, heads, rt->head_dim, &rope);
    ops->rope(be, rt->k, T, kv_heads, rt->head_dim, &rope);
    /* a sliding layer's K/V are in the window pool when there is one (kv_window.c) */
    int windowed = slides && rt->window.active;
    void *kv = windowed ? rt->window.storage : rt->kv_storage;
    int kv_layer = rt->window.layer_at[l];
    /* every new token's K/V goes in its page first: tokens of a chunk attend to each other */
    ops->kv_write(be, kv, kv_layer, rt->k, rt->v, T, windowed ? rt->window.slots : rt->slots);
    struct cinfer_backend_attn_options attn_opts = {slides ? c->sliding_window : 0, c->attention_scale,
                                                    c->attn_logit_softcap, w->sinks}; /* sinks: gpt-oss */
    const struct cinfer_backend_attn_seq *seqs = windowed ? rt->window.seqs : rt->attn_seqs;
    if ((rc = ops->attention_windowed(be, kv, kv_layer, rt->q, rt->attn, seqs, n_seqs, heads, kv_heads, rt->head_dim,
                                      &attn_opts, err)) < 0) /* (T, heads * head_dim) */
        return rc;
    /* (T, hidden), this rank's heads' part; wo's bias (gpt-oss) on rank 0 only, so the sum has it once */
    struct cinfer_backend_matmul_out o = {&w->wo, w->bo, rt->proj, 0};
    if ((rc = ops->matmul(be, rt->attn, T, &o, 1, err)) < 0 ||
        (rc = sum_over_ranks(rt, rt->proj, (size_t)T * rt->hidden, err)) < 0)
        return rc;
    if (w->post_attn_norm) /* Gemma: the attention output is normed before the residual add */
        ops->rmsnorm(be, rt->proj, rt->proj, T, rt->hidden, w->post_attn_norm, c->rms_norm_eps);
    ops->add(be, rt->x, rt->proj, (size_t)T * rt->hidden);

    /* gated MLP: SwiGLU, or GELU-tanh (Gemma); or the experts a router picks (moe_forward.c) */
    ops->rmsnorm(be, rt->xn, rt->x, T, rt->hidden, w->ffn_norm, c->rms_norm_eps);
    if (w->experts) { /* (T, hidden) into proj, this rank's share of every chosen expert */
        if ((rc = cinfer_moe_forward(rt, l, T, err)) < 0 ||
            (rc = sum_over_ranks(rt, rt->proj, (size_t)T * rt->hidden, err)) < 0)
            return rc;
        ops->add(be, rt->x, rt->proj, (size_t)T * rt->hidden);
        return 0;
    }
    struct cinfer_backend_matmul_out gate_up[2] = {
        {&w->w_gate, NULL, rt->gate, 0}, /* (T, intermediate) */
        {&w->w_up, NULL, rt->up, 0},   /* (T, intermediate) */
    };
    if ((rc = ops->matmul(be, rt->xn, T, gate_up, 2, err)) < 0)
        return rc;
    cinfer_activate(rt, rt->gate, rt->up, (size_t)T * rt->intermediate);
    struct cinfer_backend_matmul_out down = {&w->w_down, NULL, rt->proj, 0}; /* (T, hidden), this rank's part */
    if ((rc = ops->matmul(be, rt->gate, T, &down, 1, err)) < 0 ||
        (rc = sum_over_ranks(rt, rt->proj, (size_t)T * rt->hidden, err)) < 0)
        return rc;
    if (w->post_ffn_norm)
        ops->rmsnorm(be, rt->proj, rt->proj, T, rt->hidden, w->post_ffn_norm, c->rms_norm_eps);
    ops->add(be, rt->x, rt->proj, (size_t)T * rt->hidden);
    return 0;
}

/* Puts every asked row of a logits gather together in logits_dst: rank r's block of
 * gathered (size, block) is its (n, vocab rows of r) logits, packed. gathered is host
 * memory (on_host) or a backend buffer, which each piece is downloaded from. */
static void assemble_gathered_logits(struct cinfer_runtime *rt, int n, int first, size_t block, const float *gathered,
                                     int on_host)
{
    const struct runtime_shard *sh = &rt->shard;
    for (int i = 0; i < n; i++) {
        float *dst = rt->logits_dst[first + i];
        if (!dst)
            continue;
        for (int r = 0; r < sh->size; r++) {
            int v0 = r * sh->vocab_stride;
            int rows = rt->vocab - v0 < sh->vocab_stride ? rt->vocab - v0 : sh->vocab_stride;
            const float *src = gathered + (size_t)r * block + (size_t)i * rows;
            if (on_host)
                memcpy(dst + v0, src, (size_t)rows * sizeof(float));
            else
                rt->ops->download(rt->backend, dst + v0, src, (size_t)rows * sizeof(float));
        }
    }
}

/* Vocabulary-parallel logits of n asked rows from first: every rank's (n, its vocabulary
 * rows) gathered, then put together. Where the backend's buffers are device memory the
 * communicator cannot read (a backend that all-reduces itself), this rank's block comes
 * down to the host first and the ranks gather there. */
static int gather_logits(struct cinfer_runtime *rt, int n, int first, struct cinfer_error *err)
{
    size_t block = (size_t)n * rt->shard.vocab_stride;
    const float *mine = rt->logits;
    float *gathered = rt->logits_gather;
    if (rt->backend_reduces) {
        rt->ops->download(rt->backend, rt->logits_host, rt->logits, block * sizeof(float));
        mine = rt->logits_host;
        gathered = rt->logits_gather_host;
    }
    int rc = rt->comm->ops->all_gather(rt->comm->state, mine, block * sizeof(float), gathered, err);
    if (rc < 0)
        return rc;
    assemble_gathered_logits(rt, n, first, block, gathered, rt->backend_reduces);
    return 0;
}

/* The chunk of asked row i when it wants its top tokens only, else NULL. */
static const struct cinfer_seq_chunk *top_chunk(const struct cinfer_runtime *rt, int i)
{
    const struct cinfer_seq_chunk *c = rt->logits_chunk[i];
    return c && c->top_k ? c : NULL;
}

/* Where the backend cannot rank (tensor parallelism gathers the rows on the host; no
 * logits_top), the whole rows of the block's top-k rows come down to logits_rank_host. */
static int route_top_rows_to_host(struct cinfer_runtime *rt, int n, int first, struct cinfer_error *err)
{
    for (int i = 0; i < n; i++) {
        if (!top_chunk(rt, first + i))
            continue;
        if (!rt->logits_rank_host &&
            !(rt->logits_rank_host = malloc((size_t)CINFER_LOGITS_BLOCK_ROWS * rt->vocab * sizeof(float))))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "forward: cannot allocate %d rows of %d logits to rank",
                                    CINFER_LOGITS_BLOCK_ROWS, rt->vocab);
        rt->logits_dst[first + i] = rt->logits_rank_host + (size_t)i * rt->vocab;
    }
    return 0;
}

static void keep_top(const struct cinfer_seq_chunk *c, const int32_t *ids, const float *logits, int n, double lse)
{
    struct cinfer_logits_top *out = c->top_out;
    out->n = n < c->top_k ? n : c->top_k;
    memcpy(out->ids, ids, (size_t)out->n * sizeof *ids);
    memcpy(out->logits, logits, (size_t)out->n * sizeof *logits);
    out->log_sum_exp = c->top_log_sum_exp ? lse : 0.0;
}

/* The block's rows that ask for a token drawn on the backend, in one call; each row is
 * left divided by its temperature for the ranking after it. */
static int sample_on_backend(struct cinfer_runtime *rt, int n, int first, struct cinfer_error *err)
{
    int n_rows = 0;
    for (int i = 0; i < n; i++) {
        const struct cinfer_seq_chunk *c = rt->logits_chunk[first + i];
        if (!c || !c->sample)
            continue;
        rt->sample_rows[n_rows] = i;
        rt->sample_params[n_rows++] = *c->sample;
    }
    if (n_rows == 0)
        return 0;
    int rc = rt->ops->sample(rt->backend, rt->logits, rt->vocab, rt->sample_rows, n_rows, rt->sample_params,
                             rt->sample_ids, rt->sample_logits, err);
    if (rc < 0)
        return rc;
    for (int r = 0; r < n_rows; r++)
        *rt->logits_chunk[first + rt->sample_rows[r]]->sampled_out =
            (struct cinfer_sampled){rt->sample_ids[r], rt->sample_logits[r]};
    return 0;
}

/* The block's top-k rows that ask for the log-sum-exp (with_lse 1) or not (0), ranked by
 * the backend in one call where its logits are: only the answers come to the host. */
static int rank_on_backend(struct cinfer_runtime *rt, int n, int first, int with_lse, struct cinfer_error *err)
{
    int n_rows = 0, k = 0;
    for (int i = 0; i < n; i++) {
        const struct cinfer_seq_chunk *c = top_chunk(rt, first + i);
        if (!c || !c->top_log_sum_exp != !with_lse)
            continue;
        rt->top_rows[n_rows++] = i;
        k = c->top_k > k ? c->top_k : k;
    }
    if (n_rows == 0)
        return 0;
    int rc = rt->ops->logits_top(rt->backend, rt->logits, rt->vocab, rt->top_rows, n_rows, k, rt->top_ids,
                                 rt->top_logits, rt->top_n, with_lse ? rt->top_log_sum_exp : NULL, err);
    if (rc < 0)
        return rc;
    for (int r = 0; r < n_rows; r++)
        keep_top(top_chunk(rt, first + rt->top_rows[r]), rt->top_ids + (size_t)r * k, rt->top_logits + (size_t)r * k,
                 rt->top_n[r], with_lse ? rt->top_log_sum_exp[r] : 0.0);
    return 0;
}

/* The block's top-k rows ranked on the host, from logits_rank_host (the same kernel as
 * the CPU backend's logits_top, so the same bits). */
static void rank_on_host(struct cinfer_runtime *rt, int n, int first)
{
    for (int i = 0; i < n; i++) {
        const struct cinfer_seq_chunk *c = top_chunk(rt, first + i);
        if (!c)
            continue;
        const float *row = rt->logits_dst[first + i]; /* (vocab) */
        int32_t ids[CINFER_LOGITS_TOP_MAX];
        float logits[CINFER_LOGITS_TOP_MAX];
        int got = cinfer_kernel_logits_top(row, rt->vocab, c->top_k, ids, logits);
        keep_top(c, ids, logits, got, c->top_log_sum_exp ? cinfer_kernel_log_sum_exp(row, rt->vocab) : 0.0);
    }
}

/* Final norm and lm_head for the asked rows only, a block of rows per matmul. With
 * several ranks each computes its vocabulary rows and the gather makes them whole;
 * a follower keeps none. */
static int logits_forward(struct cinfer_runtime *rt, int n_logits, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    void *be = rt->backend;
    const struct runtime_shard *sh = &rt->shard;
    size_t hidden_bytes = (size_t)rt->hidden * sizeof(float);
    for (int first = 0; first < n_logits; first += CINFER_LOGITS_BLOCK_ROWS) {
        int n = n_logits - first < CINFER_LOGITS_BLOCK_ROWS ? n_logits - first : CINFER_LOGITS_BLOCK_ROWS;
        for (int i = 0; i < n; i++)
            ops->copy(be, rt->logits_x + (size_t)i * rt->hidden,
                      rt->x + (size_t)rt->logits_rows[first + i] * rt->hidden, hidden_bytes);
        ops->rmsnorm(be, rt->logits_x, rt->logits_x, n, rt->hidden, rt->output_norm,
                     rt->model->config.rms_norm_eps);                     /* (n, hidden) */
        /* (n, vocab_rows); x unrounded: the logits decide greedy tokens, and this matmul
         * is run for the asked rows only, so its speed hardly shows in prefill */
        struct cinfer_backend_matmul_out head = {&rt->lm_head, NULL, rt->logits, 1};
        int rc = ops->matmul(be, rt->logits_x, n, &head, 1, err);
        if (rc < 0)
            return rc;
        float cap = rt->model->config.final_logit_softcap; /* Gemma 2 */
        if (cap > 0.0f)
            ops->softcap(be, rt->logits, (size_t)n * sh->vocab_rows, cap);
        if (rt->backend_samples && sh->size == 1 && (rc = sample_on_backend(rt, n, first, err)) < 0)
            return rc;
        int ranked_here = sh->size == 1 && rt->backend_ranks;
        if (!ranked_here && (rc = route_top_rows_to_host(rt, n, first, err)) < 0)
            return rc;
        if (sh->size == 1) {
            for (int i = 0; i < n; i++)
                if (rt->logits_dst[first + i])
                    ops->download(be, rt->logits_dst[first + i], rt->logits + (size_t)i * rt->vocab,
                                  (size_t)rt->vocab * sizeof(float));
        } else if ((rc = gather_logits(rt, n, first, err)) < 0) {
            return rc;
        }
        if (ranked_here) {
            if ((rc = rank_on_backend(rt, n, first, 0, err)) < 0 || (rc = rank_on_backend(rt, n, first, 1, err)) < 0)
                return rc;
        } else {
            rank_on_host(rt, n, first);
        }
    }
    return 0;
}

/* Names the host arrays plan_batch laid out, which the step's ops get, to a backend that
 * takes them up front (ops version 13): a device copies them in once, not op by op. */
static int begin_step(struct cinfer_runtime *rt, int T, int n_seqs, struct cinfer_error *err)
{
    size_t ids = (size_t)T * sizeof(int32_t), angles = (size_t)T * (size_t)(rt->head_dim / 2) * sizeof(float);
    struct cinfer_backend_step_array arrays[7];
    int n = 0;
    arrays[n++] = (struct cinfer_backend_step_array){rt->tokens, ids};
    arrays[n++] = (struct cinfer_backend_step_array){rt->slots, ids};
    arrays[n++] = (struct cinfer_backend_step_array){rt->rope_cos, angles};
    arrays[n++] = (struct cinfer_backend_step_array){rt->rope_sin, angles};
    if (rt->inv_freq_local) {
        arrays[n++] = (struct cinfer_backend_step_array){rt->rope_cos_local, angles};
        arrays[n++] = (struct cinfer_backend_step_array){rt->rope_sin_local, angles};
    }
    if (rt->window.active)
        arrays[n++] = (struct cinfer_backend_step_array){rt->window.slots, ids};
    const struct cinfer_backend_attn_seq *lists[2] = {rt->attn_seqs, rt->window.active ? rt->window.seqs : NULL};
    struct cinfer_backend_step step = {.struct_size = sizeof step, .n_tokens = T, .arrays = arrays, .n_arrays = n,
                                       .seq_lists = lists, .n_seq_lists = rt->window.active ? 2 : 1,
                                       .n_seqs = n_seqs};
    return rt->ops->step_begin(rt->backend, &step, err);
}

/* The step's layers and logits. */
static int run_step(struct cinfer_runtime *rt, int T, int n_seqs, int n_logits, struct cinfer_error *err)
{
    rt->ops->embedding(rt->backend, &rt->tok_embeddings, rt->tokens, T, rt->x); /* (T, hidden) */
    int rc = sum_over_ranks(rt, rt->x, (size_t)T * rt->hidden, err);
    float embedding_scale = rt->model->config.embedding_scale; /* Gemma: sqrt(hidden) */
    if (rc == 0 && embedding_scale > 0.0f)
        rt->ops->scale(rt->backend, rt->x, (size_t)T * rt->hidden, embedding_scale);
    for (int l = 0; rc == 0 && l < rt->model->config.num_layers; l++)
        rc = layer_forward(rt, l, T, n_seqs, err);
    if (rc == 0)
        rc = logits_forward(rt, n_logits, err);
    return rc;
}

/* The pass itself, on the host arrays plan_batch laid out. */
static int run_batch(struct cinfer_runtime *rt, int T, int n_seqs, int n_logits, struct cinfer_error *err)
{
    int rc = rt->backend_steps ? begin_step(rt, T, n_seqs, err) : 0;
    if (rc == 0) {
        rc = run_step(rt, T, n_seqs, n_logits, err);
        if (rt->backend_steps) { /* ended even after a failure; the first error is the one to report */
            struct cinfer_error end_err = {0};
            int end_rc = rt->ops->step_end(rt->backend, &end_err);
            if (rc == 0 && end_rc < 0) {
                rc = end_rc;
                if (err)
                    *err = end_err;
            }
        }
    }
    /* A device reports a kernel's failure after the op returned: the step fails with it. */
    if (rc == 0 && rt->ops->version >= 7 && rt->ops->status)
        rc = rt->ops->status(rt->backend, err);
    return rc;
}

/* After a rank has started a pass the others run too, a failure of its own must not
 * leave them waiting at the next collective: it aborts the group (a no-op where the
 * failure was the group's abort already). */
static int fail_group(struct cinfer_runtime *rt, int rc, struct cinfer_error *err)
{
    if (rt->comm->ops->abort) {
        char why[256];
        snprintf(why, sizeof why, "tp rank %d: %.200s", rt->shard.rank, err ? err->message : "a forward pass failed");
        rt->comm->ops->abort(rt->comm->state, why, NULL); /* the error to return is rc's */
    }
    return rc;
}

/* What every rank's plans must agree with: its cache (and sliding-window pool), vocabulary,
 * batch size and expert split. */
static struct cinfer_tp_plan_limits plan_limits(const struct cinfer_runtime *rt)
{
    return (struct cinfer_tp_plan_limits){rt->vocab, rt->pages.n_pages, rt->pages.page_tokens, rt->max_batch_tokens,
                                          rt->window.active ? rt->window.pages.n_pages : 0,
                                          rt->shard.ep ? rt->shard.size : 1};
}

int cinfer_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                   struct cinfer_error *err)
{
    if (rt->shard.rank != 0)
        return cinfer_error_set(err, CINFER_ERR_STATE,
                                "forward: tp rank %d runs rank 0's plans (cinfer_runtime_forward_plan), not batches",
                                rt->shard.rank);
    int n_logits = 0;
    int T = plan_batch(rt, seqs, n_seqs, 0, &n_logits, err);
    if (T < 0)
        return T;
    int n_rows_seqs = n_seqs; /* with the padding rows' sequences */
    T = pad_decode_step(rt, T, &n_rows_seqs, &n_logits);
    if (rt->shard.size > 1) {
        struct cinfer_tp_plan_limits lim = plan_limits(rt);
        size_t bytes = cinfer_tp_plan_bytes(seqs, n_seqs, &lim);
        if (bytes > rt->plan_out_bytes) {
            uint8_t *grown = realloc(rt->plan_out, bytes);
            if (!grown) /* nothing published yet: the group is still whole */
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "forward: out of memory for a %zu-byte plan", bytes);
            rt->plan_out = grown;
            rt->plan_out_bytes = bytes;
        }
        cinfer_tp_plan_encode(rt->plan_step, &lim, seqs, n_seqs, rt->window.active ? rt->window.of : NULL,
                              rt->plan_out);
        int rc = rt->publish_plan(rt->publish_ctx, rt->plan_out, bytes, err);
        if (rc < 0) /* some followers may have it */
            return fail_group(rt, rc, err);
        rt->plan_step++;
    }
    int rc = run_batch(rt, T, n_rows_seqs, n_logits, err);
    return rc < 0 && rt->shard.size > 1 ? fail_group(rt, rc, err) : rc;
}

int cinfer_forward_plan(struct cinfer_runtime *rt, const void *plan, size_t plan_bytes, struct cinfer_error *err)
{
    if (rt->shard.size == 1 || rt->shard.rank == 0)
        return cinfer_error_set(err, CINFER_ERR_STATE,
                                "forward: tp rank %d of %d makes its own plans (cinfer_runtime_forward), it runs none",
                                rt->shard.rank, rt->shard.size);
    struct cinfer_tp_plan_limits lim = plan_limits(rt);
    int rc = cinfer_tp_plan_decode(plan, plan_bytes, &lim, &rt->plan, err);
    if (rc == 0 && rt->plan.step != rt->plan_step)
        rc = cinfer_error_set(err, CINFER_ERR_PARSE, "plan: step %llu, tp rank %d expects %llu (a plan was lost or "
                              "repeated)", (unsigned long long)rt->plan.step, rt->shard.rank,
                              (unsigned long long)rt->plan_step);
    int n_logits = 0, T = rc;
    for (int s = 0; rc == 0 && rt->window.active && s < rt->plan.n_seqs; s++) /* rank 0's window pages */
        for (int i = 0; i < rt->plan.seqs[s].n_pages; i++)
            rt->window.of[rt->plan.seqs[s].page_table[i]] = rt->plan.window_of[s][i];
    if (rc == 0)
        T = rc = plan_batch(rt, rt->plan.seqs, rt->plan.n_seqs, 1, &n_logits, err);
    if (rc >= 0) {
        rt->plan_step++;
        rc = run_batch(rt, T, rt->plan.n_seqs, n_logits, err);
    }
    return rc < 0 ? fail_group(rt, rc, err) : 0;
}
