/* kernels/prepare_scalar.c — activations quantized to int16 blocks for Q8_0 weights
 * (at the AVX-512 and AVX2 levels by prepare_avx512.c and prepare_avx2.c, to the same
 * numbers),
 * and rounded to bf16 for BF16 weights (used where the CPU has vdpbf16ps).
 * Rounding is to nearest (even on ties) by the 1.5 * 2^23 trick, which needs no libm
 * call and vectorizes. */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

#define ROUNDING_MAGIC 12582912.0f /* 1.5 * 2^23: adding it leaves an integer in the low bits */

size_t cinfer_kernel_prepared_bytes(enum cinfer_kernel_wtype wtype, int n, int k)
{
    if (wtype == CINFER_KW_BF16_PANELS)
        wtype = CINFER_KW_BF16; /* panels take activations as the stored type does */
    if (wtype == CINFER_KW_BF16)
        return (size_t)n * (size_t)k * sizeof(uint16_t);
    if (cinfer_kernel_xq_block(wtype))
        return (size_t)n * cinfer_kernel_xq_row_bytes(wtype, k);
    if (wtype != CINFER_KW_Q8_0 && wtype != CINFER_KW_Q8_0_PANELS)
        return 0;
    return (size_t)n * (size_t)(k / CINFER_KERNEL_Q8_BLOCK) * sizeof(struct cinfer_kernel_xblock);
}

static void quantize_row_q16(const float *x, int k, struct cinfer_kernel_xblock *out)
{
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const float *xb = x + b * CINFER_KERNEL_Q8_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++) /* compares, not fmaxf: inlined */
            amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
        float d = amax / 32767.0f;
        float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++) {
            float q = (xb[i] * inv_d + ROUNDING_MAGIC) - ROUNDING_MAGIC;
            q = q > 32767.0f ? 32767.0f : q < -32767.0f ? -32767.0f : q;
            out[b].q[i] = (int16_t)q;
        }
    }
}

/* f32 bits to bf16, rounded to nearest even, NaN kept quiet: cinfer_kernel_f32_to_bf16
 * written without a call or branch, so the split loop below vectorizes. */
static inline uint16_t bits_to_bf16(uint32_t bits)
{
    uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (bits >> 16) | 0x40u;
    return (uint16_t)((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

/* x rounded to bf16 (to nearest even), the operand vdpbf16ps multiplies. */
static void round_row_bf16(const float *x, int k, uint16_t *out)
{
    for (int q = 0; q < k; q++) {
        uint32_t bits;
        memcpy(&bits, &x[q], sizeof bits);
        out[q] = bits_to_bf16(bits);
    }
}

void cinfer_kernel_prepare_rows(enum cinfer_kernel_wtype wtype, const float *x, int k, int i0, int i1,
                                void *prepared)
{
    if (wtype == CINFER_KW_BF16_PANELS)
        wtype = CINFER_KW_BF16;
    if (wtype == CINFER_KW_BF16) {
        for (int i = i0; i < i1; i++)
            round_row_bf16(x + (size_t)i * k, k, (uint16_t *)prepared + (size_t)i * k);
        return;
    }
    int xq_block = cinfer_kernel_xq_block(wtype);
    if (xq_block) {
        size_t row_bytes = cinfer_kernel_xq_row_bytes(wtype, k);
        enum cinfer_kernel_level level = cinfer_kernels_level();
        void (*quantize32)(const float *, int, struct cinfer_kernel_xq32 *) =
            level == CINFER_KERNEL_AVX512 ? cinfer_quantize_xq32_avx512
            : level == CINFER_KERNEL_AVX2 ? cinfer_quantize_xq32_avx2
                                          : cinfer_quantize_xq32_scalar;
        void (*quantize256)(const float *, int, struct cinfer_kernel_xq256 *) =
            level == CINFER_KERNEL_AVX512 ? cinfer_quantize_xq256_avx512
            : level == CINFER_KERNEL_AVX2 ? cinfer_quantize_xq256_avx2
                                          : cinfer_quantize_xq256_scalar;
        for (int i = i0; i < i1; i++) {
            void *out = (uint8_t *)prepared + (size_t)i * row_bytes;
            if (xq_block == 32)
                quantize32(x + (size_t)i * k, k, out);
            else
                quantize256(x + (size_t)i * k, k, out);
        }
        return;
    }
    if (wtype != CINFER_KW_Q8_0 && wtype != CINFER_KW_Q8_0_PANELS)
        return;
    struct cinfer_kernel_xblock *blocks = prepared;
    int per_row = k / CINFER_KERNEL_Q8_BLOCK;
    enum cinfer_kernel_level level = cinfer_kernels_level();
    void (*quantize)(const float *, int, struct cinfer_kernel_xblock *) =
        level == CINFER_KERNEL_AVX512 ? cinfer_prepare_q8_avx512
        : level == CINFER_KERNEL_AVX2 ? cinfer_prepare_q8_avx2
                                      : quantize_row_q16;
    for (int i = i0; i < i1; i++)
        quantize(x + (size_t)i * k, k, blocks + (size_t)i * per_row);
}
