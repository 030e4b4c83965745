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

/* 8 accumulators of 8 lanes -> their 8 sums in order, by the hsum's tree (the tile's
 * hsum in matmul_avx2.c): lane i + lane i + 4, then (0 + 2, 1 + 3), then the two
 * neighbours; the same bits as 8 hsums in a quarter of the instructions. */
AI __m256 reduce8(const __m256 acc[8])
{
    __m256 h[4]; /* [row 2p: i + i+4 | row 2p+1: i + i+4] */
    for (int p = 0; p < 4; p++)
        h[p] = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * p], acc[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(acc[2 * p], acc[2 * p + 1], 0x31));
    /* per 128-bit lane: [row a: 0+2, 1+3, row c: 0+2, 1+3]; lane 0 rows 0, 2 (4, 6), lane 1 rows 1, 3 (5, 7) */
    __m256 q0 = _mm256_add_ps(_mm256_shuffle_ps(h[0], h[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(h[0], h[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 q1 = _mm256_add_ps(_mm256_shuffle_ps(h[2], h[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(h[2], h[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* lane 0: rows 0, 2, 4, 6; lane 1: rows 1, 3, 5, 7 */
    __m256 s = _mm256_add_ps(_mm256_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
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
