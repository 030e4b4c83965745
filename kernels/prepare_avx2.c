/* kernels/prepare_avx2.c — activation rows quantized for the integer kernels with AVX2:
 * int16 blocks for Q8_0 weights (quantize_row_q16 in prepare_scalar.c) and int8 blocks
 * of 32 and 256 for the block-quantized types (quant_dot_scalar.c), to the scalar
 * quantizers' numbers, as prepare_avx512.c and quant_panels_avx512.c do at the AVX-512
 * level: max |x| exactly (a NaN never wins the max), d and 1 / d by the same divisions,
 * x / d rounded to nearest even (roundps; the scalar 1.5 * 2^23 trick), then clamped.
 * A decode step quantizes each matmul's input on the calling thread before the others
 * start, so the scalar loops' cost was the whole machine's. */
#include <immintrin.h>
#include <string.h>

#include "kernels_impl.h"
#include "reduce_avx2.h"

#define AI static inline __attribute__((always_inline))

AI __m256 abs8(__m256 v)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

/* max |x| over n floats (n a multiple of 8); max_ps(|x|, m) keeps m where |x| is NaN,
 * as the scalar compare does */
AI float abs_max(const float *x, int n)
{
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8)
        m = _mm256_max_ps(abs8(_mm256_loadu_ps(x + i)), m);
    return hmax8(m);
}

/* x * scale rounded to nearest even, as int32 clamped to [-limit, limit] */
AI __m256i round_clamp(__m256 x, __m256 scale, int limit)
{
    __m256 r = _mm256_round_ps(_mm256_mul_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i q = _mm256_cvtps_epi32(r);
    return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(limit)), _mm256_set1_epi32(-limit));
}

/* 32 int32 in [-127, 127] (4 vectors, in order) to 32 int8 at out */
AI void store_int8(int8_t *out, const __m256i q[4])
{
    __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    /* per 128-bit half the packs interleave 4-value groups: put them back in order */
    packed = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)out, packed);
}

void cinfer_prepare_q8_avx2(const float *x, int k, struct cinfer_kernel_xblock *out)
{
    const __m256 limit = _mm256_set1_ps(32767.0f), neg_limit = _mm256_set1_ps(-32767.0f);
    for (int b = 0; b < k / CINFER_KERNEL_Q8_BLOCK; b++) {
        const float *xb = x + b * CINFER_KERNEL_Q8_BLOCK;
        float d = abs_max(xb, CINFER_KERNEL_Q8_BLOCK) / 32767.0f;
        float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
        __m256 inv = _mm256_set1_ps(inv_d);
        __m256i q[4];
        for (int v = 0; v < 4; v++) { /* clamped as floats, as the scalar loop does */
            __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * v), inv),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q[v] = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(r, limit), neg_limit));
        }
        for (int h = 0; h < 2; h++) {
            __m256i packed =
                _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2 * h], q[2 * h + 1]), _MM_SHUFFLE(3, 1, 2, 0));
            _mm256_storeu_si256((__m256i *)(void *)(out[b].q + 16 * h), packed);
        }
    }
}

void cinfer_quantize_xq32_avx2(const float *x, int k, struct cinfer_kernel_xq32 *out)
{
    for (int b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        float d = abs_max(xb, 32) / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        __m256 scale = _mm256_set1_ps(id);
        __m256i q[4];
        for (int v = 0; v < 4; v++)
            q[v] = round_clamp(_mm256_loadu_ps(xb + 8 * v), scale, 127);
        out[b].d = d;
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        out[b].sum = (int16_t)hsum8_epi32(sum);
        out[b].zero = 0;
        store_int8(out[b].q, q);
    }
}

void cinfer_quantize_xq256_avx2(const float *x, int k, struct cinfer_kernel_xq256 *out)
{
    for (int b = 0; b < k / CINFER_KERNEL_QK; b++) {
        const float *xb = x + CINFER_KERNEL_QK * b;
        struct cinfer_kernel_xq256 *o = &out[b];
        float amax = abs_max(xb, CINFER_KERNEL_QK);
        if (amax == 0.0f) {
            memset(o, 0, sizeof *o);
            continue;
        }
        float max = 0.0f; /* the first value of largest magnitude, as the scalar loop keeps it */
        for (int c = 0; c < CINFER_KERNEL_QK / 8; c++) {
            __m256 magnitude = abs8(_mm256_loadu_ps(xb + 8 * c));
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(magnitude, _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = xb[8 * c + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m256 scale = _mm256_set1_ps(iscale);
        for (int c = 0; c < CINFER_KERNEL_QK / 32; c++) {
            __m256i q[4];
            for (int v = 0; v < 4; v++)
                q[v] = round_clamp(_mm256_loadu_ps(xb + 32 * c + 8 * v), scale, 127);
            store_int8(o->q + 32 * c, q);
            o->bsums[2 * c] = (int16_t)hsum8_epi32(_mm256_add_epi32(q[0], q[1]));
            o->bsums[2 * c + 1] = (int16_t)hsum8_epi32(_mm256_add_epi32(q[2], q[3]));
        }
        o->d = 1.0f / iscale;
    }
}
