/* kernels/convert_scalar.c — f16 / bf16 <-> f32 in plain C (exact, IEEE round to
 * nearest even), row widening for every weight type. */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

float cinfer_kernel_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: value = mant * 2^-24 */
            float f = (float)mant * 0x1p-24f;
            memcpy(&bits, &f, sizeof bits);
            bits |= sign;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

uint16_t cinfer_kernel_f32_to_f16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7e00u;
    if (a >= 65520.0f) /* rounds to infinity */
        return sign | 0x7c00u;
    if (a < 0x1p-14f) { /* subnormal range: multiples of 2^-24, rint is nearest-even */
        return sign | (uint16_t)rintf(a * 0x1p24f);
    }
    uint32_t abits = bits & 0x7fffffffu;
    /* round the 23-bit mantissa to 10 bits, nearest even */
    uint32_t round = 0xfffu + ((abits >> 13) & 1u);
    abits += round;
    uint32_t exp = (abits >> 23) - 112u;
    return sign | (uint16_t)((exp << 10) | ((abits >> 13) & 0x3ffu));
}

float cinfer_kernel_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

uint16_t cinfer_kernel_f32_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (isnan(f))
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

size_t cinfer_kernel_row_bytes(enum cinfer_kernel_wtype wtype, int64_t k)
{
    switch (wtype) {
    case CINFER_KW_F32: return (size_t)k * 4;
    case CINFER_KW_F16:
    case CINFER_KW_BF16: return (size_t)k * 2;
    case CINFER_KW_F16_PANELS:
    case CINFER_KW_BF16_PANELS: return (size_t)k * 2;
    case CINFER_KW_Q8_0:
    case CINFER_KW_Q8_0_PANELS: return (size_t)(k / CINFER_KERNEL_Q8_BLOCK) * CINFER_KERNEL_Q8_BLOCK_BYTES;
    case CINFER_KW_Q4_0_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q4_0, k);
    case CINFER_KW_Q5_0_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q5_0, k);
    case CINFER_KW_Q4_K_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q4_K, k);
    case CINFER_KW_Q5_K_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q5_K, k);
    case CINFER_KW_Q6_K_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q6_K, k);
    case CINFER_KW_IQ4_NL_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_IQ4_NL, k);
    case CINFER_KW_IQ4_XS_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_IQ4_XS, k);
    case CINFER_KW_Q2_K_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q2_K, k);
    case CINFER_KW_Q3_K_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q3_K, k);
    case CINFER_KW_Q4_1_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q4_1, k);
    case CINFER_KW_Q5_1_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_Q5_1, k);
    case CINFER_KW_MXFP4_PANELS: return cinfer_kernel_row_bytes(CINFER_KW_MXFP4, k);
    default: {
        const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(wtype);
        return info ? (size_t)(k / info->block_values) * (size_t)info->block_bytes : 0;
    }
    }
}

void cinfer_kernel_row_from_f32(const float *x, int is_bf16, int k, uint16_t *out)
{
    if (cinfer_kernels_level() >= CINFER_KERNEL_AVX2) {
        cinfer_narrow_row_avx2(x, is_bf16, k, out);
        return;
    }
    for (int i = 0; i < k; i++)
        out[i] = is_bf16 ? cinfer_kernel_f32_to_bf16(x[i]) : cinfer_kernel_f32_to_f16(x[i]);
}

void cinfer_kernel_row_to_f32(const void *row, enum cinfer_kernel_wtype wtype, int k, float *out)
{
    const uint8_t *p = row;
    if ((wtype == CINFER_KW_F16 || wtype == CINFER_KW_BF16) && cinfer_kernels_level() >= CINFER_KERNEL_AVX2) {
        cinfer_widen_row_avx2(row, wtype == CINFER_KW_BF16, k, out); /* the KV cache's rows, a decode step's */
        return;
    }
    switch (wtype) {
    case CINFER_KW_F32:
        memcpy(out, row, (size_t)k * sizeof(float));
        break;
    case CINFER_KW_F16:
        for (int i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = cinfer_kernel_f16_to_f32(h);
        }
        break;
    case CINFER_KW_BF16:
        for (int i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = cinfer_kernel_bf16_to_f32(h);
        }
        break;
    case CINFER_KW_Q8_0:
        for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
            const uint8_t *blk = p + (size_t)b * CINFER_KERNEL_Q8_BLOCK_BYTES;
            uint16_t dh;
            memcpy(&dh, blk, 2);
            float d = cinfer_kernel_f16_to_f32(dh);
            const int8_t *q = (const int8_t *)(blk + 2);
            for (int i = 0; i < CINFER_KERNEL_Q8_BLOCK; i++)
                out[b * CINFER_KERNEL_Q8_BLOCK + i] = d * (float)q[i];
        }
        break;
    default:
        if (cinfer_kernel_is_block_quant(wtype))
            cinfer_kernel_dequantize_row(wtype, row, k, out);
        /* panels: rows are not contiguous, see cinfer_kernel_weight_row_to_f32 */
        break;
    }
}

void cinfer_kernel_weight_row_to_f32(const void *w, enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int64_t row,
                                     int k, float *out)
{
    if (cinfer_kernel_is_panels(wtype))
        cinfer_panel_row_to_f32(w, wtype, row, k, out);
    else
        cinfer_kernel_row_to_f32((const uint8_t *)w + (size_t)row * w_row_bytes, wtype, k, out);
}
