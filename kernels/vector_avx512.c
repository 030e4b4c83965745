/* kernels/vector_avx512.c — dot, axpy, RMSNorm and argmax with AVX-512; tails by mask. */
#include <immintrin.h>
#include <math.h>

#include "kernels_impl.h"

static inline __mmask16 tail_mask(int remaining)
{
    return (__mmask16)((1u << remaining) - 1u);
}

float cinfer_dot_avx512(const float *a, const float *b, int n)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

void cinfer_axpy_avx512(float *y, float a, const float *x, int n)
{
    __m512 av = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        __m512 yv = _mm512_maskz_loadu_ps(m, y + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), yv));
    }
}

void cinfer_rmsnorm_avx512(float *y, const float *x, const float *w, int n, float eps)
{
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        acc = _mm512_fmadd_ps(xv, xv, acc);
    }
    float inv_rms = 1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)n + eps);
    __m512 scale = _mm512_set1_ps(inv_rms);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(xv, scale), _mm512_maskz_loadu_ps(m, w + i)));
    }
}

/* acc[r][q] (r < rows, 4 vectors of 16 = 64 values) += coef[r][p] * x_p, p in order:
 * one FMA per element per position, as cinfer_axpy_avx512 does, with the sums kept in
 * registers across positions and each x row loaded once for every y row. */
static inline __attribute__((always_inline)) void accumulate_block(float *y, int rows, int ldy, const __mmask16 m[4],
                                                                  const float *coef, int ld_coef, const float *x,
                                                                  size_t x_stride, int n_x)
{
    __m512 acc[4][4];
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < 4; q++)
            acc[r][q] = _mm512_maskz_loadu_ps(m[q], y + (size_t)r * ldy + 16 * q);
    for (int p = 0; p < n_x; p++) {
        const float *xp = x + (size_t)p * x_stride;
        __m512 xv[4];
        for (int q = 0; q < 4; q++)
            xv[q] = _mm512_maskz_loadu_ps(m[q], xp + 16 * q);
        for (int r = 0; r < rows; r++) {
            __m512 a = _mm512_set1_ps(coef[(size_t)r * ld_coef + p]);
            for (int q = 0; q < 4; q++)
                acc[r][q] = _mm512_fmadd_ps(a, xv[q], acc[r][q]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < 4; q++)
            _mm512_mask_storeu_ps(y + (size_t)r * ldy + 16 * q, m[q], acc[r][q]);
}

void cinfer_accumulate_rows_avx512(float *y, int n_y, int len, int ldy, const float *coef, int ld_coef,
                                   const float *x, size_t x_stride, int n_x)
{
    for (int d0 = 0; d0 < len; d0 += 64) {
        __mmask16 m[4];
        for (int q = 0; q < 4; q++) {
            int left = len - d0 - 16 * q;
            m[q] = left >= 16 ? (__mmask16)0xffff : left > 0 ? tail_mask(left) : (__mmask16)0;
        }
        for (int r0 = 0; r0 < n_y; r0 += 4) {
            float *yr = y + (size_t)r0 * ldy + d0;
            const float *cr = coef + (size_t)r0 * ld_coef;
            switch (n_y - r0 < 4 ? n_y - r0 : 4) {
            case 4: accumulate_block(yr, 4, ldy, m, cr, ld_coef, x + d0, x_stride, n_x); break;
            case 3: accumulate_block(yr, 3, ldy, m, cr, ld_coef, x + d0, x_stride, n_x); break;
            case 2: accumulate_block(yr, 2, ldy, m, cr, ld_coef, x + d0, x_stride, n_x); break;
            default: accumulate_block(yr, 1, ldy, m, cr, ld_coef, x + d0, x_stride, n_x); break;
            }
        }
    }
}

/* Two passes: the largest value over 4 independent 16-lane maxima, then the first
 * index holding it. max_ps returns its second operand when either is NaN, so with
 * the running maximum second a NaN in x never enters it; a NaN at index 0 is the
 * scalar loop's answer and is returned first. */
int cinfer_argmax_avx512(const float *x, int n)
{
    if (x[0] != x[0])
        return 0;
    __m512 m0 = _mm512_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
        m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
        m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        m0 = _mm512_mask_max_ps(m0, m, _mm512_maskz_loadu_ps(m, x + i), m0);
    }
    float max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    __m512 mv = _mm512_set1_ps(max);
    for (i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
        __mmask16 hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), mv, _CMP_EQ_OQ);
        if (hit)
            return i + __builtin_ctz(hit);
    }
    return 0; /* not reached: max is one of x's values */
}
