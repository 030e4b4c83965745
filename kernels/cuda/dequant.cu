/* kernels/cuda/dequant.cu — stored weights widened on the device: the embedding lookup
 * (rows of the token table to f32) and whole matrices to bf16 for cuBLAS's prefill
 * products. One thread per 32-value chunk of a block-quantized row (decoders in
 * quant_blocks.cuh), one per value for F32 / F16 / BF16. */
#include "cuda_kernels.h"
#include "cuda_weights.h"
#include "quant_blocks.cuh"

using namespace cinfer_cuda;

namespace {

constexpr int THREADS = 256;

__device__ __forceinline__ float plain_value(uint32_t type, const uint8_t *row, int64_t i)
{
    if (type == CINFER_TENSOR_F32)
        return ((const float *)row)[i];
    if (type == CINFER_TENSOR_F16)
        return __half2float(((const __half *)row)[i]);
    return bf16_bits_to_float(((const uint16_t *)row)[i]);
}

/* grid (ceil(cols / THREADS), n): out row i = w row tokens[i], or zeros */
__global__ void embedding_plain(uint32_t type, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols,
                                const int32_t *tokens, float *out)
{
    int64_t i = blockIdx.y, col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols)
        return;
    int32_t t = tokens[i];
    out[i * cols + col] = t < 0 || t >= rows ? 0.0f : plain_value(type, w + (size_t)t * row_bytes, col);
}

template <uint32_t T>
__global__ void embedding_blocks(const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols,
                                 const int32_t *tokens, float *out)
{
    int64_t i = blockIdx.y, k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= cols / 32)
        return;
    int32_t t = tokens[i];
    float *o = out + i * cols + 32 * k;
    if (t < 0 || t >= rows) {
        for (int j = 0; j < 32; j++)
            o[j] = 0.0f;
        return;
    }
    float v[32];
    decode_row_chunk<T>(w + (size_t)t * row_bytes, k, v);
#pragma unroll
    for (int j = 0; j < 32; j++)
        o[j] = v[j];
}

struct embedding_launch {
    template <uint32_t T>
    static cudaError_t run(cudaStream_t stream, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols,
                           const int32_t *tokens, int n, float *out)
    {
        dim3 grid((unsigned)((cols / 32 + THREADS - 1) / THREADS), (unsigned)n);
        embedding_blocks<T><<<grid, THREADS, 0, stream>>>(w, row_bytes, rows, cols, tokens, out);
        return cudaGetLastError();
    }
};

/* grid (ceil(cols / THREADS), rows) */
__global__ void dequantize_plain(uint32_t type, const uint8_t *w, size_t row_bytes, int64_t cols, uint16_t *dst)
{
    int64_t r = blockIdx.y, col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols)
        return;
    const uint8_t *row = w + (size_t)r * row_bytes;
    uint16_t *d = dst + r * cols + col;
    if (type == CINFER_TENSOR_BF16)
        *d = ((const uint16_t *)row)[col];
    else
        *d = __bfloat16_as_ushort(__float2bfloat16_rn(plain_value(type, row, col)));
}

template <uint32_t T>
__global__ void dequantize_blocks(const uint8_t *w, size_t row_bytes, int64_t cols, uint16_t *dst)
{
    int64_t r = blockIdx.y, k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= cols / 32)
        return;
    float v[32];
    decode_row_chunk<T>(w + (size_t)r * row_bytes, k, v);
    uint16_t *d = dst + r * cols + 32 * k;
#pragma unroll
    for (int j = 0; j < 32; j++)
        d[j] = __bfloat16_as_ushort(__float2bfloat16_rn(v[j]));
}

struct dequantize_launch {
    template <uint32_t T>
    static cudaError_t run(cudaStream_t stream, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t cols,
                           uint16_t *dst)
    {
        dim3 grid((unsigned)((cols / 32 + THREADS - 1) / THREADS), (unsigned)rows);
        dequantize_blocks<T><<<grid, THREADS, 0, stream>>>(w, row_bytes, cols, dst);
        return cudaGetLastError();
    }
};

__global__ void f32_to_f16(uint16_t *dst, const float *x, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = __half_as_ushort(__float2half_rn(x[i]));
}

bool plain_type(uint32_t type)
{
    return type == CINFER_TENSOR_F32 || type == CINFER_TENSOR_F16 || type == CINFER_TENSOR_BF16;
}

/* A block type's rows must be whole blocks; rows of the grid's y are at most 65535. */
bool shape_ok(uint32_t type, int64_t rows_in_grid, int64_t cols)
{
    type_geometry g = geometry_of(type);
    return g.block_values > 0 && cols > 0 && cols % g.block_values == 0 && rows_in_grid >= 0 &&
           rows_in_grid <= 65535;
}

} // namespace

extern "C" size_t cinfer_cuda_packed_row_bytes(uint32_t type, int64_t cols)
{
    type_geometry g = geometry_of(type);
    if (g.block_values == 0 || cols <= 0 || cols % g.block_values != 0)
        return 0;
    return (size_t)(cols / g.block_values) * (size_t)g.block_bytes;
}

extern "C" cudaError_t cinfer_cuda_embedding(cudaStream_t stream, uint32_t type, const void *w, size_t row_bytes,
                                             int64_t rows, int64_t cols, const int32_t *tokens, int n, float *out)
{
    if (n <= 0)
        return cudaSuccess;
    if (!shape_ok(type, n, cols))
        return cudaErrorInvalidValue;
    const uint8_t *wb = (const uint8_t *)w;
    if (plain_type(type)) {
        dim3 grid((unsigned)((cols + THREADS - 1) / THREADS), (unsigned)n);
        embedding_plain<<<grid, THREADS, 0, stream>>>(type, wb, row_bytes, rows, cols, tokens, out);
        return cudaGetLastError();
    }
    return dispatch_block_type<embedding_launch>(type, stream, wb, row_bytes, rows, cols, tokens, n, out);
}

extern "C" cudaError_t cinfer_cuda_dequantize_bf16(cudaStream_t stream, uint32_t type, const void *w,
                                                   size_t row_bytes, int64_t rows, int64_t cols, uint16_t *dst)
{
    const uint8_t *wb = (const uint8_t *)w;
    /* the grid's y holds at most 65535 rows: larger matrices go in slices of rows */
    for (int64_t first = 0; first < rows; first += 65535) {
        int64_t slice = rows - first < 65535 ? rows - first : 65535;
        if (!shape_ok(type, slice, cols))
            return cudaErrorInvalidValue;
        const uint8_t *ws = wb + (size_t)first * row_bytes;
        uint16_t *ds = dst + first * cols;
        cudaError_t rc;
        if (plain_type(type)) {
            dim3 grid((unsigned)((cols + THREADS - 1) / THREADS), (unsigned)slice);
            dequantize_plain<<<grid, THREADS, 0, stream>>>(type, ws, row_bytes, cols, ds);
            rc = cudaGetLastError();
        } else {
            rc = dispatch_block_type<dequantize_launch>(type, stream, ws, row_bytes, slice, cols, ds);
        }
        if (rc != cudaSuccess)
            return rc;
    }
    return cudaSuccess;
}

extern "C" cudaError_t cinfer_cuda_f32_to_f16(cudaStream_t stream, uint16_t *dst, const float *x, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    f32_to_f16<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(dst, x, n);
    return cudaGetLastError();
}
