/* The prefix cache alone, on a real runtime's refcounted pages (a small random model):
 * matches agree with a brute-force search over the inserted sequences, equal prefixes
 * share one page, locked paths survive eviction, eviction goes least recently used
 * first, and every page comes back to the free list. */
#include <stdlib.h>
#include <string.h>

#include "model/runtime.h"
#include "scheduler/radix_cache.h"
#include "support/random_model.h"
#include "support/runner.h"

#define PAGE 4
#define N_PAGES 256

static const struct random_model_spec spec = {
    .vocab = 50, .hidden = 16, .intermediate = 32, .layers = 1, .heads = 2, .kv_heads = 1, .head_dim = 8,
    .dtype = CINFER_DTYPE_F32, .seed = 3,
};

struct fixture {
    struct cinfer_model *m;
    struct cinfer_runtime *rt;
    struct cinfer_radix_cache *c;
};

static void open_fixture(struct fixture *f)
{
    f->m = random_model_create(&spec);
    ck_assert_ptr_nonnull(f->m);
    size_t per_token = cinfer_runtime_kv_token_bytes(&f->m->config, CINFER_KV_CACHE_DTYPE_AUTO);
    struct cinfer_runtime_options ro = {.kv_cache_bytes = (size_t)N_PAGES * PAGE * per_token, .kv_page_tokens = PAGE,
                                        .n_threads = 1, .max_batch_tokens = 64};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_create(f->m, &ro, &f->rt, &err) == 0, "%s", err.message);
    ck_assert_int_eq(cinfer_runtime_kv_pages_total(f->rt), N_PAGES);
    ck_assert_int_eq(cinfer_runtime_kv_page_tokens(f->rt), PAGE);
    ck_assert_int_eq(cinfer_radix_cache_create(f->rt, &f->c, &err), 0);
}

static void close_fixture(struct fixture *f)
{
    cinfer_radix_cache_destroy(&f->c);
    ck_assert_ptr_null(f->c);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f->rt), N_PAGES); /* the tree held no stray refs */
    cinfer_runtime_destroy(&f->rt);
    random_model_free(&f->m);
}

/* What a finished request does: pages for its tokens, inserted, then its refs dropped. */
static void insert_finished(struct fixture *f, const int32_t *tokens, int n_pages)
{
    int32_t pages[64];
    for (int i = 0; i < n_pages; i++)
        ck_assert_int_eq(cinfer_runtime_kv_page_alloc(f->rt, &pages[i]), 0);
    struct cinfer_radix_node *lock = NULL;
    ck_assert_int_eq(cinfer_radix_cache_insert(f->c, tokens, pages, n_pages, &lock), 0);
    cinfer_radix_cache_unlock(f->c, lock);
    for (int i = 0; i < n_pages; i++)
        cinfer_runtime_kv_page_unref(f->rt, pages[i]);
}

START_TEST(matches_agree_with_brute_force)
{
    struct fixture f;
    open_fixture(&f);
    /* A 3-letter alphabet makes long shared prefixes common. */
    enum { N_SEQ = 40, MAX_LEN = 24 };
    int32_t seqs[N_SEQ][MAX_LEN];
    int lens[N_SEQ];
    uint64_t x = 12345;
    for (int s = 0; s < N_SEQ; s++) {
        lens[s] = 1 + (int)(x % MAX_LEN);
        for (int i = 0; i < MAX_LEN; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            seqs[s][i] = (int32_t)(x >> 62) % 3;
        }
        if (s > 0 && s % 3 == 0) /* some copy a neighbour's start exactly */
            memcpy(seqs[s], seqs[s - 1], (size_t)(MAX_LEN / 2) * sizeof(int32_t));
        insert_finished(&f, seqs[s], lens[s] / PAGE);
    }
    int distinct_pages = cinfer_radix_cache_pages(f.c);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), N_PAGES - distinct_pages);
    for (int q = 0; q < 200; q++) {
        int32_t query[MAX_LEN];
        int n = 1 + q % MAX_LEN;
        const int32_t *base = seqs[q % N_SEQ];
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            query[i] = (x >> 60) == 0 ? 2 - base[i] % 3 : base[i]; /* mostly a stored prefix, some changes */
        }
        int expected = 0; /* longest full-page common prefix with any inserted sequence */
        for (int s = 0; s < N_SEQ; s++) {
            int same = 0, limit = n < (lens[s] / PAGE) * PAGE ? n : (lens[s] / PAGE) * PAGE;
            while (same < limit && query[same] == seqs[s][same])
                same++;
            if (same / PAGE > expected)
                expected = same / PAGE;
        }
        ck_assert_int_eq(cinfer_radix_cache_peek(f.c, query, n), expected);
        int32_t pages[MAX_LEN];
        struct cinfer_radix_node *lock = NULL;
        ck_assert_int_eq(cinfer_radix_cache_match(f.c, query, n, pages, &lock), expected);
        cinfer_radix_cache_unlock(f.c, lock);
        for (int i = 0; i < expected; i++)
            cinfer_runtime_kv_page_unref(f.rt, pages[i]);
    }
    ck_assert_int_eq(cinfer_radix_cache_evictable_pages(f.c), distinct_pages);
    ck_assert_int_eq(cinfer_radix_cache_flush(f.c), 0);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), N_PAGES);
    close_fixture(&f);
}
END_TEST

START_TEST(equal_prefixes_share_one_page)
{
    struct fixture f;
    open_fixture(&f);
    int32_t tokens[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int32_t a[3], b[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(cinfer_runtime_kv_page_alloc(f.rt, &a[i]), 0);
        ck_assert_int_eq(cinfer_runtime_kv_page_alloc(f.rt, &b[i]), 0);
    }
    struct cinfer_radix_node *lock_a = NULL, *lock_b = NULL;
    ck_assert_int_eq(cinfer_radix_cache_insert(f.c, tokens, a, 3, &lock_a), 0);
    ck_assert_int_eq(cinfer_radix_cache_insert(f.c, tokens, b, 3, &lock_b), 0);
    /* b computed the same K/V: its table now points at a's pages, its own went back. */
    ck_assert(!memcmp(a, b, sizeof a));
    ck_assert_int_eq(cinfer_radix_cache_pages(f.c), 3);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), N_PAGES - 3);
    /* Both lock the path: nothing can be evicted. */
    ck_assert_int_eq(cinfer_radix_cache_evict(f.c, 3), 0);
    cinfer_radix_cache_unlock(f.c, lock_a);
    ck_assert_int_eq(cinfer_radix_cache_evict(f.c, 3), 0);
    cinfer_radix_cache_unlock(f.c, lock_b);
    for (int i = 0; i < 3; i++) {
        cinfer_runtime_kv_page_unref(f.rt, a[i]);
        cinfer_runtime_kv_page_unref(f.rt, b[i]);
    }
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), N_PAGES - 3); /* only the tree holds them */
    ck_assert_int_eq(cinfer_radix_cache_evict(f.c, 3), 3);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), N_PAGES);
    close_fixture(&f);
}
END_TEST

START_TEST(locked_paths_survive_and_lru_goes_first)
{
    struct fixture f;
    open_fixture(&f);
    int32_t x[8] = {1, 1, 1, 1, 2, 2, 2, 2}, y[8] = {1, 1, 1, 1, 3, 3, 3, 3}, z[8] = {4, 4, 4, 4, 5, 5, 5, 5};
    insert_finished(&f, x, 2);
    insert_finished(&f, y, 2); /* shares x's first page */
    insert_finished(&f, z, 2);
    ck_assert_int_eq(cinfer_radix_cache_pages(f.c), 5);
    /* Use x again: y's leaf and z's path are now older. */
    int32_t pages[2];
    struct cinfer_radix_node *lock = NULL;
    ck_assert_int_eq(cinfer_radix_cache_match(f.c, x, 8, pages, &lock), 2);
    cinfer_radix_cache_unlock(f.c, lock);
    cinfer_runtime_kv_page_unref(f.rt, pages[0]);
    cinfer_runtime_kv_page_unref(f.rt, pages[1]);
    ck_assert_int_eq(cinfer_radix_cache_evict(f.c, 1), 1);
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, y, 8), 1); /* y's own leaf went */
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, x, 8), 2);
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, z, 8), 2);
    /* Lock z (a running request on it): eviction takes x's leaf, never z's path. */
    ck_assert_int_eq(cinfer_radix_cache_match(f.c, z, 8, pages, &lock), 2);
    ck_assert_int_eq(cinfer_radix_cache_evictable_pages(f.c), 2);
    ck_assert_int_eq(cinfer_radix_cache_evict(f.c, 10), 2);
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, x, 8), 0);
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, z, 8), 2);
    ck_assert_int_eq(cinfer_radix_cache_flush(f.c), 2); /* locked pages remain */
    cinfer_radix_cache_unlock(f.c, lock);
    cinfer_runtime_kv_page_unref(f.rt, pages[0]);
    cinfer_runtime_kv_page_unref(f.rt, pages[1]);
    ck_assert_int_eq(cinfer_radix_cache_flush(f.c), 0);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), N_PAGES);
    close_fixture(&f);
}
END_TEST

START_TEST(partial_pages_are_never_matched)
{
    struct fixture f;
    open_fixture(&f);
    int32_t t[10] = {7, 7, 7, 7, 8, 8, 8, 8, 9, 9};
    insert_finished(&f, t, 2);
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, t, 10), 2);
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, t, 7), 1); /* the second page is not whole */
    ck_assert_int_eq(cinfer_radix_cache_peek(f.c, t, 3), 0);
    close_fixture(&f);
}
END_TEST

static Suite *suite_radix_cache(void)
{
    Suite *s = suite_create("radix_cache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, matches_agree_with_brute_force);
    tcase_add_test(tc, equal_prefixes_share_one_page);
    tcase_add_test(tc, locked_paths_survive_and_lru_goes_first);
    tcase_add_test(tc, partial_pages_are_never_matched);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_radix_cache)
