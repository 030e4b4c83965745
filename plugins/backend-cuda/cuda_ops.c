/* backend-cuda: the row and elementwise ops and mixture-of-experts routing, each one
 * kernel launch of kernels/cuda on the backend's stream (host arrays staged first). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cuda_backend.h"
#include "sample_row.cuh"

/* Launch a kernel call and keep its error under its own name. */
#define LAUNCH(be, call) ((void)(!cuda_enter(be) && cuda_note((be), (call), #call)))

/* Queues a record (1) when the step queues; 0: the caller launches. */
static int queued(struct cuda_backend *be, struct step_op op)
{
    return cuda_step_queue(be, &op);
}

void cuda_rmsnorm(void *state, float *y, const float *x, int n_rows, int dim, const float *w, float eps)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_rmsnorm(y, x, n_rows, dim, w, eps)))
        return;
    LAUNCH(be, cinfer_cuda_rmsnorm(be->stream, y, x, n_rows, dim, w, eps));
}

void cuda_rope(void *state, float *x, int n_tokens, int n_heads, int head_dim, const struct cinfer_backend_rope *rope)
{
    struct cuda_backend *be = state;
    if (n_tokens <= 0)
        return;
    size_t bytes = (size_t)n_tokens * (size_t)(head_dim / 2) * sizeof(float);
    /* the step's tables were copied at step_begin; others are staged here */
    void *dev[2] = {cuda_step_device(be, rope->cos, bytes), cuda_step_device(be, rope->sin, bytes)};
    struct step_op op = step_record_rope(x, n_tokens, n_heads, head_dim, rope);
    if (cuda_step_take(be, &op, dev[0] && dev[1]) || cuda_enter(be))
        return;
    struct cuda_host_part parts[2] = {{rope->cos, bytes}, {rope->sin, bytes}};
    if ((!dev[0] || !dev[1]) && cuda_stage_parts(be, parts, 2, dev))
        return;
    cuda_note(be, cinfer_cuda_rope(be->stream, x, n_tokens, n_heads, head_dim, dev[0], dev[1], rope->interleaved),
              "cinfer_cuda_rope");
}

void cuda_silu_mul(void *state, float *gate, const float *up, size_t n)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_gated(STEP_OP_SILU_MUL, gate, up, n, 0.0f, 0.0f)))
        return;
    LAUNCH(be, cinfer_cuda_silu_mul(be->stream, gate, up, n));
}

void cuda_gelu_tanh_mul(void *state, float *gate, const float *up, size_t n)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_gated(STEP_OP_GELU_TANH_MUL, gate, up, n, 0.0f, 0.0f)))
        return;
    LAUNCH(be, cinfer_cuda_gelu_tanh_mul(be->stream, gate, up, n));
}

void cuda_swiglu_oai(void *state, float *gate, const float *up, size_t n, float alpha, float limit)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_gated(STEP_OP_SWIGLU_OAI, gate, up, n, alpha, limit)))
        return;
    LAUNCH(be, cinfer_cuda_swiglu_oai(be->stream, gate, up, n, alpha, limit));
}

void cuda_add(void *state, float *y, const float *x, size_t n)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_add(y, x, n)))
        return;
    LAUNCH(be, cinfer_cuda_add(be->stream, y, x, n));
}

void cuda_scale(void *state, float *x, size_t n, float factor)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_scaled(STEP_OP_SCALE, x, n, factor)))
        return;
    LAUNCH(be, cinfer_cuda_scale(be->stream, x, n, factor));
}

void cuda_softcap(void *state, float *x, size_t n, float cap)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_scaled(STEP_OP_SOFTCAP, x, n, cap)))
        return;
    LAUNCH(be, cinfer_cuda_softcap(be->stream, x, n, cap));
}

void cuda_add_gated(void *state, float *y, const float *x, const float *gate, int n, int dim)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_add_gated(y, x, gate, n, dim)))
        return;
    LAUNCH(be, cinfer_cuda_add_gated(be->stream, y, x, gate, n, dim));
}

void cuda_zero(void *state, float *x, size_t n)
{
    struct cuda_backend *be = state;
    if (queued(be, step_record_zero(x, n)))
        return;
    if (n)
        LAUNCH(be, cudaMemsetAsync(x, 0, n * sizeof(float), be->stream));
}

/* The router runs on the device; its choices come back to the host (backend.h), so
 * this op waits for the stream. */
void cuda_moe_route(void *state, const float *logits, int n, int n_experts, int k, int normalize, int32_t *ids,
                    float *weights)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (n <= 0 || k <= 0 || cuda_enter(be))
        return;
    size_t each = (size_t)n * (size_t)k;
    uint8_t *dev = cuda_scratch_get(be, &be->moe, each * (sizeof(int32_t) + sizeof(float)), "moe_route's choices");
    if (!dev)
        return;
    int32_t *dev_ids = (int32_t *)dev;
    float *dev_weights = (float *)(dev + each * sizeof(int32_t));
    if (cuda_note(be, cinfer_cuda_moe_route(be->stream, logits, n, n_experts, k, normalize, dev_ids, dev_weights),
                  "cinfer_cuda_moe_route") ||
        cuda_note(be, cudaMemcpyAsync(ids, dev_ids, each * sizeof(int32_t), cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (moe_route ids to host)") ||
        cuda_note(be, cudaMemcpyAsync(weights, dev_weights, each * sizeof(float), cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (moe_route weights to host)") ||
        cuda_note(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (moe_route)")) {
        /* the host must not group tokens by garbage: every token to expert 0 with weight 0 */
        memset(ids, 0, each * sizeof(int32_t));
        memset(weights, 0, each * sizeof(float));
    }
}

int cuda_logits_top(void *state, const float *logits, int vocab, const int32_t *rows, int n_rows, int k,
                    int32_t *top_ids, float *top_logits, int *n_top, double *log_sum_exp, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (n_rows <= 0)
        return 0;
    if (k < 1 || k > 64 || vocab < 1)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "cuda device %d: logits_top of %d rows of %d asks for the top %d (expected 1..64)",
                                be->device, n_rows, vocab, k);
    if (cuda_enter(be))
        return cuda_status(be, err);
    struct cuda_host_part part = {rows, (size_t)n_rows * sizeof(int32_t)};
    void *dev_rows;
    if (cuda_stage_parts(be, &part, 1, &dev_rows))
        return cuda_status(be, err);
    /* the answers, one device buffer: lse (n_rows) first for its 8-byte alignment, then
     * ids and logits (n_rows, k), then the counts (n_rows) */
    size_t each = (size_t)n_rows * (size_t)k;
    size_t lse_bytes = (size_t)n_rows * sizeof(double), ids_bytes = each * sizeof(int32_t);
    size_t logits_bytes = each * sizeof(float), counts_bytes = (size_t)n_rows * sizeof(int);
    uint8_t *dev = cuda_scratch_get(be, &be->top, lse_bytes + ids_bytes + logits_bytes + counts_bytes,
                                    "logits_top's answers");
    if (!dev)
        return cuda_status(be, err);
    double *dev_lse = (double *)dev;
    int32_t *dev_ids = (int32_t *)(dev + lse_bytes);
    float *dev_logits = (float *)(dev + lse_bytes + ids_bytes);
    int *dev_counts = (int *)(dev + lse_bytes + ids_bytes + logits_bytes);
    if (cuda_note(be,
                  cinfer_cuda_logits_top(be->stream, logits, vocab, dev_rows, n_rows, k, dev_ids, dev_logits,
                                         dev_counts, log_sum_exp ? dev_lse : NULL),
                  "cinfer_cuda_logits_top") ||
        cuda_note(be, cudaMemcpyAsync(top_ids, dev_ids, ids_bytes, cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (logits_top ids to host)") ||
        cuda_note(be, cudaMemcpyAsync(top_logits, dev_logits, logits_bytes, cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (logits_top logits to host)") ||
        cuda_note(be, cudaMemcpyAsync(n_top, dev_counts, counts_bytes, cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (logits_top counts to host)") ||
        (log_sum_exp &&
         cuda_note(be, cudaMemcpyAsync(log_sum_exp, dev_lse, lse_bytes, cudaMemcpyDeviceToHost, be->stream),
                   "cudaMemcpyAsync (logits_top log-sum-exp to host)")) ||
        cuda_note(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (logits_top)"))
        return cuda_status(be, err);
    return 0;
}

/* backend.h's params are sample_row.cuh's, field for field: staged as they are */
_Static_assert(sizeof(struct cinfer_backend_sample_params) == sizeof(struct cinfer_sample_row_params) &&
                   offsetof(struct cinfer_backend_sample_params, top_k) ==
                       offsetof(struct cinfer_sample_row_params, top_k) &&
                   offsetof(struct cinfer_backend_sample_params, top_p) ==
                       offsetof(struct cinfer_sample_row_params, top_p) &&
                   offsetof(struct cinfer_backend_sample_params, min_p) ==
                       offsetof(struct cinfer_sample_row_params, min_p) &&
                   offsetof(struct cinfer_backend_sample_params, uniform) ==
                       offsetof(struct cinfer_sample_row_params, uniform),
               "struct cinfer_backend_sample_params and struct cinfer_sample_row_params differ");

int cuda_sample(void *state, float *logits, int vocab, const int32_t *rows, int n_rows,
                const struct cinfer_backend_sample_params *params, int32_t *token_ids, float *token_logits,
                struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (n_rows <= 0)
        return 0;
    if (vocab < 1)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "cuda device %d: sample of %d rows of %d tokens",
                                be->device, n_rows, vocab);
    if (cuda_enter(be))
        return cuda_status(be, err);
    /* params first: their doubles want the staged block's alignment */
    struct cuda_host_part parts[2] = {{params, (size_t)n_rows * sizeof *params},
                                      {rows, (size_t)n_rows * sizeof(int32_t)}};
    void *dev[2];
    if (cuda_stage_parts(be, parts, 2, dev))
        return cuda_status(be, err);
    size_t ids_bytes = (size_t)n_rows * sizeof(int32_t), logits_bytes = (size_t)n_rows * sizeof(float);
    uint8_t *answers = cuda_scratch_get(be, &be->top, ids_bytes + logits_bytes, "sample's answers");
    if (!answers)
        return cuda_status(be, err);
    int32_t *dev_ids = (int32_t *)answers;
    float *dev_logits = (float *)(answers + ids_bytes);
    if (cuda_note(be,
                  cinfer_cuda_sample(be->stream, logits, vocab, dev[1], n_rows, dev[0], dev_ids, dev_logits),
                  "cinfer_cuda_sample") ||
        cuda_note(be, cudaMemcpyAsync(token_ids, dev_ids, ids_bytes, cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (sample's tokens to host)") ||
        cuda_note(be, cudaMemcpyAsync(token_logits, dev_logits, logits_bytes, cudaMemcpyDeviceToHost, be->stream),
                  "cudaMemcpyAsync (sample's logits to host)") ||
        cuda_note(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (sample)"))
        return cuda_status(be, err);
    return 0;
}

void cuda_gather_rows(void *state, float *out, const float *x, const int32_t *rows, int n, int dim)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be); /* rows come from the router: not a named array */
    if (n <= 0 || cuda_enter(be))
        return;
    struct cuda_host_part part = {rows, (size_t)n * sizeof(int32_t)};
    void *dev_rows;
    if (!cuda_stage_parts(be, &part, 1, &dev_rows))
        cuda_note(be, cinfer_cuda_gather_rows(be->stream, out, x, dev_rows, n, dim), "cinfer_cuda_gather_rows");
}

void cuda_scatter_add_rows(void *state, float *y, const float *x, const int32_t *rows, const float *weights, int n,
                           int dim)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (n <= 0 || cuda_enter(be))
        return;
    struct cuda_host_part parts[2] = {{rows, (size_t)n * sizeof(int32_t)}, {weights, (size_t)n * sizeof(float)}};
    void *dev[2];
    if (!cuda_stage_parts(be, parts, 2, dev))
        cuda_note(be, cinfer_cuda_scatter_add_rows(be->stream, y, x, dev[0], dev[1], n, dim),
                  "cinfer_cuda_scatter_add_rows");
}
