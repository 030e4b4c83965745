/* kernels/q8_panels_avx512.c — Q8_0 panels (layout in kernels.h) times prepared int16
 * activation blocks with AVX-512, for any number of activation rows.
 *
 * A vector's 16 lanes are a panel's 16 weight rows. Per block and value pair p, the
 * panel's 32 bytes of pair p widen to one vector of 16 int16 pairs, and each activation
 * row's pair p is broadcast against it (vpdpwssd with an embedded broadcast: 32
 * products an instruction). Per block, each activation row then costs one conversion,
 * one product and one FMA for 16 outputs:
 *     acc = fma((float)S, dx * dw, acc)
 * with S the block's exact dot product, so each output has the bits of every other
 * Q8_0 path (kernels.h).
 *
 * Why this layout (docs/benchmarks.md): at batch 1 the weights stream from memory as one
 * sequential read (the stored layout's GEMV walks 8 rows side by side: 8 streams), with
 * no per-row reduction; in a batch, no activation transpose. Measured against the
 * stored-layout kernels on this machine's Zen 4: the GEMV streamed at 92-98% of a
 * plain read's rate against 84-89%, and the tile ran 1.04-1.26x faster at 32-512 rows,
 * 1.6-1.9x at 8. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "panels_avx512.h"
#include "weight_load_avx512.h"

#define AI static inline __attribute__((always_inline))
#define VNNI_ATTR __attribute__((target("avx512vnni")))
#define PAIRS (CINFER_KERNEL_Q8_BLOCK / 2)
#define SCALES_BYTES (PANEL * 2)

/* acc += the pair products of the panel's widened pair w and the activation pair at x
 * broadcast to every lane; compilers emit a separate broadcast for set1 of a load. */
AI VNNI_ATTR __m512i dot_vnni(__m512i acc, __m512i w, const int16_t *x)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)x));
    return acc;
}

AI __m512i dot_madd(__m512i acc, __m512i w, const int16_t *x)
{
    int32_t pair;
    memcpy(&pair, x, sizeof pair);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w, _mm512_set1_epi32(pair)));
}

/* y (R rows, ldy)[lanes of mask] for activation rows xq (R rows of `blocks` blocks)
 * against panel pg. CHAINS sums per row for each block (pair p goes to chain p %
 * CHAINS): with one or two rows, one chain would wait on the dot instruction's
 * latency 16 times a block. R, CHAINS and DOT are constants after inlining, so the
 * accumulators stay in registers. */
#define PANEL_FN(name, ATTR, R, CHAINS, DOT)                                                                           \
    AI ATTR void name(const struct cinfer_kernel_xblock *xq, int blocks, const uint8_t *pg, float *y, int ldy,         \
                      __mmask16 mask)                                                                                  \
    {                                                                                                                  \
        __m512 acc[R];                                                                                                 \
        UNROLL for (int i = 0; i < R; i++)                                                                             \
            acc[i] = _mm512_setzero_ps();                                                                              \
        for (int b = 0; b < blocks; b++) {                                                                             \
            const uint8_t *pb = pg + (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES;                                      \
            __m512i sums[R][CHAINS];                                                                                   \
            UNROLL for (int i = 0; i < R; i++)                                                                         \
                for (int c = 0; c < CHAINS; c++)                                                                       \
                    sums[i][c] = _mm512_setzero_si512();                                                               \
            for (int p0 = 0; p0 < PAIRS; p0 += CHAINS) {                                                               \
                UNROLL for (int c = 0; c < CHAINS; c++) {                                                              \
                    int p = p0 + c;                                                                                    \
                    __m512i w = _mm512_cvtepi8_epi16(                                                                  \
                        _mm256_loadu_si256((const __m256i *)(pb + SCALES_BYTES + 32 * p)));                            \
                    UNROLL for (int i = 0; i < R; i++)                                                                 \
                        sums[i][c] = DOT(sums[i][c], w, xq[(size_t)i * blocks + b].q + 2 * p);                         \
                }                                                                                                      \
            }                                                                                                          \
            __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pb));                                      \
            UNROLL for (int i = 0; i < R; i++) {                                                                       \
                __m512i s = sums[i][0];                                                                                \
                for (int c = 1; c < CHAINS; c++)                                                                       \
                    s = _mm512_add_epi32(s, sums[i][c]);                                                               \
                __m512 dx = _mm512_set1_ps(xq[(size_t)i * blocks + b].d);                                              \
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dx, dw), acc[i]);                        \
            }                                                                                                          \
        }                                                                                                              \
        UNROLL for (int i = 0; i < R; i++)                                                                             \
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, mask, acc[i]);                                                  \
    }

/* Every activation-row count a pass can have: TILE_ROWS, the GEMV's 1 and 2 (four
 * chains between them), and the tails 3 .. 7 of a batch. */
#define PANEL_FNS(suffix, ATTR, DOT)                                                                                   \
    PANEL_FN(rows1_##suffix, ATTR, 1, 4, DOT)                                                                          \
    PANEL_FN(rows2_##suffix, ATTR, 2, 2, DOT)                                                                          \
    PANEL_FN(rows3_##suffix, ATTR, 3, 1, DOT)                                                                          \
    PANEL_FN(rows4_##suffix, ATTR, 4, 1, DOT)                                                                          \
    PANEL_FN(rows5_##suffix, ATTR, 5, 1, DOT)                                                                          \
    PANEL_FN(rows6_##suffix, ATTR, 6, 1, DOT)                                                                          \
    PANEL_FN(rows7_##suffix, ATTR, 7, 1, DOT)                                                                          \
    PANEL_FN(rows8_##suffix, ATTR, 8, 1, DOT)                                                                          \
    /* Activation rows [0, n) against panels covering rows [j0, j1): TILE_ROWS rows at a time over each panel          \
     * of the range (the rows' blocks stay in L1, the panels in L2). */                                                \
    static ATTR void panels_##suffix(const struct cinfer_kernel_xblock *xq, int n, int blocks,                         \
                                     const uint8_t *panels, int j0, int j1, float *y, int ldy)                         \
    {                                                                                                                  \
        size_t panel_bytes = (size_t)blocks * CINFER_KERNEL_PANEL_BLOCK_BYTES;                                         \
        for (int i = 0; i < n; i += TILE_ROWS) {                                                                       \
            int rows = n - i < TILE_ROWS ? n - i : TILE_ROWS;                                                          \
            const struct cinfer_kernel_xblock *xi = xq + (size_t)i * blocks;                                           \
            for (int g = j0 / PANEL; g * PANEL < j1; g++) {                                                            \
                const uint8_t *pg = panels + (size_t)g * panel_bytes;                                                  \
                float *yg = y + (size_t)i * ldy + (size_t)g * PANEL;                                                   \
                __mmask16 mask = panel_rows_mask(g, j0, j1);                                                           \
                switch (rows) {                                                                                        \
                case 1: rows1_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                case 2: rows2_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                case 3: rows3_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                case 4: rows4_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                case 5: rows5_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                case 6: rows6_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                case 7: rows7_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                          \
                default: rows8_##suffix(xi, blocks, pg, yg, ldy, mask); break;                                         \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

PANEL_FNS(vnni, VNNI_ATTR, dot_vnni)
PANEL_FNS(madd, , dot_madd)

void cinfer_q8_panels_avx512(const void *x_prepared, int n, int k, const void *panels, int j0, int j1, float *y,
                             int ldy)
{
    if (j1 <= j0 || n < 1)
        return;
    int blocks = k / CINFER_KERNEL_Q8_BLOCK;
    if (has_vnni())
        panels_vnni(x_prepared, n, blocks, panels, j0, j1, y, ldy);
    else
        panels_madd(x_prepared, n, blocks, panels, j0, j1, y, ldy);
}
