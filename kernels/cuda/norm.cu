/* kernels/cuda/norm.cu — RMSNorm on the device: one block per row; the sum of squares in
 * f32, per thread over a strided slice of the row, then across each warp by shuffles and
 * across the warps through shared memory. y may be x: every value is read for the sum
 * before the block's barrier and written after it. */
#include "cuda_kernels.h"

#define RMSNORM_THREADS 256
#define WARP 32

/* y (n_rows, dim) = x * rsqrt(mean(x²) + eps) * w (dim); y and x are not restrict: they may alias */
static __global__ void rmsnorm_kernel(float *y, const float *x, int dim, const float *w, float eps)
{
    __shared__ float warp_sums[RMSNORM_THREADS / WARP];
    const float *xr = x + (size_t)blockIdx.x * (size_t)dim; /* (dim) */
    float *yr = y + (size_t)blockIdx.x * (size_t)dim;       /* (dim) */
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        sum_sq += xr[i] * xr[i];
    for (int offset = WARP / 2; offset > 0; offset /= 2)
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
    if (threadIdx.x % WARP == 0)
        warp_sums[threadIdx.x / WARP] = sum_sq;
    __syncthreads();
    float total = 0.0f;
    for (int wi = 0; wi < RMSNORM_THREADS / WARP; wi++) /* every thread, in the same order */
        total += warp_sums[wi];
    float inv_rms = 1.0f / sqrtf(total / (float)dim + eps); /* the CPU's expression */
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        yr[i] = xr[i] * inv_rms * w[i];
}

extern "C" cudaError_t cinfer_cuda_rmsnorm(cudaStream_t stream, float *y, const float *x, int n_rows, int dim,
                                           const float *w, float eps)
{
    if (n_rows <= 0 || dim <= 0)
        return cudaSuccess;
    rmsnorm_kernel<<<(unsigned)n_rows, RMSNORM_THREADS, 0, stream>>>(y, x, dim, w, eps);
    return cudaGetLastError();
}
