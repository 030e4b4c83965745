/* kernels/cuda/cuda_kernels.h — the CUDA backend's device kernels, as the plugin
 * (plugins/backend-cuda/) calls them. Plain C declarations so that the plugin's C files
 * include them; the definitions are in the .cu files beside this header.
 *
 * Every function enqueues its work on stream and returns the launch's error
 * (cudaGetLastError); an error of the work itself surfaces later, at the backend's
 * status(). Float pointers are device memory (f32) unless said otherwise; integer
 * arrays are device memory too: the plugin uploads the host arrays the backend ops get
 * (tokens, slots, page tables, expert rows) before it calls these. Semantics are those
 * of the same-named op in include/cinfer/backend.h, which the conformance suite
 * (tests/test_backend_conformance.c) checks against the CPU backend. */
#ifndef CINFER_CUDA_KERNELS_H
#define CINFER_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise and row ops (kernels/cuda/elementwise.cu, norm.cu, rope.cu) ---- */

/* y (n_rows, dim) = x * rsqrt(mean(x²) + eps) * w (dim); y may be x */
cudaError_t cinfer_cuda_rmsnorm(cudaStream_t stream, float *y, const float *x, int n_rows, int dim, const float *w,
                                float eps);
/* x (n_tokens, n_heads * head_dim) rotated by cos/sin (n_tokens, head_dim / 2);
 * interleaved 0: pairs (i, i + head_dim / 2); 1: pairs (2i, 2i + 1) */
cudaError_t cinfer_cuda_rope(cudaStream_t stream, float *x, int n_tokens, int n_heads, int head_dim, const float *cos,
                             const float *sin, int interleaved);
cudaError_t cinfer_cuda_silu_mul(cudaStream_t stream, float *gate, const float *up, size_t n);
cudaError_t cinfer_cuda_gelu_tanh_mul(cudaStream_t stream, float *gate, const float *up, size_t n);
cudaError_t cinfer_cuda_swiglu_oai(cudaStream_t stream, float *gate, const float *up, size_t n, float alpha,
                                   float limit);
cudaError_t cinfer_cuda_add(cudaStream_t stream, float *y, const float *x, size_t n);
cudaError_t cinfer_cuda_scale(cudaStream_t stream, float *x, size_t n, float factor);
cudaError_t cinfer_cuda_softcap(cudaStream_t stream, float *x, size_t n, float cap);
/* y row i (n, dim) += sigmoid(gate[i]) * x row i */
cudaError_t cinfer_cuda_add_gated(cudaStream_t stream, float *y, const float *x, const float *gate, int n, int dim);
/* y (n, dim) += bias (dim) on every row */
cudaError_t cinfer_cuda_add_bias(cudaStream_t stream, float *y, const float *bias, int n, int dim);

/* ---- KV pages and attention (kernels/cuda/kv_cache.cu, attention.cu) ---- */

/* The KV storage on the device: for layer l, page p, token offset o, row r of K is at
 * k + ((l * n_pages + p) * page_tokens + o) * row_bytes (V alike); a row holds kv_dim
 * values of dtype (enum cinfer_kv_type: f32, f16, bf16 as 2-byte values, q8_0 as
 * kv_dim / 32 blocks of {f16 d, int8 q[32]}, 34 bytes each, per head d = max|x| / 127,
 * q = round(x / d) as the CPU backend writes them). */
struct cinfer_cuda_kv {
    void *k;
    void *v;
    int n_layers;
    int n_pages;
    int page_tokens;
    int kv_dim;
    int head_dim;
    uint32_t dtype;
    size_t row_bytes;
};

/* K and V (n, kv_dim) f32 of layer go to slots[i] (device) = page * page_tokens + offset */
cudaError_t cinfer_cuda_kv_write(cudaStream_t stream, const struct cinfer_cuda_kv *kv, int layer, const float *k,
                                 const float *v, int n, const int32_t *slots);

/* One sequence of an attention call, as struct cinfer_backend_attn_seq but with its
 * page table at page_tables + page_table_at (device). */
struct cinfer_cuda_attn_seq {
    int row;
    int n_tokens;
    int start_pos;
    int n_pages;
    int page_table_at;
};

/* attention_windowed of backend.h: seqs (n_seqs) and page_tables device memory;
 * max_tokens / max_context: the largest n_tokens and start_pos + n_tokens of seqs (for
 * the launch shape); window 0: none; scale already resolved (never 0); softcap 0: none;
 * sinks NULL or (n_heads) device. */
cudaError_t cinfer_cuda_attention(cudaStream_t stream, const struct cinfer_cuda_kv *kv, int layer, const float *q,
                                  float *out, const struct cinfer_cuda_attn_seq *seqs, const int32_t *page_tables,
                                  int n_seqs, int max_tokens, int max_context, int n_heads, int n_kv_heads,
                                  int head_dim, int window, float scale, float softcap, const float *sinks);

/* ---- mixture of experts (kernels/cuda/moe.cu) ---- */

/* moe_route of backend.h with ids and weights (n, k) device memory */
cudaError_t cinfer_cuda_moe_route(cudaStream_t stream, const float *logits, int n, int n_experts, int k,
                                  int normalize, int32_t *ids, float *weights);
/* out (n, dim) = rows rows[i] of x; rows device */
cudaError_t cinfer_cuda_gather_rows(cudaStream_t stream, float *out, const float *x, const int32_t *rows, int n,
                                    int dim);
/* y row rows[i] += weights[i] * x row i, in order of i (rows may repeat: the kernel
 * must not race); rows and weights device */
cudaError_t cinfer_cuda_scatter_add_rows(cudaStream_t stream, float *y, const float *x, const int32_t *rows,
                                         const float *weights, int n, int dim);

/* ---- logits (kernels/cuda/logits_top.cu, sample.cu) ---- */

/* logits_top of backend.h with every array device memory: rows (n_rows); top_ids and
 * top_logits (n_rows, k); n_top (n_rows); log_sum_exp (n_rows) or NULL */
cudaError_t cinfer_cuda_logits_top(cudaStream_t stream, const float *logits, int vocab, const int32_t *rows,
                                   int n_rows, int k, int32_t *top_ids, float *top_logits, int *n_top,
                                   double *log_sum_exp);

/* sample of backend.h with every array device memory: rows, params, token_ids and
 * token_logits (n_rows); params as backend.h's struct cinfer_backend_sample_params
 * (kernels/cuda/sample.cu, sample_row.cuh) */
struct cinfer_sample_row_params;
cudaError_t cinfer_cuda_sample(cudaStream_t stream, float *logits, int vocab, const int32_t *rows, int n_rows,
                               const struct cinfer_sample_row_params *params, int32_t *token_ids,
                               float *token_logits);

/* ---- weights: embedding and matmul of stored types (kernels/cuda/dequant.cu, gemv_quant.cu) ---- */

/* out (n, cols) = rows tokens[i] (device) of the stored weight w (type: enum
 * cinfer_tensor_type as stored, rows of row_bytes), widened to f32; zeros outside
 * [0, rows) */
cudaError_t cinfer_cuda_embedding(cudaStream_t stream, uint32_t type, const void *w, size_t row_bytes, int64_t rows,
                                  int64_t cols, const int32_t *tokens, int n, float *out);
/* dst (rows, cols) bf16 = the stored weight dequantized (for cuBLAS on prefill chunks) */
cudaError_t cinfer_cuda_dequantize_bf16(cudaStream_t stream, uint32_t type, const void *w, size_t row_bytes,
                                        int64_t rows, int64_t cols, uint16_t *dst);
/* y (n, rows) = x (n, cols) · wᵀ for a block-quantized stored weight, reading each
 * block once for all n rows of x (decode and small batches); n ≤ 8 */
cudaError_t cinfer_cuda_gemv_quant(cudaStream_t stream, uint32_t type, const void *w, size_t row_bytes, int64_t rows,
                                   int64_t cols, const float *x, int n, float *y);
/* One product of a grouped gemv: y (n, rows) = x (n, cols) · wᵀ, device pointers. */
struct cinfer_cuda_gemv_operands {
    const void *w;
    const float *x;
    float *y;
};
/* cinfer_cuda_gemv_quant for n_groups products in one launch, each with its own w, x and
 * y but one type and shape (a decode step's expert projections): groups (n_groups) in
 * device memory, host_groups the same array on the host (the launch's checks read it) */
cudaError_t cinfer_cuda_gemv_quant_grouped(cudaStream_t stream, uint32_t type, size_t row_bytes, int64_t rows,
                                           int64_t cols, int n, const struct cinfer_cuda_gemv_operands *host_groups,
                                           const struct cinfer_cuda_gemv_operands *groups, int n_groups);
/* x (n) f32 to bf16 (round to nearest even) for cuBLAS's bf16 products */
cudaError_t cinfer_cuda_f32_to_bf16(cudaStream_t stream, uint16_t *dst, const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
