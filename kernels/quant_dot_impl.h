/* kernels/quant_dot_impl.h — the integer dot products that define the block-quantized
 * types' matmul (see quant_dot_scalar.c), included once per level with QD(name) naming
 * the level's functions: quant_dot_scalar.c (generic x86-64), quant_dot_avx2.c and
 * quant_dot_avx512.c (the same C built with those levels' flags, which the compiler
 * vectorizes). Every step is exact in int32 or a single fma, so the levels give the same
 * bits. */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

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

float QD(cinfer_quant_dot)(enum cinfer_kernel_wtype wtype, const uint8_t *w, const void *x, int k)
{
    const struct cinfer_kernel_xq32 *x32 = x;
    const struct cinfer_kernel_xq256 *x256 = x;
#ifdef QD_CODEBOOK_DOT /* the level has its own kernels for the codebook types */
    if (wtype == CINFER_KW_IQ4_NL || wtype == CINFER_KW_IQ4_XS || wtype == CINFER_KW_MXFP4)
        return QD_CODEBOOK_DOT(wtype, w, x, k);
#endif
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

void QD(cinfer_quant_matmul)(const void *x_prepared, int n, int k, const void *w, enum cinfer_kernel_wtype wtype,
                                size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    size_t x_row_bytes = cinfer_kernel_xq_row_bytes(wtype, k);
    for (int j = j0; j < j1; j++) {
        const uint8_t *wrow = (const uint8_t *)w + (size_t)j * w_row_bytes;
        for (int i = 0; i < n; i++)
            y[(size_t)i * ldy + j] =
                QD(cinfer_quant_dot)(wtype, wrow, (const uint8_t *)x_prepared + (size_t)i * x_row_bytes, k);
    }
}
