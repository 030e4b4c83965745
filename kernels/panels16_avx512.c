/* kernels/panels16_avx512.c — F16 and BF16 weights in panels of 16 rows (layouts in
 * kernels.h) times activations with AVX-512, for any number of activation rows.
 *
 * A vector's 16 lanes are a panel's 16 weight rows, and each activation value is
 * broadcast against them: no horizontal sum per row, and at batch 1 the weights stream
 * as one sequential read. Each output sums in two chains (values, or for vdpbf16ps
 * value pairs, of even and of odd index), added at the end, whatever n is: so a row's
 * outputs have the same bits alone and in any batch, and two chains keep a GEMV's FMAs
 * from waiting on each other.
 *   F16: per value, 16 rows' halves widened (vcvtph2ps), one FMA per activation row.
 *   BF16, x rounded to bf16 (x_prepared, CPUs with AVX512_BF16): per value pair, one
 *     vdpbf16ps per activation row on the 64 stored bytes, no widening at all.
 *   BF16, x unrounded (exact_x, or no AVX512_BF16): per value pair, the even and odd
 *     values widened by a shift and a mask, two FMAs per activation row.
 * Why this layout (docs/benchmarks.md): on the SmolLM-shaped model's matrices, 2
 * threads, weights from memory, paired with a plain read, the F16 GEMV streamed at
 * 96-97% of the read's rate against 83-87% for the stored layout's, BF16 98-100%
 * against 92-95%. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "panels_avx512.h"
#include "weight_load_avx512.h"

#define AI static inline __attribute__((always_inline))
/* Passes of 4 or more rows are bound by their FMAs, and the hardware prefetcher then
 * no longer keeps the weights coming: (49152, 576) weights from memory, 8 rows, 2
 * threads, F16 114 GFLOP/s and BF16 188 without this, 184-221 and 259-328 with it
 * 4 KB ahead (2 KB: 180-191, 257-269; the stored layout's tile 192 and 322). Passes
 * of 1-3 rows stream at the read's rate without it. */
#define PREFETCH_AHEAD 4096
#define PREFETCH_ROWS 4

/* R activation rows (x: f32, ld k; xb: bf16, ld k) against one panel pg, into the
 * lanes of mask of y (R rows, ldy). */
#define ROWS_BEGIN(R)                                                                                                 \
    __m512 even[R], odd[R];                                                                                           \
    UNROLL for (int i = 0; i < R; i++) even[i] = odd[i] = _mm512_setzero_ps();
#define ROWS_END(R)                                                                                                   \
    UNROLL for (int i = 0; i < R; i++) _mm512_mask_storeu_ps(y + (size_t)i * ldy, mask, _mm512_add_ps(even[i], odd[i]));

#define F16_ROWS_FN(R)                                                                                                \
    AI void f16_rows##R(const float *x, const uint16_t *xb, int k, const uint8_t *pg, float *y, int ldy,             \
                        __mmask16 mask)                                                                               \
    {                                                                                                                 \
        (void)xb;                                                                                                     \
        ROWS_BEGIN(R)                                                                                                 \
        int q = 0;                                                                                                    \
        for (; q + 1 < k; q += 2) {                                                                                   \
            if (R >= PREFETCH_ROWS)                                                                                   \
                _mm_prefetch((const char *)pg + 32 * (size_t)q + PREFETCH_AHEAD, _MM_HINT_T0);                      \
            __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pg + 32 * (size_t)q)));                \
            __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pg + 32 * (size_t)q + 32)));           \
            UNROLL for (int i = 0; i < R; i++) {                                                                      \
                even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(size_t)i * k + q]), even[i]);                        \
                odd[i] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[(size_t)i * k + q + 1]), odd[i]);                      \
            }                                                                                                         \
        }                                                                                                             \
        if (q < k) {                                                                                                  \
            __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pg + 32 * (size_t)q)));                \
            UNROLL for (int i = 0; i < R; i++)                                                                        \
                even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(size_t)i * k + q]), even[i]);                       \
        }                                                                                                             \
        ROWS_END(R)                                                                                                   \
    }

#define BF16_WIDE_ROWS_FN(R)                                                                                          \
    AI void bf16w_rows##R(const float *x, const uint16_t *xb, int k, const uint8_t *pg, float *y, int ldy,          \
                          __mmask16 mask)                                                                             \
    {                                                                                                                 \
        (void)xb;                                                                                                     \
        ROWS_BEGIN(R)                                                                                                 \
        const __m512i high_halves = _mm512_set1_epi32((int)0xffff0000u);                                              \
        for (int p = 0; p < k / 2; p++) {                                                                             \
            if (R >= PREFETCH_ROWS)                                                                                   \
                _mm_prefetch((const char *)pg + 64 * (size_t)p + PREFETCH_AHEAD, _MM_HINT_T0);                      \
            __m512i v = _mm512_loadu_si512(pg + 64 * (size_t)p);                                                      \
            __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));                                                \
            __m512 w1 = _mm512_castsi512_ps(_mm512_and_si512(v, high_halves));                                        \
            UNROLL for (int i = 0; i < R; i++) {                                                                      \
                even[i] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[(size_t)i * k + 2 * p]), even[i]);                    \
                odd[i] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[(size_t)i * k + 2 * p + 1]), odd[i]);                  \
            }                                                                                                         \
        }                                                                                                             \
        ROWS_END(R)                                                                                                   \
    }

/* x's value pair p of row i as one int32, for a broadcast */
AI int32_t bf16_pair(const uint16_t *xb, size_t at)
{
    int32_t pair;
    memcpy(&pair, xb + at, sizeof pair);
    return pair;
}

#define BF16_DOT_ROWS_FN(R)                                                                                           \
    AI BF16_ATTR void bf16d_rows##R(const float *x, const uint16_t *xb, int k, const uint8_t *pg, float *y,         \
                                    int ldy, __mmask16 mask)                                                          \
    {                                                                                                                 \
        (void)x;                                                                                                      \
        ROWS_BEGIN(R)                                                                                                 \
        int p = 0, pairs = k / 2;                                                                                     \
        for (; p + 1 < pairs; p += 2) {                                                                               \
            if (R >= PREFETCH_ROWS) {                                                                                 \
                _mm_prefetch((const char *)pg + 64 * (size_t)p + PREFETCH_AHEAD, _MM_HINT_T0);                      \
                _mm_prefetch((const char *)pg + 64 * (size_t)p + 64 + PREFETCH_AHEAD, _MM_HINT_T0);                 \
            }                                                                                                         \
            __m512i v0 = _mm512_loadu_si512(pg + 64 * (size_t)p), v1 = _mm512_loadu_si512(pg + 64 * (size_t)p + 64); \
            UNROLL for (int i = 0; i < R; i++) {                                                                      \
                even[i] = bf16_dot_step(even[i], _mm512_set1_epi32(bf16_pair(xb, (size_t)i * k + 2 * p)), v0);       \
                odd[i] = bf16_dot_step(odd[i], _mm512_set1_epi32(bf16_pair(xb, (size_t)i * k + 2 * p + 2)), v1);     \
            }                                                                                                         \
        }                                                                                                             \
        if (p < pairs) {                                                                                              \
            __m512i v0 = _mm512_loadu_si512(pg + 64 * (size_t)p);                                                     \
            UNROLL for (int i = 0; i < R; i++)                                                                        \
                even[i] = bf16_dot_step(even[i], _mm512_set1_epi32(bf16_pair(xb, (size_t)i * k + 2 * p)), v0);       \
        }                                                                                                             \
        ROWS_END(R)                                                                                                   \
    }

/* Every pass size 1 .. TILE_ROWS of one kind, and the loop over activation rows and
 * panels that picks them: TILE_ROWS rows at a time over each panel of the range (the
 * rows stay in L1, the panels in L2). */
#define PANELS_FN(kind, ATTR, ROWS_FN)                                                                                \
    ROWS_FN(1) ROWS_FN(2) ROWS_FN(3) ROWS_FN(4) ROWS_FN(5) ROWS_FN(6) ROWS_FN(7) ROWS_FN(8)                           \
    static ATTR void kind##_panels(const float *x, const uint16_t *xb, int n, int k, const uint8_t *panels, int j0,  \
                                   int j1, float *y, int ldy)                                                         \
    {                                                                                                                 \
        size_t panel_bytes = (size_t)PANEL * 2 * (size_t)k;                                                           \
        for (int i = 0; i < n; i += TILE_ROWS) {                                                                      \
            int rows = n - i < TILE_ROWS ? n - i : TILE_ROWS;                                                         \
            const float *xi = x ? x + (size_t)i * k : NULL;                                                           \
            const uint16_t *xbi = xb ? xb + (size_t)i * k : NULL;                                                     \
            for (int g = j0 / PANEL; g * PANEL < j1; g++) {                                                           \
                const uint8_t *pg = panels + (size_t)g * panel_bytes;                                                 \
                float *yg = y + (size_t)i * ldy + (size_t)g * PANEL;                                                  \
                __mmask16 mask = panel_rows_mask(g, j0, j1);                                                           \
                switch (rows) {                                                                                       \
                case 1: kind##_rows1(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                case 2: kind##_rows2(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                case 3: kind##_rows3(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                case 4: kind##_rows4(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                case 5: kind##_rows5(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                case 6: kind##_rows6(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                case 7: kind##_rows7(xi, xbi, k, pg, yg, ldy, mask); break;                                           \
                default: kind##_rows8(xi, xbi, k, pg, yg, ldy, mask); break;                                          \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }

PANELS_FN(f16, , F16_ROWS_FN)
PANELS_FN(bf16w, , BF16_WIDE_ROWS_FN)
PANELS_FN(bf16d, BF16_ATTR, BF16_DOT_ROWS_FN)

void cinfer_panels16_avx512(const float *x, const void *x_prepared, int n, int k, const void *panels,
                            enum cinfer_kernel_wtype type, int j0, int j1, float *y, int ldy)
{
    if (j1 <= j0 || n < 1)
        return;
    if (type == CINFER_KW_F16_PANELS)
        f16_panels(x, NULL, n, k, panels, j0, j1, y, ldy);
    else if (x_prepared && has_bf16_dot())
        bf16d_panels(NULL, x_prepared, n, k, panels, j0, j1, y, ldy);
    else
        bf16w_panels(x, NULL, n, k, panels, j0, j1, y, ldy);
}
