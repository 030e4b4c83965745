/* Weight element types: names, storage geometry and widening of small vectors. */
#include "model/model_load_internal.h"

#include <string.h>

const char *cinfer_dtype_name(enum cinfer_dtype t)
{
    switch (t) {
    case CINFER_DTYPE_F32: return "f32";
    case CINFER_DTYPE_F16: return "f16";
    case CINFER_DTYPE_BF16: return "bf16";
    case CINFER_DTYPE_Q8_0: return "q8_0";
    }
    return "unknown";
}

size_t cinfer_dtype_row_bytes(enum cinfer_dtype t, int64_t cols)
{
    switch (t) {
    case CINFER_DTYPE_F32: return (size_t)cols * 4;
    case CINFER_DTYPE_F16: case CINFER_DTYPE_BF16: return (size_t)cols * 2;
    case CINFER_DTYPE_Q8_0: return (size_t)(cols / CINFER_Q8_0_BLOCK) * CINFER_Q8_0_BLOCK_BYTES;
    }
    return 0;
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
