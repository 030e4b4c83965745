/* kernels/quant.c — ggml's block-quantized weight types: their geometry and their
 * dequantization, which defines what each stored value is.
 *
 * Written from the block layouts of ggml (ggml-common.h: block_q4_0 ... block_iq4_xs,
 * block_mxfp4) and the meaning llama.cpp's dequantize_row_* give them. Every value is
 * computed in f32 one operation at a time, in the order written here (the file is built
 * with -ffp-contract=off, so no multiply-add is fused): tests/reference/ggml_quants.py
 * computes the same steps in numpy, and tests/test_dequant.c checks both agree bit for
 * bit on random blocks of every type. All multi-byte fields are little-endian.
 *
 *   type    block  bytes  layout (offsets in bytes)                    value
 *   q4_0      32     18   d f16 @0, qs[16] @2                          d * ((q & 15) - 8)
 *   q4_1      32     20   d @0, m @2, qs[16] @4                        d * q + m
 *   q5_0      32     22   d @0, qh u32 @2, qs[16] @6                   d * (q5 - 16)
 *   q5_1      32     24   d @0, m @2, qh u32 @4, qs[16] @8             d * q5 + m
 *   q2_K     256     84   scales[16] @0, qs[64] @16, d @80, dmin @82   (d*sc)*q - dmin*mn
 *   q3_K     256    110   hmask[32] @0, qs[64] @32, scales[12] @96, d @108   (d*(sc-32))*q3
 *   q4_K     256    144   d @0, dmin @2, scales[12] @4, qs[128] @16   (d*sc)*q - dmin*mn
 *   q5_K     256    176   d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
 *   q6_K     256    210   ql[128] @0, qh[64] @128, scales[16] i8 @192, d @208  ((d*sc)*q6)
 *   iq4_nl    32     18   d @0, qs[16] @2                              d * kvalues[q]
 *   iq4_xs   256    136   d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8  (d*(ls-32))*kv
 *   mxfp4     32     17   e u8 @0, qs[16] @1                           kv_e2m1[q] * 2^(e-128)
 *
 * In the 32-value types the low nibble of qs[j] is value j, the high nibble value j + 16,
 * and bit j of qh is the fifth bit of value j. The K-quants' arrangement is spelled out
 * by each function below. */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

static const struct cinfer_kernel_type_info type_table[CINFER_KW_TYPE_COUNT] = {
    [CINFER_KW_F32] = {"f32", 1, 4},         [CINFER_KW_F16] = {"f16", 1, 2},
    [CINFER_KW_BF16] = {"bf16", 1, 2},       [CINFER_KW_Q8_0] = {"q8_0", 32, 34},
    [CINFER_KW_Q4_0] = {"q4_0", 32, 18},     [CINFER_KW_Q4_1] = {"q4_1", 32, 20},
    [CINFER_KW_Q5_0] = {"q5_0", 32, 22},     [CINFER_KW_Q5_1] = {"q5_1", 32, 24},
    [CINFER_KW_Q2_K] = {"q2_K", 256, 84},    [CINFER_KW_Q3_K] = {"q3_K", 256, 110},
    [CINFER_KW_Q4_K] = {"q4_K", 256, 144},   [CINFER_KW_Q5_K] = {"q5_K", 256, 176},
    [CINFER_KW_Q6_K] = {"q6_K", 256, 210},   [CINFER_KW_IQ4_NL] = {"iq4_nl", 32, 18},
    [CINFER_KW_IQ4_XS] = {"iq4_xs", 256, 136}, [CINFER_KW_MXFP4] = {"mxfp4", 32, 17},
};

/* The 16 values an IQ4_NL / IQ4_XS nibble selects (ggml's kvalues_iq4nl), and the e2m1
 * values of MXFP4 doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times 2;
 * the scale 2^(e-128) is half the OCP E8M0 scale 2^(e-127) to make up for it). */
const int8_t cinfer_kernel_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                               1,    13,   25,  38,  53,  69,  89,  113};
const int8_t cinfer_kernel_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

const struct cinfer_kernel_type_info *cinfer_kernel_type_info(enum cinfer_kernel_wtype wtype)
{
    if ((unsigned)wtype >= CINFER_KW_TYPE_COUNT || !type_table[wtype].name)
        return NULL;
    return &type_table[wtype];
}

int cinfer_kernel_is_block_quant(enum cinfer_kernel_wtype wtype)
{
    return wtype >= CINFER_KW_Q4_0 && wtype <= CINFER_KW_MXFP4;
}

int cinfer_kernel_is_panels(enum cinfer_kernel_wtype wtype)
{
    return (wtype >= CINFER_KW_Q8_0_PANELS && wtype <= CINFER_KW_BF16_PANELS) ||
           (wtype >= CINFER_KW_Q4_0_PANELS && wtype <= CINFER_KW_MXFP4_PANELS);
}

int cinfer_kernel_xq_block(enum cinfer_kernel_wtype wtype)
{
    switch (wtype) {
    case CINFER_KW_Q4_0: case CINFER_KW_Q4_1: case CINFER_KW_Q5_0: case CINFER_KW_Q5_1:
    case CINFER_KW_IQ4_NL: case CINFER_KW_MXFP4: case CINFER_KW_Q4_0_PANELS: case CINFER_KW_Q5_0_PANELS:
    case CINFER_KW_IQ4_NL_PANELS: case CINFER_KW_Q4_1_PANELS: case CINFER_KW_Q5_1_PANELS: case CINFER_KW_MXFP4_PANELS:
        return 32;
    case CINFER_KW_Q2_K: case CINFER_KW_Q3_K: case CINFER_KW_Q4_K: case CINFER_KW_Q5_K: case CINFER_KW_Q6_K:
    case CINFER_KW_IQ4_XS: case CINFER_KW_Q4_K_PANELS: case CINFER_KW_Q5_K_PANELS: case CINFER_KW_Q6_K_PANELS:
    case CINFER_KW_IQ4_XS_PANELS: case CINFER_KW_Q2_K_PANELS: case CINFER_KW_Q3_K_PANELS:
        return 256;
    default:
        return 0;
    }
}

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return cinfer_kernel_f16_to_f32(h);
}

/* 2^(e - 128), exactly, for every e (e 0 and 1 are subnormal). */
float cinfer_kernel_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block's 12 scale bytes:
 * j < 4: scale = s[j] & 63, min = s[j + 4] & 63; j >= 4: the low 4 bits from s[j + 4]
 * (scale low nibble, min high nibble) and the top 2 bits from s[j - 4] (scale) and
 * s[j] (min) bits 6-7. */
void cinfer_kernel_k4_scale_min(const uint8_t *s, int j, int *scale, int *min)
{
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* The 16 6-bit scales of a Q3_K block (0..63; the value's scale is scale - 32): scale j's
 * low 4 bits are the low (j < 8) or high (j >= 8) nibble of s[j % 8], its top 2 bits are
 * bits 2 * (j / 4) .. of s[8 + j % 4]. */
void cinfer_kernel_q3k_scales(const uint8_t *s, int out[16])
{
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? s[j] & 0x0F : s[j - 8] >> 4;
        int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = low | (high << 4);
    }
}

static void dequant_q4_0(const uint8_t *b, float *y)
{
    float d = half_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 0x0F) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

static void dequant_q4_1(const uint8_t *b, float *y)
{
    float d = half_at(b), m = half_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b[4 + j] & 0x0F) + m;
        y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
    }
}

static void dequant_q5_0(const uint8_t *b, float *y)
{
    float d = half_at(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 0x0F) | (int)((qh >> j) & 1) << 4;
        int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

static void dequant_q5_1(const uint8_t *b, float *y)
{
    float d = half_at(b), m = half_at(b + 2);
    uint32_t qh;
    memcpy(&qh, b + 4, 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[8 + j] & 0x0F) | (int)((qh >> j) & 1) << 4;
        int hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* Q2_K: 16 sub-blocks of 16; value i (0..255) sits in half h = i / 128, shift
 * s = (i % 128) / 32 (bits 2s..2s+1 of qs[32h + i % 32]), and sub-block i / 16, whose
 * scale byte holds the scale (low nibble) and min (high nibble). */
static void dequant_q2_k(const uint8_t *b, float *y)
{
    const uint8_t *scales = b, *qs = b + 16;
    float d = half_at(b + 80), dmin = half_at(b + 82);
    for (int i = 0; i < 256; i++) {
        int q = (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        uint8_t sc = scales[i / 16];
        float dl = d * (float)(sc & 0x0F), ml = dmin * (float)(sc >> 4);
        y[i] = dl * (float)q - ml;
    }
}

/* Q3_K: like Q2_K's 2-bit layout; bit (i % 128) / 32 + 4 * (i / 128) of hmask[i % 32]
 * set means q3 = q, clear means q - 4. */
static void dequant_q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hmask = b, *qs = b + 32;
    float d = half_at(b + 108);
    int sc[16];
    cinfer_kernel_q3k_scales(b + 96, sc);
    for (int i = 0; i < 256; i++) {
        int shift = (i % 128) / 32;
        int q = (qs[32 * (i / 128) + i % 32] >> (2 * shift)) & 3;
        int high = (hmask[i % 32] >> (shift + 4 * (i / 128))) & 1;
        float dl = d * (float)(sc[i / 16] - 32);
        y[i] = dl * (float)(q - (high ? 0 : 4));
    }
}

/* Q4_K: 8 sub-blocks of 32; value i in chunk c = i / 64: the low (i % 64 < 32) or high
 * nibble of qs[32c + i % 32]. */
static void dequant_q4_k(const uint8_t *b, float *y)
{
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        cinfer_kernel_k4_scale_min(b + 4, j, &sc, &mn);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            uint8_t byte = qs[32 * (j / 2) + l];
            int q = j % 2 ? byte >> 4 : byte & 0x0F;
            y[32 * j + l] = dl * (float)q - ml;
        }
    }
}

/* Q5_K: Q4_K's nibbles plus bit j of qh[l] as the fifth bit of value 32j + l. */
static void dequant_q5_k(const uint8_t *b, float *y)
{
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        cinfer_kernel_k4_scale_min(b + 4, j, &sc, &mn);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            uint8_t byte = qs[32 * (j / 2) + l];
            int q = (j % 2 ? byte >> 4 : byte & 0x0F) | ((qh[l] >> j) & 1) << 4;
            y[32 * j + l] = dl * (float)q - ml;
        }
    }
}

/* Q6_K: value i in half h = i / 128, quarter a = (i % 128) / 32, l = i % 32: low 4 bits
 * from ql[64h + 32(a % 2) + l] (low nibble for a < 2, high for a >= 2), top 2 bits
 * from bits 2a..2a+1 of qh[32h + l]; q6 - 32 times scale (int8) of sub-block i / 16. */
static void dequant_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = half_at(b + 208);
    for (int i = 0; i < 256; i++) {
        int h = i / 128, a = (i % 128) / 32, l = i % 32;
        uint8_t low_byte = ql[64 * h + 32 * (a % 2) + l];
        int low = a < 2 ? low_byte & 0x0F : low_byte >> 4;
        int top = (qh[32 * h + l] >> (2 * a)) & 3;
        float dl = d * (float)scales[i / 16];
        y[i] = dl * (float)((low | top << 4) - 32);
    }
}

static void dequant_iq4_nl(const uint8_t *b, float *y)
{
    float d = half_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)cinfer_kernel_iq4nl_values[b[2 + j] & 0x0F];
        y[j + 16] = d * (float)cinfer_kernel_iq4nl_values[b[2 + j] >> 4];
    }
}

/* IQ4_XS: 8 sub-blocks of 32 as IQ4_NL blocks (low nibbles values 0..15, high 16..31),
 * each with a 6-bit scale: low 4 bits from scales_l, top 2 bits from scales_h. */
static void dequant_iq4_xs(const uint8_t *b, float *y)
{
    float d = half_at(b);
    uint16_t scales_h;
    memcpy(&scales_h, b + 2, 2);
    const uint8_t *scales_l = b + 4, *qs = b + 8;
    for (int j = 0; j < 8; j++) {
        int ls = ((scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | ((scales_h >> (2 * j)) & 3) << 4;
        float dl = d * (float)(ls - 32);
        for (int l = 0; l < 16; l++) {
            y[32 * j + l] = dl * (float)cinfer_kernel_iq4nl_values[qs[16 * j + l] & 0x0F];
            y[32 * j + l + 16] = dl * (float)cinfer_kernel_iq4nl_values[qs[16 * j + l] >> 4];
        }
    }
}

static void dequant_mxfp4(const uint8_t *b, float *y)
{
    float d = cinfer_kernel_e8m0_half(b[0]);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)cinfer_kernel_mxfp4_values[b[1 + j] & 0x0F] * d;
        y[j + 16] = (float)cinfer_kernel_mxfp4_values[b[1 + j] >> 4] * d;
    }
}

static void dequant_q8_0(const uint8_t *b, float *y)
{
    float d = half_at(b);
    for (int j = 0; j < 32; j++)
        y[j] = d * (float)(int8_t)b[2 + j];
}

void cinfer_kernel_quantize_q8_0(const float *x, int64_t k, void *out)
{
    uint8_t *o = out;
    for (int64_t b = 0; b < k / 32; b++, x += 32, o += 34) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = cinfer_kernel_f32_to_f16(d);
        memcpy(o, &dh, 2);
        for (int i = 0; i < 32; i++)
            o[2 + i] = (uint8_t)(int8_t)roundf(x[i] * id);
    }
}

void cinfer_kernel_dequantize_row(enum cinfer_kernel_wtype wtype, const void *row, int64_t k, float *out)
{
    void (*block_fn)(const uint8_t *, float *) = NULL;
    switch (wtype) {
    case CINFER_KW_Q8_0: block_fn = dequant_q8_0; break;
    case CINFER_KW_Q4_0: block_fn = dequant_q4_0; break;
    case CINFER_KW_Q4_1: block_fn = dequant_q4_1; break;
    case CINFER_KW_Q5_0: block_fn = dequant_q5_0; break;
    case CINFER_KW_Q5_1: block_fn = dequant_q5_1; break;
    case CINFER_KW_Q2_K: block_fn = dequant_q2_k; break;
    case CINFER_KW_Q3_K: block_fn = dequant_q3_k; break;
    case CINFER_KW_Q4_K: block_fn = dequant_q4_k; break;
    case CINFER_KW_Q5_K: block_fn = dequant_q5_k; break;
    case CINFER_KW_Q6_K: block_fn = dequant_q6_k; break;
    case CINFER_KW_IQ4_NL: block_fn = dequant_iq4_nl; break;
    case CINFER_KW_IQ4_XS: block_fn = dequant_iq4_xs; break;
    case CINFER_KW_MXFP4: block_fn = dequant_mxfp4; break;
    default:
        cinfer_kernel_row_to_f32(row, wtype, (int)k, out);
        return;
    }
    const struct cinfer_kernel_type_info *info = &type_table[wtype];
    const uint8_t *p = row;
    for (int64_t b = 0; b < k / info->block_values; b++)
        block_fn(p + (size_t)b * (size_t)info->block_bytes, out + b * info->block_values);
}
