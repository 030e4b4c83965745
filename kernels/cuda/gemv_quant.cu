/* kernels/cuda/gemv_quant.cu — y (n, rows) = x (n, cols) · wᵀ for n ≤ 8 (decode and
 * small batches), straight from the stored weight: one warp per output row, each lane
 * taking chunks of the row in turn, so every weight byte is read once for all n rows of
 * x; products accumulate in f32 and the warp sums its lanes at the end.
 *
 * Block-quantized types decode 32-value chunks (quant_blocks.cuh); F16, BF16 and F32
 * rows are read 16 bytes per lane per step when the row allows it (the warp then reads
 * 512 contiguous bytes at once), value by value otherwise. x stays f32 throughout, so
 * this is also the backend's exact_x path for 16-bit weights. */
#include "cuda_kernels.h"
#include "cuda_weights.h"
#include "quant_blocks.cuh"

using namespace cinfer_cuda;

namespace {

constexpr int WARPS_PER_BLOCK = 4;
constexpr int MAX_N = 8;

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

template <int N>
__device__ __forceinline__ void store_sums(float (&acc)[N], float *y, int64_t rows, int64_t row, int lane)
{
#pragma unroll
    for (int r = 0; r < N; r++) {
        float s = warp_sum(acc[r]);
        if (lane == 0)
            y[r * rows + row] = s;
    }
}

/* The operands of one product; a grouped launch runs product blockIdx.y of its array. */
using operands = cinfer_cuda_gemv_operands;

__device__ __forceinline__ operands operands_of(const operands &one, const operands *groups)
{
    return groups ? groups[blockIdx.y] : one;
}

template <uint32_t T, int N>
__global__ void __launch_bounds__(WARPS_PER_BLOCK * 32)
    gemv_blocks(size_t row_bytes, int64_t rows, int64_t cols, operands one, const operands *groups)
{
    const operands op = operands_of(one, groups);
    const uint8_t *w = (const uint8_t *)op.w;
    const float *x = op.x;
    float *y = op.y;
    int lane = threadIdx.x % 32;
    int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows)
        return;
    const uint8_t *wrow = w + (size_t)row * row_bytes;
    float acc[N];
#pragma unroll
    for (int r = 0; r < N; r++)
        acc[r] = 0.0f;
    for (int64_t k = lane; k < cols / 32; k += 32) {
        float v[32];
        decode_row_chunk<T>(wrow, k, v);
#pragma unroll
        for (int r = 0; r < N; r++) {
            const float4 *xr = (const float4 *)(x + r * cols + 32 * k);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float4 xv = xr[j];
                s += v[4 * j] * xv.x + v[4 * j + 1] * xv.y + v[4 * j + 2] * xv.z + v[4 * j + 3] * xv.w;
            }
            acc[r] += s;
        }
    }
    store_sums<N>(acc, y, rows, row, lane);
}

template <uint32_t T> __device__ __forceinline__ float plain_at(const uint8_t *row, int64_t i)
{
    if (T == CINFER_TENSOR_F32)
        return ((const float *)row)[i];
    if (T == CINFER_TENSOR_F16)
        return __half2float(((const __half *)row)[i]);
    return bf16_bits_to_float(((const uint16_t *)row)[i]);
}

/* The values of 16 bytes of a 16-bit or f32 row (8 or 4 of them). */
template <uint32_t T> __device__ __forceinline__ int widen16(uint4 raw, float *out)
{
    const uint32_t word[4] = {raw.x, raw.y, raw.z, raw.w};
    if constexpr (T == CINFER_TENSOR_F32) {
#pragma unroll
        for (int j = 0; j < 4; j++)
            out[j] = __uint_as_float(word[j]);
        return 4;
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t lo = word[j] & 0xFFFFu, hi = word[j] >> 16;
            if constexpr (T == CINFER_TENSOR_F16) {
                out[2 * j] = __half2float(__ushort_as_half((unsigned short)lo));
                out[2 * j + 1] = __half2float(__ushort_as_half((unsigned short)hi));
            } else {
                out[2 * j] = bf16_bits_to_float(lo);
                out[2 * j + 1] = bf16_bits_to_float(hi);
            }
        }
        return 8;
    }
}

/* vectorized: every row starts 16-byte aligned and cols is a multiple of the values in
 * 16 bytes (checked by the launcher) */
template <uint32_t T, int N, bool VECTORIZED>
__global__ void __launch_bounds__(WARPS_PER_BLOCK * 32)
    gemv_plain(size_t row_bytes, int64_t rows, int64_t cols, operands one, const operands *groups)
{
    const operands op = operands_of(one, groups);
    const uint8_t *w = (const uint8_t *)op.w;
    const float *x = op.x;
    float *y = op.y;
    int lane = threadIdx.x % 32;
    int64_t row = (int64_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows)
        return;
    const uint8_t *wrow = w + (size_t)row * row_bytes;
    float acc[N];
#pragma unroll
    for (int r = 0; r < N; r++)
        acc[r] = 0.0f;
    if (VECTORIZED) {
        constexpr int per = T == CINFER_TENSOR_F32 ? 4 : 8;
        const uint4 *wv = (const uint4 *)wrow;
        for (int64_t k = lane; k < cols / per; k += 32) {
            float v[8];
            widen16<T>(__ldg(wv + k), v);
#pragma unroll
            for (int r = 0; r < N; r++) {
                const float *xr = x + r * cols + per * k;
#pragma unroll
                for (int j = 0; j < per; j++)
                    acc[r] += v[j] * xr[j];
            }
        }
    } else {
        for (int64_t i = lane; i < cols; i += 32) {
            float v = plain_at<T>(wrow, i);
#pragma unroll
            for (int r = 0; r < N; r++)
                acc[r] += v * x[r * cols + i];
        }
    }
    store_sums<N>(acc, y, rows, row, lane);
}

/* What every launch of one call shares: the products' shape, the single product's
 * operands (groups NULL) or the device array of n_groups products' (grid y). */
struct launch_shape {
    size_t row_bytes;
    int64_t rows, cols;
    operands one;
    const operands *groups;
    int n_groups;
    bool aligned; /* every w 16-byte aligned (checked on the host's copy) */
};

dim3 grid_of(const launch_shape &s)
{
    return dim3((unsigned)((s.rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK), (unsigned)s.n_groups);
}

template <int N> struct launch_n {
    template <uint32_t T> static cudaError_t run(cudaStream_t stream, const launch_shape &s)
    {
        gemv_blocks<T, N><<<grid_of(s), WARPS_PER_BLOCK * 32, 0, stream>>>(s.row_bytes, s.rows, s.cols, s.one,
                                                                           s.groups);
        return cudaGetLastError();
    }
};

template <uint32_t T, int N> cudaError_t launch_plain(cudaStream_t stream, const launch_shape &s)
{
    int per = T == CINFER_TENSOR_F32 ? 4 : 8;
    bool vectorized = s.aligned && s.row_bytes % 16 == 0 && s.cols % per == 0;
    if (vectorized)
        gemv_plain<T, N, true><<<grid_of(s), WARPS_PER_BLOCK * 32, 0, stream>>>(s.row_bytes, s.rows, s.cols, s.one,
                                                                                s.groups);
    else
        gemv_plain<T, N, false><<<grid_of(s), WARPS_PER_BLOCK * 32, 0, stream>>>(s.row_bytes, s.rows, s.cols, s.one,
                                                                                 s.groups);
    return cudaGetLastError();
}

template <int N> cudaError_t launch(cudaStream_t stream, uint32_t type, const launch_shape &s)
{
    switch (type) {
    case CINFER_TENSOR_F32: return launch_plain<CINFER_TENSOR_F32, N>(stream, s);
    case CINFER_TENSOR_F16: return launch_plain<CINFER_TENSOR_F16, N>(stream, s);
    case CINFER_TENSOR_BF16: return launch_plain<CINFER_TENSOR_BF16, N>(stream, s);
    default:
        /* the float4 reads of x need whole chunks: a block type's cols are whole blocks */
        return dispatch_block_type<launch_n<N>>(type, stream, s);
    }
}

/* Checks the shape against the kernels' limits, then launches for n rows of x. */
cudaError_t launch_checked(cudaStream_t stream, uint32_t type, int n, const launch_shape &s,
                           const operands *host_ops, int n_host_ops)
{
    type_geometry g = geometry_of(type);
    if (n <= 0 || s.rows <= 0 || s.n_groups <= 0)
        return cudaSuccess;
    if (n > MAX_N || g.block_values == 0 || s.cols <= 0 || s.cols % g.block_values != 0 || s.n_groups > 65535)
        return cudaErrorInvalidValue;
    /* block types read x as float4: x must be 16-byte aligned (cudaMalloc's are) */
    for (int i = 0; i < n_host_ops; i++)
        if (g.block_values > 1 && (uintptr_t)host_ops[i].x % 16 != 0)
            return cudaErrorMisalignedAddress;
    switch (n) {
    case 1: return launch<1>(stream, type, s);
    case 2: return launch<2>(stream, type, s);
    case 3: return launch<3>(stream, type, s);
    case 4: return launch<4>(stream, type, s);
    case 5: return launch<5>(stream, type, s);
    case 6: return launch<6>(stream, type, s);
    case 7: return launch<7>(stream, type, s);
    default: return launch<8>(stream, type, s);
    }
}

bool all_aligned(const operands *ops, int n)
{
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ops[i].w % 16 != 0)
            return false;
    return true;
}

} // namespace

extern "C" cudaError_t cinfer_cuda_gemv_quant(cudaStream_t stream, uint32_t type, const void *w, size_t row_bytes,
                                              int64_t rows, int64_t cols, const float *x, int n, float *y)
{
    operands one = {w, x, y};
    launch_shape s = {row_bytes, rows, cols, one, nullptr, 1, all_aligned(&one, 1)};
    return launch_checked(stream, type, n, s, &one, 1);
}

extern "C" cudaError_t cinfer_cuda_gemv_quant_grouped(cudaStream_t stream, uint32_t type, size_t row_bytes,
                                                      int64_t rows, int64_t cols, int n,
                                                      const struct cinfer_cuda_gemv_operands *host_groups,
                                                      const struct cinfer_cuda_gemv_operands *groups, int n_groups)
{
    launch_shape s = {row_bytes, rows, cols, host_groups[0], groups, n_groups, all_aligned(host_groups, n_groups)};
    return launch_checked(stream, type, n, s, host_groups, n_groups);
}
