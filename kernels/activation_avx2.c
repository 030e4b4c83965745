/* kernels/activation_avx2.c — SwiGLU gate and softmax with AVX2 + FMA: exp on 8 lanes
 * instead of a libm call per value. */
#include <immintrin.h>
#include <math.h>

#include "kernels_impl.h"
#include "masked_avx2.h"
#include "reduce_avx2.h"

#define AI static inline __attribute__((always_inline))

/* e^x within 2 ulp: x = n ln2 + r (ln2 in two parts so r is exact), e^r by Cephes'
 * degree-7 polynomial, 2^n built in the exponent bits. Below the normal range (x <
 * -87.3) the result is 0; x is clamped above at 88.7 (e^x near FLT_MAX). */
AI __m256 exp8(__m256 x)
{
    const __m256 lowest = _mm256_set1_ps(-87.33654f);
    __m256 underflow = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.72283f)), lowest);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n in [-126, 128]: 2^n as exponent bits, 2^128 split as 2 * 2^127 */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i half = _mm256_srai_epi32(ni, 1);
    __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    __m256 b = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(_mm256_mul_ps(p, a), b));
}

void cinfer_silu_mul_avx2(float *gate, const float *up, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 8) {
        __m256i m = lanes_left((int)(n - i < 8 ? n - i : 8));
        __m256 g = _mm256_maskload_ps(gate + i, m);
        __m256 sig = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
        store8_masked(gate + i, m, _mm256_mul_ps(sig, _mm256_maskload_ps(up + i, m)));
    }
}

void cinfer_softmax_avx2(float *x, int n)
{
    const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
    __m256 mv = neg_inf;
    for (int i = 0; i < n; i += 8) {
        __m256i m = lanes_left(n - i);
        mv = _mm256_max_ps(mv, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
    }
    __m256 max = _mm256_set1_ps(hmax8(mv));
    __m256 sum = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        __m256i m = lanes_left(n - i);
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max)), _mm256_castsi256_ps(m));
        store8_masked(x + i, m, e);
        sum = _mm256_add_ps(sum, e);
    }
    __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
    for (int i = 0; i < n; i += 8) {
        __m256i m = lanes_left(n - i);
        store8_masked(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
    }
}
