/* kernels/masked_avx2.h — partial vectors for the AVX2 kernels: the mask of a loop's
 * last lanes, and a masked store that is a plain store when every lane is kept.
 * Included by *_avx2.c files only. */
#ifndef CINFER_KERNELS_MASKED_AVX2_H
#define CINFER_KERNELS_MASKED_AVX2_H

#include <immintrin.h>

/* all lanes below `remaining` (8 or more: all 8) */
static inline __attribute__((always_inline)) __m256i lanes_left(int remaining)
{
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), index);
}

/* _mm256_maskstore_ps(p, mask, v), as a plain store when the mask keeps every lane. On
 * AMD Zen 2/3 vmaskmovps to memory is microcoded: 7.2-7.7 ns a store against 0.7 for
 * vmovups on the Zen 3 of docs/benchmarks.md, which made it a seventh of a Q4_0 prefill
 * tile's time and most of softmax's and SwiGLU's; almost every store is whole. */
static inline __attribute__((always_inline)) void store8_masked(float *p, __m256i mask, __m256 v)
{
    if (_mm256_movemask_ps(_mm256_castsi256_ps(mask)) == 0xFF)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, mask, v);
}

#endif
