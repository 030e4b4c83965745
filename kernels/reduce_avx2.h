/* kernels/reduce_avx2.h — horizontal reductions of 8-lane vectors, one tree for every
 * AVX2 kernel: the tile (matmul_avx2.c) and the decode GEMV (gemv_avx2.c) must reduce
 * the same way to give the same bits, and softmax, the norms and the quantizers use the
 * same helpers. Include after <immintrin.h>, in a file built with the AVX2 flags. */
#ifndef CINFER_KERNELS_REDUCE_AVX2_H
#define CINFER_KERNELS_REDUCE_AVX2_H

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

/* lane l + lane l + 4, then (0 + 2, 1 + 3), then the two neighbours */
AI float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI float hmax8(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI int hsum8_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* 8 accumulators of 8 lanes -> their 8 sums in order, by hsum8's tree: lane i + lane
 * i + 4, then (0 + 2, 1 + 3), then the two neighbours; the same bits as 8 hsum8 calls
 * in a quarter of the instructions. */
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

#endif
