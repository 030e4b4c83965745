/* tests/support/quantize.c — valid blocks of every ggml block-quantized type from floats,
 * for models built in memory by tests. Simple rounding against block scales (as
 * tests/reference/ggml_quants.py's quantize does), not llama.cpp's error-minimizing
 * search: the tests need correct encodings of plausible weights, not the best ones. */
#include "support/quantize.h"

#include <math.h>
#include <string.h>

#include "kernels.h"

static uint16_t f16(float x)
{
    return cinfer_kernel_f32_to_f16(x);
}

static float f16_value(float x)
{
    return cinfer_kernel_f16_to_f32(f16(x));
}

static void put_f16(uint8_t *p, float x)
{
    uint16_t h = f16(x);
    memcpy(p, &h, 2);
}

static int clampi(float v, int lo, int hi)
{
    int q = (int)floorf(v + 0.5f);
    return q < lo ? lo : q > hi ? hi : q;
}

static float safe_div(float x, float d)
{
    return d != 0.0f ? x / d : 0.0f;
}

/* Q4_0 / Q5_0: d = (value of largest magnitude) / -levels/2. */
static void quant_q_0(const float *x, uint8_t *b, int bits)
{
    int half = 1 << (bits - 1);
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    float d = f16_value(max / (float)-half);
    put_f16(b, d);
    uint32_t qh = 0;
    uint8_t *qs = b + (bits == 4 ? 2 : 6);
    for (int j = 0; j < 16; j++) {
        int lo = clampi(safe_div(x[j], d) + (float)half, 0, 2 * half - 1);
        int hi = clampi(safe_div(x[j + 16], d) + (float)half, 0, 2 * half - 1);
        qs[j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
        qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
    }
    if (bits == 5)
        memcpy(b + 2, &qh, 4);
}

/* Q4_1 / Q5_1: d = (max - min) / (levels - 1), m = min. */
static void quant_q_1(const float *x, uint8_t *b, int bits)
{
    int levels = 1 << bits;
    float lo = x[0], hi = x[0];
    for (int i = 1; i < 32; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    float d = f16_value((hi - lo) / (float)(levels - 1)), m = f16_value(lo);
    put_f16(b, d);
    put_f16(b + 2, m);
    uint32_t qh = 0;
    uint8_t *qs = b + (bits == 4 ? 4 : 8);
    for (int j = 0; j < 16; j++) {
        int q0 = clampi(safe_div(x[j] - m, d), 0, levels - 1), q1 = clampi(safe_div(x[j + 16] - m, d), 0, levels - 1);
        qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
        qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
    }
    if (bits == 5)
        memcpy(b + 4, &qh, 4);
}

static void quant_q8_0(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = f16_value(amax / 127.0f);
    put_f16(b, d);
    for (int i = 0; i < 32; i++) { /* roundf: half away from zero, as ggml's quantize_row_q8_0_ref */
        float q = roundf(safe_div(x[i], d));
        b[2 + i] = (uint8_t)(int8_t)(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
    }
}

/* The sub-block scales and mins of the K-quants with mins: per sub-block scale
 * (max - min') / qmax and min -min' (min' = min(x, 0)), both as integers 0..smax times
 * the super-block's d and dmin. q[] gets the values 0..qmax. */
static void k_scales_mins(const float *x, int sub_len, int qmax, int smax, float *d_out, float *dmin_out, int *sc,
                          int *mn, int *q)
{
    int n_sub = 256 / sub_len;
    float scale[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < n_sub; j++) {
        float lo = 0.0f, hi = x[j * sub_len];
        for (int i = 0; i < sub_len; i++) {
            lo = fminf(lo, x[j * sub_len + i]);
            hi = fmaxf(hi, x[j * sub_len + i]);
        }
        scale[j] = (hi - lo) / (float)qmax;
        mins[j] = -lo;
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, mins[j]);
    }
    float d = f16_value(max_scale / (float)smax), dmin = f16_value(max_min / (float)smax);
    for (int j = 0; j < n_sub; j++) {
        sc[j] = clampi(safe_div(scale[j], d), 0, smax);
        mn[j] = clampi(safe_div(mins[j], dmin), 0, smax);
        float step = d * (float)sc[j], offset = dmin * (float)mn[j];
        for (int i = 0; i < sub_len; i++)
            q[j * sub_len + i] = clampi(safe_div(x[j * sub_len + i] + offset, step), 0, qmax);
    }
    *d_out = d;
    *dmin_out = dmin;
}

static void pack_scales_k4(const int *sc, const int *mn, uint8_t *s)
{
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

/* The Q2_K/Q3_K arrangement of 2-bit values: value i in byte 32 * (i / 128) + i % 32 at
 * bit 2 * ((i % 128) / 32). */
static void pack_2bit(const int *q, uint8_t *qs)
{
    memset(qs, 0, 64);
    for (int i = 0; i < 256; i++)
        qs[32 * (i / 128) + i % 32] |= (uint8_t)((q[i] & 3) << (2 * ((i % 128) / 32)));
}

static void quant_q2_k(const float *x, uint8_t *b)
{
    int sc[16], mn[16], q[256];
    float d, dmin;
    k_scales_mins(x, 16, 3, 15, &d, &dmin, sc, mn, q);
    for (int j = 0; j < 16; j++)
        b[j] = (uint8_t)(sc[j] | mn[j] << 4);
    pack_2bit(q, b + 16);
    put_f16(b + 80, d);
    put_f16(b + 82, dmin);
}

static void quant_q45_k(const float *x, uint8_t *b, int bits)
{
    int sc[8], mn[8], q[256];
    float d, dmin;
    k_scales_mins(x, 32, (1 << bits) - 1, 63, &d, &dmin, sc, mn, q);
    put_f16(b, d);
    put_f16(b + 2, dmin);
    pack_scales_k4(sc, mn, b + 4);
    uint8_t *qs = b + (bits == 4 ? 16 : 48);
    memset(qs, 0, 128);
    if (bits == 5)
        memset(b + 16, 0, 32);
    for (int i = 0; i < 256; i++) {
        int j = i / 32, l = i % 32;
        qs[32 * (j / 2) + l] |= (uint8_t)((q[i] & 15) << (j % 2 ? 4 : 0));
        if (bits == 5)
            b[16 + l] |= (uint8_t)(((q[i] >> 4) & 1) << j);
    }
}

static void quant_q3_k(const float *x, uint8_t *b)
{
    float scale[16], max_scale = 0.0f;
    for (int j = 0; j < 16; j++) {
        float amax = 0.0f;
        for (int i = 0; i < 16; i++)
            amax = fmaxf(amax, fabsf(x[16 * j + i]));
        scale[j] = amax / 4.0f;
        max_scale = fmaxf(max_scale, scale[j]);
    }
    float d = f16_value(max_scale / 31.0f);
    int sc[16], q[256];
    for (int j = 0; j < 16; j++) {
        sc[j] = clampi(safe_div(scale[j], d), 0, 31) + 32;
        for (int i = 0; i < 16; i++)
            q[16 * j + i] = clampi(safe_div(x[16 * j + i], d * (float)(sc[j] - 32)), -4, 3) + 4;
    }
    memset(b, 0, 110);
    for (int i = 0; i < 256; i++)
        b[i % 32] |= (uint8_t)((q[i] >> 2) << ((i % 128) / 32 + 4 * (i / 128)));
    pack_2bit(q, b + 32);
    uint8_t *s = b + 96;
    for (int j = 0; j < 16; j++) {
        s[j % 8] |= (uint8_t)((sc[j] & 15) << (j < 8 ? 0 : 4));
        s[8 + j % 4] |= (uint8_t)(((sc[j] >> 4) & 3) << (2 * (j / 4)));
    }
    put_f16(b + 108, d);
}

static void quant_q6_k(const float *x, uint8_t *b)
{
    float scale[16], max_scale = 0.0f;
    for (int j = 0; j < 16; j++) {
        float amax = 0.0f;
        for (int i = 0; i < 16; i++)
            amax = fmaxf(amax, fabsf(x[16 * j + i]));
        scale[j] = amax / 31.0f;
        max_scale = fmaxf(max_scale, scale[j]);
    }
    float d = f16_value(max_scale / 127.0f);
    memset(b, 0, 210);
    for (int j = 0; j < 16; j++) {
        int sc = clampi(safe_div(scale[j], d), -128, 127);
        b[192 + j] = (uint8_t)(int8_t)sc;
        for (int i = 0; i < 16; i++) {
            int v = 16 * j + i, h = v / 128, a = (v % 128) / 32, l = v % 32;
            int q = clampi(safe_div(x[v], d * (float)sc), -32, 31) + 32;
            b[64 * h + 32 * (a % 2) + l] |= (uint8_t)((q & 15) << (a < 2 ? 0 : 4));
            b[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * a));
        }
    }
    put_f16(b + 208, d);
}

static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static int nearest_code(float t, const int8_t *values)
{
    int best = 0;
    for (int c = 1; c < 16; c++)
        if (fabsf(t - (float)values[c]) < fabsf(t - (float)values[best]))
            best = c;
    return best;
}

/* 32 values as nibbles of a codebook at step d: low nibble value j, high value j + 16. */
static void pack_codes(const float *x, float d, const int8_t *values, uint8_t *qs)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(nearest_code(safe_div(x[j], d), values) |
                          nearest_code(safe_div(x[j + 16], d), values) << 4);
}

static void quant_iq4_nl(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = f16_value(amax / 127.0f);
    put_f16(b, d);
    pack_codes(x, d, iq4nl_values, b + 2);
}

static void quant_iq4_xs(const float *x, uint8_t *b)
{
    float scale[8], max_scale = 0.0f;
    for (int j = 0; j < 8; j++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[32 * j + i]));
        scale[j] = amax / 127.0f;
        max_scale = fmaxf(max_scale, scale[j]);
    }
    float d = f16_value(max_scale / 31.0f);
    put_f16(b, d);
    uint16_t scales_h = 0;
    memset(b + 4, 0, 4);
    for (int j = 0; j < 8; j++) {
        int ls = clampi(safe_div(scale[j], d), 0, 31) + 32;
        scales_h |= (uint16_t)(((ls >> 4) & 3) << (2 * j));
        b[4 + j / 2] |= (uint8_t)((ls & 15) << (4 * (j % 2)));
        pack_codes(x + 32 * j, d * (float)(ls - 32), iq4nl_values, b + 8 + 16 * j);
    }
    memcpy(b + 2, &scales_h, 2);
}

static void quant_mxfp4(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    int e = amax > 0.0f ? (int)ceilf(log2f(amax / 12.0f)) + 128 : 0;
    e = e < 0 ? 0 : e > 254 ? 254 : e;
    b[0] = (uint8_t)e;
    pack_codes(x, ldexpf(1.0f, e - 128), mxfp4_values, b + 1);
}

int test_quantize_row(const float *x, int k, int dtype, void *dst)
{
    const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info((enum cinfer_kernel_wtype)dtype);
    if (!info || info->block_values <= 1 || k % info->block_values)
        return -1;
    uint8_t *out = dst;
    for (int b = 0; b < k / info->block_values; b++) {
        const float *xb = x + (size_t)b * info->block_values;
        uint8_t *blk = out + (size_t)b * info->block_bytes;
        switch ((enum cinfer_kernel_wtype)dtype) {
        case CINFER_KW_Q8_0: quant_q8_0(xb, blk); break;
        case CINFER_KW_Q4_0: quant_q_0(xb, blk, 4); break;
        case CINFER_KW_Q5_0: quant_q_0(xb, blk, 5); break;
        case CINFER_KW_Q4_1: quant_q_1(xb, blk, 4); break;
        case CINFER_KW_Q5_1: quant_q_1(xb, blk, 5); break;
        case CINFER_KW_Q2_K: quant_q2_k(xb, blk); break;
        case CINFER_KW_Q3_K: quant_q3_k(xb, blk); break;
        case CINFER_KW_Q4_K: quant_q45_k(xb, blk, 4); break;
        case CINFER_KW_Q5_K: quant_q45_k(xb, blk, 5); break;
        case CINFER_KW_Q6_K: quant_q6_k(xb, blk); break;
        case CINFER_KW_IQ4_NL: quant_iq4_nl(xb, blk); break;
        case CINFER_KW_IQ4_XS: quant_iq4_xs(xb, blk); break;
        case CINFER_KW_MXFP4: quant_mxfp4(xb, blk); break;
        default: return -1;
        }
    }
    return 0;
}
