/* kernels/quant_panels.c — Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K … Q6_K and IQ4_XS
 * weights repacked in panels of 16 rows for the AVX-512 and AVX2 kernels (quant_panels_avx512.c,
 * quant_panels_avx2.c), each a rearrangement of the stored bytes (the same size: a
 * decode step still reads each stored byte once), block after block along the rows. In
 * a panel block the 16 rows' copies of each field lie side by side, so that one 64-byte
 * load gives a vector whose 16 lanes are the 16 rows:
 *
 *   q4_0   (16 x 18 B):  d[16] f16 | 4 units of 64 B: row r's qs[4u..4u+3] at 4r
 *   iq4_nl (16 x 18 B):  as q4_0 (the same fields in the same places)
 *   mxfp4  (16 x 17 B):  e[16] (E8M0 bytes) | 4 units of qs as q4_0
 *   q5_0   (16 x 22 B):  d[16] f16 | h: row r's dword at 4r, byte i holding at bit u the
 *                        5th bit of value 4u + i and at bit 4 + u that of value 16 + 4u + i
 *                        | 4 units of qs as q4_0
 *   q4_1   (16 x 20 B):  d[16] | m[16] | 4 units of qs as q4_0
 *   q5_1   (16 x 24 B):  d[16] | m[16] | h as q5_0's | 4 units of qs as q4_0
 *   q4_K   (16 x 144 B): d[16] | dmin[16] | 3 x 64 B: row r's scale bytes 4w..4w+3 at
 *                        64w + 4r | 32 units of qs as q4_0's
 *   q5_K   (16 x 176 B): as q4_K, then 8 x 64 B: row r's qh[4v..4v+3] at 64v + 4r, then qs
 *   q2_K   (16 x 84 B):  d[16] | dmin[16] | 4 x 64 B: row r's scale bytes 4w..4w+3 at 64w + 4r |
 *                        16 units of qs as q4_0's
 *   q3_K   (16 x 110 B): d[16] | 3 x 64 B: row r's scale bytes 4w..4w+3 at 64w + 4r | 8 x 64 B:
 *                        row r's hmask[4v..4v+3] at 64v + 4r | 16 units of qs as q4_0's
 *   iq4_xs (16 x 136 B): d[16] | scales_h[16] (u16) | 64 B: row r's 4 scales_l bytes at 4r |
 *                        32 units of qs as q4_0's (unit u: sub-block u / 4)
 *   q6_K   (16 x 210 B): d[16] | 16 x 16 B: scale j of the 16 rows (int8) | 32 units of
 *                        ql as q4_0's | 16 x 64 B: row r's qh[4w..4w+3] at 64w + 4r
 *
 * Any level can read them (the loop here repacks a row back and runs the scalar
 * definition), so a row's bits do not depend on the layout. */
#include <stdlib.h>
#include <string.h>

#include "kernels_impl.h"

#define PANEL CINFER_KERNEL_PANEL_ROWS

enum cinfer_kernel_wtype cinfer_quant_panel_stored(enum cinfer_kernel_wtype panel_type)
{
    switch (panel_type) {
    case CINFER_KW_Q4_0_PANELS: return CINFER_KW_Q4_0;
    case CINFER_KW_Q5_0_PANELS: return CINFER_KW_Q5_0;
    case CINFER_KW_Q4_K_PANELS: return CINFER_KW_Q4_K;
    case CINFER_KW_Q5_K_PANELS: return CINFER_KW_Q5_K;
    case CINFER_KW_Q6_K_PANELS: return CINFER_KW_Q6_K;
    case CINFER_KW_IQ4_NL_PANELS: return CINFER_KW_IQ4_NL;
    case CINFER_KW_IQ4_XS_PANELS: return CINFER_KW_IQ4_XS;
    case CINFER_KW_Q2_K_PANELS: return CINFER_KW_Q2_K;
    case CINFER_KW_Q3_K_PANELS: return CINFER_KW_Q3_K;
    case CINFER_KW_Q4_1_PANELS: return CINFER_KW_Q4_1;
    case CINFER_KW_Q5_1_PANELS: return CINFER_KW_Q5_1;
    case CINFER_KW_MXFP4_PANELS: return CINFER_KW_MXFP4;
    default: return panel_type;
    }
}

enum cinfer_kernel_wtype cinfer_quant_panel_of(enum cinfer_kernel_wtype stored)
{
    switch (stored) {
    case CINFER_KW_Q4_0: return CINFER_KW_Q4_0_PANELS;
    case CINFER_KW_Q5_0: return CINFER_KW_Q5_0_PANELS;
    case CINFER_KW_Q4_K: return CINFER_KW_Q4_K_PANELS;
    case CINFER_KW_Q5_K: return CINFER_KW_Q5_K_PANELS;
    case CINFER_KW_Q6_K: return CINFER_KW_Q6_K_PANELS;
    case CINFER_KW_IQ4_NL: return CINFER_KW_IQ4_NL_PANELS;
    case CINFER_KW_IQ4_XS: return CINFER_KW_IQ4_XS_PANELS;
    case CINFER_KW_Q2_K: return CINFER_KW_Q2_K_PANELS;
    case CINFER_KW_Q3_K: return CINFER_KW_Q3_K_PANELS;
    case CINFER_KW_Q4_1: return CINFER_KW_Q4_1_PANELS;
    case CINFER_KW_Q5_1: return CINFER_KW_Q5_1_PANELS;
    case CINFER_KW_MXFP4: return CINFER_KW_MXFP4_PANELS;
    default: return stored;
    }
}

/* Where byte k of row r's stored block goes inside the panel block (q5_0's and q5_1's qh
 * bytes, which are rearranged bit by bit, excepted: see q5_0_h). */
static size_t panel_offset(enum cinfer_kernel_wtype stored, int r, int k)
{
    switch (stored) {
    case CINFER_KW_Q4_0:
    case CINFER_KW_IQ4_NL:
        return k < 2 ? (size_t)(2 * r + k) : (size_t)(32 + 64 * ((k - 2) / 4) + 4 * r + (k - 2) % 4);
    case CINFER_KW_Q5_0: /* k 2..5 (qh): q5_0_h */
        return k < 2 ? (size_t)(2 * r + k) : (size_t)(96 + 64 * ((k - 6) / 4) + 4 * r + (k - 6) % 4);
    case CINFER_KW_MXFP4:
        return k < 1 ? (size_t)r : (size_t)(16 + 64 * ((k - 1) / 4) + 4 * r + (k - 1) % 4);
    case CINFER_KW_Q4_1:
        return k < 4 ? (size_t)(32 * (k / 2) + 2 * r + k % 2) : (size_t)(64 + 64 * ((k - 4) / 4) + 4 * r + (k - 4) % 4);
    case CINFER_KW_Q5_1: /* k 4..7 (qh): q5_0_h */
        return k < 4 ? (size_t)(32 * (k / 2) + 2 * r + k % 2)
                     : (size_t)(128 + 64 * ((k - 8) / 4) + 4 * r + (k - 8) % 4);
    case CINFER_KW_Q4_K:
    case CINFER_KW_Q5_K: {
        int qs = stored == CINFER_KW_Q4_K ? 16 : 48, base = stored == CINFER_KW_Q4_K ? 256 : 768;
        if (k < 4)
            return (size_t)(32 * (k / 2) + 2 * r + k % 2);
        if (k < 16)
            return (size_t)(64 + 64 * ((k - 4) / 4) + 4 * r + (k - 4) % 4);
        if (k < qs) /* q5_K's qh */
            return (size_t)(256 + 64 * ((k - 16) / 4) + 4 * r + (k - 16) % 4);
        return (size_t)(base + 64 * ((k - qs) / 4) + 4 * r + (k - qs) % 4);
    }
    case CINFER_KW_Q2_K: /* scales, qs, d, dmin */
        if (k < 16)
            return (size_t)(64 + 64 * (k / 4) + 4 * r + k % 4);
        if (k < 80)
            return (size_t)(320 + 64 * ((k - 16) / 4) + 4 * r + (k - 16) % 4);
        return (size_t)(32 * ((k - 80) / 2) + 2 * r + k % 2);
    case CINFER_KW_Q3_K: /* hmask, qs, scales, d */
        if (k < 32)
            return (size_t)(224 + 64 * (k / 4) + 4 * r + k % 4);
        if (k < 96)
            return (size_t)(736 + 64 * ((k - 32) / 4) + 4 * r + (k - 32) % 4);
        if (k < 108)
            return (size_t)(32 + 64 * ((k - 96) / 4) + 4 * r + (k - 96) % 4);
        return (size_t)(2 * r + (k - 108));
    case CINFER_KW_IQ4_XS: /* d, scales_h, scales_l, qs */
        if (k < 4)
            return (size_t)(32 * (k / 2) + 2 * r + k % 2);
        if (k < 8)
            return (size_t)(64 + 4 * r + (k - 4));
        return (size_t)(128 + 64 * ((k - 8) / 4) + 4 * r + (k - 8) % 4);
    case CINFER_KW_Q6_K:
        if (k < 128) /* ql */
            return (size_t)(288 + 64 * (k / 4) + 4 * r + k % 4);
        if (k < 192) /* qh */
            return (size_t)(2336 + 64 * ((k - 128) / 4) + 4 * r + (k - 128) % 4);
        if (k < 208) /* scales */
            return (size_t)(32 + 16 * (k - 192) + r);
        return (size_t)(2 * r + (k - 208)); /* d */
    default:
        return 0;
    }
}

/* q5_0's qh (bit j: the 5th bit of value j) as the panel holds it: byte i, bit u = value
 * 4u + i, bit 4 + u = value 16 + 4u + i; and back. */
static uint32_t q5_0_h(uint32_t qh)
{
    uint32_t h = 0;
    for (int i = 0; i < 4; i++)
        for (int u = 0; u < 4; u++)
            h |= ((qh >> (4 * u + i)) & 1u) << (8 * i + u) | ((qh >> (16 + 4 * u + i)) & 1u) << (8 * i + 4 + u);
    return h;
}

static uint32_t q5_0_qh(uint32_t h)
{
    uint32_t qh = 0;
    for (int i = 0; i < 4; i++)
        for (int u = 0; u < 4; u++)
            qh |= ((h >> (8 * i + u)) & 1u) << (4 * u + i) | ((h >> (8 * i + 4 + u)) & 1u) << (16 + 4 * u + i);
    return qh;
}

int cinfer_quant_can_pack_panels(enum cinfer_kernel_wtype stored, int64_t k)
{
    const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(stored);
    return info && cinfer_quant_panel_of(stored) != stored && k > 0 && k % info->block_values == 0;
}

/* Where a 5-bit type's qh lies in its stored block (-1: not a 5-bit 32-value type), and
 * where its rearranged h lies in a panel block (row r's at h_at + 4r). */
static int qh_stored_at(enum cinfer_kernel_wtype stored, int *h_at)
{
    *h_at = stored == CINFER_KW_Q5_1 ? 64 : 32;
    return stored == CINFER_KW_Q5_0 ? 2 : stored == CINFER_KW_Q5_1 ? 4 : -1;
}

#define MAX_BLOCK_BYTES 210 /* q6_K's, the largest block with panels */
#define QH_BYTE 0xFFFFu     /* in an offset table: a 5-bit type's qh byte, rearranged apart */

/* panel_offset of every byte of a block for row r, looked up while a matrix is repacked
 * or a row put back: called byte by byte, its switch made repacking take 1.4 s for a 1B
 * model's 728 MB. */
static void row_offsets(enum cinfer_kernel_wtype stored, int bytes, int r, uint16_t offsets[MAX_BLOCK_BYTES])
{
    int h_at, qh_at = qh_stored_at(stored, &h_at);
    for (int k = 0; k < bytes; k++)
        offsets[k] = qh_at >= 0 && k >= qh_at && k < qh_at + 4 ? QH_BYTE : (uint16_t)panel_offset(stored, r, k);
}

/* Row r (of 16) of a panel block <-> its stored block; offsets: row_offsets' for r. */
static void block_to_panel(enum cinfer_kernel_wtype stored, int bytes, int r, const uint16_t *offsets,
                           const uint8_t *blk, uint8_t *pb)
{
    int h_at, qh_at = qh_stored_at(stored, &h_at);
    for (int k = 0; k < bytes; k++)
        if (offsets[k] != QH_BYTE)
            pb[offsets[k]] = blk[k];
    if (qh_at >= 0) {
        uint32_t qh;
        memcpy(&qh, blk + qh_at, 4);
        uint32_t h = q5_0_h(qh);
        memcpy(pb + h_at + 4 * r, &h, 4);
    }
}

static void panel_to_block(enum cinfer_kernel_wtype stored, int bytes, int r, const uint16_t *offsets,
                           const uint8_t *pb, uint8_t *blk)
{
    int h_at, qh_at = qh_stored_at(stored, &h_at);
    for (int k = 0; k < bytes; k++)
        if (offsets[k] != QH_BYTE)
            blk[k] = pb[offsets[k]];
    if (qh_at >= 0) {
        uint32_t h;
        memcpy(&h, pb + h_at + 4 * r, 4);
        uint32_t qh = q5_0_qh(h);
        memcpy(blk + qh_at, &qh, 4);
    }
}

void cinfer_quant_pack_panels(enum cinfer_kernel_wtype stored, const void *w, size_t w_row_bytes, int64_t rows,
                              int64_t k, void *panels)
{
    const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(stored);
    int64_t blocks = k / info->block_values;
    size_t panel_bytes = (size_t)PANEL * (size_t)blocks * (size_t)info->block_bytes;
    size_t total = (size_t)((rows + PANEL - 1) / PANEL) * panel_bytes;
    memset(panels, 0, total); /* rows past `rows`: zero blocks, whose values are 0 */
    uint16_t offsets[PANEL][MAX_BLOCK_BYTES]; /* 6.7 KB */
    for (int r = 0; r < PANEL; r++)
        row_offsets(stored, info->block_bytes, r, offsets[r]);
    for (int64_t row = 0; row < rows; row++) {
        const uint8_t *in = (const uint8_t *)w + (size_t)row * w_row_bytes;
        uint8_t *pg = (uint8_t *)panels + (size_t)(row / PANEL) * panel_bytes;
        for (int64_t b = 0; b < blocks; b++)
            block_to_panel(stored, info->block_bytes, (int)(row % PANEL), offsets[row % PANEL],
                           in + (size_t)b * info->block_bytes, pg + (size_t)b * PANEL * info->block_bytes);
    }
}

void cinfer_quant_panel_row(enum cinfer_kernel_wtype panel_type, const void *panels, int64_t row, int64_t k,
                            void *out)
{
    enum cinfer_kernel_wtype stored = cinfer_quant_panel_stored(panel_type);
    const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(stored);
    int64_t blocks = k / info->block_values;
    size_t panel_bytes = (size_t)PANEL * (size_t)blocks * (size_t)info->block_bytes;
    const uint8_t *pg = (const uint8_t *)panels + (size_t)(row / PANEL) * panel_bytes;
    uint16_t offsets[MAX_BLOCK_BYTES];
    row_offsets(stored, info->block_bytes, (int)(row % PANEL), offsets);
    for (int64_t b = 0; b < blocks; b++)
        panel_to_block(stored, info->block_bytes, (int)(row % PANEL), offsets,
                       pg + (size_t)b * PANEL * info->block_bytes, (uint8_t *)out + (size_t)b * info->block_bytes);
}

/* Any level: each asked row put back as stored, then the scalar definition. */
void cinfer_quant_panels_scalar(const void *x_prepared, int n, int k, const void *panels,
                                enum cinfer_kernel_wtype panel_type, int j0, int j1, float *y, int ldy)
{
    enum cinfer_kernel_wtype stored = cinfer_quant_panel_stored(panel_type);
    size_t x_row_bytes = cinfer_kernel_xq_row_bytes(stored, k);
    uint8_t row[4096];
    uint8_t *buf = row;
    size_t need = cinfer_kernel_row_bytes(stored, k);
    uint8_t *heap = NULL;
    if (need > sizeof row) {
        heap = malloc(need);
        if (!heap)
            return;
        buf = heap;
    }
    for (int j = j0; j < j1; j++) {
        cinfer_quant_panel_row(panel_type, panels, j, k, buf);
        for (int i = 0; i < n; i++)
            y[(size_t)i * ldy + j] =
                cinfer_quant_dot_scalar(stored, buf, (const uint8_t *)x_prepared + (size_t)i * x_row_bytes, k);
    }
    free(heap);
}
