/* kernels/weight_load_avx512.h — reading weight rows into f32 lanes, shared by the
 * tile (matmul_avx512.c) and decode GEMV (gemv_avx512.c) paths so that both perform
 * the same operations and stay bit-identical. Include after kernels_impl.h and
 * <immintrin.h>, in a file built with the AVX-512 flags. */
#ifndef CINFER_KERNELS_WEIGHT_LOAD_AVX512_H
#define CINFER_KERNELS_WEIGHT_LOAD_AVX512_H

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

/* 16 weights of one row starting at element kk, widened to f32 (F32, F16, BF16). */
AI __m512 load_weights(const uint8_t *wrow, int kk, enum cinfer_kernel_wtype wtype)
{
    switch (wtype) {
    case CINFER_KW_F32:
        return _mm512_loadu_ps((const float *)wrow + kk);
    case CINFER_KW_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wrow + 2 * (size_t)kk)));
    case CINFER_KW_BF16: {
        __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(wrow + 2 * (size_t)kk)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    case CINFER_KW_Q8_0: /* integer path: q8_avx512.c, gemv_avx2.c, q8_panels*.c */
    case CINFER_KW_Q8_0_PANELS:
    case CINFER_KW_F16_PANELS:
    case CINFER_KW_BF16_PANELS:
    default:
        break;
    }
    return _mm512_setzero_ps();
}

/* The last k % 16 weights (never Q8_0, whose k is a multiple of 32), zero-filled. */
AI __m512 load_weights_tail(const uint8_t *wrow, int kk, __mmask16 m, enum cinfer_kernel_wtype wtype)
{
    switch (wtype) {
    case CINFER_KW_F32:
        return _mm512_maskz_loadu_ps(m, (const float *)wrow + kk);
    case CINFER_KW_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, wrow + 2 * (size_t)kk));
    case CINFER_KW_BF16: {
        __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, wrow + 2 * (size_t)kk));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    case CINFER_KW_Q8_0:
    case CINFER_KW_Q8_0_PANELS:
    case CINFER_KW_F16_PANELS:
    case CINFER_KW_BF16_PANELS:
    default:
        break;
    }
    return _mm512_setzero_ps();
}

/* AVX512_BF16 (vdpbf16ps): BF16 weights then multiply activations rounded to bf16
 * (the x_prepared rows), two products per f32 lane per instruction, no widening. */
static inline int has_bf16_dot(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
    return cached;
}

#define BF16_ATTR __attribute__((target("avx512bf16")))
#define BF16_PAIRS 32 /* bf16 values one vdpbf16ps takes from each operand */

/* acc (16 lanes) += x[2l] * w[2l] + x[2l + 1] * w[2l + 1] per lane l, as vdpbf16ps
 * rounds (bf16 products are exact in f32): the tile and the GEMV both go through this
 * one helper. */
static inline __attribute__((always_inline)) BF16_ATTR __m512 bf16_dot_step(__m512 acc, __m512i x, __m512i w)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);
}

static inline int has_vnni(void)
{
    static int cached = -1;
    if (cached < 0)
        cached = __builtin_cpu_supports("avx512vnni") ? 1 : 0;
    return cached;
}

#endif
