/* kernels/vector_avx512.c — dot, axpy and RMSNorm with AVX-512; tails by mask. */
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
