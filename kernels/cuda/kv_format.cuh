/* kernels/cuda/kv_format.cuh — how the CUDA backend encodes, finds and reads KV values:
 * f32 to f16 / bf16 (round to nearest even, NaN kept), q8_0 blocks, a row's byte offset
 * in struct cinfer_cuda_kv and a position's row through a page table. Host and device
 * code (host_device.cuh): the kernels (kv_cache.cu, attention.cu) and a host test
 * without a GPU (tests/test_cuda_kernels_host.c, compiled as C) run the very same code.
 * The encoders repeat kernels/convert_scalar.c and kernels/quant.c step by step, so a
 * KV row the device writes is the CPU backend's, byte for byte. */
#ifndef CINFER_CUDA_KV_FORMAT_CUH
#define CINFER_CUDA_KV_FORMAT_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "host_device.cuh"

#define CINFER_CUDA_Q8_BLOCK 32       /* values of a q8_0 block */
#define CINFER_CUDA_Q8_BLOCK_BYTES 34 /* f16 d, then 32 int8 */

/* The KV element types, numbered as enum cinfer_kv_type (include/cinfer/backend.h). */
enum { CINFER_CUDA_KV_F32 = 0, CINFER_CUDA_KV_F16 = 1, CINFER_CUDA_KV_BF16 = 2, CINFER_CUDA_KV_Q8_0 = 3 };

CINFER_HD uint32_t cinfer_cu_float_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
#endif
}

CINFER_HD float cinfer_cu_bits_float(uint32_t bits)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(bits);
#else
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
#endif
}

/* NaN by its bits: no dependence on the compiler's floating-point flags */
CINFER_HD int cinfer_cu_is_nan(float f)
{
    return (cinfer_cu_float_bits(f) & 0x7fffffffu) > 0x7f800000u;
}

/* kernels/convert_scalar.c's cinfer_kernel_f32_to_f16, step by step */
CINFER_HD uint16_t cinfer_cu_f32_to_f16(float f)
{
    uint32_t bits = cinfer_cu_float_bits(f);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    float a = fabsf(f);
    if (cinfer_cu_is_nan(f))
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0f) /* rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14f) /* subnormal range: multiples of 2^-24, rint is nearest-even */
        return (uint16_t)(sign | (uint16_t)rintf(a * 0x1p24f));
    uint32_t abits = bits & 0x7fffffffu;
    abits += 0xfffu + ((abits >> 13) & 1u); /* the 23-bit mantissa to 10 bits, nearest even */
    uint32_t exp = (abits >> 23) - 112u;
    return (uint16_t)(sign | (uint16_t)((exp << 10) | ((abits >> 13) & 0x3ffu)));
}

/* kernels/convert_scalar.c's cinfer_kernel_f16_to_f32 (exact) */
CINFER_HD float cinfer_cu_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0)
            return cinfer_cu_bits_float(sign);
        return cinfer_cu_bits_float(cinfer_cu_float_bits((float)mant * 0x1p-24f) | sign); /* subnormal */
    }
    if (exp == 31)
        return cinfer_cu_bits_float(sign | 0x7f800000u | (mant << 13));
    return cinfer_cu_bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* kernels/convert_scalar.c's cinfer_kernel_f32_to_bf16: nearest even, NaN kept quiet */
CINFER_HD uint16_t cinfer_cu_f32_to_bf16(float f)
{
    uint32_t bits = cinfer_cu_float_bits(f);
    if (cinfer_cu_is_nan(f))
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

CINFER_HD float cinfer_cu_bf16_to_f32(uint16_t b)
{
    return cinfer_cu_bits_float((uint32_t)b << 16);
}

/* One q8_0 block of x (32) into out (34 bytes), as kernels/quant.c's
 * cinfer_kernel_quantize_q8_0: d = max|x| / 127 in f32, q = roundf(x * (1 / d)) with
 * that unrounded d (ties away from zero), then d stored rounded to f16. (A block whose
 * max|x| is below about 1e-36 makes 1 / d overflow; the CPU then converts inf to int8,
 * which C leaves undefined, and the two sides need not agree there.) */
CINFER_HD void cinfer_cu_quantize_q8_0_block(const float *x, uint8_t *out)
{
    float amax = 0.0f;
    for (int i = 0; i < CINFER_CUDA_Q8_BLOCK; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t dh = cinfer_cu_f32_to_f16(d);
    out[0] = (uint8_t)(dh & 0xffu); /* little-endian, as the CPU's memcpy on x86 and as the GPU reads it */
    out[1] = (uint8_t)(dh >> 8);
    for (int i = 0; i < CINFER_CUDA_Q8_BLOCK; i++)
        out[2 + i] = (uint8_t)(int8_t)roundf(x[i] * id);
}

/* Bytes of one K (or V) row of kv_dim values of dtype. */
CINFER_HD size_t cinfer_cu_kv_row_bytes(uint32_t dtype, int kv_dim)
{
    switch (dtype) {
    case CINFER_CUDA_KV_F32: return (size_t)kv_dim * 4;
    case CINFER_CUDA_KV_F16:
    case CINFER_CUDA_KV_BF16: return (size_t)kv_dim * 2;
    default: return (size_t)(kv_dim / CINFER_CUDA_Q8_BLOCK) * CINFER_CUDA_Q8_BLOCK_BYTES;
    }
}

/* Byte offset of the row of (layer, page, offset) from the K (or V) base of struct
 * cinfer_cuda_kv: ((layer * n_pages + page) * page_tokens + offset) * row_bytes. */
CINFER_HD size_t cinfer_cu_kv_row_at(int n_pages, int page_tokens, size_t row_bytes, int layer, int page, int offset)
{
    return (((size_t)layer * (size_t)n_pages + (size_t)page) * (size_t)page_tokens + (size_t)offset) * row_bytes;
}

/* The page and offset of position pos through a sequence's page table (page i holds
 * positions [i * page_tokens, (i + 1) * page_tokens)). */
CINFER_HD void cinfer_cu_kv_position(const int32_t *page_table, int page_tokens, int pos, int *page, int *offset)
{
    *page = page_table[pos / page_tokens];
    *offset = pos % page_tokens;
}

/* Value i of a row of dtype (i counted over the whole row, kv_dim values), widened to f32. */
CINFER_HD float cinfer_cu_kv_value(const uint8_t *row, uint32_t dtype, int i)
{
    switch (dtype) {
    case CINFER_CUDA_KV_F32: return ((const float *)(const void *)row)[i];
    case CINFER_CUDA_KV_F16: return cinfer_cu_f16_to_f32(((const uint16_t *)(const void *)row)[i]);
    case CINFER_CUDA_KV_BF16: return cinfer_cu_bf16_to_f32(((const uint16_t *)(const void *)row)[i]);
    default: {
        const uint8_t *block = row + (size_t)(i / CINFER_CUDA_Q8_BLOCK) * CINFER_CUDA_Q8_BLOCK_BYTES;
        float d = cinfer_cu_f16_to_f32((uint16_t)(block[0] | (uint16_t)(block[1] << 8)));
        return d * (float)(int8_t)block[2 + i % CINFER_CUDA_Q8_BLOCK];
    }
    }
}

/* Encodes unit u of a row from src (kv_dim f32) into dst (the row): a value for f32,
 * f16 and bf16, a block of 32 for q8_0. Units per row: cinfer_cu_kv_row_units. */
CINFER_HD int cinfer_cu_kv_row_units(uint32_t dtype, int kv_dim)
{
    return dtype == CINFER_CUDA_KV_Q8_0 ? kv_dim / CINFER_CUDA_Q8_BLOCK : kv_dim;
}

CINFER_HD void cinfer_cu_kv_encode_unit(const float *src, uint8_t *dst, uint32_t dtype, int u)
{
    switch (dtype) {
    case CINFER_CUDA_KV_F32: ((float *)(void *)dst)[u] = src[u]; break;
    case CINFER_CUDA_KV_F16: ((uint16_t *)(void *)dst)[u] = cinfer_cu_f32_to_f16(src[u]); break;
    case CINFER_CUDA_KV_BF16: ((uint16_t *)(void *)dst)[u] = cinfer_cu_f32_to_bf16(src[u]); break;
    default:
        cinfer_cu_quantize_q8_0_block(src + (size_t)u * CINFER_CUDA_Q8_BLOCK,
                                      dst + (size_t)u * CINFER_CUDA_Q8_BLOCK_BYTES);
        break;
    }
}

#endif
