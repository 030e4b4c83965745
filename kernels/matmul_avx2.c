/* kernels/matmul_avx2.c — x (n, k) · Wᵀ with AVX2 + FMA + F16C.
 *
 * Same shape as the AVX-512 version with 8 lanes and a 2 x 4 tile (8 accumulators,
 * 4 widened weight vectors and one activation vector fit the 16 ymm registers). The
 * k % 8 tail is added in scalar after the horizontal sum, the same way for every
 * output element, so results do not depend on tile placement. A whole tile's 8 sums
 * are reduced together (reduce8, reduce_avx2.h: hsum8's tree, the same bits):
 * with attention's short rows (k = head_dim) the 8 separate sums cost about as much
 * as the products. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "reduce_avx2.h"
#include "weight_load_avx2.h"

#define AI static inline __attribute__((always_inline))
#define TILE_M 2
#define TILE_N 4
#define LANES 8
#define WEIGHT_BLOCK_BYTES (256 * 1024)

AI void tile(const float *x, int k, int mr, const uint8_t *w, size_t w_row_bytes, int nr,
             enum cinfer_kernel_wtype wtype, float *y, int ldy)
{
    __m256 acc[TILE_M][TILE_N];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = _mm256_setzero_ps();
    int kk = 0;
    for (; kk + LANES <= k; kk += LANES) {
        __m256 wv[TILE_N];
        for (int j = 0; j < nr; j++) {
            const uint8_t *wrow = w + (size_t)j * w_row_bytes;
            /* the same place in the next tile's row: a short row ends before the
             * hardware prefetcher has ramped up */
            _mm_prefetch((const char *)wrow + (size_t)kk * (wtype == CINFER_KW_F32 ? 4 : 2) + TILE_N * w_row_bytes,
                         _MM_HINT_T0);
            wv[j] = load_weights(wrow, kk, wtype);
            /* in a register: left alone, GCC folds an f32 row's load into each of the
             * tile's FMAs, two loads where one does (the loop is load-bound then) */
            __asm__("" : "+x"(wv[j]));
        }
        for (int i = 0; i < mr; i++) {
            __m256 xv = _mm256_loadu_ps(x + (size_t)i * k + kk);
            for (int j = 0; j < nr; j++)
                acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (mr == TILE_M && nr == TILE_N) { /* the 8 sums at once, hsum8's tree (reduce8) */
        const __m256 all[TILE_M * TILE_N] = {acc[0][0], acc[0][1], acc[0][2], acc[0][3],
                                             acc[1][0], acc[1][1], acc[1][2], acc[1][3]};
        __m256 reduced = reduce8(all); /* row 0's 4 sums, then row 1's */
        if (kk == k) {                 /* no tail: each row's 4 outputs are adjacent */
            _mm_storeu_ps(y, _mm256_castps256_ps128(reduced));
            _mm_storeu_ps(y + ldy, _mm256_extractf128_ps(reduced, 1));
            return;
        }
        float sums[TILE_M * TILE_N];
        _mm256_storeu_ps(sums, reduced);
        for (int i = 0; i < TILE_M; i++)
            for (int j = 0; j < TILE_N; j++) {
                float sum = sums[i * TILE_N + j];
                if (kk < k)
                    sum += tail_dot(x + (size_t)i * k, w + (size_t)j * w_row_bytes, kk, k, wtype);
                y[(size_t)i * ldy + j] = sum;
            }
        return;
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float sum = hsum8(acc[i][j]);
            if (kk < k)
                sum += tail_dot(x + (size_t)i * k, w + (size_t)j * w_row_bytes, kk, k, wtype);
            y[(size_t)i * ldy + j] = sum;
        }
}

AI void matmul_typed(const float *x, int n, int k, const uint8_t *w, enum cinfer_kernel_wtype wtype,
                     size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    int block_rows = (int)(WEIGHT_BLOCK_BYTES / (w_row_bytes ? w_row_bytes : 1));
    block_rows = block_rows < TILE_N ? TILE_N : block_rows - block_rows % TILE_N;
    for (int jb = j0; jb < j1; jb += block_rows) {
        int jb_end = jb + block_rows < j1 ? jb + block_rows : j1;
        for (int i = 0; i < n; i += TILE_M) {
            int mr = n - i < TILE_M ? n - i : TILE_M;
            const float *xi = x + (size_t)i * k;
            float *yi = y + (size_t)i * ldy;
            int j = jb;
            for (; j + TILE_N <= jb_end; j += TILE_N) {
                const uint8_t *wj = w + (size_t)j * w_row_bytes;
                if (mr == 2)
                    tile(xi, k, 2, wj, w_row_bytes, TILE_N, wtype, yi + j, ldy);
                else
                    tile(xi, k, 1, wj, w_row_bytes, TILE_N, wtype, yi + j, ldy);
            }
            for (; j < jb_end; j++) {
                const uint8_t *wj = w + (size_t)j * w_row_bytes;
                if (mr == 2)
                    tile(xi, k, 2, wj, w_row_bytes, 1, wtype, yi + j, ldy);
                else
                    tile(xi, k, 1, wj, w_row_bytes, 1, wtype, yi + j, ldy);
            }
        }
    }
}

void cinfer_matmul_avx2(const float *x, const void *x_prepared, int n, int k, const void *w,
                        enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    switch (wtype) {
    case CINFER_KW_F32: matmul_typed(x, n, k, w, CINFER_KW_F32, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_F16: matmul_typed(x, n, k, w, CINFER_KW_F16, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_BF16: matmul_typed(x, n, k, w, CINFER_KW_BF16, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_Q8_0: /* 8 weight rows in flight per activation row, as the GEMV */
        cinfer_q8_rows_avx2(x_prepared, n, k, w, w_row_bytes, j0, j1, y, ldy);
        break;
    case CINFER_KW_Q8_0_PANELS: /* dispatch.c sends panels to their own kernels */
    case CINFER_KW_F16_PANELS:
    default: break; /* block-quantized types: quant_*.c */
    }
}
