/* kernels/panels.c — weights in panels of 16 rows (layouts in kernels.h): the
 * repacking, a row read back, and the matmul loops any CPU can run. Q8_0 panels give
 * each output the bits every Q8_0 path gives (per block: exact int32 dot product S,
 * then acc = fma(S, dx * dw, acc)); F16 and BF16 panels sum in the two chains the
 * layout defines (values of even and odd index), x unrounded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_impl.h"

#define PANEL CINFER_KERNEL_PANEL_ROWS
#define PAIRS (CINFER_KERNEL_Q8_BLOCK / 2)
#define SCALES_BYTES (PANEL * 2) /* a Q8_0 panel block's 16 f16 scales, before its pairs */

enum cinfer_kernel_wtype cinfer_kernel_panel_type(enum cinfer_kernel_wtype stored)
{
    switch (stored) {
    case CINFER_KW_Q8_0: return CINFER_KW_Q8_0_PANELS;
    case CINFER_KW_F16: return CINFER_KW_F16_PANELS;
    case CINFER_KW_BF16: return CINFER_KW_BF16_PANELS;
    default: return cinfer_quant_panel_of(stored);
    }
}

/* The stored type a panel type repacks. */
static enum cinfer_kernel_wtype stored_type_of(enum cinfer_kernel_wtype panel_type)
{
    return panel_type == CINFER_KW_Q8_0_PANELS ? CINFER_KW_Q8_0
           : panel_type == CINFER_KW_F16_PANELS ? CINFER_KW_F16
                                                 : CINFER_KW_BF16;
}

int cinfer_kernel_can_pack_panels(enum cinfer_kernel_wtype stored, int64_t k)
{
    switch (stored) {
    case CINFER_KW_Q8_0: return k > 0 && k % CINFER_KERNEL_Q8_BLOCK == 0;
    case CINFER_KW_F16: return k > 0;
    case CINFER_KW_BF16: return k > 0 && k % 2 == 0;
    default: return cinfer_quant_can_pack_panels(stored, k);
    }
}

size_t cinfer_kernel_panels_bytes(enum cinfer_kernel_wtype stored, int64_t rows, int64_t k)
{
    int64_t panels = (rows + PANEL - 1) / PANEL;
    return (size_t)panels * PANEL * cinfer_kernel_row_bytes(stored, k);
}

/* Byte offset, inside its panel, of the 2-byte element of row r (of 16) that holds
 * value q (Q8_0: its int8 is the first byte; the block scale is elsewhere). */
static size_t element_at(enum cinfer_kernel_wtype panel_type, int r, int64_t q)
{
    switch (panel_type) {
    case CINFER_KW_Q8_0_PANELS: {
        int64_t b = q / CINFER_KERNEL_Q8_BLOCK, i = q % CINFER_KERNEL_Q8_BLOCK;
        return (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES + SCALES_BYTES + 32 * (size_t)(i / 2) + 2 * (size_t)r +
               (size_t)(i % 2);
    }
    case CINFER_KW_F16_PANELS: return (size_t)q * 32 + 2 * (size_t)r;
    case CINFER_KW_BF16_PANELS: return (size_t)(q / 2) * 64 + 4 * (size_t)r + 2 * (size_t)(q % 2);
    default: return 0;
    }
}

void cinfer_kernel_pack_panels(enum cinfer_kernel_wtype stored, const void *w, size_t w_row_bytes, int64_t rows,
                               int64_t k, void *panels)
{
    if (cinfer_kernel_is_block_quant(stored)) {
        cinfer_quant_pack_panels(stored, w, w_row_bytes, rows, k, panels);
        return;
    }
    const uint8_t *src = w;
    uint8_t *dst = panels;
    enum cinfer_kernel_wtype type = cinfer_kernel_panel_type(stored);
    size_t panel_bytes = PANEL * cinfer_kernel_row_bytes(stored, k);
    memset(dst, 0, cinfer_kernel_panels_bytes(stored, rows, k));
    for (int64_t row = 0; row < rows; row++) {
        const uint8_t *in = src + (size_t)row * w_row_bytes;
        uint8_t *pg = dst + (size_t)(row / PANEL) * panel_bytes;
        int r = (int)(row % PANEL);
        if (type == CINFER_KW_Q8_0_PANELS) {
            for (int64_t b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
                const uint8_t *blk = in + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
                uint8_t *pb = pg + (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES;
                memcpy(pb + 2 * r, blk, 2);
                for (int p = 0; p < PAIRS; p++)
                    memcpy(pb + SCALES_BYTES + 32 * p + 2 * r, blk + 2 + 2 * p, 2);
            }
        } else if (type == CINFER_KW_F16_PANELS) { /* value q of row r at 32q + 2r */
            for (int64_t q = 0; q < k; q++)
                memcpy(pg + 32 * (size_t)q + 2 * (size_t)r, in + 2 * (size_t)q, 2);
        } else { /* BF16: value pair p of row r at 64p + 4r */
            for (int64_t p = 0; p < k / 2; p++)
                memcpy(pg + 64 * (size_t)p + 4 * (size_t)r, in + 4 * (size_t)p, 4);
        }
    }
}

/* Row `row`'s value q of 16-bit panels, widened. */
static float value16(enum cinfer_kernel_wtype type, const uint8_t *pg, int r, int64_t q)
{
    uint16_t h;
    memcpy(&h, pg + element_at(type, r, q), 2);
    return type == CINFER_KW_F16_PANELS ? cinfer_kernel_f16_to_f32(h) : cinfer_kernel_bf16_to_f32(h);
}

void cinfer_panel_row_to_f32(const void *panels, enum cinfer_kernel_wtype type, int64_t row, int k, float *out)
{
    if (type >= CINFER_KW_Q4_0_PANELS) { /* put back as stored, then its definition */
        enum cinfer_kernel_wtype stored = cinfer_quant_panel_stored(type);
        uint8_t *blocks = malloc(cinfer_kernel_row_bytes(stored, k));
        if (!blocks)
            return;
        cinfer_quant_panel_row(type, panels, row, k, blocks);
        cinfer_kernel_dequantize_row(stored, blocks, k, out);
        free(blocks);
        return;
    }
    size_t panel_bytes = PANEL * cinfer_kernel_row_bytes(stored_type_of(type), k);
    const uint8_t *pg = (const uint8_t *)panels + (size_t)(row / PANEL) * panel_bytes;
    int r = (int)(row % PANEL);
    if (type != CINFER_KW_Q8_0_PANELS) {
        for (int q = 0; q < k; q++)
            out[q] = value16(type, pg, r, q);
        return;
    }
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const uint8_t *pb = pg + (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES;
        uint16_t dh;
        memcpy(&dh, pb + 2 * r, 2);
        float d = cinfer_kernel_f16_to_f32(dh);
        for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++) {
            int64_t q = (int64_t)b * CINFER_KERNEL_Q8_BLOCK + i;
            out[q] = d * (float)(int8_t)pg[element_at(type, r, q)];
        }
    }
}

void cinfer_panels_scalar(const float *x, const void *x_prepared, int n, int k, const void *panels,
                          enum cinfer_kernel_wtype type, int j0, int j1, float *y, int ldy)
{
    const struct cinfer_kernel_xblock *xq = x_prepared;
    int blocks = k / CINFER_KERNEL_Q8_BLOCK;
    size_t panel_bytes = PANEL * cinfer_kernel_row_bytes(stored_type_of(type), k);
    for (int j = j0; j < j1; j++) {
        const uint8_t *pg = (const uint8_t *)panels + (size_t)(j / PANEL) * panel_bytes;
        int r = j % PANEL;
        for (int i = 0; i < n; i++) {
            if (type != CINFER_KW_Q8_0_PANELS) { /* the two chains of the layout, x unrounded */
                const float *xi = x + (size_t)i * k;
                float even = 0.0f, odd = 0.0f;
                for (int q = 0; q < k; q++) {
                    if (q % 2 == 0)
                        even = fmaf(value16(type, pg, r, q), xi[q], even);
                    else
                        odd = fmaf(value16(type, pg, r, q), xi[q], odd);
                }
                y[(size_t)i * ldy + j] = even + odd;
                continue;
            }
            const struct cinfer_kernel_xblock *xb = xq + (size_t)i * blocks;
            float acc = 0.0f;
            for (int b = 0; b < blocks; b++) {
                const uint8_t *pb = pg + (size_t)b * CINFER_KERNEL_PANEL_BLOCK_BYTES;
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
