/* kernels/gemv_avx512.c — x (n, k) · Wᵀ for n <= 2 activation rows (decode) with
 * AVX-512 (F, BW, VL).
 *
 * At batch 1 the 4 x 4 tile has only 4 accumulator chains and ends every weight row
 * with its own horizontal sum, which on short rows (k = 576) costs about as much as
 * the row. Here a group of 8 weight rows keeps 8 accumulators per activation row, the
 * rows are read one after the other (one sequential run of memory per group), and the
 * 8 row sums are reduced together by transposing shuffles.
 *
 * Batch invariance: every output element gets exactly the operations the tile path
 * (matmul_avx512.c) gives it — one 16-lane f32 accumulator fed in k order, the same
 * masked tail, and reduce8's tree (reduce_avx512.h), which the tile uses too. Q8_0
 * weights go to q8_avx512.c. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "reduce_avx512.h"
#include "weight_load_avx512.h"

#define AI static inline __attribute__((always_inline))
#define ROWS 8  /* weight rows per group: 8 sums reduced together */
#define LANES 16
#define MAX_X_ROWS 2

AI void store_rows(float *y, __m256 sums, int nr)
{
    if (nr == ROWS)
        _mm256_storeu_ps(y, sums);
    else
        _mm256_mask_storeu_ps(y, (__mmask8)((1u << nr) - 1u), sums);
}

/* y (mr, ldy)[0:nr] = x (mr, k) · W (nr <= 8 rows)ᵀ; rows past nr repeat the last
 * row (their sums are not stored), so the loop has no branches. Each row is read whole
 * before the next: the group is one sequential run of memory, which the hardware
 * prefetcher follows as well as it follows a plain read. Reading the 8 rows side by
 * side instead (8 streams 2.3 KB apart, with software prefetch) streamed at 77-78% of
 * a plain read of the same bytes on the development machine when its memory was
 * quiet (51 GB/s; f32, 2 threads, 576-row matrices), against 84-85% this way, and at
 * 90% against 96% when it was busy (33 GB/s). The rows' chains are independent, so
 * out-of-order execution overlaps the end of one row with the start of the next. */
AI void gemv_group(const float *x, int k, int mr, const uint8_t *w, size_t w_row_bytes, int nr,
                   enum cinfer_kernel_wtype wtype, float *y, int ldy)
{
    const uint8_t *rows[ROWS];
    for (int j = 0; j < ROWS; j++)
        rows[j] = w + (size_t)(j < nr ? j : nr - 1) * w_row_bytes;
    __m512 acc[MAX_X_ROWS][ROWS];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < ROWS; j++)
            acc[i][j] = _mm512_setzero_ps();
    const int k_full = k / LANES * LANES;
    for (int j = 0; j < ROWS; j++)
        for (int kk = 0; kk < k_full; kk += LANES) {
            __m512 wv = load_weights(rows[j], kk, wtype);
            for (int i = 0; i < mr; i++)
                acc[i][j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + (size_t)i * k + kk), wv, acc[i][j]);
        }
    if (k_full < k) {
        __mmask16 m = (__mmask16)((1u << (k - k_full)) - 1u);
        __m512 xv[MAX_X_ROWS];
        for (int i = 0; i < mr; i++)
            xv[i] = _mm512_maskz_loadu_ps(m, x + (size_t)i * k + k_full);
        for (int j = 0; j < ROWS; j++) {
            __m512 wv = load_weights_tail(rows[j], k_full, m, wtype);
            for (int i = 0; i < mr; i++)
                acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        store_rows(y + (size_t)i * ldy, reduce8(acc[i]), nr);
}

AI void gemv_typed(const float *x, int n, int k, const uint8_t *w, enum cinfer_kernel_wtype wtype,
                   size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    for (int j = j0; j < j1; j += ROWS) {
        int nr = j1 - j < ROWS ? j1 - j : ROWS;
        const uint8_t *wj = w + (size_t)j * w_row_bytes;
        if (n == 2)
            gemv_group(x, k, 2, wj, w_row_bytes, nr, wtype, y + j, ldy);
        else
            gemv_group(x, k, 1, wj, w_row_bytes, nr, wtype, y + j, ldy);
    }
}

/* BF16 weights x activations rounded to bf16, with vdpbf16ps (AVX512_BF16):
 * per output element exactly tile_bf16's operations in matmul_avx512.c (one 16-lane
 * accumulator fed 32 values at a time by bf16_dot_step, the masked tail, the
 * _mm512_reduce_add_ps tree), groups of 8 rows read row after row. */
static inline __attribute__((always_inline)) BF16_ATTR void gemv_bf16_group(const uint16_t *x, int k, int mr,
                                                                           const uint8_t *w, size_t w_row_bytes,
                                                                           int nr, float *y, int ldy)
{
    const uint8_t *rows[ROWS];
    for (int j = 0; j < ROWS; j++)
        rows[j] = w + (size_t)(j < nr ? j : nr - 1) * w_row_bytes;
    __m512 acc[MAX_X_ROWS][ROWS];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < ROWS; j++)
            acc[i][j] = _mm512_setzero_ps();
    const int k_full = k / BF16_PAIRS * BF16_PAIRS;
    for (int j = 0; j < ROWS; j++) /* row after row, as gemv_group */
        for (int kk = 0; kk < k_full; kk += BF16_PAIRS) {
            __m512i wv = _mm512_loadu_si512(rows[j] + 2 * (size_t)kk);
            for (int i = 0; i < mr; i++)
                acc[i][j] = bf16_dot_step(acc[i][j], _mm512_loadu_si512(x + (size_t)i * k + kk), wv);
        }
    int kk = k_full;
    if (kk < k) {
        __mmask32 m = (__mmask32)((1u << (k - kk)) - 1u);
        __m512i xv[MAX_X_ROWS];
        for (int i = 0; i < mr; i++)
            xv[i] = _mm512_maskz_loadu_epi16(m, x + (size_t)i * k + kk);
        for (int j = 0; j < ROWS; j++) {
            __m512i wv = _mm512_maskz_loadu_epi16(m, rows[j] + 2 * (size_t)kk);
            for (int i = 0; i < mr; i++)
                acc[i][j] = bf16_dot_step(acc[i][j], xv[i], wv);
        }
    }
    for (int i = 0; i < mr; i++)
        store_rows(y + (size_t)i * ldy, reduce8(acc[i]), nr);
}

static BF16_ATTR void gemv_bf16_dot(const uint16_t *x, int n, int k, const uint8_t *w, size_t w_row_bytes, int j0,
                                    int j1, float *y, int ldy)
{
    for (int j = j0; j < j1; j += ROWS) {
        int nr = j1 - j < ROWS ? j1 - j : ROWS;
        const uint8_t *wj = w + (size_t)j * w_row_bytes;
        if (n == 2)
            gemv_bf16_group(x, k, 2, wj, w_row_bytes, nr, y + j, ldy);
        else
            gemv_bf16_group(x, k, 1, wj, w_row_bytes, nr, y + j, ldy);
    }
}

void cinfer_gemv_avx512(const float *x, const void *x_prepared, int n, int k, const void *w,
                        enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    if (j1 <= j0)
        return;
    switch (wtype) {
    case CINFER_KW_F32: gemv_typed(x, n, k, w, CINFER_KW_F32, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_F16: gemv_typed(x, n, k, w, CINFER_KW_F16, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_BF16:
        if (has_bf16_dot() && x_prepared)
            gemv_bf16_dot(x_prepared, n, k, w, w_row_bytes, j0, j1, y, ldy);
        else
            gemv_typed(x, n, k, w, CINFER_KW_BF16, w_row_bytes, j0, j1, y, ldy);
        break;
    case CINFER_KW_Q8_0: cinfer_q8_gemv_avx512(x_prepared, n, k, w, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_Q8_0_PANELS: /* dispatch.c sends panels to their own kernels */
    case CINFER_KW_F16_PANELS:
    default: break; /* block-quantized types: quant_*.c */
    }
}
