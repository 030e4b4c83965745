/* core/model/runtime.c — binds a loaded model to its compute backend (the CPU's unless
 * given another): checks every weight's shape and type once, takes this rank's slice
 * of each (tensor parallelism: runtime_shard.c), widens the 1-D weights to f32, hands
 * the matrices, norms and biases to the backend to prepare (repack or upload), computes
 * the RoPE frequencies, sizes the paged KV cache from its byte budget and allocates the
 * scratch. */
#include "model/runtime.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_backend.h"
#include "kernels.h"
#include "model/rope_scaling.h"
#include "model/runtime_internal.h"

#define DEFAULT_PAGE_TOKENS 16
#define DEFAULT_MAX_BATCH_TOKENS 2048

/* A weight (rows, cols) the matmul reads as stored. */
static int bind_matrix(const struct cinfer_weight *w, const char *name, int layer, int64_t rows, int64_t cols,
                       struct cinfer_backend_weight *out, struct cinfer_error *err)
{
    char where[48] = "";
    if (layer >= 0)
        snprintf(where, sizeof where, " of layer %d", layer);
    if (!w->data)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "model: weight %s%s is missing", name, where);
    if (w->rows != rows || w->cols != cols)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "model: weight %s%s should be (%lld, %lld) from the config, found (%lld, %lld)", name,
                                where, (long long)rows, (long long)cols, (long long)w->rows, (long long)w->cols);
    int block = cinfer_dtype_block_values(w->dtype);
    if (block < 1)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "model: weight %s%s has an unknown type %d", name, where,
                                (int)w->dtype);
    if (cols % block != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "model: %s weight %s%s has %lld columns, not a multiple of its block of %d",
                                cinfer_dtype_name(w->dtype), name, where, (long long)cols, block);
    size_t min_row_bytes = cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)w->dtype, cols);
    if (w->row_bytes < min_row_bytes)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "model: weight %s%s (%s) has rows of %zu bytes, %lld columns need %zu", name, where,
                                cinfer_dtype_name(w->dtype), w->row_bytes, (long long)cols, min_row_bytes);
    *out = (struct cinfer_backend_weight){(uint32_t)w->dtype, rows, cols, w->data, w->row_bytes};
    return 0;
}

/* A 1-D weight (norm or bias) of n values, its values [first, first + count) widened
 * to an f32 copy; NULL when absent and optional. */
static int widen_slice(const struct cinfer_weight *w, const char *name, int layer, int64_t n, int64_t first,
                       int64_t count, int required, float **out, struct cinfer_error *err)
{
    *out = NULL;
    if (!w->data && !required)
        return 0;
    struct cinfer_backend_weight bound;
    int rc = bind_matrix(w, name, layer, 1, n, &bound, err);
    if (rc < 0)
        return rc;
    /* the whole vector (n values), then its slice: a block type's slice need not start on a block */
    *out = malloc((size_t)n * sizeof(float));
    if (!*out)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory widening %s", name);
    cinfer_kernel_dequantize_row((enum cinfer_kernel_wtype)w->dtype, w->data, n, *out);
    if (first > 0)
        memmove(*out, *out + first, (size_t)count * sizeof(float));
    return 0;
}

static int widen_vector(const struct cinfer_weight *w, const char *name, int layer, int64_t n, int required,
                        float **out, struct cinfer_error *err)
{
    return widen_slice(w, name, layer, n, 0, n, required, out, err);
}

/* w (n) += 1; nothing for an absent weight. */
static void add_one(float *w, int n)
{
    for (int i = 0; w && i < n; i++)
        w[i] += 1.0f;
}

/* The backend's KV type of an option value; -1 for an unknown one. */
static int kv_type_of(enum cinfer_kv_cache_dtype d)
{
    switch (d) {
    case CINFER_KV_CACHE_DTYPE_AUTO:
    case CINFER_KV_CACHE_DTYPE_F16: return CINFER_KV_F16;
    case CINFER_KV_CACHE_DTYPE_F32: return CINFER_KV_F32;
    case CINFER_KV_CACHE_DTYPE_BF16: return CINFER_KV_BF16;
    case CINFER_KV_CACHE_DTYPE_Q8_0: return CINFER_KV_Q8_0;
    }
    return -1;
}

size_t cinfer_runtime_kv_token_bytes(const struct cinfer_model_config *c, enum cinfer_kv_cache_dtype kv_dtype)
{
    int t = kv_type_of(kv_dtype);
    if (t < 0 || (t == CINFER_KV_Q8_0 && c->head_dim % 32 != 0))
        return 0;
    return cinfer_kv_token_bytes(c->num_layers, c->num_kv_heads * c->head_dim, t);
}

const char *cinfer_runtime_kv_dtype_name(const struct cinfer_runtime *rt)
{
    static const char *const names[] = {[CINFER_KV_F32] = "f32", [CINFER_KV_F16] = "f16", [CINFER_KV_BF16] = "bf16",
                                        [CINFER_KV_Q8_0] = "q8_0"};
    return names[rt->kv_type];
}

static int check_config(const struct cinfer_model_config *c, struct cinfer_error *err)
{
    if (c->hidden_size <= 0 || c->intermediate_size <= 0 || c->num_layers <= 0 || c->vocab_size <= 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model config: hidden_size %d, intermediate_size %d, num_layers %d and vocab_size %d "
                                "must all be positive",
                                c->hidden_size, c->intermediate_size, c->num_layers, c->vocab_size);
    if (c->num_heads <= 0 || c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model config: num_heads %d must be a positive multiple of num_kv_heads %d",
                                c->num_heads, c->num_kv_heads);
    if (c->head_dim <= 0 || c->head_dim % 2 != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "model config: head_dim must be positive and even, got %d",
                                c->head_dim);
    if (!(c->rope_theta > 0.0f) || !(c->rms_norm_eps >= 0.0f))
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model config: rope_theta must be > 0 and rms_norm_eps >= 0, got %g and %g",
                                (double)c->rope_theta, (double)c->rms_norm_eps);
    if (c->rope_scaling.type == CINFER_ROPE_SCALING_LINEAR && !(c->rope_scaling.factor > 0.0f))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "model config: linear rope_scaling needs factor > 0, got %g",
                                (double)c->rope_scaling.factor);
    if (c->num_layers > CINFER_MAX_LAYERS)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "model config: %d layers, at most %d", c->num_layers,
                                CINFER_MAX_LAYERS);
    if (c->rope_scaling.type == CINFER_ROPE_SCALING_LLAMA3 &&
        (!(c->rope_scaling.factor > 0.0f) || !(c->rope_scaling.high_freq_factor > c->rope_scaling.low_freq_factor) ||
         !(c->rope_scaling.low_freq_factor > 0.0f) || c->rope_scaling.original_max_position_embeddings <= 0))
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model config: llama3 rope_scaling needs factor > 0, high_freq_factor > "
                                "low_freq_factor > 0 and original_max_position_embeddings > 0, got %g, %g, %g, %d",
                                (double)c->rope_scaling.factor, (double)c->rope_scaling.high_freq_factor,
                                (double)c->rope_scaling.low_freq_factor,
                                c->rope_scaling.original_max_position_embeddings);
    return 0;
}

/* A matrix of the model checked against its full shape, then this rank's rows
 * (by_cols 0) or columns (by_cols 1) of it [first, first + count), as a view. */
static int bind_slice(const struct cinfer_weight *w, const char *name, int layer, int64_t rows, int64_t cols,
                      int by_cols, int64_t first, int64_t count, struct cinfer_backend_weight *out,
                      struct cinfer_error *err)
{
    struct cinfer_backend_weight full;
    int rc = bind_matrix(w, name, layer, rows, cols, &full, err);
    if (rc < 0)
        return rc;
    cinfer_weight_slice(&full, by_cols, first, count, out);
    return 0;
}

/* A sparse layer's router (whole on every rank) and this rank's share of its experts
 * (runtime_shard.c: gate and up by rows, down by columns; a gpt-oss expert's gate and up
 * biases sliced alike, its down bias on rank 0 only, as it adds to a row-parallel output
 * the all-reduce sums), appended to rt->moe_weights. Under expert parallelism the rank's
 * own experts whole with all their biases, and nothing of the others: their slots stay
 * unbound (data NULL) and their bytes unread. */
static int bind_experts(struct cinfer_runtime *rt, int l, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &rt->model->config;
    const struct cinfer_layer_weights *src = &rt->model->layers[l];
    struct runtime_layer *dst = &rt->layers[l];
    if (!cinfer_model_layer_sparse(c, l))
        return 0;
    if (!src->experts)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "model: layer %d is sparse but has no experts", l);
    if (!rt->moe_weights) {
        int sparse = 0;
        for (int i = 0; i < c->num_layers; i++)
            sparse += cinfer_model_layer_sparse(c, i);
        size_t n = (size_t)sparse * (1 + 3 * (size_t)c->n_experts + (c->shared_expert_intermediate_size > 0 ? 4 : 0));
        rt->moe_weights = calloc(n, sizeof *rt->moe_weights);
        rt->moe_sources = calloc(n, sizeof *rt->moe_sources);
        if (!rt->moe_weights || !rt->moe_sources)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory for %zu expert weights", n);
    }
    const struct runtime_shard *sh = &rt->shard;
    int64_t ffn = c->moe_intermediate_size, f0 = sh->first_moe_ffn, nf = sh->moe_ffn;
    struct cinfer_backend_weight *router = dst->router = &rt->moe_weights[rt->n_moe_weights];
    rt->moe_sources[rt->n_moe_weights++] = &src->router;
    int rc = bind_matrix(&src->router, "router", l, c->n_experts, rt->hidden, router, err);
    if (rc < 0 ||
        (rc = widen_vector(&src->router_bias, "router_bias", l, c->n_experts, c->moe_biases, &dst->router_bias,
                           err)) < 0)
        return rc;
    if (c->moe_biases) { /* gpt-oss: each expert's gate, up and down biases */
        int sparse = 0;
        for (int i = 0; i < l; i++)
            sparse += cinfer_model_layer_sparse(c, i);
        if (!rt->moe_biases && !(rt->moe_biases = calloc((size_t)c->num_layers * 3 * (size_t)c->n_experts,
                                                         sizeof *rt->moe_biases)))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory for expert biases");
        dst->expert_biases = rt->moe_biases + (size_t)sparse * 3 * (size_t)c->n_experts;
        for (int e = 0; e < c->n_experts; e++) {
            const struct cinfer_expert_weights *x = &src->experts[e];
            float **b = &dst->expert_biases[3 * e]; /* gate, up, down */
            if (!cinfer_shard_owns_expert(sh, e))
                continue; /* another rank's expert: its owner adds its down bias */
            if ((rc = widen_slice(&x->gate_bias, "expert gate bias", l, ffn, f0, nf, 1, &b[0], err)) < 0 ||
                (rc = widen_slice(&x->up_bias, "expert up bias", l, ffn, f0, nf, 1, &b[1], err)) < 0 ||
                (rc = widen_vector(&x->down_bias, "expert down bias", l, rt->hidden, 1, &b[2], err)) < 0)
                return rc;
            if (!sh->ep && sh->rank != 0) { /* checked above; rank 0 adds it to the sum */
                free(b[2]);
                b[2] = NULL;
            }
        }
    }
    dst->experts = &rt->moe_weights[rt->n_moe_weights];
    for (int e = 0; e < c->n_experts; e++) {
        const struct cinfer_expert_weights *x = &src->experts[e];
        const struct cinfer_weight *parts[3] = {&x->gate, &x->up, &x->down};
        static const char *const names[3] = {"expert gate", "expert up", "expert down"};
        for (int p = 0; p < 3; p++) {
            int down = p == 2;
            rt->moe_sources[rt->n_moe_weights] = parts[p];
            if (!cinfer_shard_owns_expert(sh, e)) { /* unbound: data NULL, never prepared nor read */
                rt->n_moe_weights++;
                continue;
            }
            if ((rc = bind_slice(parts[p], names[p], l, down ? rt->hidden : ffn, down ? ffn : rt->hidden, down, f0,
                                 nf, &rt->moe_weights[rt->n_moe_weights++], err)) < 0)
                return rc;
        }
    }
    if (c->shared_expert_intermediate_size <= 0)
        return 0;
    /* Qwen2-MoE's shared expert (split as the dense MLP), then its gate's (1, hidden) map (whole) */
    int64_t shared_ffn = c->shared_expert_intermediate_size;
    int64_t first[4] = {sh->first_shared_ffn, sh->first_shared_ffn, sh->first_shared_ffn, 0};
    int64_t count[4] = {sh->shared_ffn, sh->shared_ffn, sh->shared_ffn, 1};
    const struct cinfer_weight *shared[4] = {&src->shared_expert.gate, &src->shared_expert.up,
                                             &src->shared_expert.down, &src->shared_expert_gate};
    static const char *const shared_names[4] = {"shared expert gate", "shared expert up", "shared expert down",
                                                 "shared expert gate map"};
    int64_t rows[4] = {shared_ffn, shared_ffn, rt->hidden, 1}, cols[4] = {rt->hidden, rt->hidden, shared_ffn,
                                                                         rt->hidden};
    dst->shared = &rt->moe_weights[rt->n_moe_weights];
    dst->shared_gate = dst->shared + 3;
    for (int p = 0; p < 4; p++) {
        rt->moe_sources[rt->n_moe_weights] = shared[p];
        if ((rc = bind_slice(shared[p], shared_names[p], l, rows[p], cols[p], p == 2, first[p], count[p],
                             &rt->moe_weights[rt->n_moe_weights++], err)) < 0)
            return rc;
    }
    return 0;
}

/* Every 1-D weight slot of rt with its length, in one order (NULL slots included);
 * with slots NULL, only their count. */
#define LAYER_VECTORS 12
static int vector_slots(struct cinfer_runtime *rt, float ***slots, int *lens)
{
    const struct cinfer_model_config *c = &rt->model->config;
    int n = 0;
#define SLOT(p, len) (slots ? (void)(slots[n] = (p), lens[n] = (len)) : (void)0, n++)
    SLOT(&rt->output_norm, rt->hidden);
    for (int l = 0; l < c->num_layers; l++) {
        struct runtime_layer *w = &rt->layers[l];
        float **s[LAYER_VECTORS] = {&w->attn_norm, &w->ffn_norm, &w->post_attn_norm, &w->post_ffn_norm,
                                    &w->q_norm,    &w->k_norm,   &w->bq,             &w->bk,
                                    &w->bv,        &w->bo,       &w->sinks,          &w->router_bias};
        int len[LAYER_VECTORS] = {rt->hidden, rt->hidden, rt->hidden, rt->hidden,   rt->head_dim, rt->head_dim,
                                  rt->q_dim,  rt->kv_dim, rt->kv_dim, rt->hidden, rt->shard.heads, c->n_experts};
        for (int i = 0; i < LAYER_VECTORS; i++)
            SLOT(s[i], len[i]);
        for (int i = 0; w->expert_biases && i < 3 * c->n_experts; i++)
            SLOT(&w->expert_biases[i], i % 3 == 2 ? rt->hidden : rt->moe_ffn);
    }
#undef SLOT
    return n;
}

/* Hands every norm and bias to the backend; each slot then points at what it made. */
static int prepare_vectors(struct cinfer_runtime *rt, struct cinfer_error *err)
{
    int cap = vector_slots(rt, NULL, NULL);
    float ***slots = malloc((size_t)cap * sizeof *slots);
    int *lens = malloc((size_t)cap * sizeof *lens);
    struct runtime_vector *vectors = calloc((size_t)cap, sizeof *vectors);
    if (!slots || !lens || !vectors) {
        free(slots);
        free(lens);
        free(vectors);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    }
    rt->vectors = vectors;
    int n = vector_slots(rt, slots, lens), rc = 0;
    for (int i = 0; i < n; i++) /* the host copies, owned here from now on */
        if (*slots[i])
            rt->vectors[rt->n_vectors++].host = *slots[i];
    for (int i = 0, v = 0; i < n && rc == 0; i++) {
        if (!*slots[i])
            continue;
        struct cinfer_backend_weight stored = {CINFER_TENSOR_F32, 1, lens[i], *slots[i],
                                               (size_t)lens[i] * sizeof(float)};
        rc = rt->ops->weight_prepare(rt->backend, &stored, &rt->vectors[v].prepared, err);
        if (rc == 0) {
            *slots[i] = (float *)rt->vectors[v++].prepared.data;
            rt->n_vectors_prepared++;
        }
    }
    free(slots);
    free(lens);
    return rc;
}

static int bind_weights(struct cinfer_runtime *rt, struct cinfer_error *err)
{
    const struct cinfer_model *m = rt->model;
    const struct cinfer_model_config *c = &m->config;
    const struct runtime_shard *sh = &rt->shard;
    int64_t hd = rt->head_dim, q_full = (int64_t)c->num_heads * hd, kv_full = (int64_t)c->num_kv_heads * hd;
    int64_t q0 = sh->first_head * hd, kv0 = sh->first_kv_head * hd, f0 = sh->first_ffn;
    int64_t ffn_full = c->intermediate_size;
    int rc;
    if ((rc = bind_slice(&m->tok_embeddings, "tok_embeddings", -1, rt->vocab, rt->hidden, 0, sh->first_vocab,
                         sh->vocab_rows, &rt->tok_embeddings, err)) < 0 ||
        (rc = bind_slice(&m->lm_head, "lm_head", -1, rt->vocab, rt->hidden, 0, sh->first_vocab, sh->vocab_rows,
                         &rt->lm_head, err)) < 0 ||
        (rc = widen_vector(&m->output_norm, "output_norm", -1, rt->hidden, 1, &rt->output_norm, err)) < 0)
        return rc;
    if (c->norm_unit_offset)
        add_one(rt->output_norm, rt->hidden);
    rt->layers = calloc((size_t)c->num_layers, sizeof *rt->layers);
    if (!rt->layers)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    for (int l = 0; l < c->num_layers; l++) {
        const struct cinfer_layer_weights *src = &m->layers[l];
        struct runtime_layer *dst = &rt->layers[l];
        if ((rc = bind_slice(&src->wq, "wq", l, q_full, rt->hidden, 0, q0, rt->q_dim, &dst->wq, err)) < 0 ||
            (rc = bind_slice(&src->wk, "wk", l, kv_full, rt->hidden, 0, kv0, rt->kv_dim, &dst->wk, err)) < 0 ||
            (rc = bind_slice(&src->wv, "wv", l, kv_full, rt->hidden, 0, kv0, rt->kv_dim, &dst->wv, err)) < 0 ||
            (rc = bind_slice(&src->wo, "wo", l, rt->hidden, q_full, 1, q0, rt->q_dim, &dst->wo, err)) < 0 ||
            (!cinfer_model_layer_sparse(c, l) &&
             ((rc = bind_slice(&src->w_gate, "w_gate", l, ffn_full, rt->hidden, 0, f0, rt->intermediate, &dst->w_gate,
                               err)) < 0 ||
              (rc = bind_slice(&src->w_up, "w_up", l, ffn_full, rt->hidden, 0, f0, rt->intermediate, &dst->w_up,
                               err)) < 0 ||
              (rc = bind_slice(&src->w_down, "w_down", l, rt->hidden, ffn_full, 1, f0, rt->intermediate,
                               &dst->w_down, err)) < 0)) ||
            (rc = bind_experts(rt, l, err)) < 0 ||
            (rc = widen_vector(&src->attn_norm, "attn_norm", l, rt->hidden, 1, &dst->attn_norm, err)) < 0 ||
            (rc = widen_vector(&src->ffn_norm, "ffn_norm", l, rt->hidden, 1, &dst->ffn_norm, err)) < 0 ||
            (rc = widen_vector(&src->post_attn_norm, "post_attn_norm", l, rt->hidden, c->sandwich_norms,
                               &dst->post_attn_norm, err)) < 0 ||
            (rc = widen_vector(&src->post_ffn_norm, "post_ffn_norm", l, rt->hidden, c->sandwich_norms,
                               &dst->post_ffn_norm, err)) < 0 ||
            (rc = widen_vector(&src->q_norm, "q_norm", l, rt->head_dim, c->qk_norm, &dst->q_norm, err)) < 0 ||
            (rc = widen_vector(&src->k_norm, "k_norm", l, rt->head_dim, c->qk_norm, &dst->k_norm, err)) < 0 ||
            (rc = widen_slice(&src->bq, "bq", l, q_full, q0, rt->q_dim, c->attention_bias, &dst->bq, err)) < 0 ||
            (rc = widen_slice(&src->bk, "bk", l, kv_full, kv0, rt->kv_dim, c->attention_bias, &dst->bk, err)) < 0 ||
            (rc = widen_slice(&src->bv, "bv", l, kv_full, kv0, rt->kv_dim, c->attention_bias, &dst->bv, err)) < 0 ||
            (rc = widen_vector(&src->bo, "bo", l, rt->hidden, c->attn_output_bias, &dst->bo, err)) < 0 ||
            (rc = widen_slice(&src->sinks, "sinks", l, c->num_heads, sh->first_head, sh->heads, c->attn_sinks,
                              &dst->sinks, err)) < 0)
            return rc;
        if (sh->rank != 0) { /* wo's bias adds to a row-parallel output: rank 0 adds it to the sum */
            free(dst->bo);
            dst->bo = NULL;
        }
        if (!c->qk_norm) { /* a stray norm in a model that does not use it stays unused */
            free(dst->q_norm);
            free(dst->k_norm);
            dst->q_norm = dst->k_norm = NULL;
        }
        if (!c->sandwich_norms) {
            free(dst->post_attn_norm);
            free(dst->post_ffn_norm);
            dst->post_attn_norm = dst->post_ffn_norm = NULL;
        }
        if (c->norm_unit_offset) { /* HF Gemma: the norms scale by (1 + w), in f32 as transformers does */
            add_one(dst->attn_norm, rt->hidden);
            add_one(dst->ffn_norm, rt->hidden);
            add_one(dst->post_attn_norm, rt->hidden);
            add_one(dst->post_ffn_norm, rt->hidden);
            add_one(dst->q_norm, rt->head_dim);
            add_one(dst->k_norm, rt->head_dim);
        }
        rt->memory.weight_copy_bytes += sizeof(float) * (size_t)((dst->post_attn_norm ? 4 : 2) * rt->hidden +
                                                                 (dst->q_norm ? 2 * rt->head_dim : 0) +
                                                                 (dst->bq ? rt->q_dim + 2 * rt->kv_dim : 0));
    }
    rt->memory.weight_copy_bytes += sizeof(float) * (size_t)rt->hidden; /* output_norm */
    return 0;
}

/* The runtime's matrix weights in a fixed order: tok_embeddings, lm_head, then each
 * layer's seven; index i of runtime_weight_count(rt). */
#define LAYER_MATRICES 7

static int runtime_weight_count(const struct cinfer_runtime *rt)
{
    return 2 + LAYER_MATRICES * rt->model->config.num_layers + rt->n_moe_weights;
}

/* where the routers and experts start in runtime_weight's order */
static int moe_weight_base(const struct cinfer_runtime *rt)
{
    return 2 + LAYER_MATRICES * rt->model->config.num_layers;
}

static struct cinfer_backend_weight *runtime_weight(struct cinfer_runtime *rt, int i)
{
    if (i < 2)
        return i == 0 ? &rt->tok_embeddings : &rt->lm_head;
    if (i >= moe_weight_base(rt))
        return &rt->moe_weights[i - moe_weight_base(rt)];
    struct runtime_layer *w = &rt->layers[(i - 2) / LAYER_MATRICES];
    struct cinfer_backend_weight *layer[LAYER_MATRICES] = {&w->wq,     &w->wk,   &w->wv,    &w->wo,
                                                           &w->w_gate, &w->w_up, &w->w_down};
    return layer[(i - 2) % LAYER_MATRICES];
}

/* The model's whole matrix that runtime weight i is (a slice of). */
static const struct cinfer_weight *model_weight(const struct cinfer_runtime *rt, int i)
{
    const struct cinfer_model *m = rt->model;
    if (i < 2)
        return i == 0 ? &m->tok_embeddings : &m->lm_head;
    if (i >= moe_weight_base(rt))
        return rt->moe_sources[i - moe_weight_base(rt)];
    const struct cinfer_layer_weights *w = &m->layers[(i - 2) / LAYER_MATRICES];
    const struct cinfer_weight *layer[LAYER_MATRICES] = {&w->wq,     &w->wk,   &w->wv,    &w->wo,
                                                         &w->w_gate, &w->w_up, &w->w_down};
    return layer[(i - 2) % LAYER_MATRICES];
}

/* A compact copy of a slice view (rows whole, columns a strided part): *w becomes it. */
static int copy_slice(struct cinfer_backend_weight *w, void **copy, struct cinfer_error *err)
{
    size_t row_bytes = cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)w->type, w->cols);
    size_t bytes = (size_t)w->rows * row_bytes;
    uint8_t *dst = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!dst)
        return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                "runtime: cannot allocate %zu bytes for this rank's slice of a (%lld, %lld) weight",
                                bytes, (long long)w->rows, (long long)w->cols);
    for (int64_t r = 0; r < w->rows; r++)
        memcpy(dst + (size_t)r * row_bytes, (const uint8_t *)w->data + (size_t)r * w->row_bytes, row_bytes);
    w->data = dst;
    w->row_bytes = row_bytes;
    *copy = dst;
    return 0;
}

/* Every matrix weight through the backend's weight_prepare (the CPU repacks Q8_0, F16
 * and BF16 into panels for its AVX-512 kernels), unless the options keep the stored
 * views. Tied embeddings are prepared once. A weight the backend copied is not read as
 * stored again, so its file pages leave memory.
 *
 * A tensor-parallel rank's weights are slices. Where the backend copies a slice (panels,
 * device memory) that copy is all the rank keeps; where it would read the slice as
 * given, the runtime keeps a compact copy of it instead (a column slice is strided
 * across every page of the matrix, and the file's pages would be shared with the
 * other ranks' parts). Either way the whole matrix's file pages then leave this
 * process, so a rank holds about 1/tp_size of the weights, and never two copies.
 * The experts' slices are the exception: they stay views of the stored experts, as at
 * tp_size 1. An expert is read only when a token picks it, so a copy would fault in
 * every expert's pages at load for nothing; gate and up's row slices are this rank's
 * own pages, and down's column slices (strided, read through the view's row stride) share
 * file pages with the other ranks' columns, which the page cache holds once. */
static int prepare_weights(struct cinfer_runtime *rt, int keep_stored, struct cinfer_error *err)
{
    rt->lm_head_tied = rt->lm_head.data == rt->tok_embeddings.data;
    int sliced = rt->shard.size > 1;
    int n = runtime_weight_count(rt);
    if (sliced && !(rt->slice_copies = calloc((size_t)n, sizeof *rt->slice_copies)))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    if (keep_stored && !sliced) {
        for (int i = 0; i < n; i++) {
            const struct cinfer_backend_weight *w = runtime_weight(rt, i);
            if (!(i == 1 && rt->lm_head_tied))
                rt->memory.weight_in_place_bytes += (size_t)w->rows * w->row_bytes;
        }
        return 0;
    }
    for (int i = 0; i < n; i++) {
        struct cinfer_backend_weight *w = runtime_weight(rt, i);
        if (!w->data) { /* a sparse layer's dense MLP */
            rt->n_prepared++;
            continue;
        }
        if (w == &rt->lm_head && rt->lm_head_tied) {
            rt->lm_head = rt->tok_embeddings;
            rt->n_prepared++;
            continue;
        }
        struct cinfer_backend_weight stored = *w;
        if (!keep_stored) {
            int rc = rt->ops->weight_prepare(rt->backend, &stored, w, err);
            if (rc < 0)
                return rc;
        }
        rt->n_prepared++;
        int expert = i >= moe_weight_base(rt);
        if (sliced && w->data == stored.data && !expert) { /* the backend reads it as given: it made nothing */
            if (!keep_stored)
                rt->ops->weight_release(rt->backend, w);
            int rc = copy_slice(w, &rt->slice_copies[i], err);
            if (rc < 0)
                return rc;
        }
        if (w->data != stored.data) {
            const struct cinfer_weight *whole = model_weight(rt, i);
            cinfer_model_drop_stored(rt->model, whole->data, (size_t)whole->rows * whole->row_bytes);
            rt->memory.weight_copy_bytes += (size_t)w->rows * w->row_bytes;
        } else { /* a column view's own bytes, not its row stride's */
            rt->memory.weight_in_place_bytes +=
                (size_t)w->rows * cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)w->type, w->cols);
        }
    }
    return 0;
}

static void release_weights(struct cinfer_runtime *rt)
{
    for (int i = 0; i < rt->n_prepared; i++) {
        struct cinfer_backend_weight *w = runtime_weight(rt, i);
        if (rt->slice_copies && rt->slice_copies[i])
            free(rt->slice_copies[i]);
        else if (w->data && !(w == &rt->lm_head && rt->lm_head_tied))
            rt->ops->weight_release(rt->backend, w);
    }
    rt->n_prepared = 0;
}

static int alloc_scratch(struct cinfer_runtime *rt, struct cinfer_error *err)
{
    size_t t = (size_t)rt->max_batch_tokens;
    size_t n_experts = (size_t)rt->model->config.n_experts, moe_ffn = (size_t)rt->moe_ffn;
    size_t top_k = (size_t)rt->model->config.n_experts_used;
    size_t shared_ffn = (size_t)rt->shared_ffn; /* 0 without a shared expert */
    struct {
        float **buf;
        size_t floats;
    } bufs[] = {
        {&rt->x, t * rt->hidden},
        {&rt->xn, t * rt->hidden},
        {&rt->q, t * rt->q_dim},
        {&rt->k, t * rt->kv_dim},
        {&rt->v, t * rt->kv_dim},
        {&rt->attn, t * rt->q_dim},
        {&rt->proj, t * rt->hidden},
        {&rt->gate, t * rt->intermediate},
        {&rt->up, t * rt->intermediate},
        {&rt->moe_logits, t * (size_t)n_experts},
        {&rt->moe_x, n_experts ? t * rt->hidden : 0},
        {&rt->moe_gate, n_experts ? t * moe_ffn : 0},
        {&rt->moe_up, n_experts ? t * moe_ffn : 0},
        {&rt->moe_y, n_experts ? t * rt->hidden : 0},
        {&rt->moe_shared_gate, t * shared_ffn},
        {&rt->moe_shared_up, t * shared_ffn},
        {&rt->moe_shared_logit, shared_ffn ? t : 0},
        {&rt->logits_x, (size_t)CINFER_LOGITS_BLOCK_ROWS * rt->hidden},
        {&rt->logits, (size_t)CINFER_LOGITS_BLOCK_ROWS * rt->shard.vocab_stride},
        {&rt->logits_gather,
         rt->shard.size > 1 ? (size_t)rt->shard.size * CINFER_LOGITS_BLOCK_ROWS * rt->shard.vocab_stride : 0},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (bufs[i].floats == 0)
            continue;
        *bufs[i].buf = rt->ops->buffer_alloc(rt->backend, bufs[i].floats * sizeof(float));
        if (!*bufs[i].buf)
            return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                    "runtime: cannot allocate %zu bytes of scratch for max_batch_tokens %d",
                                    bufs[i].floats * sizeof(float), rt->max_batch_tokens);
    }
    if (rt->backend_reduces && rt->shard.size > 1) {
        size_t block = (size_t)CINFER_LOGITS_BLOCK_ROWS * rt->shard.vocab_stride;
        rt->logits_host = malloc(block * sizeof(float));
        rt->logits_gather_host = malloc((size_t)rt->shard.size * block * sizeof(float));
        if (!rt->logits_host || !rt->logits_gather_host)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory for the logits' host gather");
    }
    rt->tokens = calloc(t, sizeof *rt->tokens);
    rt->rope_cos = calloc(t * (size_t)(rt->head_dim / 2), sizeof *rt->rope_cos);
    rt->rope_sin = calloc(t * (size_t)(rt->head_dim / 2), sizeof *rt->rope_sin);
    rt->slots = calloc(t, sizeof *rt->slots);
    rt->attn_seqs = calloc(t, sizeof *rt->attn_seqs);
    rt->logits_dst = calloc(t, sizeof *rt->logits_dst);
    rt->logits_rows = calloc(t, sizeof *rt->logits_rows);
    rt->logits_chunk = calloc(t, sizeof *rt->logits_chunk);
    if (!rt->tokens || !rt->rope_cos || !rt->rope_sin || !rt->slots || !rt->attn_seqs || !rt->logits_dst ||
        !rt->logits_rows || !rt->logits_chunk)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    if (n_experts) {
        rt->moe_ids = calloc(t * top_k, sizeof *rt->moe_ids);
        rt->moe_weights_tk = calloc(t * top_k, sizeof *rt->moe_weights_tk);
        rt->moe_rows = calloc(t * top_k, sizeof *rt->moe_rows);
        rt->moe_row_weights = calloc(t * top_k, sizeof *rt->moe_row_weights);
        rt->moe_first = calloc(n_experts + 1, sizeof *rt->moe_first);
        if (!rt->moe_ids || !rt->moe_weights_tk || !rt->moe_rows || !rt->moe_row_weights || !rt->moe_first)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    }
    if (rt->inv_freq_local) {
        rt->rope_cos_local = calloc(t * (size_t)(rt->head_dim / 2), sizeof *rt->rope_cos_local);
        rt->rope_sin_local = calloc(t * (size_t)(rt->head_dim / 2), sizeof *rt->rope_sin_local);
        if (!rt->rope_cos_local || !rt->rope_sin_local)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    }
    return 0;
}

/* The tensor-parallel options: a communicator that matches tp_rank and tp_size, and
 * rank 0's publish_plan; then this rank's share of the model. */
static int setup_tp(struct cinfer_runtime *rt, const struct cinfer_runtime_options *o, struct cinfer_error *err)
{
    int size = o->tp_size ? o->tp_size : 1;
    int rc = cinfer_runtime_shard_plan(rt->model, o->tp_rank, size, o->ep_size, &rt->shard, err);
    if (rc < 0 || size == 1)
        return rc;
    if (!o->comm)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "runtime: tp_size %d needs a communicator", size);
    if ((rc = cinfer_comm_check(o->comm, err)) < 0)
        return cinfer_error_prefix(err, "runtime");
    if (o->comm->rank != o->tp_rank || o->comm->size != size)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "runtime: tp_rank %d of tp_size %d, but the communicator is rank %d of %d", o->tp_rank,
                                size, o->comm->rank, o->comm->size);
    if (o->tp_rank == 0 && !o->publish_plan)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "runtime: tp rank 0 of %d needs publish_plan to hand its plans to the other ranks",
                                size);
    rt->comm = o->comm;
    rt->publish_plan = o->publish_plan;
    rt->publish_ctx = o->publish_ctx;
    return 0;
}

/* Whether ops has `slot` (a slot of version `since`, which may be NULL): a table built
 * against an older header is shorter, so its struct_size must reach the slot too. */
#define BACKEND_OFFERS(ops, since, slot)                                                                         \
    ((ops)->version >= (since) &&                                                                                \
     (ops)->struct_size >= offsetof(struct cinfer_backend_ops, slot) + sizeof(ops)->slot && (ops)->slot != NULL)

/* gpt-oss needs version 9's attention sinks and swiglu_oai: a backend without them is
 * refused by name rather than run without (its attention would ignore the sinks). */
static int check_backend_slots(const struct cinfer_runtime *rt, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &rt->model->config;
    const struct cinfer_backend_ops *ops = rt->ops;
    int needs_swiglu = c->activation == CINFER_ACTIVATION_SWIGLU_OAI;
    if ((c->attn_sinks || needs_swiglu) && ops->version < 9)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "runtime: backend %s has ops version %u; this %s model needs version 9's %s", ops->name,
                                ops->version, c->architecture,
                                c->attn_sinks ? "attention sinks (attn_options.sinks)" : "swiglu_oai");
    if (needs_swiglu && !ops->swiglu_oai)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "runtime: backend %s has no swiglu_oai (NULL slot); this %s model's experts need it",
                                ops->name, c->architecture);
    return 0;
}

/* On the configured device; the group goes along for a backend that reduces itself. */
static int create_backend(struct cinfer_runtime *rt, const struct cinfer_runtime_options *o, struct cinfer_error *err)
{
    if (rt->ops->version < 7 || !rt->ops->create_on) {
        if (o->device != 0)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "runtime: backend %s has ops version %u, which cannot pick device %d (needs 7)",
                                    rt->ops->name, rt->ops->version, o->device);
        return rt->ops->create(o->n_threads, &rt->backend, err);
    }
    struct cinfer_backend_create_options co = {.struct_size = sizeof co, .n_threads = o->n_threads,
                                               .device = o->device, .comm = o->comm};
    int rc = rt->ops->create_on(&co, &rt->backend, err);
    if (rc < 0)
        cinfer_error_prefix(err, "runtime: backend %s, device %d", rt->ops->name, o->device);
    return rc;
}

/* tensor-parallel ranks whose device budgets device_kv_budget gathers */
#define CINFER_RUNTIME_MAX_TP_RANKS_FOR_BUDGET 256

/* --mem-fraction-static on a backend that measures its device: opts->kv_cache_bytes
 * becomes min(it, fraction x total - (total - free)), free measured now, after the
 * weights; the ranks of a group take the smallest (they must agree on the pages). */
static int device_kv_budget(struct cinfer_runtime *rt, struct cinfer_runtime_options *opts, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    if (!(opts->mem_fraction_static > 0.0) || !BACKEND_OFFERS(ops, 9, memory_info))
        return 0;
    size_t free_bytes = 0, total_bytes = 0;
    int rc = ops->memory_info(rt->backend, &free_bytes, &total_bytes, err);
    if (rc < 0)
        return cinfer_error_prefix(err, "runtime: backend %s: measuring the device memory", ops->name);
    double used = (double)total_bytes - (double)free_bytes;
    double budget = opts->mem_fraction_static * (double)total_bytes - used;
    if (budget < 1.0)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "runtime: backend %s: scheduler.mem_fraction_static (--mem-fraction-static) %.2f of "
                                "%zu bytes leaves nothing for the KV cache: %.0f bytes are in use after the weights",
                                ops->name, opts->mem_fraction_static, total_bytes, used);
    uint64_t mine = budget < (double)opts->kv_cache_bytes ? (uint64_t)budget : (uint64_t)opts->kv_cache_bytes;
    if (rt->shard.size > 1) {
        uint64_t all[CINFER_RUNTIME_MAX_TP_RANKS_FOR_BUDGET];
        if (rt->shard.size > CINFER_RUNTIME_MAX_TP_RANKS_FOR_BUDGET)
            return cinfer_error_set(err, CINFER_ERR_RANGE, "runtime: %d ranks: at most %d can agree on a KV budget",
                                    rt->shard.size, CINFER_RUNTIME_MAX_TP_RANKS_FOR_BUDGET);
        if ((rc = rt->comm->ops->all_gather(rt->comm->state, &mine, sizeof mine, all, err)) < 0)
            return cinfer_error_prefix(err, "runtime: agreeing on the device KV budget");
        for (int r = 0; r < rt->shard.size; r++)
            mine = all[r] < mine ? all[r] : mine;
    }
    opts->kv_cache_bytes = (size_t)mine;
    return 0;
}

int cinfer_runtime_create(const struct cinfer_model *m, const struct cinfer_runtime_options *o,
                          struct cinfer_runtime **out, struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_runtime_options opts = o ? *o : (struct cinfer_runtime_options){0};
    if (!m)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "runtime: no model given");
    if (opts.kv_page_tokens < 0 || opts.n_threads < 0 || opts.max_batch_tokens < 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "runtime: kv_page_tokens %d, n_threads %d and max_batch_tokens %d must not be negative",
                                opts.kv_page_tokens, opts.n_threads, opts.max_batch_tokens);
    int rc = check_config(&m->config, err);
    if (rc < 0)
        return rc;
    const struct cinfer_model_config *c = &m->config;

    struct cinfer_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
    rt->model = m;
    if ((rc = setup_tp(rt, &opts, err)) < 0) {
        free(rt);
        return rc;
    }
    rt->hidden = c->hidden_size;
    rt->head_dim = c->head_dim;
    rt->q_dim = rt->shard.heads * c->head_dim;
    rt->kv_dim = rt->shard.kv_heads * c->head_dim;
    rt->intermediate = rt->shard.ffn;
    rt->moe_ffn = rt->shard.moe_ffn;
    rt->shared_ffn = rt->shard.shared_ffn;
    rt->vocab = c->vocab_size;
    rt->max_batch_tokens = opts.max_batch_tokens ? opts.max_batch_tokens : DEFAULT_MAX_BATCH_TOKENS;
    int page_tokens = opts.kv_page_tokens ? opts.kv_page_tokens : DEFAULT_PAGE_TOKENS;
    rt->ops = opts.backend ? opts.backend : cinfer_cpu_backend_ops();
    if (c->n_experts > 0 && c->shared_expert_intermediate_size > 0 &&
        (rt->ops->version < 9 || !rt->ops->add_gated)) { /* a version-9 slot: may be NULL */
        rc = cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                              "runtime: model %s (%s) has shared experts, scaled by their gates; backend %s (ops "
                              "version %u) has no add_gated (a version 9 slot) to run them",
                              m->path ? m->path : "(in memory)", c->architecture, rt->ops->name, rt->ops->version);
        free(rt);
        return rc;
    }
    rt->backend_reduces = BACKEND_OFFERS(rt->ops, 9, all_reduce_sum);
    rt->backend_groups = BACKEND_OFFERS(rt->ops, 10, matmul_grouped);
    rt->backend_ranks = BACKEND_OFFERS(rt->ops, 11, logits_top);
    rt->backend_samples = BACKEND_OFFERS(rt->ops, 12, sample);
    rt->backend_steps = BACKEND_OFFERS(rt->ops, 13, step_begin) && BACKEND_OFFERS(rt->ops, 13, step_end);

    if ((rc = check_backend_slots(rt, err)) < 0 || (rc = bind_weights(rt, err)) < 0)
        goto fail;
    rt->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(double));
    if (!rt->inv_freq) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
        goto fail;
    }
    cinfer_rope_inv_freq(c, c->rope_theta, 1, opts.context_length, rt->inv_freq);
    rt->rope_attention_factor = (float)cinfer_rope_attention_factor(c);
    rt->rope_turned_pairs = cinfer_model_rotary_dim(c) / 2;
    if (c->rope_theta_local > 0.0f && c->sliding_window > 0) {
        /* Gemma 3: sliding layers rotate with their own base and no scaling */
        rt->inv_freq_local = malloc((size_t)(c->head_dim / 2) * sizeof(double));
        if (!rt->inv_freq_local) {
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory");
            goto fail;
        }
        cinfer_rope_inv_freq(c, c->rope_theta_local, 0, opts.context_length, rt->inv_freq_local);
    }

    rt->kv_type = kv_type_of(opts.kv_dtype);
    if (rt->kv_type < 0) {
        rc = cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "runtime: kv_dtype %d is not a KV cache type",
                              (int)opts.kv_dtype);
        goto fail;
    }
    if (rt->kv_type == CINFER_KV_Q8_0 && c->head_dim % 32 != 0) {
        rc = cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                              "runtime: kv_cache_dtype q8_0 quantizes each head's K and V in blocks of 32, but this "
                              "model's head_dim is %d; choose f16, bf16 or f32",
                              c->head_dim);
        goto fail;
    }
    if ((rc = create_backend(rt, &opts, err)) < 0)
        goto fail;
    if ((rc = prepare_weights(rt, opts.keep_stored_weights, err)) < 0 || (rc = prepare_vectors(rt, err)) < 0)
        goto fail;
    /* the device's budget is known once the weights are on it */
    if ((rc = device_kv_budget(rt, &opts, err)) < 0)
        goto fail;
    /* a rank's pages hold its KV heads only: every rank gets the same count */
    int n_pages = 0, n_window_pages = 0;
    cinfer_kv_window_plan(rt, opts.kv_cache_bytes, page_tokens, opts.keep_window_pages, &n_pages, &n_window_pages);
    if (n_pages < 1) {
        size_t page_bytes = cinfer_kv_token_bytes(c->num_layers, rt->kv_dim, rt->kv_type) * (size_t)page_tokens;
        rc = cinfer_error_set(err, CINFER_ERR_RANGE,
                              "runtime: kv_cache_bytes %zu holds no KV page; one page of %d tokens takes %zu bytes "
                              "(%d layers x K and V x %d values of %s)",
                              opts.kv_cache_bytes, page_tokens, page_bytes, c->num_layers, rt->kv_dim,
                              cinfer_runtime_kv_dtype_name(rt));
        goto fail;
    }
    rt->memory.kv_cache_bytes = cinfer_kv_window_bytes(rt, n_pages, n_window_pages, page_tokens);
    if ((rc = cinfer_kv_pages_init(&rt->pages, n_pages, page_tokens, err)) < 0 ||
        (rc = cinfer_kv_window_init(rt, n_pages, n_window_pages, err)) < 0)
        goto fail;
    int full_layers = c->num_layers - rt->window.n_layers;
    struct cinfer_backend_kv_layout layout = {full_layers, n_pages, page_tokens, rt->kv_dim, rt->head_dim,
                                              (uint32_t)rt->kv_type};
    if (full_layers > 0 && (rc = rt->ops->kv_create(rt->backend, &layout, &rt->kv_storage, err)) < 0)
        goto fail;
    struct cinfer_backend_kv_layout window_layout = {rt->window.n_layers, n_window_pages, page_tokens, rt->kv_dim,
                                                     rt->head_dim, (uint32_t)rt->kv_type};
    if (rt->window.active &&
        (rc = rt->ops->kv_create(rt->backend, &window_layout, &rt->window.storage, err)) < 0)
        goto fail;
    if ((rc = alloc_scratch(rt, err)) < 0)
        goto fail;
    /* padding rows need a page no sequence holds; only where every step's ops are the
     * same for a batch size: dense, one rank, no window pool */
    rt->pad_page = -1;
    if (rt->backend_steps && BACKEND_OFFERS(rt->ops, 13, decode_bucket) && rt->shard.size == 1 &&
        !rt->window.active && c->n_experts == 0 && n_pages > 1 && cinfer_kv_pages_alloc(&rt->pages, &rt->pad_page))
        rt->pad_page = -1;
    *out = rt;
    return 0;
fail:
    cinfer_runtime_destroy(&rt);
    return rc;
}

void cinfer_runtime_destroy(struct cinfer_runtime **rtp)
{
    struct cinfer_runtime *rt = rtp ? *rtp : NULL;
    if (!rt)
        return;
    if (rt->backend) {
        release_weights(rt);
        for (int i = 0; i < rt->n_vectors_prepared; i++)
            rt->ops->weight_release(rt->backend, &rt->vectors[i].prepared);
        float *bufs[] = {rt->x,    rt->xn, rt->q,        rt->k,      rt->v,
                         rt->attn, rt->proj, rt->gate,   rt->up,     rt->logits_x,
                         rt->logits, rt->logits_gather, rt->moe_logits, rt->moe_x, rt->moe_gate,
                         rt->moe_up, rt->moe_y, rt->moe_shared_gate, rt->moe_shared_up, rt->moe_shared_logit};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                rt->ops->buffer_free(rt->backend, bufs[i]);
        if (rt->kv_storage)
            rt->ops->kv_destroy(rt->backend, rt->kv_storage);
        if (rt->window.storage)
            rt->ops->kv_destroy(rt->backend, rt->window.storage);
        rt->window.storage = NULL;
        rt->ops->destroy(rt->backend);
    }
    if (rt->vectors) { /* the slots may point at prepared copies: free the host ones */
        for (int i = 0; i < rt->n_vectors; i++)
            free(rt->vectors[i].host);
        free(rt->vectors);
        if (rt->layers)
            memset(rt->layers, 0, sizeof *rt->layers * (size_t)rt->model->config.num_layers);
        rt->output_norm = NULL;
    }
    if (rt->layers) {
        for (int l = 0; l < rt->model->config.num_layers; l++) {
            struct runtime_layer *layer = &rt->layers[l];
            free(layer->attn_norm);
            free(layer->ffn_norm);
            free(layer->post_attn_norm);
            free(layer->post_ffn_norm);
            free(layer->q_norm);
            free(layer->k_norm);
            free(layer->bq);
            free(layer->bk);
            free(layer->bv);
            free(layer->bo);
            free(layer->sinks);
            free(layer->router_bias);
            for (int i = 0; layer->expert_biases && i < 3 * rt->model->config.n_experts; i++)
                free(layer->expert_biases[i]);
        }
        free(rt->layers);
    }
    cinfer_kv_pages_fini(&rt->pages);
    cinfer_kv_window_fini(rt);
    free(rt->slice_copies);
    free(rt->moe_biases);
    free(rt->plan_out);
    cinfer_tp_plan_free(&rt->plan);
    free(rt->output_norm);
    free(rt->inv_freq);
    free(rt->inv_freq_local);
    free(rt->rope_cos_local);
    free(rt->rope_sin_local);
    free(rt->tokens);
    free(rt->rope_cos);
    free(rt->rope_sin);
    free(rt->slots);
    free(rt->attn_seqs);
    free(rt->logits_dst);
    free(rt->logits_host);
    free(rt->logits_gather_host);
    free(rt->logits_rows);
    free(rt->logits_chunk);
    free(rt->logits_rank_host);
    free(rt->moe_ids);
    free(rt->moe_weights_tk);
    free(rt->moe_rows);
    free(rt->moe_row_weights);
    free(rt->moe_first);
    free(rt->moe_weights);
    free(rt->moe_sources);
    free(rt);
    *rtp = NULL;
}

int cinfer_runtime_kv_pages_total(const struct cinfer_runtime *rt)
{
    return rt->pages.n_pages;
}

int cinfer_runtime_kv_pages_free(const struct cinfer_runtime *rt)
{
    if (rt->window.active && rt->window.pages.n_free < rt->pages.n_free)
        return rt->window.pages.n_free;
    return rt->pages.n_free;
}

int cinfer_runtime_kv_page_tokens(const struct cinfer_runtime *rt)
{
    return rt->pages.page_tokens;
}

int cinfer_runtime_kv_page_alloc(struct cinfer_runtime *rt, int32_t *page_out)
{
    int32_t page, window_page;
    if (cinfer_kv_pages_alloc(&rt->pages, &page))
        return CINFER_ERR_NOMEM;
    if (rt->window.active) {
        if (cinfer_kv_pages_alloc(&rt->window.pages, &window_page)) {
            cinfer_kv_pages_unref(&rt->pages, page);
            return CINFER_ERR_NOMEM;
        }
        rt->window.of[page] = window_page;
    }
    *page_out = page;
    return 0;
}

void cinfer_runtime_kv_page_ref(struct cinfer_runtime *rt, int32_t page)
{
    cinfer_kv_pages_ref(&rt->pages, page);
}

void cinfer_runtime_kv_page_unref(struct cinfer_runtime *rt, int32_t page)
{
    cinfer_kv_pages_unref(&rt->pages, page);
    if (rt->pages.refcount[page] == 0) /* freed: its window part goes with it */
        cinfer_runtime_kv_page_drop_window(rt, page);
}

int cinfer_runtime_samples(const struct cinfer_runtime *rt)
{
    return rt->backend_samples && rt->shard.size == 1;
}

int cinfer_runtime_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                           struct cinfer_error *err)
{
    return cinfer_forward(rt, seqs, n_seqs, err);
}

int cinfer_runtime_forward_plan(struct cinfer_runtime *rt, const void *plan, size_t plan_bytes,
                                struct cinfer_error *err)
{
    return cinfer_forward_plan(rt, plan, plan_bytes, err);
}

void cinfer_runtime_memory(const struct cinfer_runtime *rt, struct cinfer_runtime_memory *out)
{
    *out = rt->memory;
}
