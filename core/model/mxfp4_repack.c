/* The published gpt-oss checkpoints' MXFP4 blocks (transformers' layout) repacked into
 * cinfer's MXFP4 rows (llama.cpp's block_mxfp4), value for value: no dequantization.
 *
 * transformers (convert_moe_packed_tensors): a block is 16 bytes, value 2k in the low
 * nibble of byte k and value 2k + 1 in the high one; its exponent lives apart in
 * _scales, the scale being 2^(e - 127).
 * block_mxfp4: the exponent byte first, then 16 bytes with value j in the low nibble of
 * byte j and value j + 16 in the high one; the kernels read doubled e2m1 values times
 * 2^(e - 128), the same numbers. So the exponent byte is copied and the nibbles reordered
 * (llama.cpp's convert_hf_to_gguf.py transform_nibble_layout does the same). */
#include "model/model_load_internal.h"

void cinfer_mxfp4_repack_row(const uint8_t *blocks, const uint8_t *scales, int64_t n_blocks, uint8_t *out)
{
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *in = blocks + b * 16;                      /* (16) nibble pairs */
        uint8_t *dst = out + b * CINFER_MXFP4_BLOCK_BYTES;        /* (17) exponent, 16 bytes */
        uint8_t value[32];                                         /* (32) e2m1 codes */
        for (int k = 0; k < 16; k++) {
            value[2 * k] = in[k] & 0x0F;
            value[2 * k + 1] = in[k] >> 4;
        }
        dst[0] = scales[b];
        for (int j = 0; j < 16; j++)
            dst[1 + j] = (uint8_t)(value[j] | (value[j + 16] << 4));
    }
}
