/* core/model/runtime_shard.c — which part of the model a tensor-parallel rank keeps,
 * SGLang's (Megatron's) split:
 *  - attention: rank r computes query heads [r * heads / N, (r + 1) * heads / N) and the
 *    KV heads those use: wq (and bq) by rows, wk, wv (bk, bv) by rows of its KV heads,
 *    wo by the matching columns. Where N exceeds the KV heads, N / kv_heads ranks keep
 *    a copy of the same KV head (each rank's query heads all use one);
 *  - MLP: w_gate and w_up by rows, w_down by columns: the intermediate size in shares
 *    as even as whole granules allow (a block of w_down's type: 32 columns for Q8_0, 256
 *    for the K-quants, else 1), so it need not divide by N: stories260K's 172 over 8
 *    ranks gives 21 or 22 each;
 *  - vocabulary: tok_embeddings and lm_head by rows, ceil(vocab / N) per rank (the
 *    last rank fewer): a rank embeds only its tokens (zeros for the others') and
 *    computes only its logits; an all-reduce and an all-gather make them whole;
 *  - a mixture of experts (SGLang's and vLLM's default TP MoE): the router whole on
 *    every rank (each computes the same top k), every expert's intermediate width split
 *    like the dense MLP's (gate and up by rows, down by columns, in whole blocks of the
 *    down type), so each rank runs every chosen expert on its share; Qwen2-MoE's shared
 *    expert splits likewise, its (1, hidden) gate map stays whole. Biases that add to a
 *    row-parallel output (wo's, the experts' down) are added by rank 0 only;
 *  - or, with ep_size == tp_size (SGLang's --ep-size: the MoE layers' expert-parallel
 *    group is the TP group), whole experts per rank: rank r holds experts [e0, e1),
 *    contiguous and as even as they split (the first E % N ranks one more, vLLM's and
 *    SGLang's expert map: 128 over 3 is 43/43/42), runs only the chosen ones it holds, on
 *    their whole width, with their down biases; the router stays whole on every rank,
 *    and everything else (attention, dense layers, the shared expert) keeps the split
 *    above. A rank never binds, so never reads, another rank's experts.
 * wo's, w_down's and the experts' partial outputs are summed across ranks by an all-reduce. */
#include <stdio.h>

#include "kernels.h"
#include "model/runtime_internal.h"

/* Columns of wo (which_down 0) or w_down (1) come in whole blocks of their stored type:
 * the largest block any layer's matrix has (32 for Q8_0 and Q4_0, 256 for the K-quants,
 * 1 for f32/f16/bf16); *name gets that type's name. */
static int cols_granule(const struct cinfer_model *m, int which_down, const char **name)
{
    int granule = 1;
    *name = "columns";
    for (int l = 0; l < m->config.num_layers; l++) {
        const struct cinfer_weight *w = which_down ? &m->layers[l].w_down : &m->layers[l].wo;
        const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info((enum cinfer_kernel_wtype)w->dtype);
        if (info && info->block_values > granule) {
            granule = info->block_values;
            *name = info->name;
        }
    }
    return granule;
}

/* The block granule of the columns of every sparse layer's expert down matrices
 * (shared 0: the routed experts', 1: the shared expert's), as cols_granule. */
static int expert_cols_granule(const struct cinfer_model *m, int shared, const char **name)
{
    const struct cinfer_model_config *c = &m->config;
    int granule = 1;
    *name = "columns";
    for (int l = 0; l < c->num_layers; l++) {
        const struct cinfer_layer_weights *src = &m->layers[l];
        if (!cinfer_model_layer_sparse(c, l) || !src->experts)
            continue;
        for (int e = 0; e < (shared ? 1 : c->n_experts); e++) {
            const struct cinfer_weight *w = shared ? &src->shared_expert.down : &src->experts[e].down;
            const struct cinfer_kernel_type_info *info =
                cinfer_kernel_type_info((enum cinfer_kernel_wtype)w->dtype);
            if (w->data && info && info->block_values > granule) {
                granule = info->block_values;
                *name = info->name;
            }
        }
    }
    return granule;
}

/* Rank `rank`'s share [*first, *first + *count) of an intermediate width in whole granules
 * (as even as they allow), or a refusal naming the model, the tensor and the numbers. */
static int split_width(const struct cinfer_model *m, const char *tensor, int width, int granule, const char *type,
                       int rank, int size, int *first, int *count, struct cinfer_error *err)
{
    int granules = width / granule;
    if (width % granule != 0 || granules < size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model %s: %s is %s and splits by columns in whole blocks of %d: its width %d is %d "
                                "block%s, which does not give each of tp_size %d ranks a share (at most tp_size %d)",
                                m->path ? m->path : "(in memory)", tensor, type, granule, width, granules,
                                granules == 1 ? "" : "s", size, granules > 0 ? granules : 1);
    int64_t g0 = (int64_t)granules * rank / size, g1 = (int64_t)granules * (rank + 1) / size;
    *first = (int)g0 * granule;
    *count = (int)(g1 - g0) * granule;
    return CINFER_OK;
}

/* Expert parallelism: rank `rank`'s whole experts, the first E % size ranks one more. */
static int split_experts(const struct cinfer_model *m, int rank, int size, struct runtime_shard *sh,
                         struct cinfer_error *err)
{
    int n = m->config.n_experts;
    if (n < size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model %s: n_experts %d over ep_size %d leaves a rank no expert (expert parallelism "
                                "gives each rank whole experts: at most ep_size %d)",
                                m->path ? m->path : "(in memory)", n, size, n);
    int base = n / size, extra = n % size;
    sh->ep = 1;
    sh->experts = base + (rank < extra);
    sh->first_expert = rank * base + (rank < extra ? rank : extra);
    sh->moe_ffn = m->config.moe_intermediate_size;
    sh->first_moe_ffn = 0;
    return CINFER_OK;
}

int cinfer_runtime_shard_plan(const struct cinfer_model *m, int rank, int size, int ep_size,
                              struct runtime_shard *out, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    if (size < 1 || rank < 0 || rank >= size)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "runtime: tp_rank %d of tp_size %d; expected tp_size >= 1 and 0 <= tp_rank < tp_size",
                                rank, size);
    if (ep_size > 1 && ep_size != size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "runtime: ep_size %d with tp_size %d; expected ep_size 1 (every expert's width split "
                                "over the tensor-parallel ranks) or ep_size equal to tp_size (whole experts per rank)",
                                ep_size, size);
    if (c->num_heads % size != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "model: %d attention heads do not split over tp_size %d",
                                c->num_heads, size);
    if (c->num_kv_heads % size != 0 && size % c->num_kv_heads != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model: %d key-value heads do not split over tp_size %d, nor tp_size %d into them (a "
                                "rank keeps whole KV heads, or shares one with tp_size / kv_heads ranks)",
                                c->num_kv_heads, size, size);
    int stride = (int)(((int64_t)c->vocab_size + size - 1) / size);
    if ((int64_t)stride * (size - 1) >= c->vocab_size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model: a vocabulary of %d rows in shares of %d leaves rank %d of tp_size %d none",
                                c->vocab_size, stride, size - 1, size);
    int heads = c->num_heads / size, q_cols = heads * c->head_dim;
    const char *wo_type, *down_type;
    int wo_granule = cols_granule(m, 0, &wo_type);
    if (size > 1 && q_cols % wo_granule != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model: wo is %s and splits by columns: %d heads x head_dim %d over tp_size %d "
                                "leave each rank %d columns, not whole blocks of %d",
                                wo_type, c->num_heads, c->head_dim, size, q_cols, wo_granule);
    /* the MLP in granules: a block type's columns come in whole blocks */
    int granule = size > 1 ? cols_granule(m, 1, &down_type) : 1;
    int granules = c->intermediate_size / granule;
    int64_t g0 = (int64_t)granules * rank / size, g1 = (int64_t)granules * (rank + 1) / size;
    if ((int64_t)granules < size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "model: intermediate size %d in %s of %d does not give each of tp_size %d ranks a "
                                "share",
                                c->intermediate_size, granule > 1 ? "blocks" : "columns", granule, size);
    struct runtime_shard sh = {.rank = rank, .size = size, .heads = heads, .first_head = rank * heads,
                               .ffn = (int)(g1 - g0) * granule, .first_ffn = (int)g0 * granule,
                               .vocab_stride = stride, .first_vocab = rank * stride};
    if (c->num_kv_heads % size == 0) {
        sh.kv_heads = c->num_kv_heads / size;
        sh.first_kv_head = rank * sh.kv_heads;
    } else { /* size / kv_heads ranks per KV head; rank r's query heads all use KV head r / that */
        sh.kv_heads = 1;
        sh.first_kv_head = rank / (size / c->num_kv_heads);
    }
    sh.vocab_rows = c->vocab_size - sh.first_vocab < stride ? c->vocab_size - sh.first_vocab : stride;
    if (c->n_experts > 0) { /* every expert's width (or whole experts), the shared expert's split like the MLP's */
        const char *type = "columns";
        int rc, g = size > 1 && ep_size <= 1 ? expert_cols_granule(m, 0, &type) : 1; /* EP: experts whole */
        if (ep_size > 1 ? (rc = split_experts(m, rank, size, &sh, err)) < 0
                        : (rc = split_width(m, "expert down", c->moe_intermediate_size, g, type, rank, size,
                                            &sh.first_moe_ffn, &sh.moe_ffn, err)) < 0)
            return rc;
        g = size > 1 ? expert_cols_granule(m, 1, &type) : 1;
        if (c->shared_expert_intermediate_size > 0 &&
            (rc = split_width(m, "shared expert down", c->shared_expert_intermediate_size, g, type, rank, size,
                              &sh.first_shared_ffn, &sh.shared_ffn, err)) < 0)
            return rc;
    }
    *out = sh;
    return CINFER_OK;
}

int cinfer_runtime_parallel_check(const struct cinfer_model *m, int tp_size, int ep_size, struct cinfer_error *err)
{
    struct runtime_shard sh;
    return cinfer_runtime_shard_plan(m, 0, tp_size, ep_size, &sh, err);
}

int cinfer_runtime_tp_check(const struct cinfer_model *m, int tp_size, struct cinfer_error *err)
{
    return cinfer_runtime_parallel_check(m, tp_size, 1, err);
}

void cinfer_weight_slice(const struct cinfer_backend_weight *w, int by_cols, int64_t first, int64_t count,
                         struct cinfer_backend_weight *out)
{
    *out = *w;
    if (!by_cols) {
        out->data = (const uint8_t *)w->data + (size_t)first * w->row_bytes;
        out->rows = count;
    } else {
        /* bytes before column `first`: whole elements, or whole blocks */
        size_t skip = cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)w->type, first);
        out->data = (const uint8_t *)w->data + skip;
        out->cols = count;
    }
}
