/* kernels/q8_avx512.c — Q8_0 weights times int16 activation blocks with AVX-512: the
 * decode GEMV (n <= 2 activation rows) and the batched tile (n >= 3).
 *
 * Every level and path computes each output element the same way (kernels.h):
 *     acc = 0; for each block b: acc = fma((float)S_b, dx_b * dw_b, acc)
 * with S_b the block's exact int32 dot product (|S_b| <= 32 * 32767 * 128 < 2^31), so
 * the order in which the integer products are summed is free and the float steps are
 * one per block. Both paths here produce exactly those bits.
 *
 * GEMV: 8 weight rows in flight; per block, 8 int32 vectors of 16 pair-sums
 * (vpmaddwd) are reduced together to the 8 blocks' sums, then one 8-lane FMA.
 *
 * Tile: lanes are 16 activation rows. The activations of a group of 16 rows are
 * transposed once per call so that one vector holds value pair p of block b for all
 * 16 rows; a weight row's pair p is broadcast against it (vpdpwssd, 32 products per
 * instruction), 8 weight rows at a time. Each block then costs 16 integer dot steps
 * per weight row and one conversion, one product and one FMA for 16 outputs, where a
 * k-in-lanes tile pays a conversion and an FMA per output and block. A group of at
 * most 8 rows (batched decode) uses 8 lanes on 256-bit vectors. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_impl.h"
#include "weight_load_avx512.h"

#define AI static inline __attribute__((always_inline))
#define GEMV_ROWS 8   /* weight rows in flight in the GEMV */
#define GEMV_X_ROWS 2 /* activation rows per GEMV pass */
#define TILE_X 16     /* activation rows per tile: one per lane */
#define TILE_W 12     /* weight rows per tile */
#define PAIRS (CINFER_KERNEL_Q8_BLOCK / 2)
#define PREFETCH_GROUPS 2 /* GEMV: rows ahead / GEMV_ROWS, into L2 (as gemv_avx512.c) */
#define STACK_GROUP_BLOCKS 64 /* transposed activation groups up to this many blocks live on the stack */

AI float weight_scale(const uint8_t *blk)
{
    uint16_t d_bits;
    memcpy(&d_bits, blk, 2);
    return _cvtsh_ss(d_bits);
}

/* 8 vectors of 8 int32 -> their 8 sums in order (exact, so any tree will do). */
AI __m256i reduce8_epi32(const __m256i v[8])
{
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    /* per 128-bit half: [rows 0..3 | rows 4..7], one partial sum per row and half */
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* y (mr, ldy)[0:nr] for activation rows xq (mr rows of blocks) and nr <= 8 weight rows;
 * rows past nr repeat the last one, unstored. 256-bit vectors: on CPUs that split
 * 512-bit operations in two (Zen 4) the block's 8 pair sums and their reduction cost
 * half of what 16-lane vectors would. DOT(xl, xh, wl, wh): 8 int32 sums of 4 products. */
#define Q8_GEMV_FN(name, ATTR, DOT)                                                                              \
    static inline __attribute__((always_inline)) ATTR void name(const struct cinfer_kernel_xblock *xq,          \
                                                                int blocks, int mr, const uint8_t *w,           \
                                                                size_t w_row_bytes, int nr, float *y, int ldy)  \
    {                                                                                                           \
        const uint8_t *rows[GEMV_ROWS];                                                                         \
        for (int j = 0; j < GEMV_ROWS; j++)                                                                     \
            rows[j] = w + (size_t)(j < nr ? j : nr - 1) * w_row_bytes;                                          \
        const size_t ahead = PREFETCH_GROUPS * GEMV_ROWS * w_row_bytes;                                         \
        __m256i row_offsets = _mm256_mullo_epi32(_mm256_min_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),   \
                                                                  _mm256_set1_epi32(nr - 1)),                   \
                                                 _mm256_set1_epi32((int)w_row_bytes));                          \
        __m256 acc[GEMV_X_ROWS];                                                                                \
        for (int i = 0; i < mr; i++)                                                                            \
            acc[i] = _mm256_setzero_ps();                                                                       \
        for (int b = 0; b < blocks; b++) {                                                                      \
            size_t at = (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;                                               \
            __m256i x_lo[GEMV_X_ROWS], x_hi[GEMV_X_ROWS];                                                       \
            float dx[GEMV_X_ROWS];                                                                              \
            for (int i = 0; i < mr; i++) {                                                                      \
                const struct cinfer_kernel_xblock *xb = xq + (size_t)i * blocks + b;                            \
                x_lo[i] = _mm256_loadu_si256((const __m256i *)xb->q);                                           \
                x_hi[i] = _mm256_loadu_si256((const __m256i *)(xb->q + 16));                                    \
                dx[i] = xb->d;                                                                                  \
            }                                                                                                   \
            __m256i sums[GEMV_X_ROWS][GEMV_ROWS];                                                               \
            for (int j = 0; j < GEMV_ROWS; j++) {                                                               \
                const uint8_t *blk = rows[j] + at;                                                              \
                /* 34-byte blocks: one prefetch per block touches every line of a later group */               \
                _mm_prefetch((const char *)blk + ahead, _MM_HINT_T1);                                           \
                __m256i w_lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 2)));               \
                __m256i w_hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 18)));              \
                for (int i = 0; i < mr; i++)                                                                    \
                    sums[i][j] = DOT(x_lo[i], x_hi[i], w_lo, w_hi);                                             \
            }                                                                                                   \
            /* the 8 rows' scales by one gather (8 small stores and a wide load would stall on                   \
             * store forwarding); each 32-bit load's low half is the f16 scale */                              \
            __m256i d_words = _mm256_i32gather_epi32((const int *)(w + at), row_offsets, 1);                     \
            __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(d_words));                                        \
            for (int i = 0; i < mr; i++)                                                                        \
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(sums[i])),                            \
                                         _mm256_mul_ps(_mm256_set1_ps(dx[i]), dw), acc[i]);                     \
        }                                                                                                       \
        for (int i = 0; i < mr; i++)                                                                            \
            _mm256_mask_storeu_ps(y + (size_t)i * ldy, (__mmask8)((1u << nr) - 1u), acc[i]);                    \
    }

#define DOT2_MADD(xl, xh, wl, wh) _mm256_add_epi32(_mm256_madd_epi16((xl), (wl)), _mm256_madd_epi16((xh), (wh)))
#define DOT2_VNNI(xl, xh, wl, wh) _mm256_dpwssd_epi32(_mm256_madd_epi16((xl), (wl)), (xh), (wh))
Q8_GEMV_FN(gemv_group_madd, , DOT2_MADD)
Q8_GEMV_FN(gemv_group_vnni, __attribute__((target("avx512vnni"))), DOT2_VNNI)

#define Q8_GEMV_ROWS_FN(name, ATTR, GROUP)                                                                       \
    static ATTR void name(const struct cinfer_kernel_xblock *xq, int n, int blocks, const uint8_t *w,          \
                          size_t w_row_bytes, int j0, int j1, float *y, int ldy)                               \
    {                                                                                                         \
        for (int j = j0; j < j1; j += GEMV_ROWS) {                                                            \
            int nr = j1 - j < GEMV_ROWS ? j1 - j : GEMV_ROWS;                                                 \
            const uint8_t *wj = w + (size_t)j * w_row_bytes;                                                  \
            int i = 0;                                                                                        \
            for (; i + 2 <= n; i += 2)                                                                        \
                GROUP(xq + (size_t)i * blocks, blocks, 2, wj, w_row_bytes, nr, y + (size_t)i * ldy + j, ldy); \
            if (i < n)                                                                                        \
                GROUP(xq + (size_t)i * blocks, blocks, 1, wj, w_row_bytes, nr, y + (size_t)i * ldy + j, ldy); \
        }                                                                                                     \
    }
Q8_GEMV_ROWS_FN(gemv_rows_madd, , gemv_group_madd)
Q8_GEMV_ROWS_FN(gemv_rows_vnni, __attribute__((target("avx512vnni"))), gemv_group_vnni)

/* Any number of activation rows, two at a time over each group of 8 weight rows. */
static void q8_gemv(const struct cinfer_kernel_xblock *xq, int n, int blocks, const uint8_t *w, size_t w_row_bytes,
                    int j0, int j1, float *y, int ldy)
{
    if (has_vnni())
        gemv_rows_vnni(xq, n, blocks, w, w_row_bytes, j0, j1, y, ldy);
    else
        gemv_rows_madd(xq, n, blocks, w, w_row_bytes, j0, j1, y, ldy);
}

/* Activation rows [i0, i0 + rows) transposed for the tile:
 *   pairs (blocks, PAIRS, lanes): value pair p of block b of row r as one int32
 *   scales (blocks, lanes): the rows' block scales
 * with lanes 16, or 8 (rows <= 8: only the low half of each transposed vector is kept).
 * Rows past `rows` are zero (their outputs are not stored). */
static void transpose_group(const struct cinfer_kernel_xblock *xq, int blocks, int i0, int rows, int lanes,
                            int32_t *pairs, float *scales)
{
    for (int b = 0; b < blocks; b++) {
        /* r[i]: row i's 16 value pairs; a 16 x 16 transpose of 32-bit elements by
         * unpacks and 128-bit shuffles (4 stages of 16) */
        __m512i r[TILE_X], t[TILE_X];
        float *sb = scales + (size_t)b * lanes;
        float row_scales[TILE_X];
        for (int i = 0; i < TILE_X; i++) {
            if (i < rows) {
                const struct cinfer_kernel_xblock *xb = xq + (size_t)(i0 + i) * blocks + b;
                r[i] = _mm512_loadu_si512(xb->q);
                row_scales[i] = xb->d;
            } else {
                r[i] = _mm512_setzero_si512();
                row_scales[i] = 0.0f;
            }
        }
        memcpy(sb, row_scales, sizeof(float) * (size_t)lanes);
        for (int i = 0; i < TILE_X; i += 2) {
            t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        }
        for (int i = 0; i < TILE_X; i += 4) {
            r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
            r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
            r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
            r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
        }
        /* r[4q + c] now holds, per 128-bit chunk h, pair 4h + c of rows 4q .. 4q+3 */
        for (int c = 0; c < 4; c++) {
            t[c] = _mm512_shuffle_i32x4(r[c], r[4 + c], _MM_SHUFFLE(2, 0, 2, 0));      /* chunks 0, 2 */
            t[4 + c] = _mm512_shuffle_i32x4(r[c], r[4 + c], _MM_SHUFFLE(3, 1, 3, 1));  /* chunks 1, 3 */
            t[8 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
            t[12 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
        }
        int32_t *pb = pairs + (size_t)b * PAIRS * lanes;
        for (int c = 0; c < 4; c++) {
            /* pair c: chunk 0 of rows 0-3, 4-7, 8-11, 12-15; pair 4 + c: chunk 1; ... */
            __m512i even_lo = t[c], odd_lo = t[4 + c], even_hi = t[8 + c], odd_hi = t[12 + c];
            __m512i out[4] = {_mm512_shuffle_i32x4(even_lo, even_hi, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_i32x4(odd_lo, odd_hi, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_i32x4(even_lo, even_hi, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm512_shuffle_i32x4(odd_lo, odd_hi, _MM_SHUFFLE(3, 1, 3, 1))};
            for (int h = 0; h < 4; h++) { /* out[h] is pair 4h + c */
                int32_t *dst = pb + (size_t)(4 * h + c) * lanes;
                if (lanes == TILE_X)
                    _mm512_storeu_si512(dst, out[h]);
                else
                    _mm256_storeu_si256((__m256i *)dst, _mm512_castsi512_si256(out[h]));
            }
        }
    }
}

/* Outputs (rows, ldy)[0:nw] of one group of transposed activation rows against nw <= 8
 * weight rows; nw is a constant after inlining, so the 2 x nw accumulators stay in
 * registers. DOT(acc, x, w) adds the pair products of x and w to acc. */
#define Q8_TILE_FN(name, ATTR, DOT)                                                                               \
    static inline __attribute__((always_inline)) ATTR void name(const int32_t *pairs, const float *scales,      \
                                                                int blocks, const uint8_t *w, size_t w_row_bytes, \
                                                                int nw, float *y, int ldy, int rows)            \
    {                                                                                                           \
        __m512 acc[TILE_W];                                                                                     \
        for (int j = 0; j < nw; j++)                                                                            \
            acc[j] = _mm512_setzero_ps();                                                                       \
        for (int b = 0; b < blocks; b++) {                                                                      \
            /* the weight rows' block, widened to int16: pair p of row j is wide[j][p] */                       \
            int32_t wide[TILE_W][PAIRS] __attribute__((aligned(64)));                                           \
            float dw[TILE_W];                                                                                   \
            for (int j = 0; j < nw; j++) {                                                                      \
                const uint8_t *blk = w + (size_t)j * w_row_bytes + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;    \
                _mm512_store_si512(wide[j], _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 2)))); \
                dw[j] = weight_scale(blk);                                                                      \
            }                                                                                                   \
            /* from memory from here on: broadcast loads fold into the dot instruction */                       \
            __asm__ volatile("" ::: "memory");                                                                  \
            const int32_t *pb = pairs + (size_t)b * PAIRS * TILE_X;                                             \
            __m512i sums[TILE_W];                                                                               \
            __m512i xv = _mm512_loadu_si512(pb);                                                                \
            for (int j = 0; j < nw; j++)                                                                        \
                sums[j] = _mm512_madd_epi16(xv, _mm512_set1_epi32(wide[j][0]));                                  \
            for (int p = 1; p < PAIRS; p++) {                                                                   \
                xv = _mm512_loadu_si512(pb + p * TILE_X);                                                       \
                for (int j = 0; j < nw; j++)                                                                    \
                    sums[j] = DOT(sums[j], xv, &wide[j][p]);                                                    \
            }                                                                                                   \
            __m512 dx = _mm512_loadu_ps(scales + (size_t)b * TILE_X);                                           \
            for (int j = 0; j < nw; j++)                                                                        \
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[j]), _mm512_mul_ps(dx, _mm512_set1_ps(dw[j])), \
                                         acc[j]);                                                               \
        }                                                                                                       \
        float out[TILE_W][TILE_X];                                                                              \
        for (int j = 0; j < nw; j++)                                                                            \
            _mm512_storeu_ps(out[j], acc[j]);                                                                   \
        for (int r = 0; r < rows; r++)                                                                          \
            for (int j = 0; j < nw; j++)                                                                        \
                y[(size_t)r * ldy + j] = out[j][r];                                                             \
    }

/* The same for a group of at most 8 activation rows on 256-bit vectors (lanes 8): on
 * CPUs that split 512-bit operations in two (Zen 4) as many products per cycle. */
#define Q8_TILE8_FN(name, ATTR, DOT)                                                                               \
    static inline __attribute__((always_inline)) ATTR void name(const int32_t *pairs, const float *scales,      \
                                                                int blocks, const uint8_t *w, size_t w_row_bytes, \
                                                                int nw, float *y, int ldy, int rows)            \
    {                                                                                                           \
        __m256 acc[TILE_W];                                                                                     \
        for (int j = 0; j < nw; j++)                                                                            \
            acc[j] = _mm256_setzero_ps();                                                                       \
        for (int b = 0; b < blocks; b++) {                                                                      \
            /* the weight rows' block, widened to int16: pair p of row j is wide[j][p] */                       \
            int32_t wide[TILE_W][PAIRS] __attribute__((aligned(64)));                                           \
            float dw[TILE_W];                                                                                   \
            for (int j = 0; j < nw; j++) {                                                                      \
                const uint8_t *blk = w + (size_t)j * w_row_bytes + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;    \
                _mm512_store_si512(wide[j], _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 2)))); \
                dw[j] = weight_scale(blk);                                                                      \
            }                                                                                                   \
            /* from memory from here on: broadcast loads fold into the dot instruction */                       \
            __asm__ volatile("" ::: "memory");                                                                  \
            const int32_t *pb = pairs + (size_t)b * PAIRS * 8;                                             \
            __m256i sums[TILE_W];                                                                               \
            __m256i xv = _mm256_loadu_si256((const __m256i *)pb);                                                                \
            for (int j = 0; j < nw; j++)                                                                        \
                sums[j] = _mm256_madd_epi16(xv, _mm256_set1_epi32(wide[j][0]));                                  \
            for (int p = 1; p < PAIRS; p++) {                                                                   \
                xv = _mm256_loadu_si256((const __m256i *)(pb + p * 8));                                                       \
                for (int j = 0; j < nw; j++)                                                                    \
                    sums[j] = DOT(sums[j], xv, &wide[j][p]);                                                    \
            }                                                                                                   \
            __m256 dx = _mm256_loadu_ps(scales + (size_t)b * 8);                                           \
            for (int j = 0; j < nw; j++)                                                                        \
                acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[j]), _mm256_mul_ps(dx, _mm256_set1_ps(dw[j])), \
                                         acc[j]);                                                               \
        }                                                                                                       \
        float out[TILE_W][8];                                                                              \
        for (int j = 0; j < nw; j++)                                                                            \
            _mm256_storeu_ps(out[j], acc[j]);                                                                   \
        for (int r = 0; r < rows; r++)                                                                          \
            for (int j = 0; j < nw; j++)                                                                        \
                y[(size_t)r * ldy + j] = out[j][r];                                                             \
    }

/* acc += the pair products of x and the pair at w broadcast to every lane */
#define DOT_MADD(acc, x, w) _mm512_add_epi32((acc), _mm512_madd_epi16((x), _mm512_set1_epi32(*(w))))
#define DOT_VNNI(acc, x, w) dpwssd_broadcast((acc), (x), (w))

/* vpdpwssd with the weight pair as an embedded broadcast operand ({1to16}): compilers
 * emit a separate broadcast instruction for _mm512_set1_epi32 of a load, one more
 * instruction per 32 products. */
static inline __attribute__((always_inline, target("avx512vnni"))) __m512i dpwssd_broadcast(__m512i acc, __m512i x,
                                                                                          const int32_t *w)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*w));
    return acc;
}
static inline __attribute__((always_inline, target("avx512vnni"))) __m256i dpwssd_broadcast8(__m256i acc, __m256i x,
                                                                                           const int32_t *w)
{
    __asm__("vpdpwssd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*w));
    return acc;
}
#define DOT8_MADD(acc, x, w) _mm256_add_epi32((acc), _mm256_madd_epi16((x), _mm256_set1_epi32(*(w))))
#define DOT8_VNNI(acc, x, w) dpwssd_broadcast8((acc), (x), (w))

Q8_TILE_FN(tile_madd, , DOT_MADD)
Q8_TILE_FN(tile_vnni, __attribute__((target("avx512vnni"))), DOT_VNNI)
Q8_TILE8_FN(tile8_madd, , DOT8_MADD)
Q8_TILE8_FN(tile8_vnni, __attribute__((target("avx512vnni"))), DOT8_VNNI)

/* One group of activation rows against weight rows [j0, j1). */
#define Q8_GROUP_FN(name, ATTR, TILE)                                                                            \
    static ATTR void name(const int32_t *pairs, const float *scales, int blocks, const uint8_t *w,            \
                          size_t w_row_bytes, int j0, int j1, float *y, int ldy, int rows)                     \
    {                                                                                                         \
        int j = j0;                                                                                           \
        for (; j + TILE_W <= j1; j += TILE_W)                                                                 \
            TILE(pairs, scales, blocks, w + (size_t)j * w_row_bytes, w_row_bytes, TILE_W, y + j, ldy, rows);  \
        for (; j + 4 <= j1; j += 4)                                                                           \
            TILE(pairs, scales, blocks, w + (size_t)j * w_row_bytes, w_row_bytes, 4, y + j, ldy, rows);       \
        for (; j < j1; j++)                                                                                   \
            TILE(pairs, scales, blocks, w + (size_t)j * w_row_bytes, w_row_bytes, 1, y + j, ldy, rows);       \
    }

Q8_GROUP_FN(group_madd, , tile_madd)
Q8_GROUP_FN(group_vnni, __attribute__((target("avx512vnni"))), tile_vnni)
Q8_GROUP_FN(group8_madd, , tile8_madd)
Q8_GROUP_FN(group8_vnni, __attribute__((target("avx512vnni"))), tile8_vnni)

static void q8_tiles(const struct cinfer_kernel_xblock *xq, int n, int blocks, const uint8_t *w, size_t w_row_bytes,
                     int j0, int j1, float *y, int ldy)
{
    /* one group's transposed activations: on the stack for rows up to 2048 values */
    int32_t stack_pairs[STACK_GROUP_BLOCKS * PAIRS * TILE_X] __attribute__((aligned(64)));
    float stack_scales[STACK_GROUP_BLOCKS * TILE_X];
    int32_t *pairs = stack_pairs;
    float *scales = stack_scales;
    if (blocks > STACK_GROUP_BLOCKS) {
        pairs = malloc(sizeof(int32_t) * (size_t)blocks * PAIRS * TILE_X);
        scales = malloc(sizeof(float) * (size_t)blocks * TILE_X);
        if (!pairs || !scales) { /* the GEMV gives the same bits, only slower */
            free(pairs);
            free(scales);
            q8_gemv(xq, n, blocks, w, w_row_bytes, j0, j1, y, ldy);
            return;
        }
    }
    int vnni = has_vnni();
    for (int i = 0; i < n; i += TILE_X) {
        int rows = n - i < TILE_X ? n - i : TILE_X;
        int lanes = rows <= 8 ? 8 : TILE_X;
        transpose_group(xq, blocks, i, rows, lanes, pairs, scales);
        float *yi = y + (size_t)i * ldy;
        if (lanes == 8 && vnni)
            group8_vnni(pairs, scales, blocks, w, w_row_bytes, j0, j1, yi, ldy, rows);
        else if (lanes == 8)
            group8_madd(pairs, scales, blocks, w, w_row_bytes, j0, j1, yi, ldy, rows);
        else if (vnni)
            group_vnni(pairs, scales, blocks, w, w_row_bytes, j0, j1, yi, ldy, rows);
        else
            group_madd(pairs, scales, blocks, w, w_row_bytes, j0, j1, yi, ldy, rows);
    }
    if (pairs != stack_pairs) {
        free(pairs);
        free(scales);
    }
}

void cinfer_q8_gemv_avx512(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                           float *y, int ldy)
{
    if (j1 > j0)
        q8_gemv(x_prepared, n, k / CINFER_KERNEL_Q8_BLOCK, w, w_row_bytes, j0, j1, y, ldy);
}

void cinfer_q8_tiles_avx512(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                            float *y, int ldy)
{
    if (j1 > j0)
        q8_tiles(x_prepared, n, k / CINFER_KERNEL_Q8_BLOCK, w, w_row_bytes, j0, j1, y, ldy);
}
