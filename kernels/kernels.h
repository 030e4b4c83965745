/* kernels/kernels.h — CPU compute kernels with run-time dispatch on CPU features.
 *
 * Every kernel has a scalar version; the hot ones (matmul, dot, axpy, rmsnorm) also
 * have AVX2+FMA+F16C and AVX-512 (F, BW, VL) versions. The level is picked once from
 * __builtin_cpu_supports and can be forced lower (tests compare every level against a
 * double-precision loop). Kernels are single-threaded and work on a range of rows so
 * the caller's thread pool decides the split. */
#ifndef CINFER_KERNELS_H
#define CINFER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

enum cinfer_kernel_level {
    CINFER_KERNEL_SCALAR = 0,
    CINFER_KERNEL_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CINFER_KERNEL_AVX512 = 2, /* AVX-512 F + BW + VL */
};

/* Weight types the matmul reads directly; numbered like enum cinfer_dtype. */
enum cinfer_kernel_wtype {
    CINFER_KW_F32 = 0,
    CINFER_KW_F16 = 1,
    CINFER_KW_BF16 = 2,
    CINFER_KW_Q8_0 = 3, /* blocks of 32: f16 scale d, 32 int8 q; value = d * q */
    CINFER_KW_Q8_0_PANELS = 4, /* the stored types repacked in panels of 16 rows (below) */
    CINFER_KW_F16_PANELS = 5,
    CINFER_KW_BF16_PANELS = 6,
    /* ggml's block-quantized types, as GGUF files store them (quant.c: geometry and the
     * dequantization that defines each; the integer dot products in quant_dot_scalar.c).
     * Blocks of 32 values: */
    CINFER_KW_Q4_0 = 7,   /* f16 d, 16 bytes of nibbles; d * (q - 8) */
    CINFER_KW_Q4_1 = 8,   /* f16 d, f16 m, nibbles; d * q + m */
    CINFER_KW_Q5_0 = 9,   /* f16 d, 32 high bits, nibbles; d * (q - 16) */
    CINFER_KW_Q5_1 = 10,  /* f16 d, f16 m, 32 high bits, nibbles; d * q + m */
    /* super-blocks of 256 values (the K-quants), sub-blocks with integer scales: */
    CINFER_KW_Q2_K = 11,  /* 16 x 4-bit scale/min, 2-bit q, f16 d, dmin */
    CINFER_KW_Q3_K = 12,  /* 2-bit q + high-bit mask, 16 x 6-bit scales, f16 d */
    CINFER_KW_Q4_K = 13,  /* f16 d, dmin, 8 x 6-bit scale/min, 4-bit q */
    CINFER_KW_Q5_K = 14,  /* Q4_K + a high bit per value */
    CINFER_KW_Q6_K = 15,  /* 4 + 2-bit q, 16 x int8 scales, f16 d */
    /* non-linear 4-bit codebooks: */
    CINFER_KW_IQ4_NL = 16, /* blocks of 32: f16 d, nibbles indexing kvalues_iq4nl */
    CINFER_KW_IQ4_XS = 17, /* super-blocks of 256: f16 d, 8 x 6-bit scales, nibbles as IQ4_NL */
    CINFER_KW_MXFP4 = 18,  /* blocks of 32: E8M0 exponent, nibbles of e2m1 (OCP MX) */
    /* Quantized types repacked in panels of 16 rows by the CPU backend for its AVX-512
     * and AVX2 kernels (quant_panels.c); no file stores them. */
    CINFER_KW_Q4_0_PANELS = 19,
    CINFER_KW_Q5_0_PANELS = 20,
    CINFER_KW_Q4_K_PANELS = 21,
    CINFER_KW_Q5_K_PANELS = 22,
    CINFER_KW_Q6_K_PANELS = 23,
    CINFER_KW_IQ4_NL_PANELS = 24, /* q4_0's layout: the bytes of a block have the same places */
    CINFER_KW_IQ4_XS_PANELS = 25,
    CINFER_KW_Q2_K_PANELS = 26,
    CINFER_KW_Q3_K_PANELS = 27,
    CINFER_KW_Q4_1_PANELS = 28,
    CINFER_KW_Q5_1_PANELS = 29,
    CINFER_KW_MXFP4_PANELS = 30,
    CINFER_KW_TYPE_COUNT = 31,
};
#define CINFER_KERNEL_Q8_BLOCK 32
#define CINFER_KERNEL_Q8_BLOCK_BYTES 34
#define CINFER_KERNEL_QK 256 /* values in a K-quant super-block */

/* ---- block-quantized weight types ------------------------------------------------
 * Every type is defined by its dequantization (cinfer_kernel_dequantize_row, written once
 * in quant.c) and, for the matmul, by an integer dot product against activations
 * quantized to int8 blocks (quant_dot_scalar.c), as llama.cpp computes them. */

/* Geometry of a stored type: values and bytes per block (F32/F16/BF16: 1 value). */
struct cinfer_kernel_type_info {
    const char *name;     /* ggml's spelling: "q4_K" */
    int block_values;
    int block_bytes;
};
/* NULL for a panel type or an unknown number. */
const struct cinfer_kernel_type_info *cinfer_kernel_type_info(enum cinfer_kernel_wtype wtype);
/* 1 for the block-quantized types 7..18 (not Q8_0, which has its own int16 path). */
int cinfer_kernel_is_block_quant(enum cinfer_kernel_wtype wtype);
/* 1 for every panel type (Q8_0/F16/BF16 and the quantized ones). */
int cinfer_kernel_is_panels(enum cinfer_kernel_wtype wtype);
/* out (k) = a row of k values of a stored type (k a multiple of its block): the
 * definition of each type, in f32 arithmetic one operation at a time (no fused
 * multiply-add), so the numpy implementation (tests/reference/ggml_quants.py) gives the
 * same bits. */
void cinfer_kernel_dequantize_row(enum cinfer_kernel_wtype wtype, const void *row, int64_t k, float *out);

/* x (k, a multiple of 32) to Q8_0 blocks at out, as ggml's quantize_row_q8_0_ref: per 32
 * values d = max|x| / 127 (stored as f16), q = round(x / d) half away from zero (the KV
 * cache's q8_0 rows). */
void cinfer_kernel_quantize_q8_0(const float *x, int64_t k, void *out);

/* Activations as the block-quantized types want them, quantized per block to int8 as
 * llama.cpp does (its block_q8_0/q8_1 and block_q8_K), with integer sums kept so the
 * dot products stay integer:
 *   32-value blocks (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4): d = max|x| / 127,
 *     q = round(x / d) (to nearest even), sum = Σ q;
 *   256-value blocks (the K-quants, IQ4_XS): llama.cpp's quantize_row_q8_K: the value of
 *     largest magnitude maps to -127 (iscale = -127 / it), q = round(iscale * x) clamped
 *     to 127, d = 1 / iscale, bsums = sums of each 16 q. */
struct cinfer_kernel_xq32 {
    float d;
    int16_t sum;
    int16_t zero; /* 0: (sum, zero) is an int16 pair for vpdpwssd */
    int8_t q[32];
};
struct cinfer_kernel_xq256 {
    float d;
    int16_t bsums[CINFER_KERNEL_QK / 16];
    int8_t q[CINFER_KERNEL_QK];
};
/* Which activation blocks a weight type multiplies: 32 (xq32), 256 (xq256), or 0 (none
 * of these: F32/F16/BF16/Q8_0). */
int cinfer_kernel_xq_block(enum cinfer_kernel_wtype wtype);

/* Panels: the numbers of a stored type, laid out so that a vector lane holds one weight
 * row and a decode GEMV reads the weights as one sequential stream, with no per-row
 * reduction. Rows go in panels of 16 (the last padded with zero rows); panel g holds,
 * in order along the row:
 *   Q8_0 panels, per block b (544 bytes): 16 f16 scales (row 16g + r's d at 2r), then
 *     per value pair p in [0, 16) 32 bytes, row r's q[2p] and q[2p + 1] at 32 + 32p + 2r;
 *   F16 panels, per value q (32 bytes): row r's value at 2r;
 *   BF16 panels, per value pair p (64 bytes; k even): row r's values 2p and 2p + 1 at
 *     4r and 4r + 2 (the operand order of vdpbf16ps).
 * A panel is 16 packed rows' bytes (cinfer_kernel_row_bytes of the stored type), so
 * panel g starts where packed row 16g would; functions taking a row stride ignore it
 * for panels. The matmul computes whole panels and stores the asked rows [j0, j1)
 * only. Q8_0 panels give the stored type's bits (the per-block definition below); F16
 * and BF16 panels sum each output in two chains, values of even and of odd index,
 * added at the end, for every n (so a row's bits do not depend on its batch). The
 * layouts exist to be fast at the AVX-512 level (q8_panels_avx512.c and
 * panels16_avx512.c); every other level reads them with a scalar loop (panels.c)
 * and prefers weights as stored. */
#define CINFER_KERNEL_PANEL_ROWS 16
#define CINFER_KERNEL_PANEL_BLOCK_BYTES (CINFER_KERNEL_PANEL_ROWS * CINFER_KERNEL_Q8_BLOCK_BYTES)

/* The type the level in use reads weights stored as `stored` fastest in: Q8_0, F16 and
 * BF16 -> their panels at the AVX-512 level, otherwise `stored` itself. */
enum cinfer_kernel_wtype cinfer_kernel_preferred_wtype(enum cinfer_kernel_wtype stored);
/* The panel type of a stored type (Q8_0, F16, BF16), or the type itself for F32. */
enum cinfer_kernel_wtype cinfer_kernel_panel_type(enum cinfer_kernel_wtype stored);
/* Whether `rows` x k weights of type stored can be packed (Q8_0: k a multiple of 32;
 * BF16: k even; F16: any k; F32: no). */
int cinfer_kernel_can_pack_panels(enum cinfer_kernel_wtype stored, int64_t k);
/* Bytes of `rows` rows of k values of type `stored` in panels (rows rounded up to 16). */
size_t cinfer_kernel_panels_bytes(enum cinfer_kernel_wtype stored, int64_t rows, int64_t k);
/* panels = weights (rows, k) of type `stored` (w_row_bytes from one row to the next)
 * repacked; panel rows past `rows` are zero. */
void cinfer_kernel_pack_panels(enum cinfer_kernel_wtype stored, const void *w, size_t w_row_bytes, int64_t rows,
                               int64_t k, void *panels);

/* The best level this CPU supports. */
enum cinfer_kernel_level cinfer_kernels_best_level(void);
/* The level in use (the best one unless forced). */
enum cinfer_kernel_level cinfer_kernels_level(void);
/* Forces a level; returns 0, or -1 when this CPU cannot run it (nothing changes). */
int cinfer_kernels_force_level(enum cinfer_kernel_level level);
const char *cinfer_kernels_level_name(enum cinfer_kernel_level level);

/* Activations as Q8_0 weights want them: each row of k values as k/32 blocks of a
 * scale and 32 int16 (d = max|x| / 32767, q = round(x / d)), so a weight block and an
 * activation block meet in one exact integer dot product. int16 rather than the int8
 * llama.cpp uses: rounding x costs 1.5e-5 of the block's largest value instead of
 * 4e-3, which over a deep model is the difference between 1e-4 and 1e-2 in logits. */
struct cinfer_kernel_xblock {
    float d;
    int16_t q[CINFER_KERNEL_Q8_BLOCK];
};

/* Bytes of prepared activations a matmul with wtype needs for n rows of k (0: the
 * matmul reads the f32 rows as they are): Q8_0 the int16 blocks above, BF16 the rows
 * rounded to bf16 (n, k) (the same at every level, so a caller prepares once). */
size_t cinfer_kernel_prepared_bytes(enum cinfer_kernel_wtype wtype, int n, int k);
/* Prepares rows [i0, i1) of x (n, k) into prepared (laid out for all n rows), so
 * threads can each prepare a share. */
void cinfer_kernel_prepare_rows(enum cinfer_kernel_wtype wtype, const float *x, int k, int i0, int i1,
                                void *prepared);

/* y (n, ldy) columns [j0, j1) = x (n, k) · W[j0:j1]ᵀ, where W is row-major (m, k) of
 * type wtype with w_row_bytes from one row to the next. Accumulates in f32.
 * F32/F16 weights are widened to f32 as they are read and multiply the f32
 * activations (no rounding of x). BF16 weights do the same, except at the AVX-512
 * level on CPUs with AVX512_BF16, where they multiply x rounded to bf16 (x_prepared,
 * from cinfer_kernel_prepare_rows) with vdpbf16ps, twice the products per instruction
 * of an FMA: bf16 x bf16 products are exact in f32, so the only extra error is x's
 * rounding (2^-9 relative per value, up to about 1e-2 in logits, as llama.cpp's bf16
 * path; issue 3's budget for 16-bit weights is 2e-2); given no x_prepared they take
 * the widening path, x unrounded. Q8_0 weights (k a
 * multiple of 32) multiply the activations prepared by cinfer_kernel_prepare_rows
 * (x_prepared), each output defined per block b as
 *     acc = 0; for each b: acc = fmaf((float)S_b, dx_b * dw_b, acc)
 * with S_b the exact int32 dot product of the block's int16 activations and int8
 * weights: every level and path (GEMV, tile, scalar) gives the same bits, and Q8_0
 * panels give the bits the same weights as stored do. For panels w is the first
 * panel's start, w_row_bytes is ignored, and any [j0, j1) may be asked (see above).
 * x_prepared is ignored for F32 and F16. */
void cinfer_kernel_matmul(const float *x, const void *x_prepared, int n, int k, const void *w,
                          enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy);

/* 1 when matmuls with wtype weights multiply activations rounded to bf16 at the level
 * in use (BF16 weights at the AVX-512 level on CPUs with AVX512_BF16), else 0: the
 * error bound of such a matmul is that of bf16 activations (see above). */
int cinfer_kernel_rounds_x_to_bf16(enum cinfer_kernel_wtype wtype);

/* Bytes of one row of k values of type wtype (Q8_0 and its panels: k a multiple of
 * 32). */
size_t cinfer_kernel_row_bytes(enum cinfer_kernel_wtype wtype, int64_t k);

/* out (k) = one row of type wtype widened to f32 (embedding lookup, 1-D weights); not
 * for Q8_0 panels, whose rows are not contiguous: see the next function. */
void cinfer_kernel_row_to_f32(const void *row, enum cinfer_kernel_wtype wtype, int k, float *out);
/* out (k) = x (k) narrowed to f16 (is_bf16 0) or bf16, each value as cinfer_kernel_f32_to_f16 /
 * cinfer_kernel_f32_to_bf16 gives it (a KV cache row as a step writes it). */
void cinfer_kernel_row_from_f32(const float *x, int is_bf16, int k, uint16_t *out);
/* out (k) = row `row` of the weight matrix w of type wtype (any, panels too), with
 * w_row_bytes from one row to the next (ignored for panels), widened to f32. */
void cinfer_kernel_weight_row_to_f32(const void *w, enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int64_t row,
                                     int k, float *out);

float cinfer_kernel_dot(const float *a, const float *b, int n);
/* y (n) += a * x (n) */
void cinfer_kernel_axpy(float *y, float a, const float *x, int n);
/* y (n_y, len; row r at y + r * ldy) += coef (n_y, n_x; row r at coef + r * ld_coef) ·
 * x (n_x, len; row p at x + p * x_stride): every y element gets one axpy step per x row,
 * in order, exactly as cinfer_kernel_axpy would, with the sums kept in registers where
 * the level allows. Attention's products in outer-product form: P·V (x the V rows) and,
 * for a prefill chunk, Q·Kᵀ (x the keys transposed, y zeroed first). */
void cinfer_kernel_accumulate_rows(float *y, int n_y, int len, int ldy, const float *coef, int ld_coef,
                                   const float *x, size_t x_stride, int n_x);
/* y (n) = x * rsqrt(mean(x²) + eps) * w; y may alias x. */
void cinfer_kernel_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* Element-wise kernels. The SwiGLU gate and softmax (exp-bound) have AVX2 and AVX-512
 * versions with their own exp (within 2 ulp); the rest are plain C for every CPU. */
/* gate (n) = silu(gate) * up */
void cinfer_kernel_silu_mul(float *gate, const float *up, size_t n);
/* y (n) += x (n) */
void cinfer_kernel_add(float *y, const float *x, size_t n);
/* x (n) = softmax(x) in place; returns nothing, max-subtracted for range. */
void cinfer_kernel_softmax(float *x, int n);
/* x (n) = exp(x) / (sum(exp(x)) + exp(sink)) in place: a softmax whose denominator has one
 * more logit that receives no value (gpt-oss's attention sinks); plain C. */
void cinfer_kernel_softmax_sink(float *x, int n, float sink);
/* gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
 * gate (n) = g * sigmoid(alpha * g) * (u + 1); plain C. */
void cinfer_kernel_swiglu_oai(float *gate, const float *up, size_t n, float alpha, float limit);
/* The first index of x's largest value (n >= 1): the greedy token. NaNs never win,
 * except a NaN at index 0, which is returned as is (as the plain loop
 * `if (x[i] > x[best]) best = i` does, which every level matches). */
int cinfer_kernel_argmax(const float *x, int n);
/* logits (vocab) ranked (kernels/logits_rank.c): top_ids and top_logits (k) get its k
 * most likely entries, the larger logit first, the lower id first on equal logits,
 * entries at -inf or NaN left out; returns how many (at most k). */
int cinfer_kernel_logits_top(const float *logits, int vocab, int k, int32_t *top_ids, float *top_logits);
/* log(sum(exp(logits))) over vocab entries in double, shifted by the largest
 * (cinfer_kernel_argmax); -inf when that is -inf. */
double cinfer_kernel_log_sum_exp(const float *logits, int vocab);
/* RoPE angles of one position: cos and sin (head_dim / 2 each) of pos * inv_freq[i],
 * computed in double (large positions times small frequencies lose digits in f32).
 * Computed once per token and shared by every head of every layer. */
void cinfer_kernel_rope_angles(int pos, const double *inv_freq, int head_dim, float *cos_out, float *sin_out);
/* Rotates one head vector x (head_dim) in place by its position's angles.
 * interleaved 0: pairs (i, i + head_dim/2) as Hugging Face's rotate_half; 1: pairs
 * (2i, 2i+1). */
void cinfer_kernel_rope(float *x, int head_dim, const float *cos, const float *sin, int interleaved);

/* Number conversions. */
float cinfer_kernel_f16_to_f32(uint16_t h);
uint16_t cinfer_kernel_f32_to_f16(float f); /* round to nearest even */
float cinfer_kernel_bf16_to_f32(uint16_t b);
uint16_t cinfer_kernel_f32_to_bf16(float f); /* round to nearest even */

#endif
