/* kernels/q8_avx512.c — Q8_0 weights times int16 activation blocks with AVX-512: the
 * decode GEMV (n <= 2 activation rows) and the batched tile (n >= 3).
 *
 * Every level and path computes each output element the same way (kernels.h):
 *     acc = 0; for each block b: acc = fma((float)S_b, dx_b * dw_b, acc)
 * with S_b the block's exact int32 dot product (|S_b| <= 32 * 32767 * 128 < 2^31), so
 * the order in which the integer products are summed is free and the float steps are
 * one per block. Both paths here produce exactly those bits.
 *
 * GEMV: q8_gemv.h, shared with the AVX2 level.
 *
 * Tile: lanes are 16 activation rows. The activations of a group of 16 rows are
 * transposed once per call so that one vector holds value pair p of block b for all
 * 16 rows; a weight row's pair p is broadcast against it (vpdpwssd, 32 products per
 * instruction), TILE_W weight rows at a time. Each block then costs 16 integer dot steps
 * per weight row and one conversion, one product and one FMA for 16 outputs, where a
 * k-in-lanes tile pays a conversion and an FMA per output and block. A group of at
 * most 8 rows (batched decode) uses 8 lanes on 256-bit vectors. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_impl.h"
#include "weight_load_avx512.h"

#define AI static inline __attribute__((always_inline))
#define TILE_X 16     /* activation rows per tile: one per lane */
#define TILE_W 12     /* weight rows per tile */
#define PAIRS (CINFER_KERNEL_Q8_BLOCK / 2)
#define STACK_GROUP_BLOCKS 64 /* transposed activation groups up to this many blocks live on the stack */

AI float weight_scale(const uint8_t *blk)
{
    uint16_t d_bits;
    memcpy(&d_bits, blk, 2);
    return _cvtsh_ss(d_bits);
}

/* The GEMV: q8_gemv.h (shared with the AVX2 level) with two activation rows per pass,
 * and vpdpwssd where the CPU has AVX-512 VNNI. 256-bit vectors: on CPUs that split
 * 512-bit operations in two (Zen 4) a block's pair sums and their reduction cost half
 * of what 16-lane vectors would. */
#define Q8G_FN(name) avx512_q8_##name
#define Q8G_ATTR
#define Q8G_X_ROWS 2
#define Q8G_DOT(xl, xh, wl, wh) _mm256_add_epi32(_mm256_madd_epi16((xl), (wl)), _mm256_madd_epi16((xh), (wh)))
#include "q8_gemv.h"
#undef Q8G_FN
#undef Q8G_ATTR
#undef Q8G_DOT
#define Q8G_FN(name) avx512_vnni_q8_##name
#define Q8G_ATTR __attribute__((target("avx512vnni")))
#define Q8G_DOT(xl, xh, wl, wh) _mm256_dpwssd_epi32(_mm256_madd_epi16((xl), (wl)), (xh), (wh))
#include "q8_gemv.h"

/* Any number of activation rows, two at a time over each group of 8 weight rows. */
static void q8_gemv(const struct cinfer_kernel_xblock *xq, int n, int blocks, const uint8_t *w, size_t w_row_bytes,
                    int j0, int j1, float *y, int ldy)
{
    if (has_vnni())
        avx512_vnni_q8_rows(xq, n, blocks, w, w_row_bytes, j0, j1, y, ldy);
    else
        avx512_q8_rows(xq, n, blocks, w, w_row_bytes, j0, j1, y, ldy);
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

/* The tile's vector operations at each width: 16 lanes on 512-bit vectors, 8 lanes on
 * 256-bit ones (groups of at most 8 rows: on CPUs that split 512-bit operations in two,
 * Zen 4, as many products per cycle). */
#define V16_INT __m512i
#define V16_FLOAT __m512
#define V16_LOAD_INT(p) _mm512_loadu_si512(p)
#define V16_PAIR_PRODUCTS(x, pair) _mm512_madd_epi16((x), _mm512_set1_epi32(pair))
#define V16_ZERO() _mm512_setzero_ps()
#define V16_SCALE_ADD(acc, sums, dx, dw) \
    _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps((dx), _mm512_set1_ps(dw)), (acc))
#define V16_LOAD_FLOAT(p) _mm512_loadu_ps(p)
#define V16_STORE_FLOAT(p, v) _mm512_storeu_ps((p), (v))
#define V8_INT __m256i
#define V8_FLOAT __m256
#define V8_LOAD_INT(p) _mm256_loadu_si256((const __m256i *)(p))
#define V8_PAIR_PRODUCTS(x, pair) _mm256_madd_epi16((x), _mm256_set1_epi32(pair))
#define V8_ZERO() _mm256_setzero_ps()
#define V8_SCALE_ADD(acc, sums, dx, dw) \
    _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps((dx), _mm256_set1_ps(dw)), (acc))
#define V8_LOAD_FLOAT(p) _mm256_loadu_ps(p)
#define V8_STORE_FLOAT(p, v) _mm256_storeu_ps((p), (v))

/* Outputs (rows, ldy)[0:nw] of one group of transposed activation rows (LANES of them,
 * V the matching vector operations) against nw <= TILE_W weight rows; nw is a constant
 * after inlining, so the 2 x nw accumulators stay in registers. DOT(acc, x, w) adds
 * the products of x and the pair at w broadcast to every lane. */
#define Q8_TILE_FN(name, ATTR, V, LANES, DOT)                                                                    \
    static inline __attribute__((always_inline)) ATTR void name(const int32_t *pairs, const float *scales,      \
                                                                int blocks, const uint8_t *w, size_t w_row_bytes, \
                                                                int nw, float *y, int ldy, int rows)            \
    {                                                                                                           \
        V##_FLOAT acc[TILE_W];                                                                                  \
        for (int j = 0; j < nw; j++)                                                                            \
            acc[j] = V##_ZERO();                                                                                \
        for (int b = 0; b < blocks; b++) {                                                                      \
            /* the weight rows' block, widened to int16: pair p of row j is wide[j][p] */                       \
            int32_t wide[TILE_W][PAIRS] __attribute__((aligned(64)));                                           \
            float dw[TILE_W];                                                                                   \
            for (int j = 0; j < nw; j++) {                                                                      \
                const uint8_t *blk = w + (size_t)j * w_row_bytes + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;    \
                /* the same block of the next tile's rows: with one group (batched decode) the         \
                 * weights come from memory once, in TILE_W short streams the hardware prefetcher      \
                 * does not keep ahead of */                                                           \
                _mm_prefetch((const char *)blk + TILE_W * w_row_bytes, _MM_HINT_T0);                  \
                _mm512_store_si512(wide[j], _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 2)))); \
                dw[j] = weight_scale(blk);                                                                      \
            }                                                                                                   \
            /* from memory from here on: broadcast loads fold into the dot instruction */                       \
            __asm__ volatile("" ::: "memory");                                                                  \
            const int32_t *pb = pairs + (size_t)b * PAIRS * (LANES);                                            \
            V##_INT sums[TILE_W];                                                                               \
            V##_INT xv = V##_LOAD_INT(pb);                                                                      \
            for (int j = 0; j < nw; j++)                                                                        \
                sums[j] = V##_PAIR_PRODUCTS(xv, wide[j][0]);                                                    \
            for (int p = 1; p < PAIRS; p++) {                                                                   \
                xv = V##_LOAD_INT(pb + p * (LANES));                                                            \
                for (int j = 0; j < nw; j++)                                                                    \
                    sums[j] = DOT(sums[j], xv, &wide[j][p]);                                                    \
            }                                                                                                   \
            V##_FLOAT dx = V##_LOAD_FLOAT(scales + (size_t)b * (LANES));                                        \
            for (int j = 0; j < nw; j++)                                                                        \
                acc[j] = V##_SCALE_ADD(acc[j], sums[j], dx, dw[j]);                                             \
        }                                                                                                       \
        float out[TILE_W][LANES];                                                                               \
        for (int j = 0; j < nw; j++)                                                                            \
            V##_STORE_FLOAT(out[j], acc[j]);                                                                    \
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

Q8_TILE_FN(tile_madd, , V16, 16, DOT_MADD)
Q8_TILE_FN(tile_vnni, __attribute__((target("avx512vnni"))), V16, 16, DOT_VNNI)
Q8_TILE_FN(tile8_madd, , V8, 8, DOT8_MADD)
Q8_TILE_FN(tile8_vnni, __attribute__((target("avx512vnni"))), V8, 8, DOT8_VNNI)

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
