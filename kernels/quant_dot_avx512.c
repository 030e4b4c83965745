/* kernels/quant_dot_avx512.c — the block-quantized types' integer dot products
 * (quant_dot_impl.h) built for the AVX512 level: the compiler vectorizes the integer
 * sums, the fma is one instruction; the scalar definition's bits. Used for the types
 * without panels at this level (and for all of them where the CPU has no VNNI). The
 * codebook types take the AVX2 level's kernels (every AVX-512 CPU has AVX2): built here,
 * the C definition's table lookups stay scalar. */
#define QD(name) name##_avx512
#define QD_CODEBOOK_DOT cinfer_quant_dot_codebook_avx2 /* IQ4_NL, IQ4_XS, MXFP4: quant_codebook_avx2.c */
#include "quant_dot_impl.h"
