/* kernels/quant_codebook_avx2.c — the dot products of the codebook types (IQ4_NL,
 * IQ4_XS, MXFP4) with AVX2, for the AVX2 level's cinfer_quant_dot (quant_dot_avx2.c).
 * A block's 32 nibbles index its type's 16-entry int8 codebook with one vpshufb; the
 * int8 values times the int8 activations go through vpmaddubsw with the sign moved onto
 * the activations (|w| unsigned, x * sign(w) signed: pair sums at most 2 x 127 x 127 =
 * 32258, no saturation), then vpmaddwd widens the pairs, times IQ4_XS's sub-block
 * scale where it has one. Each block's integer sum is exact and its float step is the
 * scalar definition's fmaf (quant_dot_impl.h), so the bits are the scalar level's.
 * The C definition built for AVX2 could not vectorize the table lookups: on the Zen 3
 * machine an IQ4_XS file (mostly IQ4_NL, SmolLM's rows of 576) prefilled at 6 tokens/s
 * where the same model in Q4_0 did 187. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels_impl.h"
#include "reduce_avx2.h"

/* the codebook's 16 int8 values in both 128-bit lanes, for vpshufb */
AI __m256i codebook(const int8_t values[16])
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)values));
}

/* The 32 values of a block's 16 nibble bytes at q: byte j's low nibble is value j, its
 * high nibble value j + 16 (the ggml layout these types share). */
AI __m256i values32(const uint8_t *q, __m256i table)
{
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
    __m128i lo = _mm_and_si128(v, low4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
    return _mm256_shuffle_epi8(table, _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* The int16 pair sums of w (32 int8) times the 32 int8 activations at x. */
AI __m256i pair_sums(__m256i w, const int8_t *x)
{
    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)x);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
}

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return cinfer_kernel_f16_to_f32(h);
}

/* IQ4_NL (f16 d, 16 nibble bytes) and MXFP4 (E8M0 byte, 16 nibble bytes): blocks of 32. */
static float dot_blocks32(const uint8_t *w, const struct cinfer_kernel_xq32 *x, int blocks, int mxfp4)
{
    const __m256i table = codebook(mxfp4 ? cinfer_kernel_mxfp4_values : cinfer_kernel_iq4nl_values);
    const __m256i ones = _mm256_set1_epi16(1);
    const int block_bytes = mxfp4 ? 17 : 18, scale_bytes = mxfp4 ? 1 : 2;
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += block_bytes) {
        __m256i pairs = pair_sums(values32(w + scale_bytes, table), x[b].q);
        int32_t s = hsum8_epi32(_mm256_madd_epi16(pairs, ones));
        float dw = mxfp4 ? cinfer_kernel_e8m0_half(w[0]) : half_at(w);
        acc = fmaf((float)s, dw * x[b].d, acc);
    }
    return acc;
}

/* IQ4_XS: super-blocks of 256 (f16 d, 16 bits of scales' high pairs, 4 bytes of their
 * low nibbles, 128 nibble bytes), 8 sub-blocks of 32 with scales ls - 32. */
static float dot_iq4_xs(const uint8_t *w, const struct cinfer_kernel_xq256 *x, int blocks)
{
    const __m256i table = codebook(cinfer_kernel_iq4nl_values);
    float acc = 0.0f;
    for (int b = 0; b < blocks; b++, w += 136) {
        uint16_t scales_h;
        memcpy(&scales_h, w + 2, 2);
        const uint8_t *scales_l = w + 4, *qs = w + 8;
        __m256i s = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            int ls = ((scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | ((scales_h >> (2 * j)) & 3) << 4;
            /* pair sums (at most 32258) times ls - 32 (-32..31), widened: exact in int32 */
            __m256i pairs = pair_sums(values32(qs + 16 * j, table), x[b].q + 32 * j);
            s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, _mm256_set1_epi16((int16_t)(ls - 32))));
        }
        acc = fmaf((float)hsum8_epi32(s), half_at(w) * x[b].d, acc);
    }
    return acc;
}

float cinfer_quant_dot_codebook_avx2(enum cinfer_kernel_wtype wtype, const uint8_t *w, const void *x, int k)
{
    switch (wtype) {
    case CINFER_KW_IQ4_NL: return dot_blocks32(w, x, k / 32, 0);
    case CINFER_KW_MXFP4: return dot_blocks32(w, x, k / 32, 1);
    case CINFER_KW_IQ4_XS: return dot_iq4_xs(w, x, k / 256);
    default: return 0.0f;
    }
}
