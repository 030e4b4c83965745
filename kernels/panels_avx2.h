/* kernels/panels_avx2.h — what the AVX2 panel kernels (q8_panels_avx2.c,
 * quant_panels_avx2.c) share: a 16-row panel seen as two halves of 8 rows (one 32-bit
 * lane a row), the halves' store masks, and the f16 scales of a half. Included by
 * *_avx2.c files only. */
#ifndef CINFER_KERNELS_PANELS_AVX2_H
#define CINFER_KERNELS_PANELS_AVX2_H

#include <immintrin.h>

#include "kernels_impl.h"
#include "masked_avx2.h"

#define PANEL CINFER_KERNEL_PANEL_ROWS
#define HALF_ROWS 8 /* a panel's half: 8 rows, one 32-bit lane each */
/* the loops over rows and passes must unroll for their sums to stay in registers */
#define UNROLL _Pragma("GCC unroll 8")

/* The maskstore mask of half `half` (0: rows 0..7, 1: rows 8..15) of a panel whose asked
 * rows are the bits of `asked` (cinfer_panel_rows_asked). */
static inline __attribute__((always_inline)) __m256i half_mask(unsigned asked, int half)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i rows = _mm256_set1_epi32((int)((asked >> (HALF_ROWS * half)) & 0xFFu));
    return _mm256_cmpeq_epi32(_mm256_and_si256(rows, bit), bit);
}

/* 8 f16 at p (a half's scales), widened */
static inline __attribute__((always_inline)) __m256 half8(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

#endif
