/* kernels/matmul_scalar.c — the reference-shaped matmul every CPU can run: one dot
 * product per (activation row, weight row), weights widened as they are read. */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

/* One weight row · one activation row, f32 accumulation. */
static float dot_weight_row(const float *x, const uint8_t *wrow, enum cinfer_kernel_wtype wtype, int k)
{
    float acc = 0.0f;
    switch (wtype) {
    case CINFER_KW_F32:
        for (int i = 0; i < k; i++) { /* memcpy: mmapped rows need not be 4-byte aligned */
            float w;
            memcpy(&w, wrow + 4 * (size_t)i, 4);
            acc += x[i] * w;
        }
        break;
    case CINFER_KW_F16:
        for (int i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, wrow + 2 * i, 2);
            acc += x[i] * cinfer_kernel_f16_to_f32(h);
        }
        break;
    case CINFER_KW_BF16:
        for (int i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, wrow + 2 * i, 2);
            acc += x[i] * cinfer_kernel_bf16_to_f32(h);
        }
        break;
    case CINFER_KW_Q8_0: /* through dot_q8_row */
    case CINFER_KW_Q8_0_PANELS: /* dispatch.c sends panels to panels.c */
    case CINFER_KW_F16_PANELS:
    case CINFER_KW_BF16_PANELS:
    default: /* block-quantized types: quant_dot_scalar.c */
        break;
    }
    return acc;
}

/* One Q8_0 weight row · one prepared activation row, as kernels.h defines it for every
 * level: per block an exact integer dot product S, then acc = fma(S, dx * dw, acc). */
static float dot_q8_row(const struct cinfer_kernel_xblock *xq, const uint8_t *wrow, int k)
{
    float acc = 0.0f;
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const uint8_t *blk = wrow + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
        uint16_t dh;
        memcpy(&dh, blk, 2);
        const int8_t *q = (const int8_t *)(blk + 2);
        int32_t sum = 0;
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++)
            sum += (int32_t)xq[b].q[i] * q[i];
        float scale = xq[b].d * cinfer_kernel_f16_to_f32(dh);
        acc = fmaf((float)sum, scale, acc);
    }
    return acc;
}

void cinfer_matmul_scalar(const float *x, const void *x_prepared, int n, int k, const void *w,
                          enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    const uint8_t *wbytes = w;
    const struct cinfer_kernel_xblock *xq = x_prepared;
    int blocks_per_row = k / CINFER_KERNEL_Q8_BLOCK;
    for (int j = j0; j < j1; j++) {
        const uint8_t *wrow = wbytes + (size_t)j * w_row_bytes;
        for (int i = 0; i < n; i++)
            y[(size_t)i * ldy + j] = wtype == CINFER_KW_Q8_0
                                         ? dot_q8_row(xq + (size_t)i * blocks_per_row, wrow, k)
                                         : dot_weight_row(x + (size_t)i * k, wrow, wtype, k);
    }
}
