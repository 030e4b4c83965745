/* kernels/quant_dot_scalar.c — block-quantized weights times int8 activation blocks: the
 * activation quantizers and the dot product that defines each type's matmul, for every
 * CPU. Faster levels (quant_panels_avx512.c) compute the same integers and the same
 * float steps, so they give the same bits.
 *
 * Each output is accumulated block by block (a super-block of 256 for the K-quants and
 * IQ4_XS, 32 values otherwise). Within a block every product is exact in int32:
 *   32-value types:  S = Σ w_i q_i over the block, w_i the stored integer value
 *     (Q4_0: nibble - 8; Q5_0: 5 bits - 16; Q4_1/Q5_1: the unsigned q; IQ4_NL/MXFP4:
 *     the codebook value), then
 *       acc = fma(S, dw * dx, acc)                       (dw the block's scale)
 *     and for Q4_1 / Q5_1, whose values are d * q + m, also
 *       acc = fma(sum_x, m * dx, acc)                    (sum_x = Σ q_i of x's block)
 *   256-value types: S = Σ_j scale_j Σ_{i in sub-block j} w_i q_i over the sub-blocks
 *     (the 4- or 6-bit scale as an integer: Q3_K and IQ4_XS scale - 32, Q6_K the int8),
 *       acc = fma(S, d * dx, acc)
 *     and for Q2_K / Q4_K / Q5_K, whose values are d * sc * q - dmin * m, also
 *       M = Σ_j m_j bsum_j  (x's sums over sub-block j),   acc = fma(-M, dmin * dx, acc)
 * |S|, |M| < 2^28 for every type, so int32 holds them. */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

#define ROUNDING_MAGIC 12582912.0f /* 1.5 * 2^23 */

/* x rounded to the nearest integer, ties to even (|x| < 2^22), as llama.cpp's nearest_int. */
static inline int nearest_int(float x)
{
    float v = x + ROUNDING_MAGIC;
    int32_t bits;
    memcpy(&bits, &v, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

void cinfer_quantize_xq32_scalar(const float *x, int k, struct cinfer_kernel_xq32 *out)
{
    for (int b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
        float d = amax / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            int q = nearest_int(xb[i] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            out[b].q[i] = (int8_t)q;
            sum += q;
        }
        out[b].d = d;
        out[b].sum = (int16_t)sum;
        out[b].zero = 0;
    }
}

void cinfer_quantize_xq256_scalar(const float *x, int k, struct cinfer_kernel_xq256 *out)
{
    for (int b = 0; b < k / CINFER_KERNEL_QK; b++) {
        const float *xb = x + CINFER_KERNEL_QK * b;
        struct cinfer_kernel_xq256 *o = &out[b];
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < CINFER_KERNEL_QK; i++)
            if (fabsf(xb[i]) > amax) {
                amax = fabsf(xb[i]);
                max = xb[i];
            }
        if (amax == 0.0f) {
            memset(o, 0, sizeof *o);
            continue;
        }
        float iscale = -127.0f / max;
        for (int i = 0; i < CINFER_KERNEL_QK; i++) {
            int q = nearest_int(iscale * xb[i]);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            o->q[i] = (int8_t)q;
        }
        for (int j = 0; j < CINFER_KERNEL_QK / 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++)
                sum += o->q[16 * j + i];
            o->bsums[j] = (int16_t)sum;
        }
        o->d = 1.0f / iscale;
    }
}

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return cinfer_kernel_f16_to_f32(h);
}

/* ---- 32-value blocks ------------------------------------------------------- */

static float dot_q4_0(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 18) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += ((w[2 + j] & 0x0F) - 8) * x[b].q[j] + ((w[2 + j] >> 4) - 8) * x[b].q[j + 16];
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
    }
    return acc;
}

static float dot_q4_1(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 20) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += (w[4 + j] & 0x0F) * x[b].q[j] + (w[4 + j] >> 4) * x[b].q[j + 16];
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
        acc = fmaf((float)x[b].sum, half_at(w + 2) * x[b].d, acc);
    }
    return acc;
}

static float dot_q5_0(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 22) {
        uint32_t qh;
        memcpy(&qh, w + 2, 4);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[6 + j] & 0x0F) | (int)((qh >> j) & 1) << 4;
            int hi = (w[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            s += (lo - 16) * x[b].q[j] + (hi - 16) * x[b].q[j + 16];
        }
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
    }
    return acc;
}

static float dot_q5_1(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 24) {
        uint32_t qh;
        memcpy(&qh, w + 4, 4);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (w[8 + j] & 0x0F) | (int)((qh >> j) & 1) << 4;
            int hi = (w[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            s += lo * x[b].q[j] + hi * x[b].q[j + 16];
        }
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
        acc = fmaf((float)x[b].sum, half_at(w + 2) * x[b].d, acc);
    }
    return acc;
}

static float dot_iq4_nl(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 18) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += cinfer_kernel_iq4nl_values[w[2 + j] & 0x0F] * x[b].q[j] +
                 cinfer_kernel_iq4nl_values[w[2 + j] >> 4] * x[b].q[j + 16];
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
    }
    return acc;
}

static float dot_mxfp4(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 17) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++)
            s += cinfer_kernel_mxfp4_values[w[1 + j] & 0x0F] * x[b].q[j] +
                 cinfer_kernel_mxfp4_values[w[1 + j] >> 4] * x[b].q[j + 16];
        acc = fmaf((float)s, cinfer_kernel_e8m0_half(w[0]) * x[b].d, acc);
    }
    return acc;
}

/* ---- 256-value super-blocks ------------------------------------------------- */

static float dot_q2_k(const uint8_t *w, const struct cinfer_kernel_xq256 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 84) {
        const uint8_t *scales = w, *qs = w + 16;
        int32_t s = 0, m = 0;
        for (int j = 0; j < 16; j++) {
            int32_t sub = 0;
            for (int l = 0; l < 16; l++) {
                int i = 16 * j + l;
                int q = (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
                sub += q * x[b].q[i];
            }
            s += (scales[j] & 0x0F) * sub;
            m += (scales[j] >> 4) * x[b].bsums[j];
        }
        acc = fmaf((float)s, half_at(w + 80) * x[b].d, acc);
        acc = fmaf(-(float)m, half_at(w + 82) * x[b].d, acc);
    }
    return acc;
}

static float dot_q3_k(const uint8_t *w, const struct cinfer_kernel_xq256 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 110) {
        const uint8_t *hmask = w, *qs = w + 32;
        int sc[16];
        cinfer_kernel_q3k_scales(w + 96, sc);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) {
            int32_t sub = 0;
            for (int l = 0; l < 16; l++) {
                int i = 16 * j + l, shift = (i % 128) / 32;
                int q = (qs[32 * (i / 128) + i % 32] >> (2 * shift)) & 3;
                int high = (hmask[i % 32] >> (shift + 4 * (i / 128))) & 1;
                sub += (q - (high ? 0 : 4)) * x[b].q[i];
            }
            s += (sc[j] - 32) * sub;
        }
        acc = fmaf((float)s, half_at(w + 108) * x[b].d, acc);
    }
    return acc;
}

/* Q4_K and Q5_K (qh NULL for Q4_K). */
static float dot_q45_k(const uint8_t *w, const struct cinfer_kernel_xq256 *x, int blocks, int block_bytes, int q5)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += block_bytes) {
        const uint8_t *qh = q5 ? w + 16 : NULL, *qs = w + (q5 ? 48 : 16);
        int32_t s = 0, m = 0;
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            cinfer_kernel_k4_scale_min(w + 4, j, &sc, &mn);
            int32_t sub = 0;
            for (int l = 0; l < 32; l++) {
                uint8_t byte = qs[32 * (j / 2) + l];
                int q = j % 2 ? byte >> 4 : byte & 0x0F;
                if (qh)
                    q |= ((qh[l] >> j) & 1) << 4;
                sub += q * x[b].q[32 * j + l];
            }
            s += sc * sub;
            m += mn * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
        acc = fmaf(-(float)m, half_at(w + 2) * x[b].d, acc);
    }
    return acc;
}

static float dot_q6_k(const uint8_t *w, const struct cinfer_kernel_xq256 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 210) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t *scales = (const int8_t *)(w + 192);
        int32_t s = 0;
        for (int j = 0; j < 16; j++) {
            int32_t sub = 0;
            for (int l16 = 0; l16 < 16; l16++) {
                int i = 16 * j + l16, h = i / 128, a = (i % 128) / 32, l = i % 32;
                uint8_t low_byte = ql[64 * h + 32 * (a % 2) + l];
                int low = a < 2 ? low_byte & 0x0F : low_byte >> 4;
                int top = (qh[32 * h + l] >> (2 * a)) & 3;
                sub += ((low | top << 4) - 32) * x[b].q[i];
            }
            s += scales[j] * sub;
        }
        acc = fmaf((float)s, half_at(w + 208) * x[b].d, acc);
    }
    return acc;
}

static float dot_iq4_xs(const uint8_t *w, const struct cinfer_kernel_xq256 *x, int blocks)
{
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 136) {
        uint16_t scales_h;
        memcpy(&scales_h, w + 2, 2);
        const uint8_t *scales_l = w + 4, *qs = w + 8;
        int32_t s = 0;
        for (int j = 0; j < 8; j++) {
            int ls = ((scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | ((scales_h >> (2 * j)) & 3) << 4;
            int32_t sub = 0;
            for (int l = 0; l < 16; l++)
                sub += cinfer_kernel_iq4nl_values[qs[16 * j + l] & 0x0F] * x[b].q[32 * j + l] +
                       cinfer_kernel_iq4nl_values[qs[16 * j + l] >> 4] * x[b].q[32 * j + l + 16];
            s += (ls - 32) * sub;
        }
        acc = fmaf((float)s, half_at(w) * x[b].d, acc);
    }
    return acc;
}

float cinfer_quant_dot_scalar(enum cinfer_kernel_wtype wtype, const uint8_t *w, const void *x, int k)
{
    const struct cinfer_kernel_xq32 *x32 = x;
    const struct cinfer_kernel_xq256 *x256 = x;
    switch (wtype) {
    case CINFER_KW_Q4_0: return dot_q4_0(w, x32, k / 32);
    case CINFER_KW_Q4_1: return dot_q4_1(w, x32, k / 32);
    case CINFER_KW_Q5_0: return dot_q5_0(w, x32, k / 32);
    case CINFER_KW_Q5_1: return dot_q5_1(w, x32, k / 32);
    case CINFER_KW_IQ4_NL: return dot_iq4_nl(w, x32, k / 32);
    case CINFER_KW_MXFP4: return dot_mxfp4(w, x32, k / 32);
    case CINFER_KW_Q2_K: return dot_q2_k(w, x256, k / 256);
    case CINFER_KW_Q3_K: return dot_q3_k(w, x256, k / 256);
    case CINFER_KW_Q4_K: return dot_q45_k(w, x256, k / 256, 144, 0);
    case CINFER_KW_Q5_K: return dot_q45_k(w, x256, k / 256, 176, 1);
    case CINFER_KW_Q6_K: return dot_q6_k(w, x256, k / 256);
    case CINFER_KW_IQ4_XS: return dot_iq4_xs(w, x256, k / 256);
    default: return 0.0f;
    }
}

size_t cinfer_kernel_xq_row_bytes(enum cinfer_kernel_wtype wtype, int k)
{
    switch (cinfer_kernel_xq_block(wtype)) {
    case 32: return (size_t)(k / 32) * sizeof(struct cinfer_kernel_xq32);
    case 256: return (size_t)(k / CINFER_KERNEL_QK) * sizeof(struct cinfer_kernel_xq256);
    default: return 0;
    }
}

void cinfer_quant_matmul_scalar(const void *x_prepared, int n, int k, const void *w, enum cinfer_kernel_wtype wtype,
                                size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    size_t x_row_bytes = cinfer_kernel_xq_row_bytes(wtype, k);
    for (int j = j0; j < j1; j++) {
        const uint8_t *wrow = (const uint8_t *)w + (size_t)j * w_row_bytes;
        for (int i = 0; i < n; i++)
            y[(size_t)i * ldy + j] =
                cinfer_quant_dot_scalar(wtype, wrow, (const uint8_t *)x_prepared + (size_t)i * x_row_bytes, k);
    }
}
