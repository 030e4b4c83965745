/* kernels/matmul_avx512.c — x (n, k) · Wᵀ with AVX-512 (F, BW, VL).
 *
 * Dot-product form (both operands are k-contiguous): a tile of 4 activation rows by 4
 * weight rows keeps 16 accumulators of 16 lanes; each weight vector is widened to f32
 * once and used by all 4 activation rows. Weight rows are walked in blocks that fit in
 * L2 while every activation row passes over them, so each weight byte comes from
 * memory once per call. Every output element gets the same sequence of FMAs whatever
 * tile it falls in, so a row's result does not depend on the rest of the batch. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "reduce_avx512.h"
#include "weight_load_avx512.h"

#define AI static inline __attribute__((always_inline))
#define TILE_M 4 /* activation rows per tile */
#define TILE_N 4 /* weight rows per tile */
#define LANES 16
#define WEIGHT_BLOCK_BYTES (256 * 1024) /* weight rows kept in L2 while x streams past */

/* y (mr, ldy)[0:nr] = the sums of the tile's accumulators. Full 4 x 4 tiles go through
 * reduce8, two activation rows at a time (about 3 vector instructions per sum instead
 * of 8); edge tiles use _mm512_reduce_add_ps. Both follow the same tree as the GEMV's
 * reduce8, so every path gives the same bits. */
#define STORE_TILE_SUMS(acc, mr, nr, y, ldy)                                                   \
    do {                                                                                       \
        if ((mr) == TILE_M && (nr) == TILE_N) {                                                \
            for (int i_ = 0; i_ < TILE_M; i_ += 2) {                                           \
                __m512 group_[8] = {acc[i_][0],     acc[i_][1],     acc[i_][2],     acc[i_][3], \
                                    acc[i_ + 1][0], acc[i_ + 1][1], acc[i_ + 1][2], acc[i_ + 1][3]}; \
                __m256 sums_ = reduce8(group_);                                                \
                _mm_storeu_ps((y) + (size_t)i_ * (ldy), _mm256_castps256_ps128(sums_));        \
                _mm_storeu_ps((y) + (size_t)(i_ + 1) * (ldy), _mm256_extractf128_ps(sums_, 1)); \
            }                                                                                  \
        } else {                                                                               \
            for (int i_ = 0; i_ < (mr); i_++)                                                  \
                for (int j_ = 0; j_ < (nr); j_++)                                              \
                    (y)[(size_t)i_ * (ldy) + j_] = _mm512_reduce_add_ps(acc[i_][j_]);          \
        }                                                                                      \
    } while (0)

/* Which weights a tile prefetches. The first pass of activation rows over a weight
 * block reads the block from memory: it prefetches the next tile's rows into L1 (a
 * short row ends before the hardware prefetcher has ramped up). The later passes find
 * the block in L2 and share out the next block among them so that its first pass finds
 * it there too: every tile of every later pass prefetches the lines of the same tile
 * in the next block at one k-step in (passes - 1), each pass at other steps. Spread so,
 * the requests reach memory at an even pace while the tiles compute. Giving each tile
 * the whole of its counterpart in one pass instead (every (passes - 1)th tile) sends
 * them in bursts, faster than memory serves them: n = 32, f32, 2 threads, weights from
 * memory (`bench_matmul 2 115200 576 paired ROWS 6 32`), 3072-row matrices ran at
 * 184-185 GFLOP/s that way and 190-200 spread; 28800-row ones at 183-190 and 202-205
 * (docs/benchmarks.md). */
#define PREFETCH_NEXT_TILE 1
#define PREFETCH_NEXT_BLOCK 2

struct prefetch_plan {
    int kind;   /* 0, PREFETCH_NEXT_TILE (every k-step) or PREFETCH_NEXT_BLOCK: */
    int phase;  /* at k-steps phase, phase + period, ... */
    int period;
};

/* Over passes 1 .. n_passes - 1 a tile's phase takes every value below the period
 * once, so each line of the next block is prefetched exactly once. */
AI struct prefetch_plan prefetch_plan(int pass, int n_passes, int tile_index)
{
    if (pass == 0)
        return (struct prefetch_plan){PREFETCH_NEXT_TILE, 0, 1};
    int period = n_passes - 1;
    return (struct prefetch_plan){PREFETCH_NEXT_BLOCK, (pass - 1 + tile_index) % period, period};
}

static const struct prefetch_plan NO_PREFETCH = {0, 0, 1};

/* Whether the tile prefetches at this k-step; *countdown starts at the plan's phase. */
AI int prefetch_now(struct prefetch_plan plan, int *countdown)
{
    int now = plan.kind == PREFETCH_NEXT_TILE || (plan.kind == PREFETCH_NEXT_BLOCK && *countdown == 0);
    *countdown = *countdown == 0 ? plan.period - 1 : *countdown - 1;
    return now;
}

/* at: a place in one of the tile's weight rows. */
AI void prefetch_weights(const uint8_t *at, int kind, size_t w_row_bytes, size_t block_bytes)
{
    if (kind == PREFETCH_NEXT_TILE)
        _mm_prefetch((const char *)at + TILE_N * w_row_bytes, _MM_HINT_T0);
    else if (kind == PREFETCH_NEXT_BLOCK)
        _mm_prefetch((const char *)at + block_bytes, _MM_HINT_T1);
}

/* y (mr, ldy)[0:nr] = x (mr, k) · W (nr rows)ᵀ; mr, nr and wtype are constants after
 * inlining, so the accumulators live in registers. */
AI void tile(const float *x, int k, int mr, const uint8_t *w, size_t w_row_bytes, int nr,
             enum cinfer_kernel_wtype wtype, struct prefetch_plan prefetch, size_t block_bytes, float *y, int ldy)
{
    __m512 acc[TILE_M][TILE_N];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = _mm512_setzero_ps();
    int kk = 0, countdown = prefetch.phase;
    for (; kk + LANES <= k; kk += LANES) {
        __m512 wv[TILE_N];
        int prefetching = prefetch_now(prefetch, &countdown);
        for (int j = 0; j < nr; j++) {
            const uint8_t *wrow = w + (size_t)j * w_row_bytes;
            if (prefetching)
                prefetch_weights(wrow + (size_t)kk * (wtype == CINFER_KW_F32 ? 4 : 2), prefetch.kind, w_row_bytes,
                                 block_bytes);
            wv[j] = load_weights(wrow, kk, wtype);
        }
        for (int i = 0; i < mr; i++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)i * k + kk);
            for (int j = 0; j < nr; j++)
                acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (kk < k) {
        __mmask16 m = (__mmask16)((1u << (k - kk)) - 1u);
        __m512 wv[TILE_N];
        for (int j = 0; j < nr; j++)
            wv[j] = load_weights_tail(w + (size_t)j * w_row_bytes, kk, m, wtype);
        for (int i = 0; i < mr; i++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)i * k + kk);
            for (int j = 0; j < nr; j++)
                acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    STORE_TILE_SUMS(acc, mr, nr, y, ldy);
}

/* All activation rows against weight rows [j0, j1) of one weight type. */
AI void matmul_typed(const float *x, int n, int k, const uint8_t *w, enum cinfer_kernel_wtype wtype,
                     size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    int block_rows = (int)(WEIGHT_BLOCK_BYTES / (w_row_bytes ? w_row_bytes : 1));
    block_rows = block_rows < TILE_N ? TILE_N : block_rows - block_rows % TILE_N;
    int n_passes = (n + TILE_M - 1) / TILE_M;
    size_t block_bytes = (size_t)block_rows * w_row_bytes;
    for (int jb = j0; jb < j1; jb += block_rows) {
        int jb_end = jb + block_rows < j1 ? jb + block_rows : j1;
        for (int i = 0; i < n; i += TILE_M) {
            int mr = n - i < TILE_M ? n - i : TILE_M;
            const float *xi = x + (size_t)i * k;
            float *yi = y + (size_t)i * ldy;
            int j = jb;
            for (; j + TILE_N <= jb_end; j += TILE_N) {
                const uint8_t *wj = w + (size_t)j * w_row_bytes;
                struct prefetch_plan pf = prefetch_plan(i / TILE_M, n_passes, (j - jb) / TILE_N);
                switch (mr) {
                case 4: tile(xi, k, 4, wj, w_row_bytes, TILE_N, wtype, pf, block_bytes, yi + j, ldy); break;
                case 3: tile(xi, k, 3, wj, w_row_bytes, TILE_N, wtype, pf, block_bytes, yi + j, ldy); break;
                case 2: tile(xi, k, 2, wj, w_row_bytes, TILE_N, wtype, pf, block_bytes, yi + j, ldy); break;
                default: tile(xi, k, 1, wj, w_row_bytes, TILE_N, wtype, pf, block_bytes, yi + j, ldy); break;
                }
            }
            for (; j < jb_end; j++) {
                const uint8_t *wj = w + (size_t)j * w_row_bytes;
                switch (mr) {
                case 4: tile(xi, k, 4, wj, w_row_bytes, 1, wtype, NO_PREFETCH, 0, yi + j, ldy); break;
                case 3: tile(xi, k, 3, wj, w_row_bytes, 1, wtype, NO_PREFETCH, 0, yi + j, ldy); break;
                case 2: tile(xi, k, 2, wj, w_row_bytes, 1, wtype, NO_PREFETCH, 0, yi + j, ldy); break;
                default: tile(xi, k, 1, wj, w_row_bytes, 1, wtype, NO_PREFETCH, 0, yi + j, ldy); break;
                }
            }
        }
    }
}

/* BF16 weights x activations rounded to bf16 (x_prepared) with vdpbf16ps, on CPUs
 * with AVX512_BF16: 32 values and twice the products of an FMA per step, no widening. Each output element gets one 16-lane
 * accumulator fed in k order by bf16_dot_step, the masked tail, then
 * _mm512_reduce_add_ps; the decode GEMV (gemv_avx512.c) does exactly the same. */
static inline __attribute__((always_inline)) BF16_ATTR void tile_bf16(const uint16_t *x, int k, int mr,
                                                                     const uint8_t *w, size_t w_row_bytes, int nr,
                                                                     struct prefetch_plan prefetch,
                                                                     size_t block_bytes, float *y, int ldy)
{
    __m512 acc[TILE_M][TILE_N];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = _mm512_setzero_ps();
    int kk = 0, countdown = prefetch.phase;
    for (; kk + BF16_PAIRS <= k; kk += BF16_PAIRS) {
        __m512i wv[TILE_N];
        int prefetching = prefetch_now(prefetch, &countdown);
        for (int j = 0; j < nr; j++) {
            const uint8_t *wrow = w + (size_t)j * w_row_bytes + 2 * (size_t)kk;
            if (prefetching)
                prefetch_weights(wrow, prefetch.kind, w_row_bytes, block_bytes);
            wv[j] = _mm512_loadu_si512(wrow);
        }
        for (int i = 0; i < mr; i++) {
            __m512i xv = _mm512_loadu_si512(x + (size_t)i * k + kk);
            for (int j = 0; j < nr; j++)
                acc[i][j] = bf16_dot_step(acc[i][j], xv, wv[j]);
        }
    }
    if (kk < k) {
        __mmask32 m = (__mmask32)((1u << (k - kk)) - 1u);
        __m512i wv[TILE_N];
        for (int j = 0; j < nr; j++)
            wv[j] = _mm512_maskz_loadu_epi16(m, w + (size_t)j * w_row_bytes + 2 * (size_t)kk);
        for (int i = 0; i < mr; i++) {
            __m512i xv = _mm512_maskz_loadu_epi16(m, x + (size_t)i * k + kk);
            for (int j = 0; j < nr; j++)
                acc[i][j] = bf16_dot_step(acc[i][j], xv, wv[j]);
        }
    }
    STORE_TILE_SUMS(acc, mr, nr, y, ldy);
}

static inline __attribute__((always_inline)) BF16_ATTR void tile_bf16_rows(const uint16_t *x, int k, int mr,
                                                                          const uint8_t *w, size_t w_row_bytes,
                                                                          int nr, struct prefetch_plan prefetch,
                                                                          size_t block_bytes,
                                                                          float *y, int ldy)
{
    switch (mr) {
    case 4: tile_bf16(x, k, 4, w, w_row_bytes, nr, prefetch, block_bytes, y, ldy); break;
    case 3: tile_bf16(x, k, 3, w, w_row_bytes, nr, prefetch, block_bytes, y, ldy); break;
    case 2: tile_bf16(x, k, 2, w, w_row_bytes, nr, prefetch, block_bytes, y, ldy); break;
    default: tile_bf16(x, k, 1, w, w_row_bytes, nr, prefetch, block_bytes, y, ldy); break;
    }
}

static BF16_ATTR void matmul_bf16_dot(const uint16_t *x, int n, int k, const uint8_t *w, size_t w_row_bytes, int j0,
                                      int j1, float *y, int ldy)
{
    int block_rows = (int)(WEIGHT_BLOCK_BYTES / (w_row_bytes ? w_row_bytes : 1));
    block_rows = block_rows < TILE_N ? TILE_N : block_rows - block_rows % TILE_N;
    int n_passes = (n + TILE_M - 1) / TILE_M;
    size_t block_bytes = (size_t)block_rows * w_row_bytes;
    for (int jb = j0; jb < j1; jb += block_rows) {
        int jb_end = jb + block_rows < j1 ? jb + block_rows : j1;
        for (int i = 0; i < n; i += TILE_M) {
            int mr = n - i < TILE_M ? n - i : TILE_M;
            const uint16_t *xi = x + (size_t)i * k;
            float *yi = y + (size_t)i * ldy;
            int j = jb;
            for (; j + TILE_N <= jb_end; j += TILE_N)
                tile_bf16_rows(xi, k, mr, w + (size_t)j * w_row_bytes, w_row_bytes, TILE_N,
                               prefetch_plan(i / TILE_M, n_passes, (j - jb) / TILE_N), block_bytes, yi + j, ldy);
            for (; j < jb_end; j++)
                tile_bf16_rows(xi, k, mr, w + (size_t)j * w_row_bytes, w_row_bytes, 1, NO_PREFETCH, 0, yi + j, ldy);
        }
    }
}

void cinfer_matmul_avx512(const float *x, const void *x_prepared, int n, int k, const void *w,
                          enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    switch (wtype) {
    case CINFER_KW_F32: matmul_typed(x, n, k, w, CINFER_KW_F32, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_F16: matmul_typed(x, n, k, w, CINFER_KW_F16, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_BF16:
        if (has_bf16_dot() && x_prepared)
            matmul_bf16_dot(x_prepared, n, k, w, w_row_bytes, j0, j1, y, ldy);
        else
            matmul_typed(x, n, k, w, CINFER_KW_BF16, w_row_bytes, j0, j1, y, ldy);
        break;
    case CINFER_KW_Q8_0: cinfer_q8_tiles_avx512(x_prepared, n, k, w, w_row_bytes, j0, j1, y, ldy); break;
    case CINFER_KW_Q8_0_PANELS: /* dispatch.c sends panels to their own kernels */
    case CINFER_KW_F16_PANELS:
    default: break; /* block-quantized types: quant_*.c */
    }
}
