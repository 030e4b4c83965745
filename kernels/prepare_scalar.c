/* kernels/prepare_scalar.c — activations quantized to int16 blocks for Q8_0 weights.
 * Rounding is to nearest (even on ties) by the 1.5 * 2^23 trick, which needs no libm
 * call and vectorizes. */
#include <math.h>

#include "kernels.h"

#define ROUNDING_MAGIC 12582912.0f /* 1.5 * 2^23: adding it leaves an integer in the low bits */

size_t cinfer_kernel_prepared_bytes(enum cinfer_kernel_wtype wtype, int n, int k)
{
    if (wtype != CINFER_KW_Q8_0)
        return 0;
    return (size_t)n * (size_t)(k / CINFER_KERNEL_Q8_BLOCK) * sizeof(struct cinfer_kernel_xblock);
}

static void quantize_row_q16(const float *x, int k, struct cinfer_kernel_xblock *out)
{
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const float *xb = x + b * CINFER_KERNEL_Q8_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++) /* compares, not fmaxf: inlined */
            amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
        float d = amax / 32767.0f;
        float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++) {
            float q = (xb[i] * inv_d + ROUNDING_MAGIC) - ROUNDING_MAGIC;
            q = q > 32767.0f ? 32767.0f : q < -32767.0f ? -32767.0f : q;
            out[b].q[i] = (int16_t)q;
        }
    }
}

void cinfer_kernel_prepare_rows(enum cinfer_kernel_wtype wtype, const float *x, int k, int i0, int i1,
                                void *prepared)
{
    if (wtype != CINFER_KW_Q8_0)
        return;
    struct cinfer_kernel_xblock *blocks = prepared;
    int per_row = k / CINFER_KERNEL_Q8_BLOCK;
    for (int i = i0; i < i1; i++)
        quantize_row_q16(x + (size_t)i * k, k, blocks + (size_t)i * per_row);
}
