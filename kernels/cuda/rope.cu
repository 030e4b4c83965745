/* kernels/cuda/rope.cu — RoPE on the device: one thread per rotated pair (token, head,
 * i), the CPU's kernels/elementwise_scalar.c rotation with both pair conventions. */
#include "cuda_kernels.h"
#include "launch.cuh"

/* x (n_tokens, n_heads * head_dim); cos, sin (n_tokens, head_dim / 2) */
static __global__ void rope_kernel(float *x, int n_heads, int head_dim, const float *cos_table,
                                   const float *sin_table, int interleaved, size_t n_pairs)
{
    int half = head_dim / 2;
    CINFER_CUDA_FOR_EACH(pair, n_pairs) {
        int i = (int)(pair % (size_t)half);
        size_t head_row = pair / (size_t)half; /* token * n_heads + head */
        size_t token = head_row / (size_t)n_heads;
        float *head = x + head_row * (size_t)head_dim; /* (head_dim) */
        float c = cos_table[token * (size_t)half + i];
        float s = sin_table[token * (size_t)half + i];
        int a = interleaved ? 2 * i : i;
        int b = interleaved ? 2 * i + 1 : i + half;
        float x0 = head[a];
        float x1 = head[b];
        head[a] = x0 * c - x1 * s;
        head[b] = x1 * c + x0 * s;
    }
}

extern "C" cudaError_t cinfer_cuda_rope(cudaStream_t stream, float *x, int n_tokens, int n_heads, int head_dim,
                                        const float *cos, const float *sin, int interleaved)
{
    if (n_tokens <= 0 || n_heads <= 0 || head_dim < 2)
        return cudaSuccess;
    size_t n_pairs = (size_t)n_tokens * (size_t)n_heads * (size_t)(head_dim / 2);
    rope_kernel<<<cinfer_cuda_blocks(n_pairs), CINFER_CUDA_THREADS, 0, stream>>>(x, n_heads, head_dim, cos, sin,
                                                                               interleaved, n_pairs);
    return cudaGetLastError();
}
