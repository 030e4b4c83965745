/* kernels/q8_panels.c — Q8_0 weights in panels of 16 rows (layout in kernels.h): the
 * repacking, a row read back, and the matmul loop any CPU can run, which gives each
 * output the bits every Q8_0 path gives (per block: exact int32 dot product S, then
 * acc = fma(S, dx * dw, acc)). */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

#define PANEL CINFER_KERNEL_PANEL_ROWS
#define PAIRS (CINFER_KERNEL_Q8_BLOCK / 2)
#define SCALES_BYTES (PANEL * 2) /* a panel block's 16 f16 scales, before its pairs */

size_t cinfer_kernel_q8_panels_bytes(int64_t rows, int64_t k)
{
    int64_t panels = (rows + PANEL - 1) / PANEL;
    return (size_t)panels * (size_t)(k / CINFER_KERNEL_Q8_BLOCK) * CINFER_KERNEL_PANEL_BLOCK_BYTES;
}

void cinfer_kernel_q8_pack_panels(const void *w, size_t w_row_bytes, int64_t rows, int64_t k, void *panels)
{
    const uint8_t *src = w;
    uint8_t *dst = panels;
    int64_t blocks = k / CINFER_KERNEL_Q8_BLOCK, n_panels = (rows + PANEL - 1) / PANEL;
    memset(dst, 0, cinfer_kernel_q8_panels_bytes(rows, k));
    for (int64_t g = 0; g < n_panels; g++)
        for (int r = 0; r < PANEL && g * PANEL + r < rows; r++) {
            const uint8_t *row = src + (size_t)(g * PANEL + r) * w_row_bytes;
            for (int64_t b = 0; b < blocks; b++) {
                const uint8_t *blk = row + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
                uint8_t *pb = dst + (size_t)(g * blocks + b) * CINFER_KERNEL_PANEL_BLOCK_BYTES;
                memcpy(pb + 2 * r, blk, 2);
                for (int p = 0; p < PAIRS; p++)
                    memcpy(pb + SCALES_BYTES + 32 * p + 2 * r, blk + 2 + 2 * p, 2);
            }
        }
}

/* Panel block b of the panel holding row `row`, with `blocks` blocks a row. */
static const uint8_t *panel_block(const void *panels, int blocks, int64_t row, int b)
{
    size_t block = (size_t)(row / PANEL) * (size_t)blocks + (size_t)b;
    return (const uint8_t *)panels + block * CINFER_KERNEL_PANEL_BLOCK_BYTES;
}

void cinfer_q8_panel_row_to_f32(const void *panels, int64_t row, int k, float *out)
{
    int r = (int)(row % PANEL);
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const uint8_t *pb = panel_block(panels, k / CINFER_KERNEL_Q8_BLOCK, row, b);
        uint16_t dh;
        memcpy(&dh, pb + 2 * r, 2);
        float d = cinfer_kernel_f16_to_f32(dh);
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++)
            out[b * CINFER_KERNEL_Q8_BLOCK + i] = d * (float)(int8_t)pb[SCALES_BYTES + 32 * (i / 2) + 2 * r + i % 2];
    }
}

void cinfer_q8_panels_scalar(const void *x_prepared, int n, int k, const void *panels, int j0, int j1, float *y,
                             int ldy)
{
    const struct cinfer_kernel_xblock *xq = x_prepared;
    int blocks = k / CINFER_KERNEL_Q8_BLOCK;
    for (int j = j0; j < j1; j++) {
        int r = j % PANEL;
        for (int i = 0; i < n; i++) {
            const struct cinfer_kernel_xblock *xb = xq + (size_t)i * blocks;
            float acc = 0.0f;
            for (int b = 0; b < blocks; b++) {
                const uint8_t *pb = panel_block(panels, blocks, j, b);
                uint16_t dh;
                memcpy(&dh, pb + 2 * r, 2);
                int32_t sum = 0;
                for (int q = 0; q < CINFER_KERNEL_Q8_BLOCK; q++)
                    sum += (int32_t)xb[b].q[q] * (int8_t)pb[SCALES_BYTES + 32 * (q / 2) + 2 * r + q % 2];
                acc = fmaf((float)sum, xb[b].d * cinfer_kernel_f16_to_f32(dh), acc);
            }
            y[(size_t)i * ldy + j] = acc;
        }
    }
}
