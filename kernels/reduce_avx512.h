/* kernels/reduce_avx512.h — the horizontal sums of 16-lane f32 accumulators, shared by
 * the tile (matmul_avx512.c) and the decode GEMV (gemv_avx512.c): 8 accumulators are
 * reduced together by transposing shuffles (about 3 vector instructions per sum instead
 * of _mm512_reduce_add_ps's 8) along _mm512_reduce_add_ps's tree (lane l + lane l+8,
 * then + l+4, then + l+2, then neighbours). IEEE addition is commutative, so pairing
 * the same operands in another lane gives the same bits: only the tree's shape
 * matters, and both paths use this one. Include after <immintrin.h>, in a file built
 * with the AVX-512 flags. */
#ifndef CINFER_KERNELS_REDUCE_AVX512_H
#define CINFER_KERNELS_REDUCE_AVX512_H

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

/* The last two levels of the tree for 8 rows whose 4-value partial sums sit one row
 * per 128-bit chunk: q0123 holds rows 0-3, q4567 rows 4-7. Returns the 8 row sums in
 * order: lanes (u0 + u2) + (u1 + u3), as _mm512_reduce_add_ps ends. */
AI __m256 reduce_quarters(__m512 q0123, __m512 q4567)
{
    /* per chunk c: [row c: u0+u2, u1+u3, row c+4: u0+u2, u1+u3] */
    __m512 v = _mm512_add_ps(_mm512_shuffle_ps(q0123, q4567, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(q0123, q4567, _MM_SHUFFLE(3, 2, 3, 2)));
    /* neighbours: lane 4c holds row c, lane 4c + 2 row c + 4 */
    __m512 s = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, s));
}

/* a and b (8 lanes per row, two rows per vector: [row 2p | row 2p+1]) -> one chunk
 * per row of lane i + lane i + 4. */
AI __m512 reduce_halves_of_pairs(__m512 p01, __m512 p23)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* 8 accumulators of 16 lanes -> their 8 sums by _mm512_reduce_add_ps's tree. */
AI __m256 reduce8(const __m512 acc[8])
{
    __m512 p[4]; /* [row 2i: lane l + lane l+8 | row 2i+1: the same] */
    for (int i = 0; i < 4; i++)
        p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return reduce_quarters(reduce_halves_of_pairs(p[0], p[1]), reduce_halves_of_pairs(p[2], p[3]));
}

#endif
