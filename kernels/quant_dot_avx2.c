/* kernels/quant_dot_avx2.c — the block-quantized types' integer dot products
 * (quant_dot_impl.h) built for the AVX2 level: the compiler vectorizes the integer
 * sums, the fma is one instruction; the scalar definition's bits. Used for the types
 * without panels at this level (and for all of them where the CPU has no VNNI). */
#define QD(name) name##_avx2
#include "quant_dot_impl.h"
