/* Weight element types: names, storage geometry and widening of small vectors. */
#include "model/model_load_internal.h"

#include <string.h>

#include "kernels.h"

_Static_assert((int)CINFER_DTYPE_Q4_0 == (int)CINFER_KW_Q4_0 && (int)CINFER_DTYPE_Q6_K == (int)CINFER_KW_Q6_K &&
                   (int)CINFER_DTYPE_MXFP4 == (int)CINFER_KW_MXFP4 && (int)CINFER_DTYPE_Q8_0 == (int)CINFER_KW_Q8_0,
               "model dtypes and kernel weight types are numbered alike");

/* The kernels' table, for the stored types only (not their panel layouts 4..6). */
static const struct cinfer_kernel_type_info *info_of(enum cinfer_dtype t)
{
    if ((int)t >= 4 && (int)t <= 6)
        return NULL;
    return cinfer_kernel_type_info((enum cinfer_kernel_wtype)t);
}

const char *cinfer_dtype_name(enum cinfer_dtype t)
{
    const struct cinfer_kernel_type_info *info = info_of(t);
    return info ? info->name : "unknown";
}

int cinfer_dtype_is_quantized(enum cinfer_dtype t)
{
    const struct cinfer_kernel_type_info *info = info_of(t);
    return info && info->block_values > 1;
}

int cinfer_dtype_block_values(enum cinfer_dtype t)
{
    const struct cinfer_kernel_type_info *info = info_of(t);
    return info ? info->block_values : 0;
}

size_t cinfer_dtype_row_bytes(enum cinfer_dtype t, int64_t cols)
{
    const struct cinfer_kernel_type_info *info = info_of(t);
    return info ? (size_t)(cols / info->block_values) * (size_t)info->block_bytes : 0;
}

/* IEEE half to float, exact for every input (subnormals, infinities, NaN). */
float cinfer_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1f;
    uint32_t mantissa = h & 0x3ff;
    uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int shift = 0;
        while (!(mantissa & 0x400)) {
            mantissa <<= 1;
            shift++;
        }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float cinfer_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
