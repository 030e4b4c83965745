/* core/model/moe_forward.c — the sparse MLP of a mixture-of-experts layer (Mixtral,
 * Qwen3-MoE, Qwen2-MoE with its gated shared expert, gpt-oss: its router and experts have
 * biases, its activation is clamped).
 *
 * The router scores every token against every expert; each token keeps its top k
 * experts with their softmax weights (renormalised over the k when the model says
 * so). The tokens are then grouped by expert, and each chosen expert runs once on its
 * group as a batch: gather its rows, gate/up matmul, activation, down matmul, and
 * scatter-add the rows back, each scaled by its router weight. An expert no token
 * chose is never read, so a decode step at batch 1 reads k experts' weights only.
 * Qwen2-MoE adds a shared expert that every token runs, its output scaled by
 * sigmoid(shared_expert_gate · x) before joining the routed experts' sum.
 *
 * Under tensor parallelism every rank routes alike (the router is whole on each) and
 * runs the chosen experts on its share of their intermediate width (rt->moe_ffn,
 * rt->shared_ffn: runtime_shard.c), so proj holds this rank's part of the sum; the
 * forward pass's all-reduce after the MLP makes it whole. Under expert parallelism a
 * rank runs only the chosen experts it holds, whole (proj stays zero where it holds
 * none of them), and the same all-reduce sums the ranks' experts. */
#include <string.h>

#include "model/runtime_internal.h"

/* Lays the (T, K) choices out expert by expert: moe_rows[moe_first[e] ..
 * moe_first[e + 1]) are the batch rows routed to expert e, in batch order, with their
 * weights beside them in moe_row_weights. A counting sort: O(T K + E). */
static void group_by_expert(struct cinfer_runtime *rt, int T, int E, int K)
{
    int32_t *first = rt->moe_first; /* (E + 1) */
    memset(first, 0, (size_t)(E + 1) * sizeof *first);
    for (int i = 0; i < T * K; i++)
        first[rt->moe_ids[i] + 1]++;
    for (int e = 0; e < E; e++)
        first[e + 1] += first[e];
    /* first[e] serves as expert e's write cursor, ending at expert e + 1's start */
    for (int i = 0; i < T * K; i++) {
        int at = first[rt->moe_ids[i]]++;
        rt->moe_rows[at] = i / K;
        rt->moe_row_weights[at] = rt->moe_weights_tk[i];
    }
    for (int e = E; e > 0; e--)
        first[e] = first[e - 1];
    first[0] = 0;
}

/* The shared expert's matmul outputs for rows xn: gate and up (T, rt->shared_ffn) and its
 * gate's logit (T), appended at outs (3 of them), so batch 1 can join them to the
 * routed experts' one call. */
static int shared_outs(struct cinfer_runtime *rt, const struct runtime_layer *w, struct cinfer_backend_matmul_out *outs)
{
    if (!w->shared)
        return 0;
    outs[0] = (struct cinfer_backend_matmul_out){&w->shared[0], NULL, rt->moe_shared_gate, 0};
    outs[1] = (struct cinfer_backend_matmul_out){&w->shared[1], NULL, rt->moe_shared_up, 0};
    outs[2] = (struct cinfer_backend_matmul_out){w->shared_gate, NULL, rt->moe_shared_logit, 0};
    return 3;
}

/* After shared_outs' matmul: the shared expert's activation and down projection into
 * moe_y, then proj (T, hidden) += sigmoid(logit) * that. */
static int shared_finish(struct cinfer_runtime *rt, const struct runtime_layer *w, int T, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    size_t n = (size_t)T * (size_t)rt->shared_ffn; /* this rank's share of the width */
    if (rt->model->config.activation == CINFER_ACTIVATION_GELU_TANH)
        ops->gelu_tanh_mul(rt->backend, rt->moe_shared_gate, rt->moe_shared_up, n);
    else
        ops->silu_mul(rt->backend, rt->moe_shared_gate, rt->moe_shared_up, n); /* (T, shared_ffn) */
    struct cinfer_backend_matmul_out down = {&w->shared[2], NULL, rt->moe_y, 0}; /* (T, hidden) */
    int rc = ops->matmul(rt->backend, rt->moe_shared_gate, T, &down, 1, err);
    if (rc < 0)
        return rc;
    ops->add_gated(rt->backend, rt->proj, rt->moe_y, rt->moe_shared_logit, T, rt->hidden);
    return 0;
}

/* Expert e's bias of part (0 gate, 1 up, 2 down), or NULL (only gpt-oss has them). */
static const float *expert_bias(const struct runtime_layer *w, int e, int part)
{
    return w->expert_biases ? w->expert_biases[3 * e + part] : NULL;
}

/* One token (batch-1 decode): its K experts share one input row, so their gate and up
 * projections are one matmul call of 2K outputs, their activations one call, their down
 * projections (each on its own expert's row) one grouped call (K calls where the
 * backend has no matmul_grouped), and their weighted sum one scatter-add of K rows onto
 * row 0. Fewer calls than a group per expert: at batch 1 a step reads little, and each
 * call's dispatch and join weigh. */
static int one_token(struct cinfer_runtime *rt, const struct runtime_layer *w, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    void *be = rt->backend;
    const struct cinfer_model_config *c = &rt->model->config;
    int K = 0, ffn = rt->moe_ffn; /* this rank's share of each expert's width (whole under EP) */
    for (int j = 0; j < c->n_experts_used; j++) /* the chosen experts this rank holds (all but under EP) */
        if (cinfer_shard_owns_expert(&rt->shard, rt->moe_ids[j])) {
            rt->moe_ids[K] = rt->moe_ids[j];
            rt->moe_weights_tk[K++] = rt->moe_weights_tk[j];
        }
    struct cinfer_backend_matmul_out outs[2 * CINFER_MOE_MAX_USED + 3] = {{0}};
    for (int j = 0; j < K; j++) {
        int e = rt->moe_ids[j];
        const struct cinfer_backend_weight *x = &w->experts[3 * e]; /* gate, up, down */
        outs[j] = (struct cinfer_backend_matmul_out){&x[0], expert_bias(w, e, 0), rt->moe_gate + (size_t)j * ffn,
                                                     0}; /* (1, ffn) */
        outs[K + j] = (struct cinfer_backend_matmul_out){&x[1], expert_bias(w, e, 1), rt->moe_up + (size_t)j * ffn, 0};
        rt->moe_rows[j] = 0;
    }
    int n_shared = shared_outs(rt, w, outs + 2 * K); /* the shared expert's too, in the same call */
    int rc = 0;
    ops->zero(be, rt->proj, (size_t)rt->hidden);
    if (2 * K + n_shared == 0)
        return 0; /* none of the chosen experts is this rank's: it adds nothing */
    if ((rc = ops->matmul(be, rt->xn, 1, outs, 2 * K + n_shared, err)) < 0)
        return rc;
    if (K > 0) {
        cinfer_activate(rt, rt->moe_gate, rt->moe_up, (size_t)K * ffn); /* (K, ffn) */
        struct cinfer_backend_matmul_out *downs = outs; /* the gate/up outputs are spent */
        const float *down_x[CINFER_MOE_MAX_USED];
        for (int j = 0; j < K; j++) {
            downs[j] = (struct cinfer_backend_matmul_out){&w->experts[3 * rt->moe_ids[j] + 2],
                                                          expert_bias(w, rt->moe_ids[j], 2),
                                                          rt->moe_y + (size_t)j * rt->hidden, 0}; /* (1, hidden) */
            down_x[j] = rt->moe_gate + (size_t)j * ffn; /* (1, ffn) */
        }
        if (rt->backend_groups)
            rc = ops->matmul_grouped(be, down_x, 1, downs, K, err);
        for (int j = 0; !rt->backend_groups && j < K && rc >= 0; j++)
            rc = ops->matmul(be, down_x[j], 1, &downs[j], 1, err);
        if (rc < 0)
            return rc;
        ops->scatter_add_rows(be, rt->proj, rt->moe_y, rt->moe_rows, rt->moe_weights_tk, K,
                              rt->hidden); /* (1, hidden) */
    }
    return n_shared ? shared_finish(rt, w, 1, err) : 0;
}

int cinfer_moe_forward(struct cinfer_runtime *rt, int l, int T, struct cinfer_error *err)
{
    const struct cinfer_backend_ops *ops = rt->ops;
    void *be = rt->backend;
    const struct cinfer_model_config *c = &rt->model->config;
    const struct runtime_layer *w = &rt->layers[l];
    int E = c->n_experts, K = c->n_experts_used, ffn = rt->moe_ffn;

    /* (T, E); x unrounded: the router's near-ties decide which experts run */
    struct cinfer_backend_matmul_out router = {w->router, w->router_bias, rt->moe_logits, 1};
    int rc = ops->matmul(be, rt->xn, T, &router, 1, err);
    if (rc < 0)
        return rc;
    ops->moe_route(be, rt->moe_logits, T, E, K, c->moe_norm_topk, rt->moe_ids, rt->moe_weights_tk); /* (T, K) */
    if (T == 1 && K <= CINFER_MOE_MAX_USED && rt->max_batch_tokens >= K)
        return one_token(rt, w, err);
    group_by_expert(rt, T, E, K);

    ops->zero(be, rt->proj, (size_t)T * rt->hidden); /* (T, hidden): the experts' weighted sum */
    const struct runtime_shard *sh = &rt->shard;
    int e0 = sh->ep ? sh->first_expert : 0, e1 = sh->ep ? sh->first_expert + sh->experts : E; /* this rank's */
    for (int e = e0; e < e1; e++) {
        int first = rt->moe_first[e], n = rt->moe_first[e + 1] - first;
        if (n == 0)
            continue;
        const struct cinfer_backend_weight *x = &w->experts[3 * e]; /* gate, up, down */
        ops->gather_rows(be, rt->moe_x, rt->xn, rt->moe_rows + first, n, rt->hidden); /* (n, hidden) */
        struct cinfer_backend_matmul_out gate_up[2] = {
            {&x[0], expert_bias(w, e, 0), rt->moe_gate, 0}, /* (n, ffn) */
            {&x[1], expert_bias(w, e, 1), rt->moe_up, 0},   /* (n, ffn) */
        };
        if ((rc = ops->matmul(be, rt->moe_x, n, gate_up, 2, err)) < 0)
            return rc;
        cinfer_activate(rt, rt->moe_gate, rt->moe_up, (size_t)n * ffn);
        struct cinfer_backend_matmul_out down = {&x[2], expert_bias(w, e, 2), rt->moe_y, 0}; /* (n, hidden) */
        if ((rc = ops->matmul(be, rt->moe_gate, n, &down, 1, err)) < 0)
            return rc;
        ops->scatter_add_rows(be, rt->proj, rt->moe_y, rt->moe_rows + first, rt->moe_row_weights + first, n,
                              rt->hidden);
    }
    struct cinfer_backend_matmul_out shared[3];
    if (!shared_outs(rt, w, shared))
        return 0;
    if ((rc = ops->matmul(be, rt->xn, T, shared, 3, err)) < 0)
        return rc;
    return shared_finish(rt, w, T, err);
}
