/* The paged KV cache's accounting: budget to page count, alloc / ref / unref / free,
 * sharing, and the runtime's view of it. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv_cache.h"
#include "model/runtime.h"
#include "support/random_model.h"
#include "support/runner.h"

START_TEST(budget_to_pages)
{
    /* 2 layers x K,V x 16 tokens x 64 floats x 4 bytes */
    size_t page = cinfer_kv_page_bytes(2, 16, 64, 4);
    ck_assert_uint_eq(page, 2 * 2 * 16 * 64 * 4);
    ck_assert_int_eq(cinfer_kv_pages_for_budget(page * 10, page), 10);
    ck_assert_int_eq(cinfer_kv_pages_for_budget(page * 10 - 1, page), 9);
    ck_assert_int_eq(cinfer_kv_pages_for_budget(page - 1, page), 0);
    ck_assert_int_eq(cinfer_kv_pages_for_budget(0, page), 0);
}
END_TEST

START_TEST(alloc_ref_unref_free)
{
    struct cinfer_kv_pages kv;
    ck_assert_int_eq(cinfer_kv_pages_init(&kv, 4, 16, NULL), 0);
    ck_assert_int_eq(kv.n_free, 4);
    int32_t p[4];
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(cinfer_kv_pages_alloc(&kv, &p[i]), 0);
        ck_assert_int_eq(p[i], i); /* lowest first */
        ck_assert_int_eq(cinfer_kv_pages_refcount(&kv, p[i]), 1);
    }
    ck_assert_int_eq(kv.n_free, 0);
    int32_t extra = -7;
    ck_assert_int_eq(cinfer_kv_pages_alloc(&kv, &extra), CINFER_ERR_NOMEM);
    ck_assert_int_eq(extra, -7);

    /* a shared page survives its first owner */
    cinfer_kv_pages_ref(&kv, p[1]);
    ck_assert_int_eq(cinfer_kv_pages_refcount(&kv, p[1]), 2);
    cinfer_kv_pages_unref(&kv, p[1]);
    ck_assert_int_eq(kv.n_free, 0);
    ck_assert_int_eq(cinfer_kv_pages_refcount(&kv, p[1]), 1);
    cinfer_kv_pages_unref(&kv, p[1]);
    ck_assert_int_eq(kv.n_free, 1);
    ck_assert_int_eq(cinfer_kv_pages_refcount(&kv, p[1]), 0);

    /* the freed page is the one handed out next */
    int32_t again;
    ck_assert_int_eq(cinfer_kv_pages_alloc(&kv, &again), 0);
    ck_assert_int_eq(again, p[1]);
    for (int i = 0; i < 4; i++)
        cinfer_kv_pages_unref(&kv, p[i]);
    ck_assert_int_eq(kv.n_free, 4);
    ck_assert_int_eq(cinfer_kv_pages_refcount(&kv, 9), -1);
    cinfer_kv_pages_fini(&kv);
}
END_TEST

/* Random alloc/ref/unref traffic against a plain model of the refcounts. */
START_TEST(random_traffic_matches_a_model)
{
    enum { N = 37 };
    struct cinfer_kv_pages kv;
    ck_assert_int_eq(cinfer_kv_pages_init(&kv, N, 8, NULL), 0);
    int model[N] = {0};
    uint64_t rng = 99;
    for (int step = 0; step < 5000; step++) {
        float r = random_uniform(&rng);
        int page = (int)((random_uniform(&rng) + 1.0f) * 0.5f * N) % N;
        if (r < -0.2f) {
            int32_t got;
            int rc = cinfer_kv_pages_alloc(&kv, &got);
            int any_free = 0;
            for (int i = 0; i < N; i++)
                any_free |= model[i] == 0;
            if (any_free) {
                ck_assert_int_eq(rc, 0);
                ck_assert_int_eq(model[got], 0);
                model[got] = 1;
            } else {
                ck_assert_int_eq(rc, CINFER_ERR_NOMEM);
            }
        } else if (r < 0.3f && model[page] > 0) {
            cinfer_kv_pages_ref(&kv, page);
            model[page]++;
        } else if (model[page] > 0) {
            cinfer_kv_pages_unref(&kv, page);
            model[page]--;
        }
        int n_free = 0;
        for (int i = 0; i < N; i++) {
            n_free += model[i] == 0;
            ck_assert_int_eq(cinfer_kv_pages_refcount(&kv, i), model[i]);
        }
        ck_assert_int_eq(kv.n_free, n_free);
    }
    cinfer_kv_pages_fini(&kv);
}
END_TEST

START_TEST(unref_of_a_free_page_aborts)
{
    struct cinfer_kv_pages kv;
    ck_assert_int_eq(cinfer_kv_pages_init(&kv, 2, 16, NULL), 0);
    int32_t p;
    ck_assert_int_eq(cinfer_kv_pages_alloc(&kv, &p), 0);
    cinfer_kv_pages_unref(&kv, p);
    cinfer_kv_pages_unref(&kv, p); /* second time: a caller bug */
}
END_TEST

static const struct random_model_spec small_spec = {
    .vocab = 50, .hidden = 32, .intermediate = 48, .layers = 3, .heads = 4, .kv_heads = 2, .head_dim = 8,
    .dtype = CINFER_DTYPE_F32, .seed = 1,
};

START_TEST(runtime_sizes_the_cache_from_its_budget)
{
    struct cinfer_model *m = random_model_create(&small_spec);
    ck_assert_ptr_nonnull(m);
    /* 3 layers x K,V x 8 tokens x (2 x 8) floats x 4 bytes = 3072 bytes a page */
    size_t page_bytes = 3 * 2 * 8 * 16 * 4;
    struct cinfer_runtime_options o = {.kv_cache_bytes = page_bytes * 5 + 100, .kv_page_tokens = 8, .n_threads = 2,
                                       .kv_dtype = CINFER_KV_CACHE_DTYPE_F32};
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), 0);
    ck_assert_int_eq(cinfer_runtime_kv_pages_total(rt), 5);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(rt), 5);
    ck_assert_int_eq(cinfer_runtime_kv_page_tokens(rt), 8);
    int32_t pages[5];
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(cinfer_runtime_kv_page_alloc(rt, &pages[i]), 0);
    int32_t none;
    ck_assert_int_eq(cinfer_runtime_kv_page_alloc(rt, &none), CINFER_ERR_NOMEM);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(rt), 0);
    cinfer_runtime_kv_page_ref(rt, pages[2]);
    cinfer_runtime_kv_page_unref(rt, pages[2]);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(rt), 0);
    cinfer_runtime_kv_page_unref(rt, pages[2]);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(rt), 1);
    cinfer_runtime_destroy(&rt);
    ck_assert_ptr_null(rt);

    /* default page size 16, and a budget below one page is refused with the sizes */
    o = (struct cinfer_runtime_options){.kv_cache_bytes = 2 * page_bytes - 1, .kv_dtype = CINFER_KV_CACHE_DTYPE_F32};
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_RANGE);
    ck_assert_ptr_null(rt);
    ck_assert_msg(strstr(err.message, "kv_cache_bytes 6143") && strstr(err.message, "16 tokens takes 6144 bytes"),
                  "%s", err.message);
    random_model_free(&m);
}
END_TEST

/* The budget counts the chosen type's bytes: the same memory holds twice the pages of f32
 * in f16 or bf16 (auto is f16), and 64 / 17 times them in q8_0 (34 bytes per 32 values);
 * q8_0 needs a head_dim that is a multiple of 32 and says so. */
START_TEST(budget_counts_the_kv_type_bytes)
{
    static const struct random_model_spec wide = {
        .vocab = 50, .hidden = 64, .intermediate = 48, .layers = 3, .heads = 2, .kv_heads = 1, .head_dim = 32,
        .dtype = CINFER_DTYPE_F32, .seed = 2,
    };
    struct cinfer_model *m = random_model_create(&wide);
    size_t f32_page = 3 * 2 * 16 * 32 * 4; /* 3 layers, K and V, 16 tokens, kv_dim 32 */
    static const struct {
        enum cinfer_kv_cache_dtype dtype;
        const char *name;
        int pages;
    } types[] = {{CINFER_KV_CACHE_DTYPE_F32, "f32", 34}, {CINFER_KV_CACHE_DTYPE_F16, "f16", 68},
                 {CINFER_KV_CACHE_DTYPE_BF16, "bf16", 68}, {CINFER_KV_CACHE_DTYPE_AUTO, "f16", 68},
                 {CINFER_KV_CACHE_DTYPE_Q8_0, "q8_0", 128}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct cinfer_runtime_options o = {.kv_cache_bytes = 34 * f32_page, .n_threads = 1, .kv_dtype = types[i].dtype};
        struct cinfer_runtime *rt = NULL;
        struct cinfer_error err = {0};
        ck_assert_msg(cinfer_runtime_create(m, &o, &rt, &err) == 0, "%s", err.message);
        ck_assert_str_eq(cinfer_runtime_kv_dtype_name(rt), types[i].name);
        ck_assert_int_eq(cinfer_runtime_kv_pages_total(rt), types[i].pages);
        ck_assert_uint_eq(cinfer_runtime_kv_token_bytes(&m->config, types[i].dtype) * 16 * (size_t)types[i].pages,
                          types[i].dtype == CINFER_KV_CACHE_DTYPE_Q8_0 ? 128 * 3 * 2 * 16 * 34 : 34 * f32_page);
        printf("kv cache: %zu bytes hold %d tokens in %s\n", 34 * f32_page, 16 * types[i].pages, types[i].name);
        cinfer_runtime_destroy(&rt);
    }
    random_model_free(&m);
    m = random_model_create(&small_spec); /* head_dim 8 */
    struct cinfer_runtime_options o = {.kv_cache_bytes = 1 << 20, .kv_dtype = CINFER_KV_CACHE_DTYPE_Q8_0};
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "q8_0") && strstr(err.message, "head_dim is 8"), "%s", err.message);
    ck_assert_uint_eq(cinfer_runtime_kv_token_bytes(&m->config, CINFER_KV_CACHE_DTYPE_Q8_0), 0);
    random_model_free(&m);
}
END_TEST

START_TEST(runtime_names_a_bad_weight)
{
    struct cinfer_model *m = random_model_create(&small_spec);
    m->layers[1].wk.rows = 17;
    struct cinfer_runtime_options o = {.kv_cache_bytes = 1 << 20};
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "wk of layer 1 should be (16, 32)") && strstr(err.message, "found (17, 32)"), "%s",
                  err.message);
    random_model_free(&m);
}
END_TEST

static Suite *suite_kv_cache(void)
{
    Suite *s = suite_create("kv_cache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, budget_to_pages);
    tcase_add_test(tc, alloc_ref_unref_free);
    tcase_add_test(tc, random_traffic_matches_a_model);
    tcase_add_test_raise_signal(tc, unref_of_a_free_page_aborts, SIGABRT);
    tcase_add_test(tc, runtime_sizes_the_cache_from_its_budget);
    tcase_add_test(tc, budget_counts_the_kv_type_bytes);
    tcase_add_test(tc, runtime_names_a_bad_weight);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_kv_cache)
