/* tests/support/quantize.h — floats to blocks of any block-quantized type, for models
 * built in memory by tests (simple rounding: valid encodings, not llama.cpp's best). */
#ifndef CINFER_TEST_QUANTIZE_H
#define CINFER_TEST_QUANTIZE_H

/* x (k) to one row of type dtype (an enum cinfer_kernel_wtype / cinfer_dtype of a
 * block-quantized type, Q8_0 included) at dst; -1 when dtype is not one, or k is not a
 * multiple of its block. */
int test_quantize_row(const float *x, int k, int dtype, void *dst);

#endif
