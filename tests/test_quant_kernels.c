/* The block-quantized types' kernels at every dispatch level this machine runs:
 *  - the activation quantizers (int8 blocks of 32 and of 256, as llama.cpp's q8_0 and
 *    q8_K) against their definition, and every level against the scalar one, bit for bit;
 *  - the matmul of every type against a double-precision loop over the dequantized
 *    weights (kernels/quant.c, checked against numpy by test_dequant) and the
 *    dequantized activation blocks: the integer dot products are exact, so the only
 *    difference is f32 rounding (1e-5 of Σ|w x|);
 *  - every level, and every batch size a row is computed in, gives the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "support/quantize.h"
#include "support/random_model.h"
#include "support/runner.h"

static const enum cinfer_kernel_wtype quant_types[] = {
    CINFER_KW_Q4_0, CINFER_KW_Q4_1, CINFER_KW_Q5_0, CINFER_KW_Q5_1,   CINFER_KW_Q2_K,   CINFER_KW_Q3_K,
    CINFER_KW_Q4_K, CINFER_KW_Q5_K, CINFER_KW_Q6_K, CINFER_KW_IQ4_NL, CINFER_KW_IQ4_XS, CINFER_KW_MXFP4,
};
#define N_QUANT_TYPES (int)(sizeof quant_types / sizeof quant_types[0])

#define FOR_EACH_LEVEL(level)                                                                    \
    for (enum cinfer_kernel_level level = CINFER_KERNEL_SCALAR;                                  \
         level <= cinfer_kernels_best_level() && cinfer_kernels_force_level(level) == 0; level++)

static void restore_level(void)
{
    cinfer_kernels_force_level(cinfer_kernels_best_level());
}

static void fill_uniform(float *x, size_t n, float scale, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * random_uniform(rng);
}

/* Rows of k values with outliers, ties and zero blocks, as activations have them. */
static void fill_activations(float *x, int rows, int k, uint64_t *rng)
{
    fill_uniform(x, (size_t)rows * k, 3.0f, rng);
    for (int r = 0; r < rows; r++) {
        float *row = x + (size_t)r * k;
        row[(7 * r + 3) % k] = 40.0f * (r % 2 ? -1.0f : 1.0f); /* an outlier */
        if (k >= 64 && r % 3 == 0)
            memset(row + 32, 0, 32 * sizeof(float)); /* a zero block of 32 */
        if (k >= 512 && r % 4 == 1)
            memset(row + 256, 0, 256 * sizeof(float)); /* a zero super-block */
        row[5] = 0.5f * (float)(r + 1);               /* values at exact half steps occur too */
    }
}

/* ---- activation quantizers ---------------------------------------------------- */

START_TEST(activation_blocks_of_32)
{
    enum { K = 256, ROWS = 5 };
    uint64_t rng = 31;
    float x[ROWS * K];
    fill_activations(x, ROWS, K, &rng);
    struct cinfer_kernel_xq32 want[ROWS * K / 32], got[ROWS * K / 32];
    ck_assert_uint_eq(cinfer_kernel_prepared_bytes(CINFER_KW_Q4_0, ROWS, K), sizeof want);
    cinfer_kernels_force_level(CINFER_KERNEL_SCALAR);
    cinfer_kernel_prepare_rows(CINFER_KW_Q4_0, x, K, 0, ROWS, want);
    for (int b = 0; b < ROWS * K / 32; b++) {
        const float *xb = x + 32 * b;
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(xb[i]));
        ck_assert_float_eq(want[b].d, amax / 127.0f);
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            sum += want[b].q[i];
            ck_assert_int_le(abs(want[b].q[i]), 127);
            ck_assert_double_le(fabs(xb[i] - (double)want[b].d * want[b].q[i]), 0.5 * want[b].d + 1e-6 * fabs(xb[i]));
            if (amax > 0 && fabsf(xb[i]) == amax)
                ck_assert_int_eq(abs(want[b].q[i]), 127);
        }
        ck_assert_int_eq(want[b].sum, sum);
    }
    FOR_EACH_LEVEL(level)
    {
        memset(got, 0x5a, sizeof got);
        cinfer_kernel_prepare_rows(CINFER_KW_IQ4_NL, x, K, 0, ROWS, got);
        ck_assert_msg(memcmp(got, want, sizeof want) == 0, "%s: blocks of 32 differ from the scalar quantizer's",
                      cinfer_kernels_level_name(level));
    }
    restore_level();
}
END_TEST

START_TEST(activation_blocks_of_256)
{
    enum { K = 768, ROWS = 5 };
    uint64_t rng = 37;
    float x[ROWS * K];
    fill_activations(x, ROWS, K, &rng);
    x[K + 600] = -41.0f; /* row 1's second super-block: its largest value negative */
    struct cinfer_kernel_xq256 want[ROWS * K / 256], got[ROWS * K / 256];
    ck_assert_uint_eq(cinfer_kernel_prepared_bytes(CINFER_KW_Q6_K, ROWS, K), sizeof want);
    cinfer_kernels_force_level(CINFER_KERNEL_SCALAR);
    cinfer_kernel_prepare_rows(CINFER_KW_Q4_K, x, K, 0, ROWS, want);
    int zero_blocks = 0;
    for (int b = 0; b < ROWS * K / 256; b++) {
        const float *xb = x + 256 * b;
        float amax = 0, max = 0;
        for (int i = 0; i < 256; i++)
            if (fabsf(xb[i]) > amax) {
                amax = fabsf(xb[i]);
                max = xb[i];
            }
        if (amax == 0) {
            zero_blocks++;
            ck_assert_float_eq(want[b].d, 0.0f);
            continue;
        }
        /* llama.cpp's q8_K: the value of largest magnitude maps to -127 */
        ck_assert_float_eq(want[b].d, 1.0f / (-127.0f / max));
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) {
                int q = want[b].q[16 * j + i];
                float v = xb[16 * j + i];
                sum += q;
                ck_assert_int_le(abs(q), 127);
                ck_assert_double_le(fabs(v - (double)want[b].d * q), 0.5 * fabs(want[b].d) + 1e-6 * fabs(v));
                if (v == max)
                    ck_assert_int_eq(q, -127);
            }
            ck_assert_int_eq(want[b].bsums[j], sum);
        }
    }
    ck_assert_int_gt(zero_blocks, 0);
    FOR_EACH_LEVEL(level)
    {
        memset(got, 0x5a, sizeof got);
        cinfer_kernel_prepare_rows(CINFER_KW_IQ4_XS, x, K, 0, ROWS, got);
        ck_assert_msg(memcmp(got, want, sizeof want) == 0, "%s: blocks of 256 differ from the scalar quantizer's",
                      cinfer_kernels_level_name(level));
    }
    restore_level();
}
END_TEST

/* ---- the matmul ------------------------------------------------------------------- */

/* The activation row i as the kernel multiplies it: each block's d * q. */
static void dequantized_activations(enum cinfer_kernel_wtype wtype, const void *prepared, int i, int k, double *out)
{
    if (cinfer_kernel_xq_block(wtype) == 32) {
        const struct cinfer_kernel_xq32 *xb = (const struct cinfer_kernel_xq32 *)prepared + (size_t)i * (k / 32);
        for (int t = 0; t < k; t++)
            out[t] = (double)xb[t / 32].d * xb[t / 32].q[t % 32];
    } else {
        const struct cinfer_kernel_xq256 *xb = (const struct cinfer_kernel_xq256 *)prepared + (size_t)i * (k / 256);
        for (int t = 0; t < k; t++)
            out[t] = (double)xb[t / 256].d * xb[t / 256].q[t % 256];
    }
}

struct quant_case {
    enum cinfer_kernel_wtype wtype;
    int m, k;
    size_t row_bytes;
    uint8_t *w;      /* (m, row_bytes) */
    float *wf;       /* (m, k) the weights dequantized */
};

static void quant_case_make(struct quant_case *c, enum cinfer_kernel_wtype wtype, int m, int k, uint64_t *rng)
{
    c->wtype = wtype;
    c->m = m;
    c->k = k;
    c->row_bytes = cinfer_kernel_row_bytes(wtype, k);
    c->w = malloc((size_t)m * c->row_bytes);
    c->wf = malloc(sizeof(float) * (size_t)m * k);
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int r = 0; r < m; r++) {
        fill_uniform(row, (size_t)k, 0.1f, rng);
        row[r % k] = 0.8f; /* a weight outlier per row */
        ck_assert_int_eq(test_quantize_row(row, k, (int)wtype, c->w + (size_t)r * c->row_bytes), 0);
        cinfer_kernel_dequantize_row(wtype, c->w + (size_t)r * c->row_bytes, k, c->wf + (size_t)r * k);
    }
    free(row);
}

static void quant_case_free(struct quant_case *c)
{
    free(c->w);
    free(c->wf);
}

/* y (n, m) for x (n, k) through the kernel at the level in use, over [j0, j1) in
 * pieces as a thread pool would ask. */
static void run_matmul(const struct quant_case *c, const float *x, int n, float *y, void *prepared)
{
    cinfer_kernel_prepare_rows(c->wtype, x, c->k, 0, n, prepared);
    int cut = c->m / 3;
    cinfer_kernel_matmul(x, prepared, n, c->k, c->w, c->wtype, c->row_bytes, 0, cut, y, c->m);
    cinfer_kernel_matmul(x, prepared, n, c->k, c->w, c->wtype, c->row_bytes, cut, c->m, y, c->m);
}

START_TEST(matmul_every_type_and_level)
{
    enum { M = 37, K = 512, N = 17 };
    const int batches[] = {1, 2, 3, 8, N};
    for (int t = 0; t < N_QUANT_TYPES; t++) {
        uint64_t rng = 100 + (uint64_t)t;
        struct quant_case c;
        quant_case_make(&c, quant_types[t], M, K, &rng);
        float *x = malloc(sizeof(float) * N * K);
        fill_activations(x, N, K, &rng);
        void *prepared = malloc(cinfer_kernel_prepared_bytes(c.wtype, N, K));
        float *want_bits = malloc(sizeof(float) * N * M), *y = malloc(sizeof(float) * N * M);
        double *xd = malloc(sizeof(double) * K);
        double worst = 0;
        cinfer_kernels_force_level(CINFER_KERNEL_SCALAR);
        run_matmul(&c, x, N, want_bits, prepared);
        for (int i = 0; i < N; i++) { /* against the double loop */
            dequantized_activations(c.wtype, prepared, i, K, xd);
            for (int j = 0; j < M; j++) {
                double exact = 0, size = 0;
                for (int q = 0; q < K; q++) {
                    exact += (double)c.wf[(size_t)j * K + q] * xd[q];
                    size += fabs((double)c.wf[(size_t)j * K + q] * xd[q]);
                }
                double err = fabs(want_bits[(size_t)i * M + j] - exact) / (size > 0 ? size : 1);
                worst = fmax(worst, err);
                ck_assert_msg(err <= 1e-5, "%s row %d col %d: %.9g, exact %.9g (Σ|wx| %g)",
                              cinfer_kernel_type_info(c.wtype)->name, i, j, want_bits[(size_t)i * M + j], exact, size);
            }
        }
        FOR_EACH_LEVEL(level)
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
            int n = batches[b];
            for (int first = 0; first + n <= N; first += n) { /* rows [first, first + n) as one batch */
                memset(y, 0, sizeof(float) * N * M);
                run_matmul(&c, x + (size_t)first * K, n, y, prepared);
                ck_assert_msg(memcmp(y, want_bits + (size_t)first * M, sizeof(float) * n * M) == 0,
                              "%s, %s, rows %d..%d in a batch of %d: not the bits of the scalar level in a batch of %d",
                              cinfer_kernel_type_info(c.wtype)->name, cinfer_kernels_level_name(level), first,
                              first + n - 1, n, N);
                if (n == N)
                    break;
            }
        }
        restore_level();
        printf("%-7s %dx%d, batches of 1..%d: within %.2g of the double loop (of Σ|w x|); every level and batch the "
               "same bits\n",
               cinfer_kernel_type_info(c.wtype)->name, M, K, N, worst);
        quant_case_free(&c);
        free(x);
        free(prepared);
        free(want_bits);
        free(y);
        free(xd);
    }
}
END_TEST

/* Q4_0, Q4_1, Q5_0, Q5_1, Q2_K … Q6_K, IQ4_NL, IQ4_XS and MXFP4 repacked in panels of 16
 * rows (37 rows: a partial last panel; 576 or 512 values a row): every row comes back as
 * stored, widens to the stored row's values, and the matmul over any rows [j0, j1) at every
 * level and batch size gives the stored type's bits (the AVX-512 kernels where the CPU has
 * VNNI, the AVX2 ones where it has AVX2). */
START_TEST(panels_give_the_stored_bits)
{
    static const enum cinfer_kernel_wtype panel_types[] = {CINFER_KW_Q4_0, CINFER_KW_Q5_0, CINFER_KW_Q4_K,
                                                           CINFER_KW_Q5_K, CINFER_KW_Q6_K, CINFER_KW_IQ4_NL,
                                                           CINFER_KW_IQ4_XS, CINFER_KW_Q2_K, CINFER_KW_Q3_K,
                                                           CINFER_KW_Q4_1,   CINFER_KW_Q5_1,   CINFER_KW_MXFP4};
    enum { M = 37, N = 11 };
    for (size_t t = 0; t < sizeof panel_types / sizeof panel_types[0]; t++) {
        /* 32-value blocks: 18 of them, so the decode tiles' groups of 8 leave a tail */
        const int K = cinfer_kernel_type_info(panel_types[t])->block_values == 32 ? 576 : 512;
        uint64_t rng = 900 + t;
        struct quant_case c;
        quant_case_make(&c, panel_types[t], M, K, &rng);
        if (c.wtype == CINFER_KW_MXFP4) { /* rows whose E8M0 scales are the two subnormals, 2^-126, 2^72 */
            static const uint8_t exponents[] = {0, 1, 2, 200};
            for (int r = 0; r < 4; r++) {
                for (int b = 0; b < K / 32; b++)
                    c.w[(size_t)r * c.row_bytes + (size_t)b * 17] = exponents[r];
                cinfer_kernel_dequantize_row(c.wtype, c.w + (size_t)r * c.row_bytes, K, c.wf + (size_t)r * K);
            }
        }
        enum cinfer_kernel_wtype pt = cinfer_kernel_panel_type(c.wtype);
        ck_assert_int_ne(pt, c.wtype);
        ck_assert(cinfer_kernel_can_pack_panels(c.wtype, K));
        ck_assert(!cinfer_kernel_can_pack_panels(c.wtype, K + 16));
        size_t bytes = cinfer_kernel_panels_bytes(c.wtype, M, K);
        ck_assert_uint_eq(bytes, 48 * c.row_bytes); /* 3 panels of 16 rows, the same bytes a row */
        uint8_t *panels = malloc(bytes), *row = malloc(c.row_bytes);
        cinfer_kernel_pack_panels(c.wtype, c.w, c.row_bytes, M, K, panels);
        float *wrow = malloc(sizeof(float) * K);
        for (int r = 0; r < M; r++) {
            cinfer_quant_panel_row(pt, panels, r, K, row);
            ck_assert_msg(!memcmp(row, c.w + (size_t)r * c.row_bytes, c.row_bytes), "%s row %d: not the stored bytes",
                          cinfer_kernel_type_info(c.wtype)->name, r);
            cinfer_kernel_weight_row_to_f32(panels, pt, 0, r, K, wrow);
            ck_assert(!memcmp(wrow, c.wf + (size_t)r * K, sizeof(float) * K));
        }
        float *x = malloc(sizeof(float) * N * K), *want = malloc(sizeof(float) * N * M), *got = malloc(sizeof(float) * N * M);
        void *prepared = malloc(cinfer_kernel_prepared_bytes(c.wtype, N, K));
        fill_activations(x, N, K, &rng);
        cinfer_kernels_force_level(CINFER_KERNEL_SCALAR);
        run_matmul(&c, x, N, want, prepared);
        int ranges[][2] = {{0, M}, {3, 29}, {16, 32}, {33, 37}};
        FOR_EACH_LEVEL(level)
        for (int n = 1; n <= N; n++)
            for (size_t q = 0; q < sizeof ranges / sizeof ranges[0]; q++) {
                int j0 = ranges[q][0], j1 = ranges[q][1];
                memset(got, 0, sizeof(float) * N * M);
                cinfer_kernel_prepare_rows(pt, x, K, 0, n, prepared);
                cinfer_kernel_matmul(x, prepared, n, K, panels, pt, 0, j0, j1, got, M);
                for (int i = 0; i < n; i++)
                    ck_assert_msg(!memcmp(got + (size_t)i * M + j0, want + (size_t)i * M + j0,
                                          sizeof(float) * (size_t)(j1 - j0)),
                                  "%s panels, %s, batch %d, rows %d..%d: activation row %d not the stored bits",
                                  cinfer_kernel_type_info(c.wtype)->name, cinfer_kernels_level_name(level), n, j0,
                                  j1 - 1, i);
            }
        restore_level();
        printf("%-6s panels (%s): every row as stored, the stored type's bits at every level, batch and range\n",
               cinfer_kernel_type_info(c.wtype)->name,
               cinfer_quant_panels_avx512_usable() ? "AVX-512 VNNI and AVX2 kernels here"
               : cinfer_kernels_best_level() != CINFER_KERNEL_SCALAR ? "AVX2 kernels here"
                                                                     : "scalar loop only here");
        quant_case_free(&c);
        free(panels), free(row), free(wrow), free(x), free(want), free(got), free(prepared);
    }
}
END_TEST

static Suite *suite_quant_kernels(void)
{
    Suite *s = suite_create("quant_kernels");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, activation_blocks_of_32);
    tcase_add_test(tc, activation_blocks_of_256);
    tcase_add_test(tc, matmul_every_type_and_level);
    tcase_add_test(tc, panels_give_the_stored_bits);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_quant_kernels)
