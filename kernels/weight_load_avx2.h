/* kernels/weight_load_avx2.h — reading weight rows into f32 lanes and the scalar tail
 * of a dot product, shared by the tile (matmul_avx2.c) and decode GEMV (gemv_avx2.c)
 * paths so that both perform the same operations and stay bit-identical. Include
 * after kernels_impl.h and <immintrin.h>, in a file built with the AVX2 flags. */
#ifndef CINFER_KERNELS_WEIGHT_LOAD_AVX2_H
#define CINFER_KERNELS_WEIGHT_LOAD_AVX2_H

#include <math.h>

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

AI __m256 load_weights(const uint8_t *wrow, int kk, enum cinfer_kernel_wtype wtype)
{
    switch (wtype) {
    case CINFER_KW_F32:
        return _mm256_loadu_ps((const float *)wrow + kk);
    case CINFER_KW_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wrow + 2 * (size_t)kk)));
    case CINFER_KW_BF16: {
        __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(wrow + 2 * (size_t)kk)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    case CINFER_KW_Q8_0: /* integer path: q8_avx512.c, gemv_avx2.c, q8_panels*.c */
    case CINFER_KW_Q8_0_PANELS:
    case CINFER_KW_F16_PANELS:
    case CINFER_KW_BF16_PANELS:
    default:
        break;
    }
    return _mm256_setzero_ps();
}

/* Elements [kk, k) of one dot product, in order (F32/F16/BF16 only), each an explicit
 * fused multiply-add: left to -ffp-contract, GCC -O3 fused short tails but multiplied
 * tails of 4 or more as a vector and then added the rounded products, so a row's sum
 * depended on how many zeros followed it (attention's P.V over block contexts of 11
 * and 13 differed in the last bit). */
static inline float tail_dot(const float *x, const uint8_t *wrow, int kk, int k, enum cinfer_kernel_wtype wtype)
{
    float acc = 0.0f;
    for (int i = kk; i < k; i++) {
        uint16_t h;
        float wv;
        switch (wtype) {
        case CINFER_KW_F32: memcpy(&wv, wrow + 4 * (size_t)i, 4); break;
        case CINFER_KW_F16: memcpy(&h, wrow + 2 * (size_t)i, 2); wv = cinfer_kernel_f16_to_f32(h); break;
        case CINFER_KW_BF16: memcpy(&h, wrow + 2 * (size_t)i, 2); wv = cinfer_kernel_bf16_to_f32(h); break;
        default: wv = 0.0f; break;
        }
        acc = fmaf(x[i], wv, acc);
    }
    return acc;
}

#endif
