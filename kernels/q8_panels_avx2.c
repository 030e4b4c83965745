/* kernels/q8_panels_avx2.c — Q8_0 panels (layout in kernels.h) times prepared int16
 * activation blocks with AVX2, for any number of activation rows: the AVX-512 kernel's
 * scheme (q8_panels_avx512.c) on 8 lanes, for CPUs without AVX-512.
 *
 * A panel's pair p of a block is 32 bytes, 2 for each of its 16 rows; its first 16 bytes
 * (rows 0..7) and its last 16 (rows 8..15) each widen to one vector of 8 int16 pairs,
 * and each activation row's pair p is broadcast against it (vpmaddwd: 16 products an
 * instruction, exact in int32). Per block and activation row: one conversion, one
 * product and one FMA for 8 outputs,
 *     acc = fma((float)S, dx * dw, acc)
 * with S the block's exact dot product, so each output has the bits of every other
 * Q8_0 path (kernels.h).
 *
 * At one activation row (decode) both halves of the panel go in one pass, so the
 * weights stream from memory as one sequential read; with more rows the panel is read
 * in two passes of 8 rows each (16 ymm registers), the second from cache. On the stored
 * layout's AVX2 GEMV (gemv_avx2.c: 8 rows side by side, a reduction and a gather of
 * scales per block) this Zen 3 streamed 576 x 576 matrices at 54 % of a plain read's
 * rate on one thread. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "panels_avx2.h"

#define AI static inline __attribute__((always_inline))
#define PAIRS (CINFER_KERNEL_Q8_BLOCK / 2)
#define SCALES_BYTES (PANEL * 2)
#define TILE_ROWS 4 /* activation rows per pass over a panel's half */
/* How far ahead of its reads a batch-1 pass prefetches. 1 KB on this Zen 3 (a 2-vCPU
 * guest): bench_matmul 1 184320 576 paired 576 read 86-96 % of the plain read's rate
 * at 1 KB, 83-85 % at 2 KB, 74-84 % at 4 KB (the AVX-512 kernel's distance), 77-79 % at
 * 640-768 bytes (three interleaved runs each; two threads 80-88 % against 78-79 %). */
#define PREFETCH_BYTES 1024

/* acc += the pair products of the widened pairs w and the activation pair at x,
 * broadcast to every lane. */
AI __m256i dot_pair(__m256i acc, __m256i w, const int16_t *x)
{
    int32_t pair;
    memcpy(&pair, x, sizeof pair);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_set1_epi32(pair)));
}

/* 16 int8 at p, widened to int16 */
AI __m256i widen(const uint8_t *p)
{
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* One activation row against the whole panel: both halves, two chains each. */
static void panel_row1(const struct cinfer_kernel_xblock *xq, int blocks, const uint8_t *pg, float *y, __m256i mask_lo,
                       __m256i mask_hi)
{
    __m256 acc_lo = _mm256_setzero_ps(), acc_hi = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES;
        const int16_t *x = xq[b].q;
        for (int off = 0; off < CINFER_KERNEL_PANEL_BLOCK_BYTES; off += 64)
            _mm_prefetch((const char *)pb + PREFETCH_BYTES + off, _MM_HINT_T0);
        __m256i lo0 = _mm256_setzero_si256(), lo1 = lo0, hi0 = lo0, hi1 = lo0;
        UNROLL for (int p = 0; p < PAIRS; p += 2) {
            const uint8_t *w = pb + SCALES_BYTES + 32 * p;
            lo0 = dot_pair(lo0, widen(w), x + 2 * p);
            hi0 = dot_pair(hi0, widen(w + 16), x + 2 * p);
            lo1 = dot_pair(lo1, widen(w + 32), x + 2 * p + 2);
            hi1 = dot_pair(hi1, widen(w + 48), x + 2 * p + 2);
        }
        __m256 dx = _mm256_set1_ps(xq[b].d);
        acc_lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(lo0, lo1)), _mm256_mul_ps(dx, half8(pb)), acc_lo);
        acc_hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(hi0, hi1)), _mm256_mul_ps(dx, half8(pb + 16)),
                                 acc_hi);
    }
    store8_masked(y, mask_lo, acc_lo);
    store8_masked(y + HALF_ROWS, mask_hi, acc_hi);
}

/* R activation rows against the panel's rows 8 half .. 8 half + 7. */
AI void panel_half(const struct cinfer_kernel_xblock *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                   __m256i mask, int half, const int R)
{
    __m256 acc[TILE_ROWS];
    UNROLL for (int i = 0; i < R; i++)
        acc[i] = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES;
        __m256i sums[TILE_ROWS];
        UNROLL for (int i = 0; i < R; i++)
            sums[i] = _mm256_setzero_si256();
        for (int p = 0; p < PAIRS; p++) {
            __m256i w = widen(pb + SCALES_BYTES + 32 * p + 16 * half);
            UNROLL for (int i = 0; i < R; i++)
                sums[i] = dot_pair(sums[i], w, xq[(size_t)i * blocks + b].q + 2 * p);
        }
        __m256 dw = half8(pb + 16 * half);
        UNROLL for (int i = 0; i < R; i++) {
            __m256 dx = _mm256_set1_ps(xq[(size_t)i * blocks + b].d);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i]), _mm256_mul_ps(dx, dw), acc[i]);
        }
    }
    UNROLL for (int i = 0; i < R; i++)
        store8_masked(y + (size_t)i * ldy + HALF_ROWS * half, mask, acc[i]);
}

typedef void (*half_fn)(const struct cinfer_kernel_xblock *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                        __m256i mask, int half);
#define HALF_FN(R)                                                                                                    \
    static void rows##R(const struct cinfer_kernel_xblock *xq, int blocks, const uint8_t *pg, float *y, int ldy,    \
                        __m256i mask, int half)                                                                       \
    {                                                                                                                 \
        panel_half(xq, blocks, pg, y, ldy, mask, half, R);                                                            \
    }
HALF_FN(1)
HALF_FN(2)
HALF_FN(3)
HALF_FN(4)

void cinfer_q8_panels_avx2(const void *x_prepared, int n, int k, const void *panels, int j0, int j1, float *y, int ldy)
{
    static const half_fn fns[] = {rows1, rows2, rows3, rows4};
    if (j1 <= j0 || n < 1)
        return;
    const struct cinfer_kernel_xblock *xq = x_prepared;
    int blocks = k / CINFER_KERNEL_Q8_BLOCK;
    size_t panel_bytes = (size_t)blocks * CINFER_KERNEL_PANEL_BLOCK_BYTES;
    for (int i = 0; i < n; i += TILE_ROWS) {
        int rows = n - i < TILE_ROWS ? n - i : TILE_ROWS;
        const struct cinfer_kernel_xblock *xi = xq + (size_t)i * blocks;
        for (int g = j0 / PANEL; g * PANEL < j1; g++) {
            const uint8_t *pg = (const uint8_t *)panels + (size_t)g * panel_bytes;
            float *yg = y + (size_t)i * ldy + (size_t)g * PANEL;
            unsigned asked = cinfer_panel_rows_asked(g, j0, j1);
            if (rows == 1) {
                panel_row1(xi, blocks, pg, yg, half_mask(asked, 0), half_mask(asked, 1));
                continue;
            }
            for (int half = 0; half < 2; half++) {
                if ((asked >> (HALF_ROWS * half)) & 0xFFu)
                    fns[rows - 1](xi, blocks, pg, yg, ldy, half_mask(asked, half), half);
            }
        }
    }
}
