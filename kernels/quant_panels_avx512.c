/* kernels/quant_panels_avx512.c — Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K … Q6_K and IQ4_XS panels
 * (layouts in quant_panels.c) times int8 activation blocks with AVX-512 VNNI, any number
 * of activation rows; and the activation quantizers at this level.
 *
 * A vector's 16 lanes are a panel's 16 weight rows. Four consecutive values of the 16
 * rows come out of the packed bits as one vector of unsigned bytes u (the stored integer
 * plus a bias that makes it non-negative: 8 for Q4_0, 16 for Q5_0, 4 for Q3_K, 32 for
 * Q6_K, 128 for the codebook values of IQ4_NL, IQ4_XS and MXFP4, looked up by vpshufb;
 * the types with mins store unsigned values already), and each activation row's four
 * int8 for those values are broadcast against it: vpdpbusd, 64 products an instruction, into
 * one int32 sum per row and (sub-)block. The bias comes off with the activation block's
 * sums (sum * -bias in one vpdpwssd against the pair (sum, 0) or the sub-blocks' pairs of
 * 16-value sums), the K-quants' integer sub-block scales multiply the sums (vpmulld) and
 * their mins meet the 16-value sums (vpdpwssd); everything stays exact in int32. The
 * float steps are then the scalar definition's (quant_dot_scalar.c), one or two fma a
 * block per row and lane, so every output has the scalar level's bits.
 *
 * At one or two activation rows (decode) the weights stream from memory once, in order,
 * the 32-value types' blocks in groups of eight, and the integer sums of a block run in
 * several chains so the dot instruction's latency does not bound the stream. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "panels_avx512.h"

#define AI static inline __attribute__((always_inline))
#define VNNI __attribute__((target("avx512vnni")))
#define TILE_Q 8  /* activation rows per pass, 32-value types */
#define TILE_K 4  /* activation rows per pass, K-quants (more sums live per row) */
#ifndef PREFETCH_BYTES
/* How far ahead of its reads a panel's stream prefetches. With two threads streaming,
 * 2048 bytes (about 60 ns of one core's share of the memory's rate) no longer covered the
 * guest's memory latency: at 4096, interleaved batch-1 decode steps of the Q4_K_M file
 * (mostly Q5_0 panels) took 4-5 % less time, Q6_K's 1-5 %, Q4_0's the same; bench_matmul's
 * 4608-row Q5_0 matrices went from 91 % to 99 % of a plain read's rate. */
#define PREFETCH_BYTES 4096
#endif

/* Every cache line of the block `bytes` long at p, PREFETCH_BYTES ahead: at one or two
 * activation rows the weights stream from memory, and one core keeps enough lines in
 * flight for the memory's rate only if asked ahead (the hardware prefetcher alone left
 * Q4_0 at about half a plain read's rate). */
AI void prefetch_block(const uint8_t *p, int bytes)
{
    for (int off = 0; off < bytes; off += 64)
        _mm_prefetch((const char *)p + PREFETCH_BYTES + off, _MM_HINT_T0);
}

int cinfer_quant_panels_avx512_usable(void)
{
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vnni");
    }
    return cached;
}

/* acc += Σ over 4 products per lane of the unsigned bytes w and the 4 int8 at x, broadcast. */
AI VNNI __m512i dot_u8(__m512i acc, __m512i w, const int8_t *x)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(const void *)x));
    return acc;
}

/* acc += the int16 pairs of w times the pair at x, broadcast. */
AI VNNI __m512i dot_i16(__m512i acc, __m512i w, const int16_t *x)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(const void *)x));
    return acc;
}

AI __m512i low4(__m512i v)
{
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

/* (v & 0x0F) | t, in one instruction (t has only bits 4..5 set) */
AI __m512i low4_or(__m512i v, __m512i t)
{
    return _mm512_ternarylogic_epi32(v, _mm512_set1_epi8(0x0F), t, 0xEA);
}

AI __m512 half16(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

AI __m512i load(const uint8_t *p)
{
    return _mm512_loadu_si512(p);
}

/* the R activation rows' sums of a panel, stored where the mask keeps a row */
AI void store_rows(float *y, int ldy, __mmask16 mask, const __m512 acc[], const int R)
{
    UNROLL for (int r = 0; r < R; r++)
        _mm512_mask_storeu_ps(y + (size_t)r * ldy, mask, acc[r]);
}

/* ---- 32-value blocks: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 --------------------------- */

enum block32_kind { Q4_0_BLOCKS, Q5_0_BLOCKS, IQ4_NL_BLOCKS, Q4_1_BLOCKS, Q5_1_BLOCKS, MXFP4_BLOCKS };

/* A codebook plus 128 (unsigned bytes for vpdpbusd), in each 128-bit lane for vpshufb. */
AI __m512i table_u8(const int8_t values[16])
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)values);
    return _mm512_broadcast_i32x4(_mm_xor_si128(v, _mm_set1_epi8((char)0x80)));
}

/* The 16 E8M0 bytes at p as floats of half their scale (cinfer_kernel_e8m0_half): 2^(e - 128),
 * exponents 0 and 1 as the two subnormals. */
AI __m512 e8m0_half16(const uint8_t *p)
{
    __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
}

/* Bytes of a panel block (16 rows) of the kind. */
AI int block32_bytes(const enum block32_kind kind)
{
    const int q5 = kind == Q5_0_BLOCKS || kind == Q5_1_BLOCKS, mins = kind == Q4_1_BLOCKS || kind == Q5_1_BLOCKS;
    return 16 * (kind == MXFP4_BLOCKS ? 17 : 18 + 4 * q5 + 2 * mins);
}

/* One block of a panel against R activation rows (xq rows of `blocks` blocks): the exact
 * integer sum of each row, bias taken off (s[r]). Q5: the 5th bits from the panel's h (bit
 * u of byte i: value 4u + i; bit 4 + u: value 16 + 4u + i). IQ4_NL has Q4_0's layout; its
 * nibbles index the codebook. MXFP4's nibbles index its own (e2m1 values, doubled), after
 * 16 E8M0 scale bytes. Q4_1 and Q5_1 store unsigned values and keep their bias in the min
 * (block32_add). */
AI VNNI void block32_sums(const struct cinfer_kernel_xq32 *xq, int blocks, const uint8_t *pb, int b, __m512i s[],
                          const int R, const enum block32_kind kind)
{
    const int q5 = kind == Q5_0_BLOCKS || kind == Q5_1_BLOCKS, mx = kind == MXFP4_BLOCKS;
    const int codebook = kind == IQ4_NL_BLOCKS || mx;
    const int mins = kind == Q4_1_BLOCKS || kind == Q5_1_BLOCKS, in_place = kind == Q4_0_BLOCKS || kind == Q4_1_BLOCKS;
    const int h_at = mins ? 64 : 32, qs_at = mx ? 16 : h_at + (q5 ? 64 : 0);
    /* int16 pairs (-bias, 0) */
    const __m512i bias = _mm512_set1_epi32(q5 ? 0xFFF0 : codebook ? 0xFF80 : 0xFFF8);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    const __m512i table = mx         ? table_u8(cinfer_kernel_mxfp4_values)
                          : codebook ? table_u8(cinfer_kernel_iq4nl_values)
                                     : _mm512_setzero_si512();
    /* sums a row: low nibbles in chains [0, chains), Q4_0's and Q4_1's high nibbles, kept
     * in place (16 x their value: v - low, one instruction), in chains [2, 2 + chains) and
     * divided by 16 (exactly) at the block's end; the other types' high values with the
     * low ones */
    const int chains = R <= 2 ? 2 : 1;
    __m512i isum[TILE_Q][4];
    UNROLL for (int r = 0; r < R; r++)
        isum[r][0] = isum[r][1] = isum[r][2] = isum[r][3] = _mm512_setzero_si512();
    __m512i h = q5 ? load(pb + h_at) : _mm512_setzero_si512();
    UNROLL for (int u = 0; u < 4; u++) {
        __m512i v = load(pb + qs_at + 64 * u), lo, hi;
        /* one load of the unit: folded into both of its uses, it was read twice */
        __asm__("" : "+v"(v));
        if (q5) {
            __m512i hl = _mm512_and_si512(_mm512_slli_epi16(h, 4 - u), bit4);
            __m512i hh = _mm512_and_si512(u ? _mm512_srli_epi16(h, u) : h, bit4);
            lo = low4_or(v, hl);
            hi = low4_or(_mm512_srli_epi16(v, 4), hh);
        } else if (codebook) {
            lo = _mm512_shuffle_epi8(table, low4(v));
            hi = _mm512_shuffle_epi8(table, low4(_mm512_srli_epi16(v, 4)));
        } else {
            lo = low4(v);
            hi = _mm512_sub_epi8(v, lo); /* 16 x the high nibble */
        }
        UNROLL for (int r = 0; r < R; r++) {
            const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
            int c = u % chains;
            isum[r][c] = dot_u8(isum[r][c], lo, x->q + 4 * u);
            int hc = in_place ? 2 + c : c;
            isum[r][hc] = dot_u8(isum[r][hc], hi, x->q + 16 + 4 * u);
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
        s[r] = chains == 2 ? _mm512_add_epi32(isum[r][0], isum[r][1]) : isum[r][0];
        if (in_place)
            s[r] = _mm512_add_epi32(s[r], _mm512_srai_epi32(chains == 2 ? _mm512_add_epi32(isum[r][2], isum[r][3])
                                                                        : isum[r][2], 4));
        if (!mins)
            s[r] = dot_i16(s[r], bias, &x->sum); /* - bias * sum */
    }
}

/* The float steps of block b, the scalar definition's: acc[r] += s[r] x (d x the
 * activation block's d), then for the types with mins + sum x (m x that d). */
AI void block32_add(__m512 acc[], const __m512i s[], const struct cinfer_kernel_xq32 *xq, int blocks,
                    const uint8_t *pb, int b, const int R, const enum block32_kind kind)
{
    const int mx = kind == MXFP4_BLOCKS, mins = kind == Q4_1_BLOCKS || kind == Q5_1_BLOCKS;
    __m512 dw = mx ? e8m0_half16(pb) : half16(pb), mw = mins ? half16(pb + 32) : _mm512_setzero_ps();
    UNROLL for (int r = 0; r < R; r++) {
        const struct cinfer_kernel_xq32 *x = xq + (size_t)r * blocks + b;
        __m512 dx = _mm512_set1_ps(x->d);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), _mm512_mul_ps(dw, dx), acc[r]);
        if (mins)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps((float)x->sum), _mm512_mul_ps(mw, dx), acc[r]);
    }
}

/* Blocks a decode tile takes at a time: their lines prefetched in one burst, their integer
 * sums, then their float steps (in block order, so the bits do not change), as the K-quant
 * tiles go through a super-block. In batch-1 decode of the 1B-shaped Q4_0 file, timing each
 * matmul call, its q4_0 matrices streamed at 91-95 % of the rate of the Q4_K_M file's q4_K
 * matrices one block at a time, at 98-100 % in groups (interleaved runs, docs/benchmarks.md). */
#define GROUP_BLOCKS 8

/* One panel against R activation rows. */
AI VNNI void block32_tile(const struct cinfer_kernel_xq32 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                          __mmask16 mask, const int R, const enum block32_kind kind)
{
    const int block_bytes = block32_bytes(kind);
    __m512 acc[TILE_Q];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    int b = 0;
    if (R <= 2) /* decode: the weights stream from memory */
        for (; b + GROUP_BLOCKS <= blocks; b += GROUP_BLOCKS) {
            const uint8_t *pb = pg + (size_t)b * block_bytes;
            prefetch_block(pb, GROUP_BLOCKS * block_bytes);
            __m512i s[GROUP_BLOCKS][2];
            UNROLL for (int j = 0; j < GROUP_BLOCKS; j++)
                block32_sums(xq, blocks, pb + j * block_bytes, b + j, s[j], R, kind);
            UNROLL for (int j = 0; j < GROUP_BLOCKS; j++)
                block32_add(acc, s[j], xq, blocks, pb + j * block_bytes, b + j, R, kind);
        }
    for (; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        prefetch_block(pb, block_bytes);
        __m512i s[TILE_Q];
        block32_sums(xq, blocks, pb, b, s, R, kind);
        block32_add(acc, s, xq, blocks, pb, b, R, kind);
    }
    store_rows(y, ldy, mask, acc, R);
}

/* ---- super-blocks of 256: what their tiles share ----------------------------------- */

/* The float steps of a super-block, the scalar definition's: acc[r] += s[r] x (d x the
 * activation row's d), then, for the types with mins, acc[r] -= m[r] x (dmin x that d). */
AI void add_super_block(__m512 acc[], const __m512i s[], const __m512i m[], const uint8_t *pb,
                        const struct cinfer_kernel_xq256 *xq, int blocks, int b, const int R, const int mins)
{
    __m512 d = half16(pb), dmin = mins ? half16(pb + 32) : _mm512_setzero_ps();
    UNROLL for (int r = 0; r < R; r++) {
        __m512 dx = _mm512_set1_ps(xq[(size_t)r * blocks + b].d);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), _mm512_mul_ps(d, dx), acc[r]);
        if (mins)
            acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m[r]), _mm512_mul_ps(dmin, dx), acc[r]);
    }
}

/* ---- K-quants: Q4_K, Q5_K (super-blocks of 256, 8 sub-blocks of 32 with mins) ---------- */

/* The 6-bit scales and mins of the 8 sub-blocks of 16 rows, from the 3 dword vectors of
 * their 12 scale bytes: sc[j] as int32, mp[j] the min as an int16 pair (m, m). */
AI void k4_scales(const uint8_t *pb, __m512i sc[8], __m512i mp[8])
{
    const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
    __m512i s0 = load(pb + 64), s1 = load(pb + 128), s2 = load(pb + 192);
    __m512i mn[8];
    UNROLL for (int j = 0; j < 4; j++) {
        sc[j] = _mm512_and_si512(_mm512_srli_epi32(s0, 8 * j), m6);
        mn[j] = _mm512_and_si512(_mm512_srli_epi32(s1, 8 * j), m6);
        sc[j + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 8 * j), m4),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(s0, 8 * j + 6), m2), 4));
        mn[j + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 8 * j + 4), m4),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(s1, 8 * j + 6), m2), 4));
    }
    UNROLL for (int j = 0; j < 8; j++)
        mp[j] = _mm512_or_si512(mn[j], _mm512_slli_epi32(mn[j], 16));
}

AI VNNI void k45_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                      __mmask16 mask, const int R, const int q5)
{
    const int block_bytes = q5 ? 16 * 176 : 16 * 144, qs_at = q5 ? 768 : 256;
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    __m512 acc[TILE_K];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        prefetch_block(pb, block_bytes);
        __m512i sc[8], mp[8];
        k4_scales(pb, sc, mp);
        __m512i s[TILE_K], m[TILE_K];
        UNROLL for (int r = 0; r < R; r++) {
            s[r] = _mm512_setzero_si512();
            m[r] = _mm512_setzero_si512();
            const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
            UNROLL for (int j = 0; j < 8; j++) /* mins times the 16-value sums, two a sub-block */
                m[r] = dot_i16(m[r], mp[j], x->bsums + 2 * j);
        }
        for (int c = 0; c < 4; c++) { /* 64 values: sub-blocks 2c (low nibbles) and 2c + 1 (high) */
            __m512i lo_sum[TILE_K][2], hi_sum[TILE_K][2];
            UNROLL for (int r = 0; r < R; r++)
                lo_sum[r][0] = lo_sum[r][1] = hi_sum[r][0] = hi_sum[r][1] = _mm512_setzero_si512();
            UNROLL for (int v = 0; v < 8; v++) {
                __m512i w = load(pb + qs_at + 64 * (8 * c + v)), lo, hi;
                if (q5) { /* bit 2c (low) and 2c + 1 (high) of qh[4v + i] */
                    __m512i h = load(pb + 256 + 64 * v);
                    int sl = 2 * c, sh = 2 * c + 1;
                    __m512i hl = sl <= 4 ? _mm512_slli_epi16(h, 4 - sl) : _mm512_srli_epi16(h, sl - 4);
                    __m512i hh = sh <= 4 ? _mm512_slli_epi16(h, 4 - sh) : _mm512_srli_epi16(h, sh - 4);
                    lo = low4_or(w, _mm512_and_si512(hl, bit4));
                    hi = low4_or(_mm512_srli_epi16(w, 4), _mm512_and_si512(hh, bit4));
                } else { /* Q4_K: the high nibbles in place, 16 x their value (divided at the end) */
                    lo = low4(w);
                    hi = _mm512_sub_epi8(w, lo);
                }
                UNROLL for (int r = 0; r < R; r++) {
                    const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
                    lo_sum[r][v & 1] = dot_u8(lo_sum[r][v & 1], lo, x->q + 64 * c + 4 * v);
                    hi_sum[r][v & 1] = dot_u8(hi_sum[r][v & 1], hi, x->q + 64 * c + 32 + 4 * v);
                }
            }
            UNROLL for (int r = 0; r < R; r++) {
                __m512i l = _mm512_add_epi32(lo_sum[r][0], lo_sum[r][1]);
                __m512i hsum = _mm512_add_epi32(hi_sum[r][0], hi_sum[r][1]);
                if (!q5)
                    hsum = _mm512_srai_epi32(hsum, 4);
                s[r] = _mm512_add_epi32(s[r], _mm512_add_epi32(_mm512_mullo_epi32(l, sc[2 * c]),
                                                               _mm512_mullo_epi32(hsum, sc[2 * c + 1])));
            }
        }
        add_super_block(acc, s, m, pb, xq, blocks, b, R, 1);
    }
    store_rows(y, ldy, mask, acc, R);
}

/* ---- Q6_K (16 sub-blocks of 16 with int8 scales, values 6 bits - 32) ----------------- */

AI VNNI void q6k_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                      __mmask16 mask, const int R)
{
    const int block_bytes = 16 * 210;
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    __m512 acc[TILE_K];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        prefetch_block(pb, block_bytes);
        const uint8_t *scales = pb + 32, *ql = pb + 288, *qh = pb + 2336;
        __m512i s[TILE_K], bias[8];
        for (int t = 0; t < 8; t++) { /* -32 x the scales of sub-blocks 2t and 2t + 1, as int16 pairs */
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(scales + 32 * t));
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(scales + 32 * t + 16));
            __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi8(a, c), _mm_unpacklo_epi8(a, c));
            bias[t] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(pairs), _mm512_set1_epi16(-32));
        }
        UNROLL for (int r = 0; r < R; r++) { /* the bias against the 16-value sums */
            s[r] = _mm512_setzero_si512();
            const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
            UNROLL for (int t = 0; t < 8; t++)
                s[r] = dot_i16(s[r], bias[t], x->bsums + 2 * t);
        }
        for (int h = 0; h < 2; h++)
            for (int run = 0; run < 2; run++) { /* v = 4 run .. 4 run + 3: sub-blocks 8h + 2a + run */
                __m512i sum[TILE_K][4];
                UNROLL for (int r = 0; r < R; r++)
                    sum[r][0] = sum[r][1] = sum[r][2] = sum[r][3] = _mm512_setzero_si512();
                UNROLL for (int vv = 0; vv < 4; vv++) {
                    int v = 4 * run + vv;
                    __m512i A = load(ql + 64 * (16 * h + v)), B = load(ql + 64 * (16 * h + 8 + v));
                    __m512i H = load(qh + 64 * (8 * h + v));
                    __m512i q0 = low4_or(A, _mm512_and_si512(_mm512_slli_epi16(H, 4), bits45));
                    __m512i q1 = low4_or(B, _mm512_and_si512(_mm512_slli_epi16(H, 2), bits45));
                    __m512i q2 = low4_or(_mm512_srli_epi16(A, 4), _mm512_and_si512(H, bits45));
                    __m512i q3 = low4_or(_mm512_srli_epi16(B, 4), _mm512_and_si512(_mm512_srli_epi16(H, 2), bits45));
                    UNROLL for (int r = 0; r < R; r++) {
                        const int8_t *xr = xq[(size_t)r * blocks + b].q + 128 * h + 4 * v;
                        sum[r][0] = dot_u8(sum[r][0], q0, xr);
                        sum[r][1] = dot_u8(sum[r][1], q1, xr + 32);
                        sum[r][2] = dot_u8(sum[r][2], q2, xr + 64);
                        sum[r][3] = dot_u8(sum[r][3], q3, xr + 96);
                    }
                }
                UNROLL for (int a = 0; a < 4; a++) {
                    __m512i sc = _mm512_cvtepi8_epi32(
                        _mm_loadu_si128((const __m128i *)(const void *)(scales + 16 * (8 * h + 2 * a + run))));
                    UNROLL for (int r = 0; r < R; r++)
                        s[r] = _mm512_add_epi32(s[r], _mm512_mullo_epi32(sum[r][a], sc));
                }
            }
        add_super_block(acc, s, s, pb, xq, blocks, b, R, 0);
    }
    store_rows(y, ldy, mask, acc, R);
}

/* ---- Q2_K and Q3_K (super-blocks of 256, 16 sub-blocks of 16) ------------------------- */

/* Both types keep a value's 2 low bits in qs: byte 32h + l holds, at bits 2s, value
 * 128h + 32s + l. So the 4 qs units 8h + 4e + k (k < 4) give, shifted by 2s, the 16
 * values of sub-block 8h + 2s + e, against activations 128h + 32s + 16e + 4k. */

/* Q3_K's 6-bit scale j (minus 32) of the 16 rows, from the 3 dword vectors of their 12
 * scale bytes (cinfer_kernel_q3k_scales for one row). */
AI __m512i q3k_scale(const __m512i a[3], int j)
{
    const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
    __m512i low = _mm512_and_si512(_mm512_srli_epi32(a[j / 4 % 2], 8 * (j % 4) + 4 * (j / 8)), m4);
    __m512i high = _mm512_and_si512(_mm512_srli_epi32(a[2], 8 * (j % 4) + 2 * (j / 4)), m2);
    return _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
}

/* One panel against R activation rows. Q2_K: values 0..3, 4-bit scales and mins (scale
 * byte j: scale in the low nibble, min in the high), d and dmin. Q3_K: a high bit from
 * hmask (byte l, bit s + 4h) makes values 0..7, and 4 comes off (4 x the 16-value sum)
 * before the scale. Every sum is exact in int32. */
AI VNNI void k23_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                      __mmask16 mask, const int R, const int q3)
{
    const int block_bytes = q3 ? 16 * 110 : 16 * 84, qs_at = q3 ? 736 : 320;
    const __m512i m2 = _mm512_set1_epi8(3), bit2 = _mm512_set1_epi8(4), m4 = _mm512_set1_epi32(15);
    const __m512i bias = _mm512_set1_epi32(0xFFFC); /* pairs (-4, 0) */
    __m512 acc[TILE_K];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        prefetch_block(pb, block_bytes);
        __m512i sw[4]; /* Q2_K: 4 dwords of scale bytes; Q3_K: 3 */
        for (int w = 0; w < (q3 ? 3 : 4); w++)
            sw[w] = load(pb + (q3 ? 32 : 64) + 64 * w);
        __m512i s[TILE_K], m[TILE_K];
        UNROLL for (int r = 0; r < R; r++) {
            s[r] = _mm512_setzero_si512();
            m[r] = _mm512_setzero_si512();
        }
        if (!q3)
            UNROLL for (int j = 0; j < 16; j += 2) { /* mins times the 16-value sums, as int16 pairs */
                __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sw[j / 4], 8 * (j % 4) + 4), m4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sw[j / 4], 8 * (j % 4) + 12), m4);
                __m512i pair = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
                UNROLL for (int r = 0; r < R; r++)
                    m[r] = dot_i16(m[r], pair, xq[(size_t)r * blocks + b].bsums + j);
            }
        for (int h = 0; h < 2; h++)
            for (int e = 0; e < 2; e++) {
                __m512i q[4], hm[4];
                UNROLL for (int k = 0; k < 4; k++) {
                    q[k] = load(pb + qs_at + 64 * (8 * h + 4 * e + k));
                    hm[k] = q3 ? load(pb + 224 + 64 * (4 * e + k)) : _mm512_setzero_si512();
                }
                UNROLL for (int sh = 0; sh < 4; sh++) {
                    const int j = 8 * h + 2 * sh + e, bit = sh + 4 * h;
                    __m512i sc =
                        q3 ? q3k_scale(sw, j) : _mm512_and_si512(_mm512_srli_epi32(sw[j / 4], 8 * (j % 4)), m4);
                    __m512i w[4];
                    UNROLL for (int k = 0; k < 4; k++) {
                        __m512i low = _mm512_srli_epi16(q[k], 2 * sh);
                        if (q3) {
                            __m512i hb = bit >= 2 ? _mm512_srli_epi16(hm[k], bit - 2)
                                                  : _mm512_slli_epi16(hm[k], 2 - bit);
                            w[k] = _mm512_ternarylogic_epi32(low, m2, _mm512_and_si512(hb, bit2), 0xEA);
                        } else {
                            w[k] = _mm512_and_si512(low, m2);
                        }
                    }
                    UNROLL for (int r = 0; r < R; r++) {
                        const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
                        __m512i sub = q3 ? dot_i16(_mm512_setzero_si512(), bias, x->bsums + j) : _mm512_setzero_si512();
                        UNROLL for (int k = 0; k < 4; k++)
                            sub = dot_u8(sub, w[k], x->q + 128 * h + 32 * sh + 16 * e + 4 * k);
                        s[r] = _mm512_add_epi32(s[r], _mm512_mullo_epi32(sub, sc));
                    }
                }
            }
        add_super_block(acc, s, m, pb, xq, blocks, b, R, !q3);
    }
    store_rows(y, ldy, mask, acc, R);
}

/* ---- IQ4_XS (super-blocks of 256, 8 sub-blocks of 32 with 6-bit scales - 32) ---------- */

/* One panel against R activation rows. The nibbles go through the codebook plus 128 as
 * IQ4_NL's; a sub-block's sum loses 128 x its activations' sum (the two 16-value sums)
 * and is then multiplied by its scale: at most 32 x 127 x 127 x 32 a sub-block, exact. */
AI VNNI void iq4xs_tile(const struct cinfer_kernel_xq256 *xq, int blocks, const uint8_t *pg, float *y, int ldy,
                        __mmask16 mask, const int R)
{
    const int block_bytes = 16 * 136;
    const __m512i table = table_u8(cinfer_kernel_iq4nl_values), bias = _mm512_set1_epi16(-128);
    const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3), offset = _mm512_set1_epi32(32);
    __m512 acc[TILE_K];
    UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int b = 0; b < blocks; b++) {
        const uint8_t *pb = pg + (size_t)b * block_bytes;
        prefetch_block(pb, block_bytes);
        __m512i scales_l = load(pb + 64);
        __m512i scales_h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(pb + 32)));
        __m512i s[TILE_K];
        UNROLL for (int r = 0; r < R; r++)
            s[r] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i sc = _mm512_sub_epi32(
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(scales_l, 4 * j), m4),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(scales_h, 2 * j), m2), 4)),
                offset);
            __m512i sub[TILE_K][2];
            UNROLL for (int r = 0; r < R; r++) {
                const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
                sub[r][0] = dot_i16(_mm512_setzero_si512(), bias, x->bsums + 2 * j); /* -128 x the sum */
                sub[r][1] = _mm512_setzero_si512();
            }
            UNROLL for (int v = 0; v < 4; v++) { /* values 32j + 4v + i (low nibbles) and + 16 (high) */
                __m512i w = load(pb + 128 + 64 * (4 * j + v));
                __m512i lo = _mm512_shuffle_epi8(table, low4(w));
                __m512i hi = _mm512_shuffle_epi8(table, low4(_mm512_srli_epi16(w, 4)));
                UNROLL for (int r = 0; r < R; r++) {
                    const struct cinfer_kernel_xq256 *x = xq + (size_t)r * blocks + b;
                    sub[r][v & 1] = dot_u8(sub[r][v & 1], lo, x->q + 32 * j + 4 * v);
                    sub[r][v & 1] = dot_u8(sub[r][v & 1], hi, x->q + 32 * j + 16 + 4 * v);
                }
            }
            UNROLL for (int r = 0; r < R; r++)
                s[r] = _mm512_add_epi32(s[r], _mm512_mullo_epi32(_mm512_add_epi32(sub[r][0], sub[r][1]), sc));
        }
        add_super_block(acc, s, s, pb, xq, blocks, b, R, 0);
    }
    store_rows(y, ldy, mask, acc, R);
}

/* ---- the panels' loop ---------------------------------------------------------------- */

#define TILE_FN(name, R, ...)                                                                                  \
    static VNNI void name##_rows##R(const void *x, int blocks, const uint8_t *pg, float *y, int ldy, __mmask16 m) \
    {                                                                                                          \
        __VA_ARGS__;                                                                                           \
    }
#define TILE_FNS(R)                                                                                            \
    TILE_FN(q4_0, R, block32_tile(x, blocks, pg, y, ldy, m, R, Q4_0_BLOCKS))                                   \
    TILE_FN(q5_0, R, block32_tile(x, blocks, pg, y, ldy, m, R, Q5_0_BLOCKS))                                   \
    TILE_FN(iq4_nl, R, block32_tile(x, blocks, pg, y, ldy, m, R, IQ4_NL_BLOCKS))                               \
    TILE_FN(q4_1, R, block32_tile(x, blocks, pg, y, ldy, m, R, Q4_1_BLOCKS))                                   \
    TILE_FN(q5_1, R, block32_tile(x, blocks, pg, y, ldy, m, R, Q5_1_BLOCKS))                                   \
    TILE_FN(mxfp4, R, block32_tile(x, blocks, pg, y, ldy, m, R, MXFP4_BLOCKS))
#define TILE_K_FNS(R)                                                                                          \
    TILE_FN(q4_k, R, k45_tile(x, blocks, pg, y, ldy, m, R, 0))                                                 \
    TILE_FN(q5_k, R, k45_tile(x, blocks, pg, y, ldy, m, R, 1))                                                 \
    TILE_FN(q6_k, R, q6k_tile(x, blocks, pg, y, ldy, m, R))                                                    \
    TILE_FN(iq4_xs, R, iq4xs_tile(x, blocks, pg, y, ldy, m, R))                                                \
    TILE_FN(q2_k, R, k23_tile(x, blocks, pg, y, ldy, m, R, 0))                                                 \
    TILE_FN(q3_k, R, k23_tile(x, blocks, pg, y, ldy, m, R, 1))
TILE_FNS(1)
TILE_FNS(2)
TILE_FNS(3)
TILE_FNS(4)
TILE_FNS(5)
TILE_FNS(6)
TILE_FNS(7)
TILE_FNS(8)
TILE_K_FNS(1)
TILE_K_FNS(2)
TILE_K_FNS(3)
TILE_K_FNS(4)

typedef void (*tile_fn)(const void *x, int blocks, const uint8_t *pg, float *y, int ldy, __mmask16 m);

void cinfer_quant_panels_avx512(const void *x_prepared, int n, int k, const void *panels,
                                enum cinfer_kernel_wtype panel_type, int j0, int j1, float *y, int ldy)
{
    static const tile_fn q4_0[] = {q4_0_rows1, q4_0_rows2, q4_0_rows3, q4_0_rows4,
                                   q4_0_rows5, q4_0_rows6, q4_0_rows7, q4_0_rows8};
    static const tile_fn q5_0[] = {q5_0_rows1, q5_0_rows2, q5_0_rows3, q5_0_rows4,
                                   q5_0_rows5, q5_0_rows6, q5_0_rows7, q5_0_rows8};
    static const tile_fn iq4_nl[] = {iq4_nl_rows1, iq4_nl_rows2, iq4_nl_rows3, iq4_nl_rows4,
                                     iq4_nl_rows5, iq4_nl_rows6, iq4_nl_rows7, iq4_nl_rows8};
    static const tile_fn q4_1[] = {q4_1_rows1, q4_1_rows2, q4_1_rows3, q4_1_rows4,
                                   q4_1_rows5, q4_1_rows6, q4_1_rows7, q4_1_rows8};
    static const tile_fn q5_1[] = {q5_1_rows1, q5_1_rows2, q5_1_rows3, q5_1_rows4,
                                   q5_1_rows5, q5_1_rows6, q5_1_rows7, q5_1_rows8};
    static const tile_fn mxfp4[] = {mxfp4_rows1, mxfp4_rows2, mxfp4_rows3, mxfp4_rows4,
                                    mxfp4_rows5, mxfp4_rows6, mxfp4_rows7, mxfp4_rows8};
    static const tile_fn q4_k[] = {q4_k_rows1, q4_k_rows2, q4_k_rows3, q4_k_rows4};
    static const tile_fn q5_k[] = {q5_k_rows1, q5_k_rows2, q5_k_rows3, q5_k_rows4};
    static const tile_fn q6_k[] = {q6_k_rows1, q6_k_rows2, q6_k_rows3, q6_k_rows4};
    static const tile_fn iq4_xs[] = {iq4_xs_rows1, iq4_xs_rows2, iq4_xs_rows3, iq4_xs_rows4};
    static const tile_fn q2_k[] = {q2_k_rows1, q2_k_rows2, q2_k_rows3, q2_k_rows4};
    static const tile_fn q3_k[] = {q3_k_rows1, q3_k_rows2, q3_k_rows3, q3_k_rows4};
    if (j1 <= j0 || n < 1)
        return;
    enum cinfer_kernel_wtype stored = cinfer_quant_panel_stored(panel_type);
    const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(stored);
    int blocks = k / info->block_values, tile = info->block_values == 32 ? TILE_Q : TILE_K;
    const tile_fn *fns = stored == CINFER_KW_Q4_0   ? q4_0
                         : stored == CINFER_KW_Q5_0 ? q5_0
                         : stored == CINFER_KW_IQ4_NL ? iq4_nl
                         : stored == CINFER_KW_Q4_1 ? q4_1
                         : stored == CINFER_KW_Q5_1 ? q5_1
                         : stored == CINFER_KW_MXFP4 ? mxfp4
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
        for (int g = j0 / PANEL; g * PANEL < j1; g++)
            fns[rows - 1](xi, blocks, (const uint8_t *)panels + (size_t)g * panel_bytes,
                          y + (size_t)i * ldy + (size_t)g * PANEL, ldy, panel_rows_mask(g, j0, j1));
    }
}

/* ---- activations to int8 blocks -------------------------------------------------------- */

/* x rounded to nearest even, clamped to [-127, 127]: the scalar quantizers' nearest_int
 * for |x| < 2^22. */
AI __m512i round_clamp(__m512 v)
{
    __m512i q = _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

void cinfer_quantize_xq32_avx512(const float *x, int k, struct cinfer_kernel_xq32 *out)
{
    for (int b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
        __m512 m = _mm512_max_ps(_mm512_abs_ps(lo), _mm512_setzero_ps()); /* NaN never wins */
        m = _mm512_max_ps(_mm512_abs_ps(hi), m);
        float amax = _mm512_reduce_max_ps(m);
        float d = amax / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        __m512i qlo = round_clamp(_mm512_mul_ps(lo, _mm512_set1_ps(id)));
        __m512i qhi = round_clamp(_mm512_mul_ps(hi, _mm512_set1_ps(id)));
        out[b].d = d;
        out[b].sum = (int16_t)_mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
        out[b].zero = 0;
        _mm_storeu_si128((__m128i *)(void *)out[b].q, _mm512_cvtepi32_epi8(qlo));
        _mm_storeu_si128((__m128i *)(void *)(out[b].q + 16), _mm512_cvtepi32_epi8(qhi));
    }
}

void cinfer_quantize_xq256_avx512(const float *x, int k, struct cinfer_kernel_xq256 *out)
{
    for (int b = 0; b < k / CINFER_KERNEL_QK; b++) {
        const float *xb = x + CINFER_KERNEL_QK * b;
        struct cinfer_kernel_xq256 *o = &out[b];
        __m512 m = _mm512_setzero_ps();
        for (int c = 0; c < 16; c++)
            m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * c)), m);
        float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            memset(o, 0, sizeof *o);
            continue;
        }
        float max = 0.0f; /* the first value of largest magnitude, as the scalar loop keeps it */
        for (int c = 0; c < 16; c++) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * c)), _mm512_set1_ps(amax),
                                               _CMP_EQ_OQ);
            if (hit) {
                max = xb[16 * c + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        for (int c = 0; c < 16; c++) {
            __m512i q = round_clamp(_mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(xb + 16 * c)));
            _mm_storeu_si128((__m128i *)(void *)(o->q + 16 * c), _mm512_cvtepi32_epi8(q));
            o->bsums[c] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        o->d = 1.0f / iscale;
    }
}
