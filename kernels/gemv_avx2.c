/* kernels/gemv_avx2.c — x (n, k) · Wᵀ for n <= 2 activation rows (decode) with AVX2 +
 * FMA + F16C.
 *
 * The AVX-512 GEMV's scheme on 8 lanes (gemv_avx512.c): 8 weight rows in flight per
 * activation row, their 8 sums reduced together, weights prefetched into L2. Every
 * output element gets exactly the tile path's operations (matmul_avx2.c):
 * one 8-lane accumulator fed in k order, the horizontal sum's tree (halves, pairs,
 * neighbours), then the k % 8 tail added in scalar, so results are bit-identical to
 * the tile's and do not depend on the batch. Two activation rows go one after the
 * other over each group of weight rows (the group is in L1 the second time): 16
 * accumulators would not fit the 16 ymm registers. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "weight_load_avx2.h"

#define AI static inline __attribute__((always_inline))
#define ROWS 8
#define LANES 8
#define PREFETCH_GROUPS 2 /* rows ahead / ROWS, into L2: see gemv_avx512.c */

/* 8 accumulators of 8 lanes -> their 8 sums in order, by the hsum's tree: lane i +
 * lane i + 4, then (0 + 2, 1 + 3), then the two neighbours. */
AI __m256 reduce8(const __m256 acc[ROWS])
{
    __m256 h[ROWS / 2]; /* [row 2p: i + i+4 | row 2p+1: i + i+4] */
    for (int p = 0; p < ROWS / 2; p++)
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

/* y[0:nr] = x (k) · W (nr <= 8 rows)ᵀ; rows past nr repeat the last row, unstored. */
AI void gemv_group(const float *x, int k, const uint8_t *w, size_t w_row_bytes, int nr,
                   enum cinfer_kernel_wtype wtype, float *y)
{
    const uint8_t *rows[ROWS];
    for (int j = 0; j < ROWS; j++)
        rows[j] = w + (size_t)(j < nr ? j : nr - 1) * w_row_bytes;
    const size_t weight_bytes = wtype == CINFER_KW_F32 ? 4 : 2;
    const size_t ahead = PREFETCH_GROUPS * ROWS * w_row_bytes;
    __m256 acc[ROWS];
    for (int j = 0; j < ROWS; j++)
        acc[j] = _mm256_setzero_ps();
    int kk = 0;
    for (; kk + LANES <= k; kk += LANES) {
        __m256 xv = _mm256_loadu_ps(x + kk);
        /* one prefetch per 64-byte line */
        int prefetch = (kk * (int)weight_bytes & 63) == 0;
        for (int j = 0; j < ROWS; j++) {
            if (prefetch)
                _mm_prefetch((const char *)rows[j] + (size_t)kk * weight_bytes + ahead, _MM_HINT_T1);
            acc[j] = _mm256_fmadd_ps(xv, load_weights(rows[j], kk, wtype), acc[j]);
        }
    }
    float sums[ROWS];
    _mm256_storeu_ps(sums, reduce8(acc));
    for (int j = 0; j < nr; j++)
        y[j] = kk < k ? sums[j] + tail_dot(x, rows[j], kk, k, wtype) : sums[j];
}

AI void gemv_typed(const float *x, int n, int k, const uint8_t *w, enum cinfer_kernel_wtype wtype,
                   size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    for (int j = j0; j < j1; j += ROWS) {
        int nr = j1 - j < ROWS ? j1 - j : ROWS;
        for (int i = 0; i < n; i++)
            gemv_group(x + (size_t)i * k, k, w + (size_t)j * w_row_bytes, w_row_bytes, nr, wtype,
                       y + (size_t)i * ldy + j);
    }
}

/* 8 vectors of 8 int32 -> their 8 sums in order (exact, so any tree will do). */
AI __m256i reduce8_epi32(const __m256i v[ROWS])
{
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    /* per 128-bit half: [rows 0..3 | rows 4..7], one partial sum per row and half */
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* Q8_0, 8 weight rows in flight for one activation row: per block the 8 exact integer
 * sums, then acc = fma((float)S, dx * dw, acc), as kernels.h defines every level's Q8_0
 * result. The AVX2 tile (matmul_avx2.c) calls this for every activation row. */
AI void q8_group(const struct cinfer_kernel_xblock *xq, int blocks, const uint8_t *w, size_t w_row_bytes, int nr,
                 float *y)
{
    const uint8_t *rows[ROWS];
    for (int j = 0; j < ROWS; j++)
        rows[j] = w + (size_t)(j < nr ? j : nr - 1) * w_row_bytes;
    const size_t ahead = PREFETCH_GROUPS * ROWS * w_row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        size_t at = (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
        __m256i x_lo = _mm256_loadu_si256((const __m256i *)xq[b].q);
        __m256i x_hi = _mm256_loadu_si256((const __m256i *)(xq[b].q + 16));
        __m256i sums[ROWS];
        uint16_t d_bits[ROWS];
        for (int j = 0; j < ROWS; j++) {
            const uint8_t *blk = rows[j] + at;
            _mm_prefetch((const char *)blk + ahead, _MM_HINT_T1);
            memcpy(&d_bits[j], blk, 2);
            __m256i w_lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 2)));
            __m256i w_hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 18)));
            sums[j] = _mm256_add_epi32(_mm256_madd_epi16(x_lo, w_lo), _mm256_madd_epi16(x_hi, w_hi));
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d_bits));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(sums)), _mm256_mul_ps(_mm256_set1_ps(xq[b].d), dw),
                              acc);
    }
    float out[ROWS];
    _mm256_storeu_ps(out, acc);
    memcpy(y, out, sizeof(float) * (size_t)nr);
}

void cinfer_q8_rows_avx2(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                         float *y, int ldy)
{
    const struct cinfer_kernel_xblock *xq = x_prepared;
    const uint8_t *wb = w;
    int blocks = k / CINFER_KERNEL_Q8_BLOCK;
    for (int j = j0; j < j1; j += ROWS) {
        int nr = j1 - j < ROWS ? j1 - j : ROWS;
        for (int i = 0; i < n; i++)
            q8_group(xq + (size_t)i * blocks, blocks, wb + (size_t)j * w_row_bytes, w_row_bytes, nr,
                     y + (size_t)i * ldy + j);
    }
}

void cinfer_gemv_avx2(const float *x, const void *x_prepared, int n, int k, const void *w,
                      enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    const uint8_t *wb = w;
    switch (wtype) {
    case CINFER_KW_F32: gemv_typed(x, n, k, wb, CINFER_KW_F32, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_F16: gemv_typed(x, n, k, wb, CINFER_KW_F16, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_BF16: gemv_typed(x, n, k, wb, CINFER_KW_BF16, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_Q8_0: cinfer_q8_rows_avx2(x_prepared, n, k, w, w_row_bytes, j0, j1, y, ldy); break;
    }
}
