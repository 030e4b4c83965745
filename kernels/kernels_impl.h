/* kernels/kernels_impl.h — the per-level implementations behind kernels.h. Each
 * *_avx2.c / *_avx512.c file is compiled with its own -m flags and only called after
 * dispatch.c checked the CPU. */
#ifndef CINFER_KERNELS_IMPL_H
#define CINFER_KERNELS_IMPL_H

#include "kernels.h"

#define CINFER_KERNEL_LEVEL_FNS(suffix)                                                             \
    void cinfer_matmul_##suffix(const float *x, const void *x_prepared, int n, int k, const void *w, \
                                enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, \
                                float *y, int ldy);                                                 \
    float cinfer_dot_##suffix(const float *a, const float *b, int n);                               \
    void cinfer_axpy_##suffix(float *y, float a, const float *x, int n);                            \
    void cinfer_rmsnorm_##suffix(float *y, const float *x, const float *w, int n, float eps);              \
    void cinfer_silu_mul_##suffix(float *gate, const float *up, size_t n);                            \
    void cinfer_softmax_##suffix(float *x, int n);                                                  \
    int cinfer_argmax_##suffix(const float *x, int n);

CINFER_KERNEL_LEVEL_FNS(scalar)
CINFER_KERNEL_LEVEL_FNS(avx2)
CINFER_KERNEL_LEVEL_FNS(avx512)

/* Decode-shaped matmul (n <= 2 activation rows): more weight rows in flight than the
 * tile, with the same per-element operations, so results match it bit for bit. */
void cinfer_gemv_avx512(const float *x, const void *x_prepared, int n, int k, const void *w,
                        enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy);
void cinfer_gemv_avx2(const float *x, const void *x_prepared, int n, int k, const void *w,
                      enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy);
#define CINFER_GEMV_MAX_ROWS 2

/* Q8_0 weights x prepared int16 activation blocks at the AVX-512 level (q8_avx512.c):
 * the GEMV (8 weight rows in flight, for n <= 2) and the tile (16, or for groups of at
 * most 8 rows 8, activation rows per vector, for n >= 3); both give every output the
 * same bits (see kernels.h). */
void cinfer_q8_gemv_avx512(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                           float *y, int ldy);
void cinfer_q8_tiles_avx512(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                            float *y, int ldy);
/* The same at the AVX2 level, for any n (gemv_avx2.c). */
void cinfer_q8_rows_avx2(const void *x_prepared, int n, int k, const void *w, size_t w_row_bytes, int j0, int j1,
                         float *y, int ldy);

/* Weights in panels (kernels.h) times activations, any n, any rows [j0, j1): the loop
 * every level can run (panels.c, x unrounded for F16/BF16), and the AVX-512 kernels
 * for Q8_0 panels (q8_panels_avx512.c: the stored layout's bits) and for F16/BF16
 * panels (panels16_avx512.c: BF16 with x_prepared on CPUs with AVX512_BF16 multiplies
 * x rounded to bf16, as the stored type's kernels do). */
/* The rows [j0, j1) asks of panel g (rows 16g ..), as bits 0..15. */
static inline unsigned cinfer_panel_rows_asked(int g, int j0, int j1)
{
    int lo = j0 > g * CINFER_KERNEL_PANEL_ROWS ? j0 - g * CINFER_KERNEL_PANEL_ROWS : 0;
    int hi = j1 < (g + 1) * CINFER_KERNEL_PANEL_ROWS ? j1 - g * CINFER_KERNEL_PANEL_ROWS : CINFER_KERNEL_PANEL_ROWS;
    return ((1u << hi) - 1u) & ~((1u << lo) - 1u);
}
void cinfer_panels_scalar(const float *x, const void *x_prepared, int n, int k, const void *panels,
                          enum cinfer_kernel_wtype type, int j0, int j1, float *y, int ldy);
void cinfer_q8_panels_avx512(const void *x_prepared, int n, int k, const void *panels, int j0, int j1, float *y,
                             int ldy);
/* ... and with AVX2 (q8_panels_avx2.c), for CPUs without AVX-512. */
void cinfer_q8_panels_avx2(const void *x_prepared, int n, int k, const void *panels, int j0, int j1, float *y, int ldy);
void cinfer_panels16_avx512(const float *x, const void *x_prepared, int n, int k, const void *panels,
                            enum cinfer_kernel_wtype type, int j0, int j1, float *y, int ldy);
/* out (k) = row `row` of weights in panels of type `type`, widened. */
void cinfer_panel_row_to_f32(const void *panels, enum cinfer_kernel_wtype type, int64_t row, int k, float *out);

/* y (n_y, len) += coef (n_y, n_x) · x (n_x, len): see cinfer_kernel_accumulate_rows. */
void cinfer_accumulate_rows_avx512(float *y, int n_y, int len, int ldy, const float *coef, int ld_coef,
                                   const float *x, size_t x_stride, int n_x);
void cinfer_accumulate_rows_avx2(float *y, int n_y, int len, int ldy, const float *coef, int ld_coef,
                                 const float *x, size_t x_stride, int n_x);

/* One row of k activations to Q8_0's int16 blocks, the same numbers as the scalar
 * quantizer (prepare_scalar.c). */
void cinfer_prepare_q8_avx512(const float *x, int k, struct cinfer_kernel_xblock *out);

/* Block-quantized types (quant.c, quant_dot_scalar.c). */
extern const int8_t cinfer_kernel_iq4nl_values[16];
extern const int8_t cinfer_kernel_mxfp4_values[16];
float cinfer_kernel_e8m0_half(uint8_t e);
void cinfer_kernel_k4_scale_min(const uint8_t *scales12, int j, int *scale, int *min);
void cinfer_kernel_q3k_scales(const uint8_t *scales12, int out[16]);
void cinfer_quantize_xq32_scalar(const float *x, int k, struct cinfer_kernel_xq32 *out);
void cinfer_quantize_xq256_scalar(const float *x, int k, struct cinfer_kernel_xq256 *out);
/* One stored row of a block-quantized type times one prepared activation row. */
float cinfer_quant_dot_scalar(enum cinfer_kernel_wtype wtype, const uint8_t *wrow, const void *x_row, int k);
/* Bytes of one prepared activation row of k values for wtype (0: not an xq type). */
size_t cinfer_kernel_xq_row_bytes(enum cinfer_kernel_wtype wtype, int k);
void cinfer_quant_matmul_scalar(const void *x_prepared, int n, int k, const void *w, enum cinfer_kernel_wtype wtype,
                                size_t w_row_bytes, int j0, int j1, float *y, int ldy);
/* The same definition built for the AVX2 and AVX-512 levels (quant_dot_{avx2,avx512}.c). */
float cinfer_quant_dot_avx2(enum cinfer_kernel_wtype wtype, const uint8_t *wrow, const void *x_row, int k);
/* IQ4_NL, IQ4_XS and MXFP4 with vpshufb lookups (quant_codebook_avx2.c): the same bits. */
float cinfer_quant_dot_codebook_avx2(enum cinfer_kernel_wtype wtype, const uint8_t *wrow, const void *x_row, int k);
float cinfer_quant_dot_avx512(enum cinfer_kernel_wtype wtype, const uint8_t *wrow, const void *x_row, int k);
void cinfer_quant_matmul_avx2(const void *x_prepared, int n, int k, const void *w, enum cinfer_kernel_wtype wtype,
                              size_t w_row_bytes, int j0, int j1, float *y, int ldy);
void cinfer_quant_matmul_avx512(const void *x_prepared, int n, int k, const void *w, enum cinfer_kernel_wtype wtype,
                                size_t w_row_bytes, int j0, int j1, float *y, int ldy);

/* Q4_0, Q5_0, Q4_K, Q5_K and Q6_K in panels of 16 rows (quant_panels.c): the type a panel
 * type repacks and back; whether rows of k can be packed; packing; a row put back as
 * stored (out: its row bytes); the loop any level runs; and the AVX-512 kernels
 * (quant_panels_avx512.c, VNNI and VBMI) with whether this CPU runs them. The AVX2
 * level, and an AVX-512 CPU without VNNI, run the AVX2 kernels. */
enum cinfer_kernel_wtype cinfer_quant_panel_stored(enum cinfer_kernel_wtype panel_type);
enum cinfer_kernel_wtype cinfer_quant_panel_of(enum cinfer_kernel_wtype stored);
int cinfer_quant_can_pack_panels(enum cinfer_kernel_wtype stored, int64_t k);
void cinfer_quant_pack_panels(enum cinfer_kernel_wtype stored, const void *w, size_t w_row_bytes, int64_t rows,
                              int64_t k, void *panels);
void cinfer_quant_panel_row(enum cinfer_kernel_wtype panel_type, const void *panels, int64_t row, int64_t k,
                            void *out);
void cinfer_quant_panels_scalar(const void *x_prepared, int n, int k, const void *panels,
                                enum cinfer_kernel_wtype panel_type, int j0, int j1, float *y, int ldy);
/* The same kernels with AVX2 (quant_panels_avx2.c), for CPUs without AVX-512 VNNI. */
void cinfer_quant_panels_avx2(const void *x_prepared, int n, int k, const void *panels,
                              enum cinfer_kernel_wtype panel_type, int j0, int j1, float *y, int ldy);
int cinfer_quant_panels_avx512_usable(void);
void cinfer_quant_panels_avx512(const void *x_prepared, int n, int k, const void *panels,
                                enum cinfer_kernel_wtype panel_type, int j0, int j1, float *y, int ldy);
/* Activations to int8 blocks with AVX-512: the scalar quantizers' numbers. */
void cinfer_quantize_xq32_avx512(const float *x, int k, struct cinfer_kernel_xq32 *out);
void cinfer_quantize_xq256_avx512(const float *x, int k, struct cinfer_kernel_xq256 *out);
/* ... and with AVX2 (prepare_avx2.c), with the Q8_0 weights' int16 blocks. */
void cinfer_quantize_xq32_avx2(const float *x, int k, struct cinfer_kernel_xq32 *out);
void cinfer_quantize_xq256_avx2(const float *x, int k, struct cinfer_kernel_xq256 *out);
void cinfer_prepare_q8_avx2(const float *x, int k, struct cinfer_kernel_xblock *out);

/* f16 / bf16 row widening with F16C (vector_avx2.c): the scalar conversions' values. */
void cinfer_widen_row_avx2(const void *row, int is_bf16, int k, float *out);
/* ... and narrowing, with F16C's rounding (nearest even, subnormals kept) and NaN made the
 * scalar conversions' quiet NaN. */
void cinfer_narrow_row_avx2(const float *x, int is_bf16, int k, uint16_t *out);

/* Rows of x handled together by one SIMD tile, and the block of activations rows kept
 * hot in cache while weight rows stream past. */
#define CINFER_MATMUL_TILE_ROWS 4
#define CINFER_MATMUL_TILE_COLS 4

#endif
