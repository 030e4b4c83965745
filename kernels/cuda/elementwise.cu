/* kernels/cuda/elementwise.cu — the element-wise ops of include/cinfer/backend.h on the
 * device: one thread per value in grid-stride loops. The arithmetic is the CPU
 * backend's, written in the same order (core/backend/cpu_backend.c and the scalar kernels), with
 * libm-accurate expf and tanhf (no fast-math intrinsics), so results differ from the
 * CPU's by rounding only. */
#include "cuda_kernels.h"
#include "kv_format.cuh"
#include "launch.cuh"

static __global__ void silu_mul_kernel(float *gate, const float *up, size_t n)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))), the CPU's expression */
static __global__ void gelu_tanh_mul_kernel(float *gate, const float *up, size_t n)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        float g = gate[i];
        gate[i] = 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g))) * up[i];
    }
}

/* gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit), g * sigmoid(alpha g) * (u + 1)
 * (llama.cpp's form: g / (1 + exp(-alpha g))) */
static __global__ void swiglu_oai_kernel(float *gate, const float *up, size_t n, float alpha, float limit)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        float g = fminf(gate[i], limit);
        float u = fminf(fmaxf(up[i], -limit), limit);
        gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

static __global__ void add_kernel(float *y, const float *x, size_t n)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        y[i] += x[i];
    }
}

static __global__ void scale_kernel(float *x, size_t n, float factor)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        x[i] *= factor;
    }
}

static __global__ void softcap_kernel(float *x, size_t n, float cap)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        x[i] = cap * tanhf(x[i] / cap);
    }
}

/* y (n, dim) += sigmoid(gate[i]) * x (n, dim) row by row */
static __global__ void add_gated_kernel(float *y, const float *x, const float *gate, size_t n_values, int dim)
{
    CINFER_CUDA_FOR_EACH(i, n_values) {
        float g = 1.0f / (1.0f + expf(-gate[i / (size_t)dim]));
        y[i] += g * x[i];
    }
}

/* y (n, dim) += bias (dim) */
static __global__ void add_bias_kernel(float *y, const float *bias, size_t n_values, int dim)
{
    CINFER_CUDA_FOR_EACH(i, n_values) {
        y[i] += bias[i % (size_t)dim];
    }
}

static __global__ void f32_to_bf16_kernel(uint16_t *dst, const float *x, size_t n)
{
    CINFER_CUDA_FOR_EACH(i, n) {
        dst[i] = cinfer_cu_f32_to_bf16(x[i]);
    }
}

extern "C" cudaError_t cinfer_cuda_silu_mul(cudaStream_t stream, float *gate, const float *up, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    silu_mul_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(gate, up, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_gelu_tanh_mul(cudaStream_t stream, float *gate, const float *up, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    gelu_tanh_mul_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(gate, up, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_swiglu_oai(cudaStream_t stream, float *gate, const float *up, size_t n, float alpha,
                                              float limit)
{
    if (n == 0)
        return cudaSuccess;
    swiglu_oai_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(gate, up, n, alpha, limit);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_add(cudaStream_t stream, float *y, const float *x, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    add_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(y, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_scale(cudaStream_t stream, float *x, size_t n, float factor)
{
    if (n == 0)
        return cudaSuccess;
    scale_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(x, n, factor);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_softcap(cudaStream_t stream, float *x, size_t n, float cap)
{
    if (n == 0)
        return cudaSuccess;
    softcap_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(x, n, cap);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_add_gated(cudaStream_t stream, float *y, const float *x, const float *gate, int n,
                                             int dim)
{
    if (n <= 0 || dim <= 0)
        return cudaSuccess;
    size_t values = (size_t)n * (size_t)dim;
    add_gated_kernel<<<cinfer_cuda_blocks(values), CINFER_CUDA_THREADS, 0, stream>>>(y, x, gate, values, dim);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_add_bias(cudaStream_t stream, float *y, const float *bias, int n, int dim)
{
    if (n <= 0 || dim <= 0)
        return cudaSuccess;
    size_t values = (size_t)n * (size_t)dim;
    add_bias_kernel<<<cinfer_cuda_blocks(values), CINFER_CUDA_THREADS, 0, stream>>>(y, bias, values, dim);
    return cudaGetLastError();
}

extern "C" cudaError_t cinfer_cuda_f32_to_bf16(cudaStream_t stream, uint16_t *dst, const float *x, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    f32_to_bf16_kernel<<<cinfer_cuda_blocks(n), CINFER_CUDA_THREADS, 0, stream>>>(dst, x, n);
    return cudaGetLastError();
}
