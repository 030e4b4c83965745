/* kernels/cuda/moe.cu — the mixture-of-experts ops on the device. The router runs one
 * thread per token row with moe_route.cuh's copy of the CPU backend's route_row. The
 * scatter-add runs one thread per output column, looping over the rows to add in order:
 * a row that repeats is added in the CPU's order, with no atomics, so results are
 * deterministic. */
#include "cuda_kernels.h"
#include "launch.cuh"
#include "moe_route.cuh"

/* logits (n, n_experts) -> ids, weights (n, k); one thread per row */
static __global__ void moe_route_kernel(const float *logits, int n, int n_experts, int k, int normalize,
                                        int32_t *ids, float *weights)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n)
        cinfer_cu_route_row(logits + (size_t)r * n_experts, n_experts, k, normalize, ids + (size_t)r * k,
                            weights + (size_t)r * k);
}

/* out (n, dim) = x rows rows[i] */
static __global__ void gather_rows_kernel(float *out, const float *x, const int32_t *rows, size_t n_values,
                                          int dim)
{
    CINFER_CUDA_FOR_EACH(i, n_values) {
        size_t r = i / (size_t)dim, c = i % (size_t)dim;
        out[i] = x[(size_t)rows[r] * (size_t)dim + c];
    }
}

/* y rows rows[i] += weights[i] * x row i (x (n, dim)); one thread per column c */
static __global__ void scatter_add_rows_kernel(float *y, const float *x, const int32_t *rows, const float *weights,
                                               int n, int dim)
{
    CINFER_CUDA_FOR_EACH(c, (size_t)dim) {
        for (int i = 0; i < n; i++)
            y[(size_t)rows[i] * (size_t)dim + c] += weights[i] * x[(size_t)i * (size_t)dim + c];
    }
}

#define ROUTE_THREADS 64

extern "C" cudaError_t cinfer_cuda_moe_route(cudaStream_t stream, const float *logits, int n, int n_experts, int k,
                                             int normalize, int32_t *ids, float *weights)
{
    if (n <= 0 || n_experts <= 0 || k <= 0)
        return cudaSuccess;
    moe_route_kernel<<<(unsigned)((n + ROUTE_THREADS - 1) / ROUTE_THREADS), ROUTE_THREADS, 0, stream>>>(
        logits, n, n_experts, k, normalize, ids, weights);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_gather_rows(cudaStream_t stream, float *out, const float *x, const int32_t *rows,
                                               int n, int dim)
{
    if (n <= 0 || dim <= 0)
        return cudaSuccess;
    size_t values = (size_t)n * (size_t)dim;
    gather_rows_kernel<<<cinfer_cuda_blocks(values), CINFER_CUDA_THREADS, 0, stream>>>(out, x, rows, values, dim);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_scatter_add_rows(cudaStream_t stream, float *y, const float *x,
                                                    const int32_t *rows, const float *weights, int n, int dim)
{
    if (n <= 0 || dim <= 0)
        return cudaSuccess;
    scatter_add_rows_kernel<<<cinfer_cuda_blocks((size_t)dim), CINFER_CUDA_THREADS, 0, stream>>>(y, x, rows, weights,
                                                                                                n, dim);
    return cudaGetLastError();
}
