/* kernels/quant_panels_avx2.c — Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K … Q6_K and IQ4_XS
 * panels (layouts in quant_panels.c) times int8 activation blocks with AVX2, any number
 * of activation rows: the AVX-512 kernels' scheme (quant_panels_avx512.c) for CPUs
 * without AVX-512, such as AMD Zen 2/3 and Intel's client cores.
 *
 * A panel's 16 weight rows are two halves of 8 rows: half h is the 32-byte half of each
 * 64-byte group of the panel that holds rows 8h .. 8h + 7, one 32-bit lane a row. At one
 * activation row (decode) both halves go in one pass, so the weights stream from memory
 * in order; with more rows there is no room in the 16 ymm registers for both, and the
 * panel is read in two passes, the second from cache (a panel is a few KB).
 * Where AVX-512 VNNI has vpdpbusd, AVX2 multiplies the unsigned weight bytes by the
 * broadcast int8 activations into int16 pair sums (vpmaddubsw) and those pairs into one
 * int32 per lane (vpmaddwd against ones). vpmaddubsw saturates at 32767, so the values
 * stay small: every weight byte here is below 64 (Q6_K's 6 bits; the high nibbles are
 * shifted down, not kept in place as the AVX-512 kernel keeps them), and 2 x 63 x 127
 * fits. The 4- and 5-bit types add up to four pair sums in int16 before widening them
 * (pairs_u8), a quarter fewer instructions a block where prefill is compute-bound.
 * Every integer step is exact and the float steps are the scalar definition's (one or
 * two fma a block, per row and lane, quant_dot_scalar.c), so every output has the
 * scalar level's bits. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "panels_avx2.h"

#define AI static inline __attribute__((always_inline))
#define TILE_Q 6    /* activation rows per pass, 32-value types: 4 rows fit the 16 ymm registers, 6 spill
                     * a sum or two and still ran Q5_0 5-7 % faster (one decoding of the weights for
                     * more rows) */
#define TILE_K 2    /* activation rows per pass, Q4_K and Q5_K (more sums live per row) */
#define TILE_Q6K 4  /* activation rows per pass, Q6_K (one sum a row: the scales go in vpmaddwd) */
#define TILE_K23 4  /* activation rows per pass, Q2_K and Q3_K (one sum a row, and the mins' or offsets') */
#define TILE_IQ4 4  /* activation rows per pass, IQ4_NL, IQ4_XS and MXFP4 (the codebook and the weights' magnitudes
                     * live too) */
/* How far ahead of its reads a panel's stream prefetches: 1 KB, as the Q8_0 panels
 * (q8_panels_avx2.c). On the Q4_0 file's batch-1 decode (bench_model, six interleaved
 * pairs) 1 KB read 1-3 points nearer the paired floor than the AVX-512 kernel's 4 KB
 * (76-78 % against 75-77 % on one thread, 79-83 % against 77-81 % on two); the Q4_K_M
 * and Q6_K files did not tell them apart. */
#define PREFETCH_BYTES 1024

/* Every cache line of the panel's block at p (bytes long), PREFETCH_BYTES ahead: the
 * first pass over a panel streams it from memory. */
AI void prefetch_block(const uint8_t *p, int bytes)
{
    for (int off = 0; off < bytes; off += 64)
        _mm_prefetch((const char *)p + PREFETCH_BYTES + off, _MM_HINT_T0);
}

/* Lines [lines x part, lines x (part + 1)) of the block at p (bytes long), PREFETCH_BYTES
 * ahead: the K-quants' blocks (2-3.4 KB a panel) prefetch a few lines per step of their
 * loop rather than all at the block's start. The burst of 36-53 prefetches (and its
 * loop) cost more than it gave: spread, the Q6_K panels ran 7-19 % faster at batch 1
 * from memory and 10 % from cache, Q5_K 7-13 %, Q4_K 4 % from cache and level from
 * memory (interleaved pairs, one thread). */
AI void prefetch_part(const uint8_t *p, int bytes, int part, const int lines)
{
    UNROLL for (int l = 0; l < lines; l++)
        if (64 * (lines * part + l) < bytes)
            _mm_prefetch((const char *)p + PREFETCH_BYTES + 64 * (lines * part + l), _MM_HINT_T0);
}

/* 4 int8 at x, broadcast to every 32-bit lane */
AI __m256i broadcast4(const int8_t *x)
{
    int32_t four;
    memcpy(&four, x, 4);
    return _mm256_set1_epi32(four);
}

/* the 8 int32 sums of acc16's int16 pairs */
AI __m256i widen_pairs(__m256i acc16)
{
    return _mm256_madd_epi16(acc16, _mm256_set1_epi16(1));
}

/* acc16 += the int16 pair sums of the unsigned bytes w and the 4 int8 at x, broadcast:
 * no more than four of these (bytes below 32: 4 x 2 x 31 x 127 = 31496 fits int16) or
 * eight (below 16: 30480) go into one acc16 before it is widened, one widening where
 * each product group would take its own. */
AI __m256i pairs_u8(__m256i acc16, __m256i w, const int8_t *x)
{
    return _mm256_add_epi16(acc16, _mm256_maddubs_epi16(w, broadcast4(x)));
}

/* acc += the int16 pairs of w times the pair at x, broadcast. */
AI __m256i dot_i16(__m256i acc, __m256i w, const int16_t *x)
{
    int32_t pair;
    memcpy(&pair, x, 4);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_set1_epi32(pair)));
}

AI __m256i low4(__m256i v)
{
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* (v & 0x0F) | t (t has only bits 4..5 set) */
AI __m256i low4_or(__m256i v, __m256i t)
{
    return _mm256_or_si256(low4(v), t);
}

/* the high nibbles of v's bytes, as values 0..15 */
AI __m256i high4(__m256i v)
{
    return low4(_mm256_srli_epi16(v, 4));
}

AI __m256i load(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* A tile's float sums: [pass][activation row]; a pass is the panel's half `half` (R > 1)
 * or, at R = 1, pass p is half p. */
#define TILE_MAX TILE_Q
AI void clear_tile(__m256 acc[2][TILE_MAX], const int R)
{
    const int passes = R == 1 ? 2 : 1;
    UNROLL for (int p = 0; p < passes; p++)
        UNROLL for (int r = 0; r < R; r++)
            acc[p][r] = _mm256_setzero_ps();
}

AI void store_tile(__m256 acc[2][TILE_MAX], float *y, int ldy, __m256i mask_lo, __m256i mask_hi, int half,
                   const int R)
{
    const int passes = R == 1 ? 2 : 1;
    UNROLL for (int p = 0; p < passes; p++)
        UNROLL for (int r = 0; r < R; r++)
            store8_masked(y + (size_t)r * ldy + HALF_ROWS * (R == 1 ? p : half), p ? mask_hi : mask_lo,
                                acc[p][r]);
}

/* ---- 32-value blocks: Q4_0, Q4_1, Q5_0, Q5_1 ---------------------------------------- */

enum block32_kind { Q4_0_BLOCKS, Q5_0_BLOCKS, Q4_1_BLOCKS, Q5_1_BLOCKS };

/* One panel against R activation rows (xq rows of `blocks` blocks): at R = 1 both of
 * its halves in one pass (the weights stream in order), otherwise rows 8 half .. 8 half
 * + 7. Q5: the 5th bits from the panel's h (bit u of byte i: value 4u + i; bit 4 + u:
 * value 16 + 4u + i). Q4_1 and Q5_1 store unsigned values and a min m, which meets the
 * activation block's sum in a second fma. */
AI void block32_tile(const struct cinfer_kernel_xq32 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                     __m256i mask_lo, __m256i mask_hi, int half, int first, const int R, const enum block32_kind kind)
{
    const int q5 = kind == Q5_0_BLOCKS || kind == Q5_1_BLOCKS, mins = kind == Q4_1_BLOCKS || kind == Q5_1_BLOCKS;
    const int block_bytes = 16 * (18 + 4 * q5 + 2 * mins), h_at = mins ? 64 : 32, passes = R == 1 ? 2 : 1;
    const __m256i bias = _mm256_set1_epi32(q5 ? 0xFFF0 : 0xFFF8); /* pairs (-16, 0) or (-8, 0) */
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    __m256 acc[2][TILE_MAX];
    clear_tile(acc, R);
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        if (first)
            prefetch_block(pb, block_bytes);
        UNROLL for (int p = 0; p < passes; p++) {
            int hf = R == 1 ? p : half, qs_at = h_at + (q5 ? 64 : 0) + 32 * hf;
            /* int16 pair sums: 4-bit values all 8 in one (8 x 2 x 15 x 127 = 30480 fits),
             * 5-bit ones the low values' and the high values' apart (each 4 x 2 x 31 x 127 =
             * 31496) */
            __m256i isum[TILE_Q][2];
            UNROLL for (int r = 0; r < R; r++)
                isum[r][0] = isum[r][1] = _mm256_setzero_si256();
            __m256i h = q5 ? load(pb + h_at + 32 * hf) : _mm256_setzero_si256();
            UNROLL for (int u = 0; u < 4; u++) {
                __m256i v = load(pb + qs_at + 64 * u), lo, hi;
                if (q5) {
                    __m256i hl = _mm256_and_si256(_mm256_slli_epi16(h, 4 - u), bit4);
                    __m256i hh = _mm256_and_si256(u ? _mm256_srli_epi16(h, u) : h, bit4);
                    lo = low4_or(v, hl);
                    hi = _mm256_or_si256(high4(v), hh);
                } else {
                    lo = low4(v);
                    hi = high4(v);
                }
                UNROLL for (int r = 0; r < R; r++) {
                    const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
                    isum[r][0] = pairs_u8(isum[r][0], lo, x->q + 4 * u);
                    isum[r][q5] = pairs_u8(isum[r][q5], hi, x->q + 16 + 4 * u);
                }
            }
            __m256 dw = half8(pb + 16 * hf), mw = mins ? half8(pb + 32 + 16 * hf) : _mm256_setzero_ps();
            UNROLL for (int r = 0; r < R; r++) {
                const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
                __m256i s = widen_pairs(isum[r][0]);
                if (q5)
                    s = _mm256_add_epi32(s, widen_pairs(isum[r][1]));
                if (!mins)
                    s = dot_i16(s, bias, &x->sum); /* - bias * sum */
                __m256 dx = _mm256_set1_ps(x->d);
                acc[p][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, dx), acc[p][r]);
                if (mins)
                    acc[p][r] = _mm256_fmadd_ps(_mm256_set1_ps((float)x->sum), _mm256_mul_ps(mw, dx), acc[p][r]);
            }
        }
    }
    store_tile(acc, y, ldy, mask_lo, mask_hi, half, R);
}

/* ---- IQ4_NL and MXFP4: Q4_0's layout, each nibble an index into an int8 codebook ------- */

/* a codebook's 16 int8 values in both 128-bit lanes, for vpshufb */
AI __m256i codebook16(const int8_t values[16])
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)values));
}

/* The 8 E8M0 bytes at p as floats of half their scale (cinfer_kernel_e8m0_half): 2^(e - 128),
 * exponents 0 and 1 as the two subnormals. */
AI __m256 e8m0_half8(const uint8_t *p)
{
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

/* One panel against R activation rows, as block32_tile. A nibble's value comes from the
 * codebook by vpshufb; the values are signed, so vpmaddubsw takes their magnitudes and
 * the activations with their signs (pair sums at most 2 x 127 x 127 = 32258), and each
 * product group is widened on its own (two would not fit int16). No offset to take off.
 * MXFP4 (mx): e2m1 values (doubled) and 16 E8M0 scale bytes where IQ4_NL has f16 d. */
AI void codebook_tile(const struct cinfer_kernel_xq32 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                      __m256i mask_lo, __m256i mask_hi, int half, int first, const int R, const int mx)
{
    const int block_bytes = 16 * (mx ? 17 : 18), passes = R == 1 ? 2 : 1;
    const __m256i table = codebook16(mx ? cinfer_kernel_mxfp4_values : cinfer_kernel_iq4nl_values);
    __m256 acc[2][TILE_MAX];
    clear_tile(acc, R);
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        if (first)
            prefetch_block(pb, block_bytes);
        UNROLL for (int p = 0; p < passes; p++) {
            int hf = R == 1 ? p : half, qs_at = (mx ? 16 : 32) + 32 * hf;
            __m256i isum[TILE_IQ4];
            UNROLL for (int r = 0; r < R; r++)
                isum[r] = _mm256_setzero_si256();
            UNROLL for (int u = 0; u < 4; u++) {
                __m256i v = load(pb + qs_at + 64 * u);
                __m256i lo = _mm256_shuffle_epi8(table, low4(v)), hi = _mm256_shuffle_epi8(table, high4(v));
                __m256i lo_abs = _mm256_sign_epi8(lo, lo), hi_abs = _mm256_sign_epi8(hi, hi);
                UNROLL for (int r = 0; r < R; r++) {
                    const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
                    __m256i pl = _mm256_maddubs_epi16(lo_abs, _mm256_sign_epi8(broadcast4(x->q + 4 * u), lo));
                    __m256i ph = _mm256_maddubs_epi16(hi_abs, _mm256_sign_epi8(broadcast4(x->q + 16 + 4 * u), hi));
                    isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(widen_pairs(pl), widen_pairs(ph)));
                }
            }
            __m256 dw = mx ? e8m0_half8(pb + 8 * hf) : half8(pb + 16 * hf);
            UNROLL for (int r = 0; r < R; r++) {
                const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
                acc[p][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(dw, _mm256_set1_ps(x->d)),
                                            acc[p][r]);
            }
        }
    }
    store_tile(acc, y, ldy, mask_lo, mask_hi, half, R);
}

/* ---- super-blocks of 256: what their tiles share ----------------------------------- */

/* The float steps of a super-block's pass (rows 8 hf .. 8 hf + 7), the scalar definition's:
 * acc[r] += s[r] x (d x the activation row's d), then, for the types with mins, acc[r] -=
 * m[r] x (dmin x that d). */
AI void add_super_block(__m256 acc[], const __m256i s[], const __m256i m[], const uint8_t *pb, int hf,
                        const struct cinfer_kernel_xq256 *xq, int blocks, int b, const int R, const int mins)
{
    __m256 d = half8(pb + 16 * hf), dmin = mins ? half8(pb + 32 + 16 * hf) : _mm256_setzero_ps();
    UNROLL for (int r = 0; r < R; r++) {
        __m256 dx = _mm256_set1_ps(xq[(size_t)r * blocks + b].d);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_mul_ps(d, dx), acc[r]);
        if (mins)
            acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m[r]), _mm256_mul_ps(dmin, dx), acc[r]);
    }
}

/* (v, v) int16 pairs of the int32 lanes of v (|v| < 2^15) */
AI __m256i int16_pairs(__m256i v)
{
    return _mm256_blend_epi16(v, _mm256_slli_epi32(v, 16), 0xAA);
}

/* ---- K-quants: Q4_K, Q5_K (super-blocks of 256, 8 sub-blocks of 32 with mins) ---------- */

/* The 6-bit scales and mins of the 8 sub-blocks of the pass's 8 rows, from the halves of
 * the 3 dword vectors of their 12 scale bytes, each as an int16 pair in its row's lane:
 * sc[j] (s, s), for vpmaddwd to scale a lane's pair sums as it widens them; mp[j] (m, m). */
AI void k4_scales(const uint8_t *pb, int half, __m256i sc[8], __m256i mp[8])
{
    const __m256i m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3);
    __m256i s0 = load(pb + 64 + 32 * half), s1 = load(pb + 128 + 32 * half), s2 = load(pb + 192 + 32 * half);
    __m256i mn[8];
    UNROLL for (int j = 0; j < 4; j++) {
        sc[j] = _mm256_and_si256(_mm256_srli_epi32(s0, 8 * j), m6);
        mn[j] = _mm256_and_si256(_mm256_srli_epi32(s1, 8 * j), m6);
        sc[j + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 8 * j), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(s0, 8 * j + 6), m2), 4));
        mn[j + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 8 * j + 4), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(s1, 8 * j + 6), m2), 4));
    }
    UNROLL for (int j = 0; j < 8; j++) {
        sc[j] = _mm256_or_si256(sc[j], _mm256_slli_epi32(sc[j], 16));
        mp[j] = _mm256_or_si256(mn[j], _mm256_slli_epi32(mn[j], 16));
    }
}

AI void k45_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                 __m256i mask_lo, __m256i mask_hi, int half, int first, const int R, const int q5)
{
    const int block_bytes = q5 ? 16 * 176 : 16 * 144, passes = R == 1 ? 2 : 1;
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    __m256 acc[2][TILE_MAX];
    clear_tile(acc, R);
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        UNROLL for (int p = 0; p < passes; p++) {
            int hf = R == 1 ? p : half, qs_at = (q5 ? 768 : 256) + 32 * hf;
            __m256i sc[8], mp[8];
            k4_scales(pb, hf, sc, mp);
            __m256i s[TILE_K], m[TILE_K];
            UNROLL for (int r = 0; r < R; r++) {
                s[r] = _mm256_setzero_si256();
                m[r] = _mm256_setzero_si256();
                const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
                UNROLL for (int j = 0; j < 8; j++) /* mins times the 16-value sums, two a sub-block */
                    m[r] = dot_i16(m[r], mp[j], x->bsums + 2 * j);
            }
            for (int c = 0; c < 4; c++) { /* 64 values: sub-blocks 2c (low nibbles) and 2c + 1 (high) */
                if (first && p == 0) /* a quarter of the block's 36 or 44 lines */
                    prefetch_part(pb, block_bytes, c, q5 ? 11 : 9);
                __m256i lo_sum[TILE_K][2], hi_sum[TILE_K][2];
                UNROLL for (int r = 0; r < R; r++)
                    lo_sum[r][0] = lo_sum[r][1] = hi_sum[r][0] = hi_sum[r][1] = _mm256_setzero_si256();
                UNROLL for (int v = 0; v < 8; v++) {
                    __m256i w = load(pb + qs_at + 64 * (8 * c + v)), lo, hi;
                    if (q5) { /* bit 2c (low) and 2c + 1 (high) of qh[4v + i] */
                        __m256i h = load(pb + 256 + 64 * v + 32 * hf);
                        int sl = 2 * c, sh = 2 * c + 1;
                        __m256i hl = sl <= 4 ? _mm256_slli_epi16(h, 4 - sl) : _mm256_srli_epi16(h, sl - 4);
                        __m256i hh = sh <= 4 ? _mm256_slli_epi16(h, 4 - sh) : _mm256_srli_epi16(h, sh - 4);
                        lo = low4_or(w, _mm256_and_si256(hl, bit4));
                        hi = _mm256_or_si256(high4(w), _mm256_and_si256(hh, bit4));
                    } else {
                        lo = low4(w);
                        hi = high4(w);
                    }
                    UNROLL for (int r = 0; r < R; r++) {
                        const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
                        lo_sum[r][v & 1] = pairs_u8(lo_sum[r][v & 1], lo, x->q + 64 * c + 4 * v);
                        hi_sum[r][v & 1] = pairs_u8(hi_sum[r][v & 1], hi, x->q + 64 * c + 32 + 4 * v);
                    }
                }
                UNROLL for (int r = 0; r < R; r++) { /* pair sums (at most 31496) times a scale (63) */
                    __m256i l = _mm256_add_epi32(_mm256_madd_epi16(lo_sum[r][0], sc[2 * c]),
                                                 _mm256_madd_epi16(lo_sum[r][1], sc[2 * c]));
                    __m256i hsum = _mm256_add_epi32(_mm256_madd_epi16(hi_sum[r][0], sc[2 * c + 1]),
                                                    _mm256_madd_epi16(hi_sum[r][1], sc[2 * c + 1]));
                    s[r] = _mm256_add_epi32(s[r], _mm256_add_epi32(l, hsum));
                }
            }
            add_super_block(acc[p], s, m, pb, hf, xq, blocks, b, R, 1);
        }
    }
    store_tile(acc, y, ldy, mask_lo, mask_hi, half, R);
}

/* ---- Q6_K (16 sub-blocks of 16 with int8 scales, values 6 bits - 32) ----------------- */

/* The int8 scales of one sub-block for the pass's 8 rows (8 bytes at p), each as an
 * int16 pair (sc, sc) in its row's lane: vpmaddwd against them turns a lane's int16 pair
 * sums into the scaled sum in one step, where widening and then vpmulld took two. */
AI __m256i scale_pairs(const uint8_t *p)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(b, b));
}

AI void q6k_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                 __m256i mask_lo, __m256i mask_hi, int half, int first, const int R)
{
    const int block_bytes = 16 * 210, passes = R == 1 ? 2 : 1;
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    __m256 acc[2][TILE_MAX];
    clear_tile(acc, R);
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        UNROLL for (int p = 0; p < passes; p++) {
            int hf = R == 1 ? p : half;
            const uint8_t *scales = pb + 32, *ql = pb + 288 + 32 * hf, *qh = pb + 2336 + 32 * hf;
            __m256i s[TILE_Q6K], sc[16];
            for (int j = 0; j < 16; j++)
                sc[j] = scale_pairs(scales + 16 * j + 8 * hf);
            /* the values' offset: -32 x each sub-block's scale x its activations' 16-value
             * sum, the scales of sub-blocks 2t and 2t + 1 as one int16 pair per lane */
            UNROLL for (int r = 0; r < R; r++)
                s[r] = _mm256_setzero_si256();
            UNROLL for (int t = 0; t < 8; t++) {
                __m256i pair = _mm256_blend_epi16(sc[2 * t], sc[2 * t + 1], 0xAA);
                UNROLL for (int r = 0; r < R; r++)
                    s[r] = dot_i16(s[r], pair, xq[(size_t)r * blocks + b].bsums + 2 * t);
            }
            UNROLL for (int r = 0; r < R; r++)
                s[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s[r], 5));
            for (int h = 0; h < 2; h++)
                UNROLL for (int v = 0; v < 8; v += 2) { /* q[e][a]: sub-block 8h + 2a + v / 4 */
                    const int run = v / 4;
                    if (first && p == 0) {
                        prefetch_part(pb, block_bytes, 8 * h + v, 4);
                        prefetch_part(pb, block_bytes, 8 * h + v + 1, 4);
                    }
                    __m256i q[2][4];
                    UNROLL for (int e = 0; e < 2; e++) {
                        __m256i A = load(ql + 64 * (16 * h + v + e)), B = load(ql + 64 * (16 * h + 8 + v + e));
                        __m256i H = load(qh + 64 * (8 * h + v + e));
                        q[e][0] = low4_or(A, _mm256_and_si256(_mm256_slli_epi16(H, 4), bits45));
                        q[e][1] = low4_or(B, _mm256_and_si256(_mm256_slli_epi16(H, 2), bits45));
                        q[e][2] = _mm256_or_si256(high4(A), _mm256_and_si256(H, bits45));
                        q[e][3] = _mm256_or_si256(high4(B), _mm256_and_si256(_mm256_srli_epi16(H, 2), bits45));
                    }
                    UNROLL for (int r = 0; r < R; r++) {
                        const int8_t *xr = xq[(size_t)r * blocks + b].q + 128 * h + 4 * v;
                        /* v and v + 1 share their scales: their pair sums (each at most 2 x 63 x 127
                         * = 16002) add in int16 before one vpmaddwd scales and widens both */
                        UNROLL for (int a = 0; a < 4; a++) {
                            __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(q[0][a], broadcast4(xr + 32 * a)),
                                                             _mm256_maddubs_epi16(q[1][a], broadcast4(xr + 32 * a + 4)));
                            s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(pairs, sc[8 * h + 2 * a + run]));
                        }
                    }
                }
            add_super_block(acc[p], s, s, pb, hf, xq, blocks, b, R, 0);
        }
    }
    store_tile(acc, y, ldy, mask_lo, mask_hi, half, R);
}

/* ---- Q2_K and Q3_K (super-blocks of 256, 16 sub-blocks of 16) ------------------------- */

/* Both types keep a value's 2 low bits in qs: byte 32h + l holds, at bits 2s, value
 * 128h + 32s + l. So the 4 qs units 8h + 4e + k (k < 4) give, shifted by 2s, the 16
 * values of sub-block 8h + 2s + e, against activations 128h + 32s + 16e + 4k. */

/* Q3_K's 6-bit scale j (minus 32) of the pass's 8 rows, from the 3 dword vectors of
 * their 12 scale bytes (cinfer_kernel_q3k_scales for one row). */
AI __m256i q3k_scale(const __m256i a[3], int j)
{
    const __m256i m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3);
    __m256i low = _mm256_and_si256(_mm256_srli_epi32(a[j / 4 % 2], 8 * (j % 4) + 4 * (j / 8)), m4);
    __m256i high = _mm256_and_si256(_mm256_srli_epi32(a[2], 8 * (j % 4) + 2 * (j / 4)), m2);
    return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
}

/* One panel against R activation rows. Q2_K: values 0..3, 4-bit scales and mins (scale
 * byte j: scale in the low nibble, min in the high), d and dmin. Q3_K: a high bit from
 * hmask (byte l, bit s + 4h) makes values 0..7; 4 comes off as 4 x each sub-block's scale
 * x its 16-value sum. A sub-block's 4 pair sums add in int16 (at most 4 x 2 x 7 x 127 =
 * 7112) before vpmaddwd against the (scale, scale) pairs widens and scales them. */
AI void k23_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                 __m256i mask_lo, __m256i mask_hi, int half, int first, const int R, const int q3)
{
    const int block_bytes = q3 ? 16 * 110 : 16 * 84, qs_at = q3 ? 736 : 320, passes = R == 1 ? 2 : 1;
    const __m256i m2 = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4), m4 = _mm256_set1_epi32(15);
    __m256 acc[2][TILE_MAX];
    clear_tile(acc, R);
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        UNROLL for (int p = 0; p < passes; p++) {
            int hf = R == 1 ? p : half;
            __m256i sw[4]; /* Q2_K: 4 dwords of scale bytes; Q3_K: 3 */
            for (int w = 0; w < (q3 ? 3 : 4); w++)
                sw[w] = load(pb + (q3 ? 32 : 64) + 64 * w + 32 * hf);
            __m256i s[TILE_K23], m[TILE_K23];
            UNROLL for (int r = 0; r < R; r++) {
                s[r] = _mm256_setzero_si256();
                m[r] = _mm256_setzero_si256();
            }
            UNROLL for (int j = 0; j < 16; j += 2) { /* Q2_K's mins, Q3_K's scales x the 16-value sums */
                __m256i pair;
                if (q3) {
                    pair = _mm256_blend_epi16(q3k_scale(sw, j), _mm256_slli_epi32(q3k_scale(sw, j + 1), 16), 0xAA);
                } else {
                    __m256i lo = _mm256_and_si256(_mm256_srli_epi32(sw[j / 4], 8 * (j % 4) + 4), m4);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi32(sw[j / 4], 8 * (j % 4) + 12), m4);
                    pair = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 16));
                }
                UNROLL for (int r = 0; r < R; r++)
                    m[r] = dot_i16(m[r], pair, xq[(size_t)r * blocks + b].bsums + j);
            }
            for (int h = 0; h < 2; h++)
                for (int e = 0; e < 2; e++) {
                    if (first && p == 0) /* a quarter of the block's 21 or 28 lines */
                        prefetch_part(pb, block_bytes, 2 * h + e, q3 ? 7 : 6);
                    __m256i q[4], hm[4];
                    UNROLL for (int k = 0; k < 4; k++) {
                        q[k] = load(pb + qs_at + 64 * (8 * h + 4 * e + k) + 32 * hf);
                        hm[k] = q3 ? load(pb + 224 + 64 * (4 * e + k) + 32 * hf) : _mm256_setzero_si256();
                    }
                    UNROLL for (int sh = 0; sh < 4; sh++) {
                        const int j = 8 * h + 2 * sh + e, bit = sh + 4 * h;
                        __m256i sc = int16_pairs(
                            q3 ? q3k_scale(sw, j) : _mm256_and_si256(_mm256_srli_epi32(sw[j / 4], 8 * (j % 4)), m4));
                        __m256i w[4];
                        UNROLL for (int k = 0; k < 4; k++) {
                            __m256i low = _mm256_and_si256(_mm256_srli_epi16(q[k], 2 * sh), m2);
                            if (q3) {
                                __m256i hb = bit >= 2 ? _mm256_srli_epi16(hm[k], bit - 2)
                                                      : _mm256_slli_epi16(hm[k], 2 - bit);
                                low = _mm256_or_si256(low, _mm256_and_si256(hb, bit2));
                            }
                            w[k] = low;
                        }
                        UNROLL for (int r = 0; r < R; r++) {
                            const int8_t *xr = xq[(size_t)r * blocks + b].q + 128 * h + 32 * sh + 16 * e;
                            __m256i pairs = _mm256_setzero_si256();
                            UNROLL for (int k = 0; k < 4; k++)
                                pairs = pairs_u8(pairs, w[k], xr + 4 * k);
                            s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(pairs, sc));
                        }
                    }
                }
            if (q3) /* the values' offset: 4 x scale x sum */
                UNROLL for (int r = 0; r < R; r++)
                    s[r] = _mm256_sub_epi32(s[r], _mm256_slli_epi32(m[r], 2));
            add_super_block(acc[p], s, m, pb, hf, xq, blocks, b, R, !q3);
        }
    }
    store_tile(acc, y, ldy, mask_lo, mask_hi, half, R);
}

/* ---- IQ4_XS (super-blocks of 256, 8 sub-blocks of 32 with 6-bit scales - 32) ---------- */

/* One panel against R activation rows. The values come from the codebook as IQ4_NL's
 * (magnitudes times sign-moved activations in vpmaddubsw); vpmaddwd against each lane's
 * (scale, scale) pair scales the pair sums as it widens them: at most 2 x 32258 x 32. */
AI void iq4xs_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                   __m256i mask_lo, __m256i mask_hi, int half, int first, const int R)
{
    const int block_bytes = 16 * 136, passes = R == 1 ? 2 : 1;
    const __m256i table = codebook16(cinfer_kernel_iq4nl_values);
    const __m256i m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3), offset = _mm256_set1_epi32(32);
    __m256 acc[2][TILE_MAX];
    clear_tile(acc, R);
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        UNROLL for (int p = 0; p < passes; p++) {
            int hf = R == 1 ? p : half;
            __m256i scales_l = load(pb + 64 + 32 * hf);
            __m256i scales_h =
                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(pb + 32 + 16 * hf)));
            __m256i s[TILE_IQ4];
            UNROLL for (int r = 0; r < R; r++)
                s[r] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                if (first && p == 0) /* an eighth of the block's 34 lines */
                    prefetch_part(pb, block_bytes, j, 5);
                __m256i sc = _mm256_sub_epi32(
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(scales_l, 4 * j), m4),
                                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(scales_h, 2 * j), m2), 4)),
                    offset);
                sc = int16_pairs(sc);
                UNROLL for (int v = 0; v < 4; v++) { /* values 32j + 4v + i (low nibbles) and + 16 (high) */
                    __m256i w = load(pb + 128 + 64 * (4 * j + v) + 32 * hf);
                    __m256i lo = _mm256_shuffle_epi8(table, low4(w)), hi = _mm256_shuffle_epi8(table, high4(w));
                    __m256i lo_abs = _mm256_sign_epi8(lo, lo), hi_abs = _mm256_sign_epi8(hi, hi);
                    UNROLL for (int r = 0; r < R; r++) {
                        const int8_t *xr = xq[(size_t)r * blocks + b].q + 32 * j + 4 * v;
                        __m256i pl = _mm256_maddubs_epi16(lo_abs, _mm256_sign_epi8(broadcast4(xr), lo));
                        __m256i ph = _mm256_maddubs_epi16(hi_abs, _mm256_sign_epi8(broadcast4(xr + 16), hi));
                        s[r] = _mm256_add_epi32(s[r], _mm256_add_epi32(_mm256_madd_epi16(pl, sc),
                                                                       _mm256_madd_epi16(ph, sc)));
                    }
                }
            }
            add_super_block(acc[p], s, s, pb, hf, xq, blocks, b, R, 0);
        }
    }
    store_tile(acc, y, ldy, mask_lo, mask_hi, half, R);
}

/* ---- the panels' loop ---------------------------------------------------------------- */

/* mask_lo / mask_hi: the asked rows of the pass (R > 1) or of the panel's two halves
 * (R = 1); first: the panel's first pass, which prefetches it */
typedef void (*tile_fn)(const void *x, int blocks, const uint8_t *pg, float *y, int ldy, __m256i mask_lo,
                        __m256i mask_hi, int half, int first);

#define TILE_FN(name, R, ...)                                                                                  \
    static void name##_rows##R(const void *x, int blocks, const uint8_t *pg, float *y, int ldy, __m256i mlo,      \
                               __m256i mhi, int hf, int first)                                                 \
    {                                                                                                          \
        __VA_ARGS__;                                                                                           \
    }
#define TILE_FNS(R)                                                                                            \
    TILE_FN(q4_0, R, block32_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, Q4_0_BLOCKS))                 \
    TILE_FN(q5_0, R, block32_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, Q5_0_BLOCKS))                 \
    TILE_FN(q4_1, R, block32_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, Q4_1_BLOCKS))                 \
    TILE_FN(q5_1, R, block32_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, Q5_1_BLOCKS))
#define TILE_K_FNS(R)                                                                                          \
    TILE_FN(q4_k, R, k45_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, 0))                                      \
    TILE_FN(q5_k, R, k45_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, 1))
#define TILE_Q6K_FNS(R) TILE_FN(q6_k, R, q6k_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R))
#define TILE_K23_FNS(R)                                                                                        \
    TILE_FN(q2_k, R, k23_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, 0))                               \
    TILE_FN(q3_k, R, k23_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, 1))
#define TILE_IQ4_FNS(R)                                                                                        \
    TILE_FN(iq4_nl, R, codebook_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, 0))                        \
    TILE_FN(mxfp4, R, codebook_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R, 1))                         \
    TILE_FN(iq4_xs, R, iq4xs_tile(x, blocks, pg, y, ldy, mlo, mhi, hf, first, R))
TILE_FNS(1)
TILE_FNS(2)
TILE_FNS(3)
TILE_FNS(4)
TILE_FNS(5)
TILE_FNS(6)
TILE_K_FNS(1)
TILE_K_FNS(2)
TILE_Q6K_FNS(1)
TILE_Q6K_FNS(2)
TILE_Q6K_FNS(3)
TILE_Q6K_FNS(4)
TILE_IQ4_FNS(1)
TILE_IQ4_FNS(2)
TILE_IQ4_FNS(3)
TILE_IQ4_FNS(4)
TILE_K23_FNS(1)
TILE_K23_FNS(2)
TILE_K23_FNS(3)
TILE_K23_FNS(4)

void cinfer_quant_panels_avx2(const void *x_prepared, int n, int k, const void *panels,
                              enum cinfer_kernel_wtype panel_type, int j0, int j1, float *y, int ldy)
{
    static const tile_fn q4_0[] = {q4_0_rows1, q4_0_rows2, q4_0_rows3, q4_0_rows4, q4_0_rows5, q4_0_rows6};
    static const tile_fn q5_0[] = {q5_0_rows1, q5_0_rows2, q5_0_rows3, q5_0_rows4, q5_0_rows5, q5_0_rows6};
    static const tile_fn q4_1[] = {q4_1_rows1, q4_1_rows2, q4_1_rows3, q4_1_rows4, q4_1_rows5, q4_1_rows6};
    static const tile_fn q5_1[] = {q5_1_rows1, q5_1_rows2, q5_1_rows3, q5_1_rows4, q5_1_rows5, q5_1_rows6};
    static const tile_fn q4_k[] = {q4_k_rows1, q4_k_rows2};
    static const tile_fn q5_k[] = {q5_k_rows1, q5_k_rows2};
    static const tile_fn q6_k[] = {q6_k_rows1, q6_k_rows2, q6_k_rows3, q6_k_rows4};
    static const tile_fn iq4_nl[] = {iq4_nl_rows1, iq4_nl_rows2, iq4_nl_rows3, iq4_nl_rows4};
    static const tile_fn mxfp4[] = {mxfp4_rows1, mxfp4_rows2, mxfp4_rows3, mxfp4_rows4};
    static const tile_fn iq4_xs[] = {iq4_xs_rows1, iq4_xs_rows2, iq4_xs_rows3, iq4_xs_rows4};
    static const tile_fn q2_k[] = {q2_k_rows1, q2_k_rows2, q2_k_rows3, q2_k_rows4};
    static const tile_fn q3_k[] = {q3_k_rows1, q3_k_rows2, q3_k_rows3, q3_k_rows4};
    if (j1 <= j0 || n < 1)
        return;
    enum cinfer_kernel_wtype stored = cinfer_quant_panel_stored(panel_type);
    const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(stored);
    int blocks = k / info->block_values;
    int tile = stored == CINFER_KW_IQ4_NL || stored == CINFER_KW_IQ4_XS || stored == CINFER_KW_MXFP4 ? TILE_IQ4
               : stored == CINFER_KW_Q2_K || stored == CINFER_KW_Q3_K ? TILE_K23
               : info->block_values == 32 ? TILE_Q
               : stored == CINFER_KW_Q6_K ? TILE_Q6K
                                          : TILE_K;
    const tile_fn *fns = stored == CINFER_KW_Q4_0     ? q4_0
                         : stored == CINFER_KW_IQ4_NL ? iq4_nl
                         : stored == CINFER_KW_Q5_0   ? q5_0
                         : stored == CINFER_KW_Q4_1   ? q4_1
                         : stored == CINFER_KW_Q5_1   ? q5_1
                         : stored == CINFER_KW_MXFP4  ? mxfp4
                         : stored == CINFER_KW_Q4_K ? q4_k
                         : stored == CINFER_KW_Q5_K ? q5_k
                         : stored == CINFER_KW_IQ4_XS ? iq4_xs
                         : stored == CINFER_KW_Q2_K ? q2_k
                         : stored == CINFER_KW_Q3_K ? q3_k
                                                    : q6_k;
    size_t panel_bytes = (size_t)PANEL * (size_t)blocks * (size_t)info->block_bytes;
    size_t x_row_bytes = cinfer_kernel_xq_row_bytes(stored, k);
    for (int i = 0; i < n; i += tile) {
        int rows = n - i < tile ? n - i : tile;
        const uint8_t *xi = (const uint8_t *)x_prepared + (size_t)i * x_row_bytes;
        for (int g = j0 / PANEL; g * PANEL < j1; g++) {
            unsigned asked = cinfer_panel_rows_asked(g, j0, j1);
            const uint8_t *pg = (const uint8_t *)panels + (size_t)g * panel_bytes;
            float *yg = y + (size_t)i * ldy + (size_t)g * PANEL;
            if (rows == 1) { /* both halves in one pass */
                fns[0](xi, blocks, pg, yg, ldy, half_mask(asked, 0), half_mask(asked, 1), 0, 1);
                continue;
            }
            for (int half = 0; half < 2; half++) {
                if ((asked >> (HALF_ROWS * half)) & 0xFFu)
                    fns[rows - 1](xi, blocks, pg, yg, ldy, half_mask(asked, half), half_mask(0, 0), half,
                                  half == 0 || !(asked & 0xFFu));
            }
        }
    }
}
