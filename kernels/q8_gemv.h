/* kernels/q8_gemv.h — the Q8_0 decode GEMV on 256-bit vectors, shared by the AVX2 level
 * (gemv_avx2.c; it is that level's tile too) and the AVX-512 level (q8_avx512.c).
 *
 * 8 weight rows in flight. Per block and activation row: each weight row's 8 int32
 * sums of 4 products (madd, or vpdpwssd where the includer has VNNI), the 8 rows'
 * sums reduced together to the blocks' exact dot products S, the rows' 8 scales
 * gathered into one vector (q8g_row_scales), then one 8-lane
 * acc = fma((float)S, dx * dw, acc): the per-block definition every level and path
 * shares (kernels.h).
 *
 * The includer defines, then includes this file once per variant:
 *   Q8G_FN(name)             a unique name for each function
 *   Q8G_ATTR                 function attributes (a target for VNNI)
 *   Q8G_X_ROWS               activation rows per pass over a group (register budget)
 *   Q8G_DOT(xl, xh, wl, wh)  8 int32 sums of 4 products of 32 s16 x 32 s16 */
#ifndef CINFER_KERNELS_Q8_GEMV_SHARED
#define CINFER_KERNELS_Q8_GEMV_SHARED

#define Q8G_ROWS 8           /* weight rows in flight */
#define Q8G_AHEAD_GROUPS 2   /* weights prefetched this many groups ahead, into L2 */

/* 8 vectors of 8 int32 -> their 8 sums in order (exact, so any tree will do). */
static inline __attribute__((always_inline)) __m256i q8g_reduce8_epi32(const __m256i v[Q8G_ROWS])
{
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    /* per 128-bit half: [rows 0..3 | rows 4..7], one partial sum per row and half */
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* The f16 scales of 8 rows' blocks (rows[j] + at) as f32: each row's first 4 bytes
 * (scale and two quants) loaded as a plain int and the 8 set into a vector, the low
 * halves then packed and widened. The vector gather this replaced is microcoded into
 * many more operations on Zen 4: one thread, Q8_0 576 x 576 weights in L2, 32.9 GB/s
 * with it and 37.8 GB/s this way (one activation row; 23.0 and 25.1 with two). 8
 * two-byte stores and a wide load would stall on store forwarding. */
static inline __attribute__((always_inline)) __m256 q8g_row_scales(const uint8_t *const rows[Q8G_ROWS], size_t at)
{
    int32_t word[Q8G_ROWS];
    for (int j = 0; j < Q8G_ROWS; j++)
        memcpy(&word[j], rows[j] + at, sizeof word[j]);
    __m256i words = _mm256_setr_epi32(word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7]);
    const __m256i low_halves = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5,
                                                8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(words, low_halves), _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

#endif

/* y (mr, ldy)[0:nr] for activation rows xq (mr <= Q8G_X_ROWS rows of blocks) and
 * nr <= 8 weight rows; rows past nr repeat the last one, unstored. */
static inline __attribute__((always_inline)) Q8G_ATTR void Q8G_FN(group)(const struct cinfer_kernel_xblock *xq,
                                                                        int blocks, int mr, const uint8_t *w,
                                                                        size_t w_row_bytes, int nr, float *y, int ldy)
{
    const uint8_t *rows[Q8G_ROWS];
    for (int j = 0; j < Q8G_ROWS; j++)
        rows[j] = w + (size_t)(j < nr ? j : nr - 1) * w_row_bytes;
    const size_t ahead = Q8G_AHEAD_GROUPS * Q8G_ROWS * w_row_bytes;
    __m256 acc[Q8G_X_ROWS];
    for (int i = 0; i < mr; i++)
        acc[i] = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        size_t at = (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
        __m256i x_lo[Q8G_X_ROWS], x_hi[Q8G_X_ROWS];
        float dx[Q8G_X_ROWS];
        for (int i = 0; i < mr; i++) {
            const struct cinfer_kernel_xblock *xb = xq + (size_t)i * blocks + b;
            x_lo[i] = _mm256_loadu_si256((const __m256i *)xb->q);
            x_hi[i] = _mm256_loadu_si256((const __m256i *)(xb->q + 16));
            dx[i] = xb->d;
        }
        __m256i sums[Q8G_X_ROWS][Q8G_ROWS];
        for (int j = 0; j < Q8G_ROWS; j++) {
            const uint8_t *blk = rows[j] + at;
            /* 34-byte blocks: one prefetch per block touches every line of a later group */
            _mm_prefetch((const char *)blk + ahead, _MM_HINT_T1);
            __m256i w_lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 2)));
            __m256i w_hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 18)));
            for (int i = 0; i < mr; i++)
                sums[i][j] = Q8G_DOT(x_lo[i], x_hi[i], w_lo, w_hi);
        }
        __m256 dw = q8g_row_scales(rows, at);
        for (int i = 0; i < mr; i++)
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8g_reduce8_epi32(sums[i])),
                                     _mm256_mul_ps(_mm256_set1_ps(dx[i]), dw), acc[i]);
    }
    for (int i = 0; i < mr; i++) {
        float out[Q8G_ROWS];
        _mm256_storeu_ps(out, acc[i]);
        memcpy(y + (size_t)i * ldy, out, sizeof(float) * (size_t)nr);
    }
}

/* y (n, ldy)[j0:j1]: any number of activation rows, Q8G_X_ROWS at a time over each
 * group of 8 weight rows (the group stays in L1 between passes). */
static Q8G_ATTR void Q8G_FN(rows)(const struct cinfer_kernel_xblock *xq, int n, int blocks, const uint8_t *w,
                                  size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    for (int j = j0; j < j1; j += Q8G_ROWS) {
        int nr = j1 - j < Q8G_ROWS ? j1 - j : Q8G_ROWS;
        const uint8_t *wj = w + (size_t)j * w_row_bytes;
        int i = 0;
        for (; i + Q8G_X_ROWS <= n; i += Q8G_X_ROWS)
            Q8G_FN(group)(xq + (size_t)i * blocks, blocks, Q8G_X_ROWS, wj, w_row_bytes, nr, y + (size_t)i * ldy + j,
                          ldy);
        for (; i < n; i++)
            Q8G_FN(group)(xq + (size_t)i * blocks, blocks, 1, wj, w_row_bytes, nr, y + (size_t)i * ldy + j, ldy);
    }
}
