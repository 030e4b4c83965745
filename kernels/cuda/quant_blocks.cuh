/* kernels/cuda/quant_blocks.cuh — device decoders of the stored weight types, shared by
 * dequant.cu (embedding, dequantize to bf16) and gemv_quant.cu (decode's products).
 *
 * The unit is a chunk of 32 consecutive values of a row: a 32-value block is one chunk,
 * a 256-value K-quant or IQ4_XS block is eight. decode_chunk<T>(block, c, out) writes
 * values [32c, 32c + 32) of the block at block (bytes) to out. F32, F16 and BF16 are
 * read value by value by their callers (rows of any length). The arithmetic follows
 * kernels/quant.c step for step, with __fmul_rn / __fadd_rn so that nvcc fuses no
 * multiply-add: the values are bit for bit those of the CPU's dequantization. */
#ifndef CINFER_CUDA_QUANT_BLOCKS_CUH
#define CINFER_CUDA_QUANT_BLOCKS_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cinfer/backend.h"

namespace cinfer_cuda {

/* Geometry of a stored type: values and bytes per block (0, 0 for an unknown type). */
struct type_geometry {
    int block_values;
    int block_bytes;
};

__host__ __device__ inline type_geometry geometry_of(uint32_t type)
{
    switch (type) {
    case CINFER_TENSOR_F32: return {1, 4};
    case CINFER_TENSOR_F16: return {1, 2};
    case CINFER_TENSOR_BF16: return {1, 2};
    case CINFER_TENSOR_Q8_0: return {32, 34};
    case CINFER_TENSOR_Q4_0: return {32, 18};
    case CINFER_TENSOR_Q4_1: return {32, 20};
    case CINFER_TENSOR_Q5_0: return {32, 22};
    case CINFER_TENSOR_Q5_1: return {32, 24};
    case CINFER_TENSOR_Q2_K: return {256, 84};
    case CINFER_TENSOR_Q3_K: return {256, 110};
    case CINFER_TENSOR_Q4_K: return {256, 144};
    case CINFER_TENSOR_Q5_K: return {256, 176};
    case CINFER_TENSOR_Q6_K: return {256, 210};
    case CINFER_TENSOR_IQ4_NL: return {32, 18};
    case CINFER_TENSOR_IQ4_XS: return {256, 136};
    case CINFER_TENSOR_MXFP4: return {32, 17};
    default: return {0, 0};
    }
}

/* Blocks start at any byte (18-byte blocks, 22-byte ones with a u32 at offset 2), so
 * multi-byte fields are read byte by byte, little-endian. */
__device__ __forceinline__ uint32_t u16_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

__device__ __forceinline__ uint32_t u32_at(const uint8_t *p)
{
    return u16_at(p) | u16_at(p + 2) << 16;
}

__device__ __forceinline__ float half_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)u16_at(p)));
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits)
{
    return __uint_as_float(bits << 16);
}

/* 2^(e - 128) exactly (e 0 and 1 subnormal), as cinfer_kernel_e8m0_half. */
__device__ __forceinline__ float e8m0_half(uint32_t e)
{
    return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

__constant__ const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                              1,    13,   25,  38,  53,  69,  89,  113};
__constant__ const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* cinfer_kernel_k4_scale_min: the 6-bit scale and min of sub-block j of Q4_K / Q5_K. */
__device__ __forceinline__ void k4_scale_min(const uint8_t *s, int j, int *scale, int *min)
{
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* cinfer_kernel_q3k_scales, one scale j (0..15, 0..63; the value's scale is this - 32). */
__device__ __forceinline__ int q3k_scale(const uint8_t *s, int j)
{
    int low = j < 8 ? s[j] & 0x0F : s[j - 8] >> 4;
    int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return low | (high << 4);
}

template <uint32_t T> __device__ __forceinline__ void decode_chunk(const uint8_t *b, int c, float *out);

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q8_0>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b);
#pragma unroll
    for (int j = 0; j < 32; j++)
        out[j] = __fmul_rn(d, (float)(int8_t)b[2 + j]);
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q4_0>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        out[j] = __fmul_rn(d, (float)((b[2 + j] & 0x0F) - 8));
        out[j + 16] = __fmul_rn(d, (float)((b[2 + j] >> 4) - 8));
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q4_1>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b), m = half_at(b + 2);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        out[j] = __fadd_rn(__fmul_rn(d, (float)(b[4 + j] & 0x0F)), m);
        out[j + 16] = __fadd_rn(__fmul_rn(d, (float)(b[4 + j] >> 4)), m);
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q5_0>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b);
    uint32_t qh = u32_at(b + 2);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 0x0F) | (int)((qh >> j) & 1) << 4;
        int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        out[j] = __fmul_rn(d, (float)(lo - 16));
        out[j + 16] = __fmul_rn(d, (float)(hi - 16));
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q5_1>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b), m = half_at(b + 2);
    uint32_t qh = u32_at(b + 4);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        int lo = (b[8 + j] & 0x0F) | (int)((qh >> j) & 1) << 4;
        int hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        out[j] = __fadd_rn(__fmul_rn(d, (float)lo), m);
        out[j + 16] = __fadd_rn(__fmul_rn(d, (float)hi), m);
    }
}

/* Q2_K: value i = 32c + l: half i / 128, shift (i % 128) / 32, sub-block i / 16. */
template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q2_K>(const uint8_t *b, int c, float *out)
{
    const uint8_t *scales = b, *qs = b + 16;
    float d = half_at(b + 80), dmin = half_at(b + 82);
    int half = c / 4, shift = c % 4;
#pragma unroll
    for (int l = 0; l < 32; l++) {
        int q = (qs[32 * half + l] >> (2 * shift)) & 3;
        uint32_t sc = scales[(32 * c + l) / 16];
        float dl = __fmul_rn(d, (float)(sc & 0x0F)), ml = __fmul_rn(dmin, (float)(sc >> 4));
        out[l] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q3_K>(const uint8_t *b, int c, float *out)
{
    const uint8_t *hmask = b, *qs = b + 32;
    float d = half_at(b + 108);
    int half = c / 4, shift = c % 4;
    float dl0 = __fmul_rn(d, (float)(q3k_scale(b + 96, 2 * c) - 32));
    float dl1 = __fmul_rn(d, (float)(q3k_scale(b + 96, 2 * c + 1) - 32));
#pragma unroll
    for (int l = 0; l < 32; l++) {
        int q = (qs[32 * half + l] >> (2 * shift)) & 3;
        int high = (hmask[l] >> (shift + 4 * half)) & 1;
        out[l] = __fmul_rn(l < 16 ? dl0 : dl1, (float)(q - (high ? 0 : 4)));
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q4_K>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *qs = b + 16;
    int sc, mn;
    k4_scale_min(b + 4, c, &sc, &mn);
    float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)mn);
#pragma unroll
    for (int l = 0; l < 32; l++) {
        uint32_t byte = qs[32 * (c / 2) + l];
        int q = c % 2 ? byte >> 4 : byte & 0x0F;
        out[l] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q5_K>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *qh = b + 16, *qs = b + 48;
    int sc, mn;
    k4_scale_min(b + 4, c, &sc, &mn);
    float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)mn);
#pragma unroll
    for (int l = 0; l < 32; l++) {
        uint32_t byte = qs[32 * (c / 2) + l];
        int q = (int)(c % 2 ? byte >> 4 : byte & 0x0F) | ((qh[l] >> c) & 1) << 4;
        out[l] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_Q6_K>(const uint8_t *b, int c, float *out)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = half_at(b + 208);
    int h = c / 4, a = c % 4;
    float dl0 = __fmul_rn(d, (float)scales[2 * c]), dl1 = __fmul_rn(d, (float)scales[2 * c + 1]);
#pragma unroll
    for (int l = 0; l < 32; l++) {
        uint32_t low_byte = ql[64 * h + 32 * (a % 2) + l];
        int low = a < 2 ? low_byte & 0x0F : low_byte >> 4;
        int top = (qh[32 * h + l] >> (2 * a)) & 3;
        out[l] = __fmul_rn(l < 16 ? dl0 : dl1, (float)((low | top << 4) - 32));
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_IQ4_NL>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        out[j] = __fmul_rn(d, (float)iq4nl_values[b[2 + j] & 0x0F]);
        out[j + 16] = __fmul_rn(d, (float)iq4nl_values[b[2 + j] >> 4]);
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_IQ4_XS>(const uint8_t *b, int c, float *out)
{
    float d = half_at(b);
    uint32_t scales_h = u16_at(b + 2);
    const uint8_t *scales_l = b + 4, *qs = b + 8;
    int ls = ((scales_l[c / 2] >> (4 * (c % 2))) & 0x0F) | (int)((scales_h >> (2 * c)) & 3) << 4;
    float dl = __fmul_rn(d, (float)(ls - 32));
#pragma unroll
    for (int l = 0; l < 16; l++) {
        out[l] = __fmul_rn(dl, (float)iq4nl_values[qs[16 * c + l] & 0x0F]);
        out[l + 16] = __fmul_rn(dl, (float)iq4nl_values[qs[16 * c + l] >> 4]);
    }
}

template <> __device__ __forceinline__ void decode_chunk<CINFER_TENSOR_MXFP4>(const uint8_t *b, int c, float *out)
{
    float d = e8m0_half(b[0]);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        out[j] = __fmul_rn((float)mxfp4_values[b[1 + j] & 0x0F], d);
        out[j + 16] = __fmul_rn((float)mxfp4_values[b[1 + j] >> 4], d);
    }
}

/* Chunks of 32 values per block of T (1 or 8). */
template <uint32_t T> __host__ __device__ constexpr int chunks_per_block()
{
    return T == CINFER_TENSOR_Q2_K || T == CINFER_TENSOR_Q3_K || T == CINFER_TENSOR_Q4_K ||
                   T == CINFER_TENSOR_Q5_K || T == CINFER_TENSOR_Q6_K || T == CINFER_TENSOR_IQ4_XS
               ? 8
               : 1;
}

/* Block bytes of T, for the templated kernels. */
template <uint32_t T> __host__ __device__ constexpr int block_bytes_of()
{
    return T == CINFER_TENSOR_Q8_0     ? 34
           : T == CINFER_TENSOR_Q4_0   ? 18
           : T == CINFER_TENSOR_Q4_1   ? 20
           : T == CINFER_TENSOR_Q5_0   ? 22
           : T == CINFER_TENSOR_Q5_1   ? 24
           : T == CINFER_TENSOR_Q2_K   ? 84
           : T == CINFER_TENSOR_Q3_K   ? 110
           : T == CINFER_TENSOR_Q4_K   ? 144
           : T == CINFER_TENSOR_Q5_K   ? 176
           : T == CINFER_TENSOR_Q6_K   ? 210
           : T == CINFER_TENSOR_IQ4_NL ? 18
           : T == CINFER_TENSOR_IQ4_XS ? 136
           : T == CINFER_TENSOR_MXFP4  ? 17
                                       : 0;
}

/* Values [32k, 32k + 32) of a row of a block-quantized T. */
template <uint32_t T> __device__ __forceinline__ void decode_row_chunk(const uint8_t *row, int64_t k, float *out)
{
    constexpr int chunks = chunks_per_block<T>();
    decode_chunk<T>(row + (size_t)(k / chunks) * (size_t)block_bytes_of<T>(), (int)(k % chunks), out);
}

/* Calls F::template run<T>(args...) for the block-quantized type type; returns
 * cudaErrorInvalidValue for another. */
template <typename F, typename... Args> cudaError_t dispatch_block_type(uint32_t type, Args... args)
{
    switch (type) {
    case CINFER_TENSOR_Q8_0: return F::template run<CINFER_TENSOR_Q8_0>(args...);
    case CINFER_TENSOR_Q4_0: return F::template run<CINFER_TENSOR_Q4_0>(args...);
    case CINFER_TENSOR_Q4_1: return F::template run<CINFER_TENSOR_Q4_1>(args...);
    case CINFER_TENSOR_Q5_0: return F::template run<CINFER_TENSOR_Q5_0>(args...);
    case CINFER_TENSOR_Q5_1: return F::template run<CINFER_TENSOR_Q5_1>(args...);
    case CINFER_TENSOR_Q2_K: return F::template run<CINFER_TENSOR_Q2_K>(args...);
    case CINFER_TENSOR_Q3_K: return F::template run<CINFER_TENSOR_Q3_K>(args...);
    case CINFER_TENSOR_Q4_K: return F::template run<CINFER_TENSOR_Q4_K>(args...);
    case CINFER_TENSOR_Q5_K: return F::template run<CINFER_TENSOR_Q5_K>(args...);
    case CINFER_TENSOR_Q6_K: return F::template run<CINFER_TENSOR_Q6_K>(args...);
    case CINFER_TENSOR_IQ4_NL: return F::template run<CINFER_TENSOR_IQ4_NL>(args...);
    case CINFER_TENSOR_IQ4_XS: return F::template run<CINFER_TENSOR_IQ4_XS>(args...);
    case CINFER_TENSOR_MXFP4: return F::template run<CINFER_TENSOR_MXFP4>(args...);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace cinfer_cuda

#endif
