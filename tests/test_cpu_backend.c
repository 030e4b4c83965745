/* The CPU backend's weight preparation (core/backend/cpu_weights.c through
 * weight_prepare / weight_release): at the AVX-512 level Q8_0, F16 and BF16 weights
 * become copies in 16-row panels, elsewhere every weight is returned as stored;
 * embedding lookups through a prepared weight give the stored weight's bits, and so do
 * matmuls for Q8_0 (16-bit panels sum in another order: within 1e-6); copies are carved
 * one after another from shared slabs, a copy larger than a slab gets its own, and
 * releasing every copy in any order frees them all (ASan's leak check sees the rest).
 * attention_windowed (sliding window, score scale, soft-capping) against a float64
 * loop over the same K/V, for a prefill chunk and a decode step, on shuffled pages.
 * The mixture-of-experts ops (router top-k, row gather and weighted scatter-add)
 * against plain loops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_backend.h"
#include "kernels.h"
#include "support/random_model.h"
#include "support/runner.h"

#define K 576

/* A (rows, k) weight of type `type` with random values, rows packed. */
static struct cinfer_backend_weight make_weight(enum cinfer_tensor_type type, int64_t rows, int k, uint64_t *rng)
{
    size_t row_bytes = cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)type, k);
    uint8_t *data = malloc(row_bytes * (size_t)rows);
    ck_assert_ptr_nonnull(data);
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int64_t r = 0; r < rows; r++) {
        for (int q = 0; q < k; q++)
            row[q] = 0.5f * random_uniform(rng);
        random_model_store_row(row, k, (enum cinfer_dtype)type, data + (size_t)r * row_bytes);
    }
    free(row);
    return (struct cinfer_backend_weight){(uint32_t)type, rows, k, data, row_bytes};
}

START_TEST(prepared_weights_give_the_stored_bits)
{
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    uint64_t rng = 5;
    const enum cinfer_tensor_type types[] = {CINFER_TENSOR_F32, CINFER_TENSOR_F16, CINFER_TENSOR_BF16,
                                             CINFER_TENSOR_Q8_0};
    const int batches[] = {1, 2, 3, 17};
    float *x = malloc(sizeof(float) * 17 * K);
    for (int i = 0; i < 17 * K; i++)
        x[i] = 2.0f * random_uniform(&rng);
    const int32_t tokens[] = {0, 44, 17, 3, 44};
    for (enum cinfer_kernel_level level = CINFER_KERNEL_SCALAR;
         level <= cinfer_kernels_best_level() && cinfer_kernels_force_level(level) == 0; level++) {
        void *be;
        struct cinfer_error err = {0};
        ck_assert_int_eq(ops->create(2, &be, &err), 0);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            struct cinfer_backend_weight stored = make_weight(types[t], 45, K, &rng), prepared;
            ck_assert_int_eq(ops->weight_prepare(be, &stored, &prepared, &err), 0);
            /* 16-bit and Q8_0 panels at the AVX-512 level, Q8_0 panels at the AVX2 level too */
            int panels = types[t] != CINFER_TENSOR_F32 &&
                         (level == CINFER_KERNEL_AVX512 ||
                          (level == CINFER_KERNEL_AVX2 && types[t] == CINFER_TENSOR_Q8_0));
            if (panels) {
                enum cinfer_kernel_wtype want = cinfer_kernel_panel_type((enum cinfer_kernel_wtype)types[t]);
                ck_assert_uint_eq(prepared.type, (uint32_t)want);
                ck_assert_ptr_ne(prepared.data, stored.data);
                ck_assert_uint_eq((uintptr_t)prepared.data % 64, 0);
            } else {
                ck_assert_mem_eq(&prepared, &stored, sizeof stored);
            }
            ck_assert_int_eq(prepared.rows, stored.rows);
            ck_assert_int_eq(prepared.cols, stored.cols);
            /* (17, 45) matmul outputs or (5, K) embedding rows */
            float *y_stored = malloc(sizeof(float) * 5 * K), *y_prepared = malloc(sizeof(float) * 5 * K);
            for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
                int n = batches[b];
                struct cinfer_backend_matmul_out out_s = {&stored, NULL, y_stored, 0};
                struct cinfer_backend_matmul_out out_p = {&prepared, NULL, y_prepared, 0};
                ck_assert_int_eq(ops->matmul(be, x, n, &out_s, 1, &err), 0);
                ck_assert_int_eq(ops->matmul(be, x, n, &out_p, 1, &err), 0);
                if (types[t] == CINFER_TENSOR_Q8_0 || !panels) { /* the same per-output definition */
                    ck_assert_msg(memcmp(y_stored, y_prepared, sizeof(float) * n * 45) == 0,
                                  "%s type %d n %d: the prepared weight's matmul differs",
                                  cinfer_kernels_level_name(level), (int)types[t], n);
                } else { /* 16-bit panels sum in another order */
                    double diff = 0, norm = 0;
                    for (int i = 0; i < n * 45; i++) {
                        diff += ((double)y_stored[i] - y_prepared[i]) * ((double)y_stored[i] - y_prepared[i]);
                        norm += (double)y_stored[i] * y_stored[i];
                    }
                    ck_assert_msg(diff <= 1e-12 * norm, "%s type %d n %d: relative difference %g",
                                  cinfer_kernels_level_name(level), (int)types[t], n, sqrt(diff / norm));
                }
            }
            ops->embedding(be, &stored, tokens, 5, y_stored);
            ops->embedding(be, &prepared, tokens, 5, y_prepared);
            ck_assert_mem_eq(y_stored, y_prepared, sizeof(float) * 5 * K);
            ops->weight_release(be, &prepared);
            free(y_stored);
            free(y_prepared);
            free((void *)stored.data);
        }
        ops->destroy(be);
    }
    cinfer_kernels_force_level(cinfer_kernels_best_level());
    free(x);
}
END_TEST

/* Copies share slabs in the order they were made; one past a slab's 64 MiB gets a slab
 * of its own; releases in any order, interleaved with new copies, leave nothing. */
START_TEST(copies_share_slabs_and_are_all_freed)
{
    if (cinfer_kernels_best_level() != CINFER_KERNEL_AVX512) {
        printf("cpu backend: no AVX-512 here, so no weight is copied: nothing to check\n");
        return;
    }
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be;
    struct cinfer_error err = {0};
    ck_assert_int_eq(ops->create(2, &be, &err), 0);
    uint64_t rng = 6;
    enum { SMALL = 12 };
    struct cinfer_backend_weight stored[SMALL], prepared[SMALL];
    for (int i = 0; i < SMALL; i++) {
        stored[i] = make_weight(CINFER_TENSOR_Q8_0, 16 + 7 * i, K, &rng);
        ck_assert_int_eq(ops->weight_prepare(be, &stored[i], &prepared[i], &err), 0);
    }
    for (int i = 1; i < SMALL; i++) { /* one after another, 64-byte aligned */
        size_t bytes = cinfer_kernel_panels_bytes(CINFER_KW_Q8_0, stored[i - 1].rows, K);
        ck_assert_ptr_eq(prepared[i].data, (const uint8_t *)prepared[i - 1].data + (bytes + 63) / 64 * 64);
    }
    /* 65536 rows of 1024: 71.3 MB of panels, more than a slab */
    size_t big_row = cinfer_kernel_row_bytes(CINFER_KW_Q8_0, 1024);
    uint8_t *big_data = malloc(big_row * 65536);
    ck_assert_ptr_nonnull(big_data);
    for (size_t i = 0; i < big_row * 65536; i++)
        big_data[i] = (uint8_t)(i * 2654435761u >> 11);
    struct cinfer_backend_weight big = {CINFER_TENSOR_Q8_0, 65536, 1024, big_data, big_row}, big_prepared;
    ck_assert_int_eq(ops->weight_prepare(be, &big, &big_prepared, &err), 0);
    float row_stored[1024], row_prepared[1024];
    for (int64_t r = 0; r < 65536; r += 4099) {
        cinfer_kernel_weight_row_to_f32(big.data, CINFER_KW_Q8_0, big_row, r, 1024, row_stored);
        cinfer_kernel_weight_row_to_f32(big_prepared.data, CINFER_KW_Q8_0_PANELS, 0, r, 1024, row_prepared);
        ck_assert_mem_eq(row_stored, row_prepared, sizeof row_stored);
    }
    /* a copy made after the big one goes to the newest slab with room */
    struct cinfer_backend_weight late = make_weight(CINFER_TENSOR_Q8_0, 32, K, &rng), late_prepared;
    ck_assert_int_eq(ops->weight_prepare(be, &late, &late_prepared, &err), 0);
    for (int i = 0; i < SMALL; i += 2)
        ops->weight_release(be, &prepared[i]);
    ops->weight_release(be, &big_prepared);
    for (int i = 1; i < SMALL; i += 2)
        ops->weight_release(be, &prepared[i]);
    /* a weight returned as stored is released as a no-op */
    struct cinfer_backend_weight f16 = make_weight(CINFER_TENSOR_F16, 4, K, &rng), f16_prepared;
    ck_assert_int_eq(ops->weight_prepare(be, &f16, &f16_prepared, &err), 0);
    ops->weight_release(be, &f16_prepared);
    ops->weight_release(be, &late_prepared);
    ops->destroy(be);
    for (int i = 0; i < SMALL; i++)
        free((void *)stored[i].data);
    free((void *)late.data);
    free((void *)f16.data);
    free(big_data);
    printf("cpu backend: %d copies carved in order, a %.1f MB copy past a slab, all released\n", SMALL,
           cinfer_kernel_panels_bytes(CINFER_KW_Q8_0, 65536, 1024) / 1e6);
}
END_TEST

#define ATT_PAGE 4
#define ATT_PAGES 24 /* 96 positions */
#define ATT_HEADS 4
#define ATT_KV_HEADS 2
#define ATT_HD 8

/* out (n_tokens, heads * hd) of a sequence at [start, start + n_tokens), in double. */
static void attention_by_hand(const float *q, const float *k, const float *v, int start, int n_tokens,
                              const struct cinfer_backend_attn_options *o, double *out)
{
    int kv_dim = ATT_KV_HEADS * ATT_HD, q_dim = ATT_HEADS * ATT_HD, group = ATT_HEADS / ATT_KV_HEADS;
    double scale = o->scale > 0.0f ? o->scale : 1.0 / sqrt(ATT_HD);
    for (int t = 0; t < n_tokens; t++)
        for (int h = 0; h < ATT_HEADS; h++) {
            int pos = start + t, kvh = h / group;
            int lo = o->window > 0 && pos - o->window + 1 > 0 ? pos - o->window + 1 : 0;
            double p[ATT_PAGE * ATT_PAGES], max = -INFINITY, sum = 0;
            for (int j = lo; j <= pos; j++) {
                double dot = 0;
                for (int d = 0; d < ATT_HD; d++)
                    dot += (double)q[t * q_dim + h * ATT_HD + d] * k[j * kv_dim + kvh * ATT_HD + d];
                dot *= scale;
                if (o->softcap > 0.0f)
                    dot = o->softcap * tanh(dot / o->softcap);
                p[j] = dot;
                max = dot > max ? dot : max;
            }
            if (o->sinks) /* gpt-oss: the head's sink logit joins the denominator only */
                max = fmax(max, o->sinks[h]);
            for (int j = lo; j <= pos; j++)
                sum += p[j] = exp(p[j] - max);
            if (o->sinks)
                sum += exp(o->sinks[h] - max);
            for (int d = 0; d < ATT_HD; d++) {
                double acc = 0;
                for (int j = lo; j <= pos; j++)
                    acc += p[j] / sum * v[j * kv_dim + kvh * ATT_HD + d];
                out[t * q_dim + h * ATT_HD + d] = acc;
            }
        }
}

START_TEST(windowed_attention_matches_a_double_loop)
{
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be = NULL, *kv = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(ops->create(2, &be, &err), 0);
    struct cinfer_backend_kv_layout layout = {1, ATT_PAGES, ATT_PAGE, ATT_KV_HEADS * ATT_HD, ATT_HD, CINFER_KV_F32};
    ck_assert_int_eq(ops->kv_create(be, &layout, &kv, &err), 0);
    enum { N = ATT_PAGE * ATT_PAGES, KV_DIM = ATT_KV_HEADS * ATT_HD, Q_DIM = ATT_HEADS * ATT_HD };
    static float k[N * KV_DIM], v[N * KV_DIM], q[N * Q_DIM], out[N * Q_DIM]; /* (N, kv_dim), (N, q_dim) */
    static double want[N * Q_DIM];
    int32_t pages[ATT_PAGES], slots[N];
    uint64_t rng = 11;
    for (int i = 0; i < ATT_PAGES; i++)
        pages[i] = (i * 7) % ATT_PAGES; /* shuffled: 7 is prime to 24 */
    for (int p = 0; p < N; p++)
        slots[p] = pages[p / ATT_PAGE] * ATT_PAGE + p % ATT_PAGE;
    for (int i = 0; i < N * KV_DIM; i++) {
        k[i] = 2.0f * random_uniform(&rng);
        v[i] = random_uniform(&rng);
    }
    for (int i = 0; i < N * Q_DIM; i++)
        q[i] = 2.0f * random_uniform(&rng);
    ops->kv_write(be, kv, 0, k, v, N, slots);
    /* sinks: one below the scores, one above them (most of the weight goes to no value) */
    static const float sinks[ATT_HEADS] = {-1.0f, 0.5f, 2.0f, 6.0f};
    const struct cinfer_backend_attn_options cases[] = {
        {0, 0.0f, 0.0f, NULL},  {10, 0.0f, 0.0f, NULL}, {10, 0.2f, 1.5f, NULL},
        {32, 0.0f, 3.0f, NULL}, {1, 0.0f, 0.0f, NULL},  {0, 0.0f, 0.0f, sinks},
        {8, 0.0f, 0.0f, sinks}, {1, 0.0f, 0.0f, sinks},
    };
    /* a prefill chunk of 40 tokens from position 50 (its window reaches back past several
     * pages), then a decode step at the last position */
    const int chunks[][2] = {{50, 40}, {N - 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t s = 0; s < 2; s++) {
            int start = chunks[s][0], n = chunks[s][1];
            struct cinfer_backend_attn_seq seq = {0, n, start, pages, ATT_PAGES};
            ck_assert_int_eq(ops->attention_windowed(be, kv, 0, q + (size_t)start * Q_DIM, out, &seq, 1, ATT_HEADS,
                                                     ATT_KV_HEADS, ATT_HD, &cases[c], &err), 0);
            attention_by_hand(q + (size_t)start * Q_DIM, k, v, start, n, &cases[c], want);
            double worst = 0;
            for (int i = 0; i < n * Q_DIM; i++)
                worst = fmax(worst, fabs(out[i] - want[i]));
            ck_assert_msg(worst < 1e-5, "window %d scale %g softcap %g sinks %s, chunk at %d of %d: max |diff| %g",
                          cases[c].window, (double)cases[c].scale, (double)cases[c].softcap,
                          cases[c].sinks ? "yes" : "no", start, n, worst);
        }
    ops->kv_destroy(be, kv);
    ops->destroy(be);
}
END_TEST

/* swiglu_oai against its definition in double, on values on both sides of the clamps. */
START_TEST(swiglu_oai_matches_its_definition)
{
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(ops->create(2, &be, &err), 0);
    ck_assert_ptr_nonnull(ops->swiglu_oai);
    enum { N = 20000 };
    static float gate[N], up[N], want[N]; /* (N) */
    const float alpha = 1.702f, limit = 7.0f;
    uint64_t rng = 23;
    int clamped = 0;
    for (int i = 0; i < N; i++) {
        gate[i] = 20.0f * random_uniform(&rng); /* in [-20, 20): a third above 7, a third below -7 */
        up[i] = 20.0f * random_uniform(&rng);
        double g = fmin(gate[i], limit), u = fmax(fmin(up[i], limit), -limit);
        want[i] = (float)(g / (1.0 + exp(-alpha * g)) * (u + 1.0));
        clamped += gate[i] > limit;
    }
    ops->swiglu_oai(be, gate, up, N, alpha, limit);
    for (int i = 0; i < N; i++)
        ck_assert_double_eq_tol(gate[i], want[i], 1e-5 * fmax(1.0, fabs(want[i])));
    ck_assert_int_gt(clamped, N / 10);
    ops->destroy(be);
}
END_TEST

/* moe_route against a sort of each row and a softmax in double; gather_rows and
 * scatter_add_rows against plain loops, on a batch large enough to be split across threads. */
START_TEST(moe_ops_match_plain_loops)
{
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(ops->create(2, &be, &err), 0);
    enum { N = 300, E = 16, TOP = 4, DIM = 96 };
    static float logits[N * E], w[N * TOP], x[N * DIM], y[N * DIM], g[N * DIM]; /* (N, E) (N, TOP) (N, DIM) */
    static double want_y[N * DIM];
    int32_t ids[N * TOP], rows[N];
    uint64_t rng = 17;
    for (int i = 0; i < N * E; i++)
        logits[i] = 4.0f * random_uniform(&rng);
    logits[3 * E + 5] = logits[3 * E + 9] = 10.0f; /* a tie: the lower id comes first */
    for (int normalize = 0; normalize <= 1; normalize++) {
        ops->moe_route(be, logits, N, E, TOP, normalize, ids, w);
        for (int r = 0; r < N; r++) {
            const float *l = logits + r * E;
            double max = l[0], sum = 0, kept = 0;
            for (int e = 1; e < E; e++)
                max = fmax(max, l[e]);
            for (int e = 0; e < E; e++)
                sum += exp(l[e] - max);
            for (int j = 0; j < TOP; j++) {
                int rank = 0, id = ids[r * TOP + j]; /* experts strictly above it, or equal with a lower id */
                for (int e = 0; e < E; e++)
                    rank += l[e] > l[id] || (l[e] == l[id] && e < id);
                ck_assert_int_eq(rank, j);
                kept += exp(l[id] - max) / sum;
            }
            for (int j = 0; j < TOP; j++) {
                double p = exp(l[ids[r * TOP + j]] - max) / sum;
                ck_assert_double_eq_tol(w[r * TOP + j], normalize ? p / kept : p, 1e-6);
            }
        }
    }
    ck_assert_int_eq(ids[3 * TOP], 5);
    ck_assert_int_eq(ids[3 * TOP + 1], 9);
    for (int i = 0; i < N * DIM; i++) {
        x[i] = random_uniform(&rng);
        y[i] = random_uniform(&rng);
        want_y[i] = y[i];
    }
    for (int r = 0; r < N; r++)
        rows[r] = (r * 7) % N; /* a permutation: 7 is prime to 300 */
    ops->gather_rows(be, g, x, rows, N, DIM);
    for (int r = 0; r < N; r++)
        ck_assert_mem_eq(g + r * DIM, x + rows[r] * DIM, DIM * sizeof(float));
    ops->scatter_add_rows(be, y, x, rows, w, N, DIM);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < DIM; i++)
            want_y[rows[r] * DIM + i] += (double)w[r] * x[r * DIM + i];
    for (int i = 0; i < N * DIM; i++)
        ck_assert_double_eq_tol(y[i], want_y[i], 1e-6);
    /* a row added several times (one token's experts onto its row), in order */
    int32_t same[TOP] = {2, 2, 5, 2};
    for (int i = 0; i < N * DIM; i++)
        want_y[i] = y[i];
    ops->scatter_add_rows(be, y, x, same, w, TOP, DIM);
    for (int r = 0; r < TOP; r++)
        for (int i = 0; i < DIM; i++)
            want_y[same[r] * DIM + i] += (double)w[r] * x[r * DIM + i];
    for (int i = 0; i < N * DIM; i++)
        ck_assert_double_eq_tol(y[i], want_y[i], 1e-6);
    ops->zero(be, y, N * DIM);
    for (int i = 0; i < N * DIM; i++)
        ck_assert_float_eq(y[i], 0.0f);
    ops->destroy(be);
}
END_TEST

static Suite *suite_cpu_backend(void)
{
    Suite *s = suite_create("cpu_backend");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, prepared_weights_give_the_stored_bits);
    tcase_add_test(tc, copies_share_slabs_and_are_all_freed);
    tcase_add_test(tc, windowed_attention_matches_a_double_loop);
    tcase_add_test(tc, moe_ops_match_plain_loops);
    tcase_add_test(tc, swiglu_oai_matches_its_definition);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_cpu_backend)
