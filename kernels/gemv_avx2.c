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
#include "reduce_avx2.h"
#include "weight_load_avx2.h"

#define AI static inline __attribute__((always_inline))
#define ROWS 8
#define LANES 8
#define PREFETCH_GROUPS 2 /* rows ahead / ROWS, into L2: see gemv_avx512.c */

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

/* Q8_0: the shared 256-bit GEMV (q8_gemv.h), one activation row per pass (16 ymm
 * registers); the AVX2 tile (matmul_avx2.c) calls it for every activation row too. */
#define Q8G_FN(name) avx2_q8_##name
#define Q8G_ATTR
#define Q8G_X_ROWS 1
#define Q8G_DOT(xl, xh, wl, wh) _mm256_add_epi32(_mm256_madd_epi16((xl), (wl)), _mm256_madd_epi16((xh), (wh)))
#include "q8_gemv.h"

void cinfer_q8_rows_avx2(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                         float *y, int ldy)
{
    avx2_q8_rows(x_prepared, n, k / CINFER_KERNEL_Q8_BLOCK, w, w_row_bytes, j0, j1, y, ldy);
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
    case CINFER_KW_Q8_0_PANELS: /* dispatch.c sends panels to their own kernels */
    case CINFER_KW_F16_PANELS:
    default: break; /* block-quantized types: quant_*.c */
    }
}
