/* kernels/dispatch.c — picks the kernel level once from the CPU's features and routes
 * each call there. Tests force lower levels to compare them all. */
#include <cpuid.h>
#include <stdatomic.h>

#include "kernels_impl.h"

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c". */
static int cpu_has_f16c(void)
{
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
}

static atomic_int current_level = -1; /* -1: not detected yet */

enum cinfer_kernel_level cinfer_kernels_best_level(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return CINFER_KERNEL_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        cpu_has_f16c())
        return CINFER_KERNEL_AVX2;
    return CINFER_KERNEL_SCALAR;
}

enum cinfer_kernel_level cinfer_kernels_level(void)
{
    int level = atomic_load_explicit(&current_level, memory_order_relaxed);
    if (level < 0) {
        level = (int)cinfer_kernels_best_level();
        atomic_store(&current_level, level);
    }
    return (enum cinfer_kernel_level)level;
}

int cinfer_kernels_force_level(enum cinfer_kernel_level level)
{
    if (level < CINFER_KERNEL_SCALAR || level > cinfer_kernels_best_level())
        return -1;
    atomic_store(&current_level, (int)level);
    return 0;
}

const char *cinfer_kernels_level_name(enum cinfer_kernel_level level)
{
    switch (level) {
    case CINFER_KERNEL_SCALAR: return "scalar";
    case CINFER_KERNEL_AVX2: return "avx2";
    case CINFER_KERNEL_AVX512: return "avx512";
    }
    return "unknown";
}

enum cinfer_kernel_wtype cinfer_kernel_preferred_wtype(enum cinfer_kernel_wtype stored)
{
    enum cinfer_kernel_level level = cinfer_kernels_level();
    /* block-quantized and Q8_0 panels wherever vector kernels for them run (AVX2 and
     * AVX-512); F16 and BF16 panels only at the AVX-512 level */
    if (cinfer_kernel_is_block_quant(stored) || stored == CINFER_KW_Q8_0)
        return level == CINFER_KERNEL_SCALAR ? stored : cinfer_kernel_panel_type(stored);
    return level == CINFER_KERNEL_AVX512 ? cinfer_kernel_panel_type(stored) : stored;
}

void cinfer_kernel_matmul(const float *x, const void *xp, int n, int k, const void *w,
                          enum cinfer_kernel_wtype wtype, size_t w_row_bytes, int j0, int j1, float *y, int ldy)
{
    if (cinfer_kernel_is_block_quant(wtype)) { /* the integer definition, built for each level */
        switch (cinfer_kernels_level()) {
        case CINFER_KERNEL_AVX512: cinfer_quant_matmul_avx512(xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy); return;
        case CINFER_KERNEL_AVX2: cinfer_quant_matmul_avx2(xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy); return;
        case CINFER_KERNEL_SCALAR: break;
        }
        cinfer_quant_matmul_scalar(xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy);
        return;
    }
    if (wtype >= CINFER_KW_Q4_0_PANELS) { /* quantized panels: lanes are weight rows */
        enum cinfer_kernel_level level = cinfer_kernels_level();
        if (level == CINFER_KERNEL_AVX512 && cinfer_quant_panels_avx512_usable())
            cinfer_quant_panels_avx512(xp, n, k, w, wtype, j0, j1, y, ldy);
        else if (level != CINFER_KERNEL_SCALAR) /* AVX2, or AVX-512 without VNNI */
            cinfer_quant_panels_avx2(xp, n, k, w, wtype, j0, j1, y, ldy);
        else
            cinfer_quant_panels_scalar(xp, n, k, w, wtype, j0, j1, y, ldy);
        return;
    }
    if (cinfer_kernel_is_panels(wtype)) { /* one kernel for any n: lanes are weight rows */
        if (cinfer_kernels_level() == CINFER_KERNEL_AVX2 && wtype == CINFER_KW_Q8_0_PANELS)
            cinfer_q8_panels_avx2(xp, n, k, w, j0, j1, y, ldy);
        else if (cinfer_kernels_level() != CINFER_KERNEL_AVX512)
            cinfer_panels_scalar(x, xp, n, k, w, wtype, j0, j1, y, ldy);
        else if (wtype == CINFER_KW_Q8_0_PANELS)
            cinfer_q8_panels_avx512(xp, n, k, w, j0, j1, y, ldy);
        else
            cinfer_panels16_avx512(x, xp, n, k, w, wtype, j0, j1, y, ldy);
        return;
    }
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512:
        if (n <= CINFER_GEMV_MAX_ROWS)
            cinfer_gemv_avx512(x, xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy);
        else
            cinfer_matmul_avx512(x, xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy);
        return;
    case CINFER_KERNEL_AVX2:
        if (n <= CINFER_GEMV_MAX_ROWS)
            cinfer_gemv_avx2(x, xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy);
        else
            cinfer_matmul_avx2(x, xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy);
        return;
    case CINFER_KERNEL_SCALAR: break;
    }
    cinfer_matmul_scalar(x, xp, n, k, w, wtype, w_row_bytes, j0, j1, y, ldy);
}

float cinfer_kernel_dot(const float *a, const float *b, int n)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: return cinfer_dot_avx512(a, b, n);
    case CINFER_KERNEL_AVX2: return cinfer_dot_avx2(a, b, n);
    case CINFER_KERNEL_SCALAR: break;
    }
    return cinfer_dot_scalar(a, b, n);
}

void cinfer_kernel_axpy(float *y, float a, const float *x, int n)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: cinfer_axpy_avx512(y, a, x, n); return;
    case CINFER_KERNEL_AVX2: cinfer_axpy_avx2(y, a, x, n); return;
    case CINFER_KERNEL_SCALAR: break;
    }
    cinfer_axpy_scalar(y, a, x, n);
}

void cinfer_kernel_rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: cinfer_rmsnorm_avx512(y, x, w, n, eps); return;
    case CINFER_KERNEL_AVX2: cinfer_rmsnorm_avx2(y, x, w, n, eps); return;
    case CINFER_KERNEL_SCALAR: break;
    }
    cinfer_rmsnorm_scalar(y, x, w, n, eps);
}

void cinfer_kernel_silu_mul(float *gate, const float *up, size_t n)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: cinfer_silu_mul_avx512(gate, up, n); return;
    case CINFER_KERNEL_AVX2: cinfer_silu_mul_avx2(gate, up, n); return;
    case CINFER_KERNEL_SCALAR: break;
    }
    cinfer_silu_mul_scalar(gate, up, n);
}

void cinfer_kernel_softmax(float *x, int n)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: cinfer_softmax_avx512(x, n); return;
    case CINFER_KERNEL_AVX2: cinfer_softmax_avx2(x, n); return;
    case CINFER_KERNEL_SCALAR: break;
    }
    cinfer_softmax_scalar(x, n);
}

int cinfer_kernel_argmax(const float *x, int n)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: return cinfer_argmax_avx512(x, n);
    case CINFER_KERNEL_AVX2: return cinfer_argmax_avx2(x, n);
    case CINFER_KERNEL_SCALAR: break;
    }
    return cinfer_argmax_scalar(x, n);
}

int cinfer_kernel_rounds_x_to_bf16(enum cinfer_kernel_wtype wtype)
{
    __builtin_cpu_init();
    return (wtype == CINFER_KW_BF16 || wtype == CINFER_KW_BF16_PANELS) &&
           cinfer_kernels_level() == CINFER_KERNEL_AVX512 && __builtin_cpu_supports("avx512bf16");
}

void cinfer_kernel_accumulate_rows(float *y, int n_y, int len, int ldy, const float *coef, int ld_coef,
                                   const float *x, size_t x_stride, int n_x)
{
    switch (cinfer_kernels_level()) {
    case CINFER_KERNEL_AVX512: cinfer_accumulate_rows_avx512(y, n_y, len, ldy, coef, ld_coef, x, x_stride, n_x); return;
    case CINFER_KERNEL_AVX2: cinfer_accumulate_rows_avx2(y, n_y, len, ldy, coef, ld_coef, x, x_stride, n_x); return;
    case CINFER_KERNEL_SCALAR: break;
    }
    for (int p = 0; p < n_x; p++)
        for (int r = 0; r < n_y; r++)
            cinfer_kernel_axpy(y + (size_t)r * ldy, coef[(size_t)r * ld_coef + p], x + (size_t)p * x_stride, len);
}
