/* kernels/quant_dot_avx512.c — the block-quantized types' integer dot products
 * (quant_dot_impl.h) built for the AVX512 level: the compiler vectorizes the integer
 * sums, the fma is one instruction; the scalar definition's bits. Used for the types
 * without panels at this level (and for all of them where the CPU has no VNNI). */
#define QD(name) name##_avx512
#include "quant_dot_impl.h"
