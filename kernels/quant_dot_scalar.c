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

size_t cinfer_kernel_xq_row_bytes(enum cinfer_kernel_wtype wtype, int k)
{
    switch (cinfer_kernel_xq_block(wtype)) {
    case 32: return (size_t)(k / 32) * sizeof(struct cinfer_kernel_xq32);
    case 256: return (size_t)(k / CINFER_KERNEL_QK) * sizeof(struct cinfer_kernel_xq256);
    default: return 0;
    }
}

#define QD(name) name##_scalar
#include "quant_dot_impl.h"
