/* Every CPU kernel at every dispatch level this machine runs, against plain loops in
 * double precision, for every weight type. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "support/random_model.h"
#include "support/runner.h"

static const enum cinfer_kernel_wtype all_types[] = {CINFER_KW_F32, CINFER_KW_F16, CINFER_KW_BF16, CINFER_KW_Q8_0};
static const char *const type_names[] = {"F32", "F16", "BF16", "Q8_0"};

static void fill_uniform(float *x, size_t n, float scale, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * random_uniform(rng);
}

/* Runs the loop body once per level this CPU supports (forcing each in turn). */
#define FOR_EACH_LEVEL(level)                                                                    \
    for (enum cinfer_kernel_level level = CINFER_KERNEL_SCALAR;                                  \
         level <= cinfer_kernels_best_level() && cinfer_kernels_force_level(level) == 0; level++)

static void restore_level(void)
{
    cinfer_kernels_force_level(cinfer_kernels_best_level());
}

/* One value as the kernel multiplies it for BF16 weights at such a level. */
static double bf16_rounded(float x)
{
    return cinfer_kernel_bf16_to_f32(cinfer_kernel_f32_to_bf16(x));
}

static void round_to_bf16(const float *x, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = bf16_rounded(x[i]);
}

START_TEST(levels_are_detected)
{
    enum cinfer_kernel_level best = cinfer_kernels_best_level();
    printf("kernels: best level on this CPU: %s\n", cinfer_kernels_level_name(best));
    ck_assert_int_eq(cinfer_kernels_level(), best);
    ck_assert_int_eq(cinfer_kernels_force_level((enum cinfer_kernel_level)(CINFER_KERNEL_AVX512 + 1)), -1);
    ck_assert_int_eq(cinfer_kernels_force_level(CINFER_KERNEL_SCALAR), 0);
    ck_assert_int_eq(cinfer_kernels_level(), CINFER_KERNEL_SCALAR);
    restore_level();
}
END_TEST

/* Every finite half converts to f32 and back to itself; f32 -> f16 rounds to nearest. */
START_TEST(f16_and_bf16_conversions)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = cinfer_kernel_f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        ck_assert_uint_eq(cinfer_kernel_f32_to_f16(f), h);
        ck_assert_uint_eq(cinfer_kernel_f32_to_bf16(cinfer_kernel_bf16_to_f32((uint16_t)h)), h & 0xffff);
    }
    ck_assert_float_eq(cinfer_kernel_f16_to_f32(0x3c00), 1.0f);
    ck_assert_float_eq(cinfer_kernel_f16_to_f32(0xc000), -2.0f);
    ck_assert_float_eq(cinfer_kernel_f16_to_f32(0x0001), 0x1p-24f);
    ck_assert_uint_eq(cinfer_kernel_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);          /* tie to even */
    ck_assert_uint_eq(cinfer_kernel_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above the tie */
    ck_assert_uint_eq(cinfer_kernel_f32_to_f16(70000.0f), 0x7c00);
    ck_assert_uint_eq(cinfer_kernel_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);            /* tie to even */
    ck_assert_uint_eq(cinfer_kernel_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-12f), 0x3f81);
    uint64_t rng = 7;
    for (int i = 0; i < 100000; i++) { /* nearest: no other half is closer */
        float f = 60000.0f * random_uniform(&rng) * fabsf(random_uniform(&rng));
        uint16_t h = cinfer_kernel_f32_to_f16(f);
        double err = fabs((double)cinfer_kernel_f16_to_f32(h) - f);
        ck_assert(err <= fabs((double)cinfer_kernel_f16_to_f32((uint16_t)(h + 1)) - f));
        ck_assert(err <= fabs((double)cinfer_kernel_f16_to_f32((uint16_t)(h - 1)) - f));
    }
}
END_TEST

/* w (m, k) stored as `type` rows row_bytes apart, as a model file holds them (malloc'd). */
static uint8_t *store_rows(const float *w, int m, int k, enum cinfer_kernel_wtype type, size_t row_bytes)
{
    uint8_t *stored = malloc(row_bytes * m);
    for (int j = 0; j < m; j++)
        random_model_store_row(w + (size_t)j * k, k, (enum cinfer_dtype)type, stored + j * row_bytes);
    return stored;
}

/* The matmul of every type against double loops over the very numbers it multiplies
 * (dequantized weights; for Q8_0 also the Q8-quantized activations, whose block dot
 * products are exact integers): each element within 1e-5 of the sum of |products|
 * (f32 accumulation). Against the original f32 weights and activations the whole
 * output stays within the type's budget: 1e-4 relative for F32, 2e-2 for the others. */
START_TEST(matmul_every_type_and_level)
{
    const int shapes[][3] = {/* n, k, m */ {1, 64, 9}, {2, 32, 4}, {3, 96, 13}, {4, 256, 8}, {5, 128, 17},
                             {9, 512, 33}, {1, 4096, 5}, {7, 37, 6}, {6, 100, 11}, {1, 15, 3},
                             {37, 576, 29}, {18, 2112, 7}};
    uint64_t rng = 42;
    double worst_exact[3][4] = {{0}}, worst_budget[3][4] = {{0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int n = shapes[s][0], k = shapes[s][1], m = shapes[s][2];
        float *x = malloc(sizeof(float) * n * k);
        float *w = malloc(sizeof(float) * m * k);
        float *wq = malloc(sizeof(float) * m * k);
        float *y = malloc(sizeof(float) * n * m);
        float *row = malloc(sizeof(float) * m);
        double *ref_exact = malloc(sizeof(double) * n * m);
        double *ref_orig = malloc(sizeof(double) * n * m);
        double *bound = malloc(sizeof(double) * n * m);
        double *ref_rounded = malloc(sizeof(double) * n * m), *bound_rounded = malloc(sizeof(double) * n * m);
        double *x_bf16 = malloc(sizeof(double) * n * k);
        fill_uniform(x, (size_t)n * k, 2.0f, &rng);
        round_to_bf16(x, (size_t)n * k, x_bf16);
        fill_uniform(w, (size_t)m * k, 0.5f, &rng);
        for (size_t t = 0; t < 4; t++) {
            enum cinfer_kernel_wtype type = all_types[t];
            if (type == CINFER_KW_Q8_0 && k % 32 != 0)
                continue;
            size_t row_bytes = cinfer_kernel_row_bytes(type, k) + 6; /* a gap between rows is allowed */
            uint8_t *stored = malloc(row_bytes * m);
            for (int j = 0; j < m; j++) {
                random_model_store_row(w + (size_t)j * k, k, (enum cinfer_dtype)type, stored + j * row_bytes);
                cinfer_kernel_row_to_f32(stored + j * row_bytes, type, k, wq + (size_t)j * k);
            }
            size_t prepared_bytes = cinfer_kernel_prepared_bytes(type, n, k);
            ck_assert_uint_eq(prepared_bytes, type == CINFER_KW_Q8_0  ? (size_t)n * (k / 32) * 68
                                              : type == CINFER_KW_BF16 ? (size_t)n * k * 2
                                                                       : 0);
            size_t prepared_row_bytes = prepared_bytes / (size_t)n;
            struct cinfer_kernel_xblock *xq = prepared_bytes ? malloc(prepared_bytes) : NULL;
            cinfer_kernel_prepare_rows(type, x, k, 0, n, xq);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < m; j++) {
                    double a = 0, b = 0, bnd = 0;
                    for (int q = 0; q < k; q++)
                        b += (double)x[i * k + q] * w[j * k + q];
                    if (type == CINFER_KW_Q8_0) {
                        for (int blk = 0; blk < k / 32; blk++) {
                            const struct cinfer_kernel_xblock *xb = &xq[i * (k / 32) + blk];
                            const uint8_t *wb = stored + j * row_bytes + blk * 34;
                            uint16_t d_bits;
                            memcpy(&d_bits, wb, 2);
                            double scale = (double)xb->d * cinfer_kernel_f16_to_f32(d_bits);
                            long isum = 0, iabs = 0;
                            for (int q = 0; q < 32; q++) {
                                isum += (long)xb->q[q] * (int8_t)wb[2 + q];
                                iabs += labs((long)xb->q[q] * (int8_t)wb[2 + q]);
                            }
                            a += scale * isum;
                            bnd += fabs(scale) * iabs;
                        }
                    } else {
                        double ar = 0, bndr = 0;
                        for (int q = 0; q < k; q++) {
                            a += (double)x[i * k + q] * wq[j * k + q];
                            bnd += fabs((double)x[i * k + q] * wq[j * k + q]);
                            ar += (double)x_bf16[i * k + q] * wq[j * k + q];
                            bndr += fabs((double)x_bf16[i * k + q] * wq[j * k + q]);
                        }
                        ref_rounded[i * m + j] = ar;
                        bound_rounded[i * m + j] = bndr;
                    }
                    ref_exact[i * m + j] = a;
                    ref_orig[i * m + j] = b;
                    bound[i * m + j] = bnd;
                }
            float *y_scalar = malloc(sizeof(float) * n * m);
            FOR_EACH_LEVEL(level)
            {
                for (int i = 0; i < n * m; i++)
                    y[i] = NAN;
                /* in two column ranges, as two threads would */
                int split = m / 2;
                cinfer_kernel_matmul(x, xq, n, k, stored, type, row_bytes, 0, split, y, m);
                cinfer_kernel_matmul(x, xq, n, k, stored, type, row_bytes, split, m, y, m);
                /* Q8_0 is defined per block (an exact integer sum, then one FMA), so every
                 * level gives the scalar level's bits */
                if (level == CINFER_KERNEL_SCALAR)
                    memcpy(y_scalar, y, sizeof(float) * n * m);
                else if (type == CINFER_KW_Q8_0)
                    ck_assert_msg(memcmp(y, y_scalar, sizeof(float) * n * m) == 0,
                                  "%s Q8_0 n=%d k=%d m=%d: not the scalar level's bits",
                                  cinfer_kernels_level_name(level), n, k, m);
                double norm_diff = 0, norm_ref = 0;
                int rounded = cinfer_kernel_rounds_x_to_bf16(type);
                const double *ref = rounded ? ref_rounded : ref_exact, *bnd = rounded ? bound_rounded : bound;
                for (int i = 0; i < n * m; i++) {
                    double err = fabs(y[i] - ref[i]) / bnd[i];
                    worst_exact[level][t] = fmax(worst_exact[level][t], err);
                    ck_assert_msg(err <= 1e-5, "%s %s n=%d k=%d m=%d element %d: %g vs %g",
                                  cinfer_kernels_level_name(level), type_names[t], n, k, m, i, (double)y[i],
                                  ref[i]);
                    norm_diff += (y[i] - ref_orig[i]) * (y[i] - ref_orig[i]);
                    norm_ref += ref_orig[i] * ref_orig[i];
                }
                double budget_err = sqrt(norm_diff / norm_ref);
                worst_budget[level][t] = fmax(worst_budget[level][t], budget_err);
                ck_assert_msg(budget_err <= (type == CINFER_KW_F32 ? 1e-4 : 2e-2), "%s %s: error %g vs f32 math",
                              cinfer_kernels_level_name(level), type_names[t], budget_err);
                /* each row alone gives bit-identical results (batch invariance) */
                for (int i = 0; i < n; i++) {
                    cinfer_kernel_matmul(x + (size_t)i * k, xq ? (const uint8_t *)xq + i * prepared_row_bytes : NULL,
                                         1, k, stored, type, row_bytes, 0, m, row, m);
                    ck_assert_mem_eq(row, y + (size_t)i * m, sizeof(float) * m);
                }
            }
            restore_level();
            free(stored);
            free(xq);
            free(y_scalar);
        }
        free(x), free(w), free(wq), free(y), free(row), free(ref_exact), free(ref_orig), free(bound);
        free(ref_rounded), free(bound_rounded), free(x_bf16);
    }
    for (int t = 0; t < 4; t++)
        for (int l = 0; l <= (int)cinfer_kernels_best_level(); l++)
            printf("matmul %-4s %-6s: worst |y - exact| / sum|products| %.3g; relative error vs f32 weights and "
                   "activations %.3g (budget %s)\n",
                   type_names[t], cinfer_kernels_level_name(l), worst_exact[l][t], worst_budget[l][t],
                   t == 0 ? "1e-4" : "2e-2");
}
END_TEST

/* Activation blocks for Q8_0 weights: d = max|x| / 32767, q = x / d rounded to nearest. */
START_TEST(q8_activation_quantizer)
{
    uint64_t rng = 21;
    float x[96];
    fill_uniform(x, 96, 5.0f, &rng);
    x[40] = 0.0f;
    for (int i = 64; i < 96; i++) /* an all-zero block */
        x[i] = 0.0f;
    struct cinfer_kernel_xblock q[3];
    cinfer_kernels_force_level(CINFER_KERNEL_SCALAR);
    cinfer_kernel_prepare_rows(CINFER_KW_Q8_0, x, 96, 0, 1, q);
    restore_level();
    for (int b = 0; b < 3; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        ck_assert_float_eq(q[b].d, amax / 32767.0f);
        for (int i = 0; i < 32; i++) {
            float v = x[b * 32 + i];
            if (amax == 0.0f) {
                ck_assert_int_eq(q[b].q[i], 0);
                continue;
            }
            /* half a step, plus the f32 rounding of x / d */
            ck_assert_double_le(fabs(v - q[b].d * q[b].q[i]), 0.5 * q[b].d + 1e-6 * fabs(v));
            if (fabsf(v) == amax)
                ck_assert_int_eq(abs(q[b].q[i]), 32767);
        }
    }
    ck_assert_int_eq(q[1].q[8], 0);

    /* every level gives the scalar quantizer's numbers, bit for bit (rows of 576, with
     * ties and values at the block maximum) */
    enum { K = 576, ROWS = 3 };
    float xr[ROWS * K];
    fill_uniform(xr, ROWS * K, 4.0f, &rng);
    xr[10] = 4.0f;  /* the block maximum */
    xr[11] = -4.0f; /* and its negative */
    xr[64] = 32767.0f; /* d = 1: x / d exactly half-way below, ties to even */
    for (int i = 65; i < 96; i++)
        xr[i] = (float)(i - 80) + 0.5f;
    struct cinfer_kernel_xblock want[ROWS * K / 32], got[ROWS * K / 32];
    cinfer_kernels_force_level(CINFER_KERNEL_SCALAR);
    cinfer_kernel_prepare_rows(CINFER_KW_Q8_0, xr, K, 0, ROWS, want);
    FOR_EACH_LEVEL(level)
    {
        memset(got, 0xa5, sizeof got);
        cinfer_kernel_prepare_rows(CINFER_KW_Q8_0, xr, K, 0, ROWS, got);
        for (int b = 0; b < ROWS * K / 32; b++) {
            ck_assert_msg(got[b].d == want[b].d, "%s block %d: d %g vs %g", cinfer_kernels_level_name(level), b,
                          (double)got[b].d, (double)want[b].d);
            ck_assert_msg(memcmp(got[b].q, want[b].q, sizeof want[b].q) == 0, "%s block %d: q differs",
                          cinfer_kernels_level_name(level), b);
        }
    }
    restore_level();
}
END_TEST

/* Activations for BF16 weights: each value rounded to bf16 (to nearest even, NaN kept
 * quiet), as cinfer_kernel_f32_to_bf16 does; zero, tiny, infinite and NaN values too. */
START_TEST(bf16_activation_rounding)
{
    enum { K = 40 };
    uint64_t rng = 23;
    float x[2 * K];
    fill_uniform(x, 2 * K, 3.0f, &rng);
    x[3] = 0.0f;
    x[5] = 1e-30f;
    x[7] = INFINITY;
    x[9] = NAN;
    x[K + 1] = 1.0f + 1.0f / 256; /* a tie: to even (1.0) */
    x[K + 2] = 1.0f + 3.0f / 256; /* a tie: to even (1 + 4/256) */
    ck_assert_uint_eq(cinfer_kernel_prepared_bytes(CINFER_KW_BF16, 2, K), 2 * K * sizeof(uint16_t));
    uint16_t out[2 * K];
    cinfer_kernel_prepare_rows(CINFER_KW_BF16, x, K, 0, 2, out);
    for (int q = 0; q < 2 * K; q++)
        ck_assert_uint_eq(out[q], cinfer_kernel_f32_to_bf16(x[q]));
    ck_assert_float_eq(cinfer_kernel_bf16_to_f32(out[K + 1]), 1.0f);
    ck_assert_float_eq(cinfer_kernel_bf16_to_f32(out[K + 2]), 1.0f + 4.0f / 256);
    ck_assert(isnan(cinfer_kernel_bf16_to_f32(out[9])));
}
END_TEST

START_TEST(vector_kernels_every_level)
{
    const int sizes[] = {1, 7, 16, 33, 64, 100, 128, 1000};
    uint64_t rng = 3;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
        float *w = malloc(sizeof(float) * n);
        fill_uniform(a, n, 3.0f, &rng);
        fill_uniform(b, n, 1.0f, &rng);
        fill_uniform(w, n, 1.0f, &rng);
        double dot = 0, abs_dot = 0, sum_sq = 0;
        for (int i = 0; i < n; i++) {
            dot += (double)a[i] * b[i];
            abs_dot += fabs((double)a[i] * b[i]);
            sum_sq += (double)a[i] * a[i];
        }
        double inv_rms = 1.0 / sqrt(sum_sq / n + 1e-6);
        FOR_EACH_LEVEL(level)
        {
            ck_assert_double_le(fabs(cinfer_kernel_dot(a, b, n) - dot), 1e-6 * abs_dot);
            memcpy(y, b, sizeof(float) * n);
            cinfer_kernel_axpy(y, 0.75f, a, n);
            for (int i = 0; i < n; i++)
                ck_assert_double_le(fabs(y[i] - (b[i] + 0.75 * a[i])), 1e-6 * (fabs(b[i]) + fabs(a[i])));
            cinfer_kernel_rmsnorm(y, a, w, n, 1e-6f);
            for (int i = 0; i < n; i++)
                ck_assert_double_le(fabs(y[i] - a[i] * inv_rms * w[i]), 1e-5 * fabs(a[i] * inv_rms) + 1e-30);
            memcpy(y, a, sizeof(float) * n); /* in place */
            cinfer_kernel_rmsnorm(y, y, w, n, 1e-6f);
            for (int i = 0; i < n; i++)
                ck_assert_double_le(fabs(y[i] - a[i] * inv_rms * w[i]), 1e-5 * fabs(a[i] * inv_rms) + 1e-30);
        }
        restore_level();
        free(a);
        free(b);
        free(y);
        free(w);
    }
}
END_TEST

/* The greedy token: every level gives the first index of the largest value, as the
 * plain loop does, on lengths around every vector width and with ties, infinities,
 * signed zeros and NaNs placed at the front, inside and at the tail. */
static int argmax_reference(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

START_TEST(argmax_every_level)
{
    const int sizes[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 49152};
    uint64_t rng = 11;
    float *x = malloc(sizeof(float) * 49152);
    int cases = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        for (int variant = 0; variant < 12; variant++) {
            fill_uniform(x, (size_t)n, 4.0f, &rng);
            uint64_t pick = rng;
            int a = (int)((pick >> 7) % (uint64_t)n), b = (int)((pick >> 29) % (uint64_t)n);
            switch (variant) {
            case 1: x[a] = x[b] = 9.0f; break;                        /* a tie: the lower index wins */
            case 2: x[a] = INFINITY; x[b] = INFINITY; break;          /* tied infinities */
            case 3: for (int i = 0; i < n; i++) x[i] = -INFINITY; break;
            case 4: x[a] = NAN; break;                                /* a NaN never wins ... */
            case 5: x[0] = NAN; break;                                /* ... unless it is first */
            case 6: x[n - 1] = 50.0f; break;                          /* the tail */
            case 7: for (int i = 0; i < n; i++) x[i] = (i & 1) ? 0.0f : -0.0f; break;
            case 8: for (int i = 0; i < n; i++) x[i] = NAN; break;
            case 9: x[a] = NAN; x[b] = 60.0f; break;
            case 10: for (int i = 0; i < n; i++) x[i] = 1.0f; break;  /* all equal */
            case 11: x[0] = 70.0f; break;
            default: break;
            }
            int expected = argmax_reference(x, n);
            FOR_EACH_LEVEL(level)
            {
                int got = cinfer_kernel_argmax(x, n);
                ck_assert_msg(got == expected, "argmax at %s, n %d, case %d: %d, the plain loop says %d",
                              cinfer_kernels_level_name(level), n, variant, got, expected);
            }
            restore_level();
            cases++;
        }
    }
    printf("argmax: %d arrays at every level, equal to the plain loop\n", cases);
    free(x);
}
END_TEST

/* Attention's products in outer-product form (P·V, and a prefill's Q·Kᵀ): every level
 * equals the same axpy steps one by one, bit for bit (y rows of odd lengths and a
 * stride of their own, x rows strided as a KV page's, runs of positions longer than
 * the AVX2 kernel's); y between its rows is left alone. */
START_TEST(accumulate_rows_equals_axpy_steps)
{
    enum { MAX_Y = 6, MAX_LEN = 128, LD_COEF = 151, MAX_X = 150, PAD = 3 };
    const int lens[] = {64, 128, 80, 5, 16, 33}, n_xs[] = {11, MAX_X};
    static float coef[MAX_Y * LD_COEF], x[MAX_X * (MAX_LEN + 7)];
    static float y0[MAX_Y * (MAX_LEN + PAD)], want[MAX_Y * (MAX_LEN + PAD)], got[MAX_Y * (MAX_LEN + PAD)];
    uint64_t rng = 13;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t nx = 0; nx < sizeof n_xs / sizeof n_xs[0]; nx++)
            for (int n_y = 1; n_y <= MAX_Y; n_y++) {
                int len = lens[l], ldy = len + PAD, n_x = n_xs[nx], stride = len + 7;
                fill_uniform(coef, sizeof coef / sizeof coef[0], 1.0f, &rng);
                fill_uniform(x, sizeof x / sizeof x[0], 3.0f, &rng);
                fill_uniform(y0, sizeof y0 / sizeof y0[0], 2.0f, &rng);
                FOR_EACH_LEVEL(level)
                {
                    memcpy(want, y0, sizeof want);
                    for (int p = 0; p < n_x; p++)
                        for (int r = 0; r < n_y; r++)
                            cinfer_kernel_axpy(want + r * ldy, coef[r * LD_COEF + p], x + p * stride, len);
                    memcpy(got, y0, sizeof got);
                    cinfer_kernel_accumulate_rows(got, n_y, len, ldy, coef, LD_COEF, x, (size_t)stride, n_x);
                    ck_assert_msg(memcmp(got, want, sizeof want) == 0, "%s len %d n_y %d n_x %d",
                                  cinfer_kernels_level_name(level), len, n_y, n_x);
                    ck_assert_mem_eq(got + n_y * ldy, y0 + n_y * ldy,
                                     sizeof(float) * (size_t)(MAX_Y * (MAX_LEN + PAD) - n_y * ldy));
                }
                restore_level();
            }
}
END_TEST

START_TEST(elementwise_kernels)
{
    uint64_t rng = 11;
    enum { N = 301 };
    float g[N], u[N], y[N];
    fill_uniform(g, N, 8.0f, &rng);
    fill_uniform(u, N, 2.0f, &rng);
    g[7] = -95.0f; /* e^-g overflows to inf: the gate is -0 */
    g[8] = 95.0f;
    g[9] = 0.0f;
    float g0[N];
    memcpy(g0, g, sizeof g);
    memcpy(y, u, sizeof y);
    cinfer_kernel_add(y, g0, N);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(y[i], u[i] + g0[i]);

    /* softmax: sums to 1, matches exp ratios, survives large logits and -inf */
    float s0[N];
    fill_uniform(s0, N, 30.0f, &rng);
    s0[5] = 300.0f;
    s0[6] = -INFINITY;
    s0[7] = 300.0f - 87.0f; /* near the smallest normal probability */
    s0[8] = 300.0f - 103.0f; /* a subnormal probability or 0 */
    /* every length up to N (vector tails) at every level */
    const int lengths[] = {1, 2, 7, 8, 15, 16, 17, 33, N};
    FOR_EACH_LEVEL(level)
    {
        memcpy(g, g0, sizeof g);
        cinfer_kernel_silu_mul(g, u, N);
        for (int i = 0; i < N; i++) {
            double want = g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
            ck_assert_msg(fabs(g[i] - want) <= 1e-6 * (fabs(want) + 1e-3), "%s silu_mul [%d]: %g vs %g",
                          cinfer_kernels_level_name(level), i, (double)g[i], want);
        }
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            int n = lengths[l];
            float s[N + 1];
            memcpy(s, s0, sizeof(float) * n);
            s[n] = 12345.0f; /* past the end: untouched */
            double lmax = -INFINITY, lsum = 0;
            for (int i = 0; i < n; i++)
                lmax = fmax(lmax, s0[i]);
            for (int i = 0; i < n; i++)
                lsum += exp(s0[i] - lmax);
            cinfer_kernel_softmax(s, n);
            for (int i = 0; i < n; i++) {
                double want = exp(s0[i] - lmax) / lsum;
                ck_assert_msg(fabs(s[i] - want) <= 1e-6 * want + 1e-30, "%s softmax n=%d [%d]: %g vs %g",
                              cinfer_kernels_level_name(level), n, i, (double)s[i], want);
            }
            ck_assert_float_eq(s[n], 12345.0f);
            if (n > 6)
                ck_assert_float_eq(s[6], 0.0f);
        }
    }
    restore_level();
}
END_TEST

/* RoPE against the rotation written out in double for both pairings. */
START_TEST(rope_both_pairings)
{
    enum { HD = 24 };
    double inv_freq[HD / 2];
    for (int i = 0; i < HD / 2; i++)
        inv_freq[i] = 1.0 / pow(10000.0, 2.0 * i / HD);
    uint64_t rng = 5;
    const int positions[] = {0, 1, 17, 1000, 131071};
    for (int interleaved = 0; interleaved <= 1; interleaved++)
        for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
            float x[HD], x0[HD];
            fill_uniform(x, HD, 1.0f, &rng);
            memcpy(x0, x, sizeof x);
            float cos_table[HD / 2], sin_table[HD / 2];
            cinfer_kernel_rope_angles(positions[p], inv_freq, HD, cos_table, sin_table);
            cinfer_kernel_rope(x, HD, cos_table, sin_table, interleaved);
            for (int d = 0; d < HD; d++) {
                /* Hugging Face: out = x * cos + rotate_half(x) * sin with cos/sin
                 * repeated over both halves; interleaved: the same on pairs (2i, 2i+1) */
                int i = interleaved ? d / 2 : d % (HD / 2);
                double angle = positions[p] * inv_freq[i];
                double rotated;
                if (interleaved)
                    rotated = d % 2 == 0 ? -x0[d + 1] : x0[d - 1];
                else
                    rotated = d < HD / 2 ? -x0[d + HD / 2] : x0[d - HD / 2];
                double want = x0[d] * cos(angle) + rotated * sin(angle);
                ck_assert_double_le(fabs(x[d] - want), 2e-6);
            }
        }
    /* position 0 is the identity */
    float x[HD], x0[HD];
    fill_uniform(x, HD, 1.0f, &rng);
    memcpy(x0, x, sizeof x);
    float cos_table[HD / 2], sin_table[HD / 2];
    cinfer_kernel_rope_angles(0, inv_freq, HD, cos_table, sin_table);
    cinfer_kernel_rope(x, HD, cos_table, sin_table, 0);
    ck_assert_mem_eq(x, x0, sizeof x);
}
END_TEST

START_TEST(row_widening)
{
    uint64_t rng = 9;
    float src[64], out[64];
    fill_uniform(src, 64, 4.0f, &rng);
    uint8_t stored[64 * 4];
    random_model_store_row(src, 64, CINFER_DTYPE_Q8_0, stored);
    cinfer_kernel_row_to_f32(stored, CINFER_KW_Q8_0, 64, out);
    for (int b = 0; b < 2; b++) {
        uint16_t d_bits;
        memcpy(&d_bits, stored + b * 34, 2);
        float d = cinfer_kernel_f16_to_f32(d_bits);
        for (int i = 0; i < 32; i++) {
            ck_assert_float_eq(out[b * 32 + i], d * (float)(int8_t)stored[b * 34 + 2 + i]);
            ck_assert_double_le(fabs(out[b * 32 + i] - src[b * 32 + i]), 0.51 * d + 1e-7);
        }
    }
    ck_assert_uint_eq(cinfer_kernel_row_bytes(CINFER_KW_Q8_0, 64), 68);
    ck_assert_uint_eq(cinfer_kernel_row_bytes(CINFER_KW_BF16, 64), 128);

    /* every f16 and bf16 pattern widens to the scalar conversion's value at every level
     * (NaN to a NaN: F16C quiets a signaling one) */
    static uint16_t all[65536 + 3];
    static float wide[65536 + 3];
    for (uint32_t h = 0; h < 65536 + 3; h++)
        all[h] = (uint16_t)h;
    for (int bf = 0; bf < 2; bf++)
        FOR_EACH_LEVEL(level)
        {
            cinfer_kernel_row_to_f32(all, bf ? CINFER_KW_BF16 : CINFER_KW_F16, 65536 + 3, wide);
            for (uint32_t h = 0; h < 65536 + 3; h++) {
                float want = bf ? cinfer_kernel_bf16_to_f32(all[h]) : cinfer_kernel_f16_to_f32(all[h]);
                ck_assert_msg(isnan(want) ? isnan(wide[h]) : memcmp(&want, &wide[h], 4) == 0,
                              "%s, %s 0x%04x: %g, expected %g", cinfer_kernels_level_name(level), bf ? "bf16" : "f16",
                              all[h], (double)wide[h], (double)want);
            }
        }
    restore_level();
}
END_TEST

/* f32 rows narrowed to f16 and bf16 (a KV cache row as a step writes it) give, at every
 * level, the scalar conversions' bits: ties, subnormals, overflow, infinities and NaN
 * (signaling, quiet, with payload: the scalar's one quiet NaN) among 2^20 patterns that
 * step through every exponent. */
START_TEST(row_narrowing)
{
    enum { N = (1 << 20) + 5 }; /* + 5: a tail past the vector width */
    static float src[N];
    static uint16_t out[N];
    for (uint32_t i = 0; i < N; i++) {
        uint32_t bits = i * 4093u + (i << 20); /* every exponent, with low and high mantissa bits */
        if (i % 7 == 0)
            bits = (bits & 0xffff0000u) | (i % 3 == 0 ? 0x8000u : 0x7fffu); /* bf16 ties and near ties */
        if (i % 11 == 0)
            bits = (bits & 0x80000000u) | ((112u + i % 14) << 23) | (bits & 0x7fffffu); /* f16 range edges */
        memcpy(&src[i], &bits, 4);
    }
    const float specials[] = {65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, -0x1p-14f, 0.0f};
    memcpy(src, specials, sizeof specials);
    for (int bf = 0; bf < 2; bf++)
        FOR_EACH_LEVEL(level)
        {
            cinfer_kernel_row_from_f32(src, bf, N, out);
            for (uint32_t i = 0; i < N; i++) {
                uint16_t want = bf ? cinfer_kernel_f32_to_bf16(src[i]) : cinfer_kernel_f32_to_f16(src[i]);
                uint32_t bits;
                memcpy(&bits, &src[i], 4);
                ck_assert_msg(out[i] == want, "%s, %s of 0x%08x: 0x%04x, expected 0x%04x",
                              cinfer_kernels_level_name(level), bf ? "bf16" : "f16", bits, out[i], want);
            }
        }
    restore_level();
}
END_TEST

/* Double-precision x_row · w_row over the numbers the kernel multiplies (dequantized
 * weights; for Q8_0 the prepared activation blocks) and the sum of |products|. */
static void exact_dot(enum cinfer_kernel_wtype type, int x_as_bf16, const float *x,
                      const struct cinfer_kernel_xblock *xq, const uint8_t *wrow, int k, double *dot, double *abs_sum)
{
    double a = 0, bnd = 0;
    if (type == CINFER_KW_Q8_0) {
        for (int blk = 0; blk < k / 32; blk++) {
            uint16_t d_bits;
            memcpy(&d_bits, wrow + blk * 34, 2);
            double scale = (double)xq[blk].d * cinfer_kernel_f16_to_f32(d_bits);
            long isum = 0, iabs = 0;
            for (int q = 0; q < 32; q++) {
                long p = (long)xq[blk].q[q] * (int8_t)wrow[blk * 34 + 2 + q];
                isum += p;
                iabs += labs(p);
            }
            a += scale * isum;
            bnd += fabs(scale) * iabs;
        }
    } else {
        float *wf = malloc(sizeof(float) * k);
        cinfer_kernel_row_to_f32(wrow, type, k, wf);
        for (int q = 0; q < k; q++) {
            double xv = x_as_bf16 ? bf16_rounded(x[q]) : x[q];
            a += xv * wf[q];
            bnd += fabs(xv * wf[q]);
        }
        free(wf);
    }
    *dot = a;
    *abs_sum = bnd;
}

/* The decode GEMV (n <= 2 activation rows, AVX2 and AVX-512) on SmolLM-like widths and on k and
 * m that are not multiples of its vector width or of its 8-row groups: within the
 * matmul test's bound of the double-precision product, and bit-identical to the tile
 * path (the same rows inside a batch of 8, and the tile kernel called directly with
 * n = 1 and 2), so a decode step alone equals the same step inside a batch. */
START_TEST(decode_gemv_matches_tile_bit_for_bit)
{
    const int shapes[][2] = {/* k, m */ {576, 45}, {1536, 21}, {64, 8}, {33 * 32, 17}, {37, 11}, {100, 3}, {15, 9}};
    enum { BATCH = 8 };
    uint64_t rng = 77;
    long checked = 0, direct = 0;
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int k = shapes[s][0], m = shapes[s][1];
        float *x = malloc(sizeof(float) * BATCH * k), *w = malloc(sizeof(float) * m * k);
        float *y_batch = malloc(sizeof(float) * BATCH * m), *y_few = malloc(sizeof(float) * 2 * m);
        float *y_tile = malloc(sizeof(float) * 2 * m);
        fill_uniform(x, (size_t)BATCH * k, 2.0f, &rng);
        fill_uniform(w, (size_t)m * k, 0.5f, &rng);
        for (size_t t = 0; t < 4; t++) {
            enum cinfer_kernel_wtype type = all_types[t];
            if (type == CINFER_KW_Q8_0 && k % 32 != 0)
                continue;
            size_t row_bytes = cinfer_kernel_row_bytes(type, k) + 10; /* rows need not be packed or aligned */
            uint8_t *stored = store_rows(w, m, k, type, row_bytes);
            size_t prepared_bytes = cinfer_kernel_prepared_bytes(type, BATCH, k);
            size_t prepared_row_bytes = prepared_bytes / BATCH;
            struct cinfer_kernel_xblock *xq = prepared_bytes ? malloc(prepared_bytes) : NULL;
            cinfer_kernel_prepare_rows(type, x, k, 0, BATCH, xq);
            FOR_EACH_LEVEL(level)
            {
                cinfer_kernel_matmul(x, xq, BATCH, k, stored, type, row_bytes, 0, m, y_batch, m);
                for (int n = 1; n <= 2; n++)
                    for (int i = 0; i + n <= BATCH; i++) {
                        const float *xi = x + (size_t)i * k;
                        const uint8_t *xqi = xq ? (const uint8_t *)xq + i * prepared_row_bytes : NULL;
                        for (int c = 0; c < n * m; c++)
                            y_few[c] = NAN;
                        /* two column ranges split inside a group of 8 rows, as two threads would */
                        int split = m > 5 ? 5 : m / 2;
                        cinfer_kernel_matmul(xi, xqi, n, k, stored, type, row_bytes, 0, split, y_few, m);
                        cinfer_kernel_matmul(xi, xqi, n, k, stored, type, row_bytes, split, m, y_few, m);
                        for (int r = 0; r < n; r++) {
                            ck_assert_msg(memcmp(y_few + (size_t)r * m, y_batch + (size_t)(i + r) * m,
                                                 sizeof(float) * m) == 0,
                                          "%s %s k=%d m=%d n=%d row %d: not bit-identical to the batch of 8",
                                          cinfer_kernels_level_name(level), type_names[t], k, m, n, i + r);
                            for (int j = 0; j < m; j++) {
                                double dot, bnd;
                                exact_dot(type, cinfer_kernel_rounds_x_to_bf16(type), xi + (size_t)r * k,
                                          xqi ? (const void *)(xqi + r * prepared_row_bytes) : NULL,
                                          stored + j * row_bytes, k, &dot, &bnd);
                                double err = fabs(y_few[(size_t)r * m + j] - dot) / bnd;
                                worst = fmax(worst, err);
                                ck_assert_msg(err <= 1e-5, "%s %s k=%d m=%d n=%d [%d, %d]: %g vs %g",
                                              cinfer_kernels_level_name(level), type_names[t], k, m, n, r, j,
                                              (double)y_few[(size_t)r * m + j], dot);
                                checked++;
                            }
                        }
                        if (level != CINFER_KERNEL_SCALAR) { /* the tile kernel itself at the same n */
                            if (level == CINFER_KERNEL_AVX512)
                                cinfer_matmul_avx512(xi, xqi, n, k, stored, type, row_bytes, 0, m, y_tile, m);
                            else
                                cinfer_matmul_avx2(xi, xqi, n, k, stored, type, row_bytes, 0, m, y_tile, m);
                            ck_assert_mem_eq(y_tile, y_few, sizeof(float) * n * m);
                            direct++;
                        }
                    }
            }
            restore_level();
            free(stored);
            free(xq);
        }
        free(x), free(w), free(y_batch), free(y_few), free(y_tile);
    }
    printf("decode gemv: %ld outputs within 1e-5 of sum|products| (worst %.3g), bit-identical to the batch of "
           "%d; %ld calls compared with the AVX2 / AVX-512 tile kernels directly\n",
           checked, worst, BATCH, direct);
}
END_TEST

/* Weights repacked in panels of 16 rows (the AVX-512 level's layout, kernels.h), Q8_0,
 * F16 and BF16, at every level: the panels read back row by row as the stored rows and
 * pad with zero rows; each output is within 1e-5 of sum|products| of the double
 * product of the numbers multiplied; a row's outputs have the same bits in a batch of
 * 1, 2, 3, 5, 8, 9, 13 or 40 and whatever column ranges the call is cut into; Q8_0
 * panels give the stored layout's bits, and F16 and BF16 panels with x unrounded the
 * scalar loop's bits at every level (the same FMAs in the same two chains). The
 * AVX-512 level prefers panels for all three, the AVX2 level for Q8_0 (q8_panels_avx2.c). */
START_TEST(panels_every_type_and_level)
{
    const int shapes[][2] = {/* k, m */ {576, 45}, {1536, 21}, {32, 1}, {64, 16}, {33 * 32, 17}, {96, 15}, {37, 19}};
    const enum cinfer_kernel_wtype stored_types[] = {CINFER_KW_Q8_0, CINFER_KW_F16, CINFER_KW_BF16};
    const int batches[] = {1, 2, 3, 5, 8, 9, 13, 40};
    enum { MOST = 40 };
    uint64_t rng = 131;
    long compared = 0;
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int k = shapes[s][0], m = shapes[s][1];
        float *x = malloc(sizeof(float) * MOST * k), *w = malloc(sizeof(float) * m * k);
        float *y_whole = malloc(sizeof(float) * MOST * m), *y_cut = malloc(sizeof(float) * MOST * m);
        float *y_stored = malloc(sizeof(float) * MOST * m), *y_scalar = malloc(sizeof(float) * MOST * m);
        float *row_stored = malloc(sizeof(float) * k), *row_panels = malloc(sizeof(float) * k);
        fill_uniform(x, (size_t)MOST * k, 2.0f, &rng);
        fill_uniform(w, (size_t)m * k, 0.5f, &rng);
        for (size_t t = 0; t < sizeof stored_types / sizeof stored_types[0]; t++) {
            enum cinfer_kernel_wtype stored_type = stored_types[t], type = cinfer_kernel_panel_type(stored_type);
            if (!cinfer_kernel_can_pack_panels(stored_type, k))
                continue;
            size_t row_bytes = cinfer_kernel_row_bytes(stored_type, k) + 6; /* stored rows with gaps */
            uint8_t *stored = store_rows(w, m, k, stored_type, row_bytes);
            size_t panel_bytes = cinfer_kernel_panels_bytes(stored_type, m, k);
            ck_assert_uint_eq(panel_bytes, (size_t)((m + 15) / 16) * 16 * cinfer_kernel_row_bytes(stored_type, k));
            ck_assert_uint_eq(cinfer_kernel_row_bytes(type, k), cinfer_kernel_row_bytes(stored_type, k));
            uint8_t *panels = malloc(panel_bytes);
            memset(panels, 0xa5, panel_bytes);
            cinfer_kernel_pack_panels(stored_type, stored, row_bytes, m, k, panels);
            for (int j = 0; j < m; j++) {
                cinfer_kernel_weight_row_to_f32(stored, stored_type, row_bytes, j, k, row_stored);
                cinfer_kernel_weight_row_to_f32(panels, type, 0, j, k, row_panels);
                ck_assert_mem_eq(row_stored, row_panels, sizeof(float) * k);
            }
            for (int j = m; j < (m + 15) / 16 * 16; j++) { /* padding rows */
                cinfer_kernel_weight_row_to_f32(panels, type, 0, j, k, row_panels);
                for (int q = 0; q < k; q++)
                    ck_assert_float_eq(row_panels[q], 0.0f);
            }
            size_t prepared_bytes = cinfer_kernel_prepared_bytes(type, MOST, k);
            ck_assert_uint_eq(prepared_bytes, cinfer_kernel_prepared_bytes(stored_type, MOST, k));
            size_t prepared_row_bytes = prepared_bytes / MOST;
            uint8_t *xq = prepared_bytes ? malloc(prepared_bytes) : NULL;
            cinfer_kernel_prepare_rows(type, x, k, 0, MOST, xq);
            FOR_EACH_LEVEL(level)
            {
                int panels_preferred = level == CINFER_KERNEL_AVX512 ||
                                       (level == CINFER_KERNEL_AVX2 && stored_type == CINFER_KW_Q8_0);
                ck_assert_int_eq(cinfer_kernel_preferred_wtype(stored_type), panels_preferred ? type : stored_type);
                int rounded = xq && cinfer_kernel_rounds_x_to_bf16(type);
                cinfer_kernel_matmul(x, xq, MOST, k, panels, type, 0, 0, m, y_whole, m);
                for (int i = 0; i < MOST; i++)
                    for (int j = 0; j < m; j++) {
                        double dot, bnd;
                        exact_dot(stored_type, rounded, x + (size_t)i * k,
                                  xq ? (const void *)(xq + i * prepared_row_bytes) : NULL, stored + j * row_bytes, k,
                                  &dot, &bnd);
                        double err = fabs(y_whole[(size_t)i * m + j] - dot) / bnd;
                        worst = fmax(worst, err);
                        ck_assert_msg(err <= 1e-5, "%s %s panels k=%d m=%d [%d, %d]: %g vs %g",
                                      cinfer_kernels_level_name(level), type_names[stored_type], k, m, i, j,
                                      (double)y_whole[(size_t)i * m + j], dot);
                    }
                if (stored_type == CINFER_KW_Q8_0) {
                    cinfer_kernel_matmul(x, xq, MOST, k, stored, stored_type, row_bytes, 0, m, y_stored, m);
                    ck_assert_msg(memcmp(y_stored, y_whole, sizeof(float) * MOST * m) == 0,
                                  "%s k=%d m=%d: Q8_0 panels differ from the stored layout",
                                  cinfer_kernels_level_name(level), k, m);
                } else { /* x unrounded: the scalar loop's bits */
                    cinfer_kernel_matmul(x, NULL, MOST, k, panels, type, 0, 0, m, y_stored, m);
                    if (level == CINFER_KERNEL_SCALAR)
                        memcpy(y_scalar, y_stored, sizeof(float) * MOST * m);
                    else
                        ck_assert_msg(memcmp(y_scalar, y_stored, sizeof(float) * MOST * m) == 0,
                                      "%s %s panels, x unrounded, k=%d m=%d: not the scalar loop's bits",
                                      cinfer_kernels_level_name(level), type_names[stored_type], k, m);
                }
                for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
                    int n = batches[b];
                    for (int first = 0; first + n <= MOST; first += 13) {
                        const float *xi = x + (size_t)first * k;
                        const uint8_t *xqi = xq ? xq + first * prepared_row_bytes : NULL;
                        for (int c = 0; c < n * m; c++)
                            y_cut[c] = NAN;
                        /* three column ranges, cut inside panels (threads' chunks never are,
                         * but the contract allows it) */
                        int cut1 = m / 3, cut2 = m - m / 4;
                        cinfer_kernel_matmul(xi, xqi, n, k, panels, type, 0, 0, cut1, y_cut, m);
                        cinfer_kernel_matmul(xi, xqi, n, k, panels, type, 0, cut1, cut2, y_cut, m);
                        cinfer_kernel_matmul(xi, xqi, n, k, panels, type, 0, cut2, m, y_cut, m);
                        ck_assert_msg(memcmp(y_cut, y_whole + (size_t)first * m, sizeof(float) * n * m) == 0,
                                      "%s %s panels k=%d m=%d: rows %d-%d in a batch of %d differ from the batch "
                                      "of %d",
                                      cinfer_kernels_level_name(level), type_names[stored_type], k, m, first,
                                      first + n - 1, n, MOST);
                        compared += (long)n * m;
                    }
                }
            }
            restore_level();
            free(stored), free(panels), free(xq);
        }
        free(x), free(w), free(y_whole), free(y_cut), free(y_stored), free(y_scalar), free(row_stored);
        free(row_panels);
    }
    printf("panels: %ld outputs equal to the same rows in a batch of %d (any cut); all within 1e-5 of "
           "sum|products| (worst %.3g)\n",
           compared, MOST, worst);
}
END_TEST

/* A batch of 40 rows makes 10 passes of the tile over each weight block, a batch of 8
 * two, a single row takes the decode GEMV: every row of the batch of 40 must equal, bit
 * for bit, the same row computed in a batch of 8 and alone, so a sequence's logits do
 * not depend on how many others share its step (whatever order a kernel walks the
 * weights in). */
START_TEST(batch_orders_agree_bit_for_bit)
{
    const int shapes[][2] = {/* k, m */ {576, 45}, {1536, 21}, {37, 11}, {100, 13}};
    enum { BIG = 40, SMALL = 8 };
    uint64_t rng = 91;
    long compared = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int k = shapes[s][0], m = shapes[s][1];
        float *x = malloc(sizeof(float) * BIG * k), *w = malloc(sizeof(float) * m * k);
        float *y_big = malloc(sizeof(float) * BIG * m), *y_small = malloc(sizeof(float) * SMALL * m);
        fill_uniform(x, (size_t)BIG * k, 2.0f, &rng);
        fill_uniform(w, (size_t)m * k, 0.5f, &rng);
        for (size_t t = 0; t < 4; t++) {
            enum cinfer_kernel_wtype type = all_types[t];
            if (type == CINFER_KW_Q8_0 && k % 32 != 0)
                continue;
            size_t row_bytes = cinfer_kernel_row_bytes(type, k);
            uint8_t *stored = store_rows(w, m, k, type, row_bytes);
            size_t prepared_bytes = cinfer_kernel_prepared_bytes(type, BIG, k);
            size_t prepared_row_bytes = prepared_bytes / BIG;
            uint8_t *xq = prepared_bytes ? malloc(prepared_bytes) : NULL;
            cinfer_kernel_prepare_rows(type, x, k, 0, BIG, xq);
            FOR_EACH_LEVEL(level)
            {
                cinfer_kernel_matmul(x, xq, BIG, k, stored, type, row_bytes, 0, m, y_big, m);
                for (int i = 0; i < BIG; i += SMALL) {
                    cinfer_kernel_matmul(x + (size_t)i * k, xq ? xq + i * prepared_row_bytes : NULL, SMALL, k,
                                         stored, type, row_bytes, 0, m, y_small, m);
                    ck_assert_msg(memcmp(y_small, y_big + (size_t)i * m, sizeof(float) * SMALL * m) == 0,
                                  "%s %s k=%d m=%d rows %d-%d: the batch of %d differs from the batch of %d",
                                  cinfer_kernels_level_name(level), type_names[t], k, m, i, i + SMALL - 1, SMALL,
                                  BIG);
                    compared += SMALL * m;
                }
                cinfer_kernel_matmul(x + (size_t)(BIG - 1) * k, xq ? xq + (BIG - 1) * prepared_row_bytes : NULL, 1,
                                     k, stored, type, row_bytes, 0, m, y_small, m);
                ck_assert_msg(memcmp(y_small, y_big + (size_t)(BIG - 1) * m, sizeof(float) * m) == 0,
                              "%s %s k=%d m=%d: the last row alone differs from the batch of %d",
                              cinfer_kernels_level_name(level), type_names[t], k, m, BIG);
            }
            restore_level();
            free(stored);
            free(xq);
        }
        free(x), free(w), free(y_big), free(y_small);
    }
    printf("batch orders: %ld outputs of batches of %d equal to batches of %d and to single rows\n", compared, BIG,
           SMALL);
}
END_TEST

static Suite *suite_kernels(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, levels_are_detected);
    tcase_add_test(tc, f16_and_bf16_conversions);
    tcase_add_test(tc, matmul_every_type_and_level);
    tcase_add_test(tc, decode_gemv_matches_tile_bit_for_bit);
    tcase_add_test(tc, batch_orders_agree_bit_for_bit);
    tcase_add_test(tc, panels_every_type_and_level);
    tcase_add_test(tc, q8_activation_quantizer);
    tcase_add_test(tc, bf16_activation_rounding);
    tcase_add_test(tc, vector_kernels_every_level);
    tcase_add_test(tc, argmax_every_level);
    tcase_add_test(tc, elementwise_kernels);
    tcase_add_test(tc, accumulate_rows_equals_axpy_steps);
    tcase_add_test(tc, rope_both_pairings);
    tcase_add_test(tc, row_widening);
    tcase_add_test(tc, row_narrowing);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_kernels)
