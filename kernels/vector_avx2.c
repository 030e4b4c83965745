/* kernels/vector_avx2.c — dot, axpy, RMSNorm and argmax with AVX2 + FMA; tails in scalar. */
#include <immintrin.h>
#include <math.h>

#include "kernels_impl.h"
#include "masked_avx2.h"
#include "reduce_avx2.h"

float cinfer_dot_avx2(const float *a, const float *b, int n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = hsum8(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        sum = fmaf(a[i], b[i], sum); /* fused always (see weight_load_avx2.h) */
    return sum;
}

void cinfer_axpy_avx2(float *y, float a, const float *x, int n)
{
    __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

/* accumulate_rows' tile: 2 y rows by 4 vectors (32 values), 8 sums in registers while
 * x rows go past; positions in runs of ACCUMULATE_RUN, so that a run of x rows (32
 * values of each) stays in L1 for every pair of y rows. */
#define ACCUMULATE_ROWS 2
#define ACCUMULATE_VECTORS 4
#define ACCUMULATE_RUN 64

/* acc[r][q] (r < rows) += coef[r][p] * x_p for positions p of [p0, p1), in order: one FMA
 * per element per position, as cinfer_axpy_avx2 does (the same bits). */
static inline __attribute__((always_inline)) void accumulate_tile(float *y, int rows, int ldy, const __m256i m[4],
                                                                 const float *coef, int ld_coef, const float *x,
                                                                 size_t x_stride, int p0, int p1)
{
    __m256 acc[ACCUMULATE_ROWS][ACCUMULATE_VECTORS];
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < ACCUMULATE_VECTORS; q++)
            acc[r][q] = _mm256_maskload_ps(y + (size_t)r * ldy + 8 * q, m[q]);
    for (int p = p0; p < p1; p++) {
        const float *xp = x + (size_t)p * x_stride;
        __m256 a[ACCUMULATE_ROWS];
        for (int r = 0; r < rows; r++)
            a[r] = _mm256_broadcast_ss(coef + (size_t)r * ld_coef + p);
        for (int q = 0; q < ACCUMULATE_VECTORS; q++) {
            __m256 xv = _mm256_maskload_ps(xp + 8 * q, m[q]);
            for (int r = 0; r < rows; r++)
                acc[r][q] = _mm256_fmadd_ps(a[r], xv, acc[r][q]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < ACCUMULATE_VECTORS; q++)
            store8_masked(y + (size_t)r * ldy + 8 * q, m[q], acc[r][q]);
}

void cinfer_accumulate_rows_avx2(float *y, int n_y, int len, int ldy, const float *coef, int ld_coef,
                                 const float *x, size_t x_stride, int n_x)
{
    const int width = 8 * ACCUMULATE_VECTORS;
    for (int d0 = 0; d0 < len; d0 += width) {
        __m256i m[ACCUMULATE_VECTORS];
        for (int q = 0; q < ACCUMULATE_VECTORS; q++)
            m[q] = lanes_left(len - d0 - 8 * q);
        for (int p0 = 0; p0 < n_x; p0 += ACCUMULATE_RUN) {
            int p1 = p0 + ACCUMULATE_RUN < n_x ? p0 + ACCUMULATE_RUN : n_x;
            for (int r0 = 0; r0 < n_y; r0 += ACCUMULATE_ROWS) {
                float *yr = y + (size_t)r0 * ldy + d0;
                const float *cr = coef + (size_t)r0 * ld_coef;
                if (n_y - r0 >= 2)
                    accumulate_tile(yr, 2, ldy, m, cr, ld_coef, x + d0, x_stride, p0, p1);
                else
                    accumulate_tile(yr, 1, ldy, m, cr, ld_coef, x + d0, x_stride, p0, p1);
            }
        }
    }
}

void cinfer_rmsnorm_avx2(float *y, const float *x, const float *w, int n, float eps)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        acc = _mm256_fmadd_ps(xv, xv, acc);
    }
    float sum_sq = hsum8(acc);
    for (; i < n; i++)
        sum_sq = fmaf(x[i], x[i], sum_sq);
    float inv_rms = 1.0f / sqrtf(sum_sq / (float)n + eps);
    __m256 scale = _mm256_set1_ps(inv_rms);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(xv, scale), _mm256_loadu_ps(w + i)));
    }
    for (; i < n; i++)
        y[i] = x[i] * inv_rms * w[i];
}

/* As cinfer_argmax_avx512: the largest value, then its first index; max_ps with the
 * running maximum second keeps NaNs out of it. */
int cinfer_argmax_avx2(const float *x, int n)
{
    if (x[0] != x[0])
        return 0;
    __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    float max = x[0];
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (int l = 0; l < 8; l++)
        max = lanes[l] > max ? lanes[l] : max;
    for (; i < n; i++)
        max = x[i] > max ? x[i] : max;
    __m256 mv = _mm256_set1_ps(max);
    for (i = 0; i + 8 <= n; i += 8) {
        int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
        if (hit)
            return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == max)
            return i;
    return 0; /* not reached: max is one of x's values */
}

/* k f16 (is_bf16 0) or bf16 values at row widened to f32: exact, as the scalar
 * conversions (F16C's vcvtph2ps handles subnormals, infinities and NaN the same way). */
void cinfer_widen_row_avx2(const void *row, int is_bf16, int k, float *out)
{
    const uint16_t *p = row;
    int i = 0;
    for (; i + 8 <= k; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        __m256 f = is_bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
        _mm256_storeu_ps(out + i, f);
    }
    for (; i < k; i++)
        out[i] = is_bf16 ? cinfer_kernel_bf16_to_f32(p[i]) : cinfer_kernel_f16_to_f32(p[i]);
}

/* 8 values narrowed: f16 by vcvtps2ph (nearest even, subnormals and overflow to infinity
 * as the scalar conversion), bf16 by the scalar's integer rounding; a NaN becomes the
 * scalar's quiet NaN (sign | 0x7e00 for f16, the high half | 0x40 for bf16). */
static __m128i narrow8(__m256 f, int is_bf16)
{
    __m256i bits = _mm256_castps_si256(f);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)); /* all ones where NaN */
    __m256i high = _mm256_srli_epi32(bits, 16);
    __m256i out32;
    if (is_bf16) {
        __m256i odd = _mm256_and_si256(high, _mm256_set1_epi32(1));
        __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
        __m256i quiet = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
        out32 = _mm256_blendv_epi8(rounded, quiet, nan);
    } else {
        __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i quiet = _mm256_or_si256(_mm256_and_si256(high, _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x7e00));
        out32 = _mm256_blendv_epi8(_mm256_cvtepu16_epi32(h), quiet, nan);
    }
    /* the low halves of the 8 lanes, in order */
    __m256i packed = _mm256_packus_epi32(_mm256_and_si256(out32, _mm256_set1_epi32(0xffff)), _mm256_setzero_si256());
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

void cinfer_narrow_row_avx2(const float *x, int is_bf16, int k, uint16_t *out)
{
    int i = 0;
    for (; i + 8 <= k; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + i), narrow8(_mm256_loadu_ps(x + i), is_bf16));
    for (; i < k; i++)
        out[i] = is_bf16 ? cinfer_kernel_f32_to_bf16(x[i]) : cinfer_kernel_f32_to_f16(x[i]);
}
