/* kernels/prepare_avx512.c — one activation row to int16 blocks for Q8_0 weights with
 * AVX-512, two 16-lane halves per block: the same numbers as quantize_row_q16 in
 * prepare_scalar.c (max |x| exactly, d and 1 / d by the same divisions, x / d rounded
 * to nearest even by roundscale as the scalar 1.5 * 2^23 trick does, then clamped). */
#include <immintrin.h>

#include "kernels_impl.h"

void cinfer_prepare_q8_avx512(const float *x, int k, struct cinfer_kernel_xblock *out)
{
    const __m512 limit = _mm512_set1_ps(32767.0f);
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const float *xb = x + b * CINFER_KERNEL_Q8_BLOCK;
        __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
        /* max_ps(|x|, m) keeps m where |x| is NaN, as the scalar compare does */
        __m512 m = _mm512_max_ps(_mm512_abs_ps(lo), _mm512_setzero_ps());
        m = _mm512_max_ps(_mm512_abs_ps(hi), m);
        float amax = _mm512_reduce_max_ps(m);
        float d = amax / 32767.0f;
        float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
        __m512 inv = _mm512_set1_ps(inv_d);
        __m512 q_lo = _mm512_roundscale_ps(_mm512_mul_ps(lo, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 q_hi = _mm512_roundscale_ps(_mm512_mul_ps(hi, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q_lo = _mm512_max_ps(_mm512_min_ps(q_lo, limit), _mm512_sub_ps(_mm512_setzero_ps(), limit));
        q_hi = _mm512_max_ps(_mm512_min_ps(q_hi, limit), _mm512_sub_ps(_mm512_setzero_ps(), limit));
        _mm256_storeu_si256((__m256i *)out[b].q, _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(q_lo)));
        _mm256_storeu_si256((__m256i *)(out[b].q + 16), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(q_hi)));
    }
}
