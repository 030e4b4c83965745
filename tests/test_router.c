/* The data-parallel router (core/engine/router.c) against what SGLang's cache-aware
 * router does: prompts that share a long prefix go to the replica that saw it, others to
 * the least loaded, a down replica gets nothing, loads far apart win over affinity, and
 * what is forgotten (a restart, the block limit) no longer attracts requests. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/router.h"
#include "support/runner.h"

#define BLOCK CINFER_ROUTER_BLOCK_TOKENS

/* A prompt: `shared` tokens of the family's prefix, then `own` tokens of its own. */
static void make_prompt(int32_t *ids, int family, int shared, int unique, int own)
{
    for (int i = 0; i < shared; i++)
        ids[i] = 1000 * family + i;
    for (int i = 0; i < own; i++)
        ids[shared + i] = 500000 + 977 * unique + i;
}

START_TEST(shared_prefixes_stick_and_the_rest_spread)
{
    struct engine_router *r = cinfer_router_new(2, 4096);
    ck_assert_ptr_nonnull(r);
    int up[2] = {1, 1}, load[2] = {0, 0};
    int32_t ids[256];
    size_t matched;
    /* Two families of 200-token system prompts, interleaved. */
    int home[2] = {-1, -1}, hits = 0, queries = 0;
    for (int q = 0; q < 40; q++) {
        int family = q % 2;
        make_prompt(ids, family, 200, q, 20);
        int chosen = cinfer_router_choose(r, ids, 220, up, load, &matched);
        ck_assert_int_ge(chosen, 0);
        load[chosen]++;
        if (home[family] < 0)
            home[family] = chosen;
        ck_assert_msg(chosen == home[family], "request %d of family %d went to %d, its prefix is on %d", q, family,
                      chosen, home[family]);
        hits += (int)matched;
        queries += 220;
    }
    /* The two families landed on different replicas: the second found no prefix and
     * took the less loaded one. */
    ck_assert_int_ne(home[0], home[1]);
    printf("router: shared-prefix requests matched %d of %d prompt tokens (%.1f%%)\n", hits, queries,
           100.0 * hits / queries);
    ck_assert_int_gt(hits, queries * 8 / 10);

    /* Prompts with nothing in common alternate by load. */
    int count[2] = {0, 0};
    load[0] = load[1] = 0;
    for (int q = 0; q < 32; q++) {
        make_prompt(ids, 0, 0, 1000 + q, 64);
        int chosen = cinfer_router_choose(r, ids, 64, up, load, &matched);
        load[chosen]++;
        count[chosen]++;
        ck_assert_uint_eq(matched, 0);
    }
    ck_assert_int_eq(count[0], 16);
    ck_assert_int_eq(count[1], 16);
    cinfer_router_free(&r);
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(down_replicas_imbalance_and_forgetting)
{
    struct engine_router *r = cinfer_router_new(3, 64);
    int up[3] = {1, 1, 1}, load[3] = {0, 0, 0};
    int32_t ids[512];
    size_t matched;
    make_prompt(ids, 7, 480, 1, 8);
    int home = cinfer_router_choose(r, ids, 488, up, load, &matched);
    ck_assert_int_eq(home, 0); /* all idle: the first turn */
    ck_assert_uint_eq(matched, 0);
    ck_assert_int_eq(cinfer_router_choose(r, ids, 488, up, load, &matched), home);
    ck_assert_uint_eq(matched, 480);

    /* Its replica is down: the next best, and the prefix follows it there. */
    up[home] = 0;
    int moved = cinfer_router_choose(r, ids, 488, up, load, &matched);
    ck_assert_int_ne(moved, home);
    ck_assert_uint_eq(matched, 0);
    up[home] = 1;

    /* Both `home` and `moved` hold the prefix; `other` is idle. Loads within 32 of each
     * other: the prefix wins, on the less loaded of its holders. */
    int other = 3 - home - moved;
    load[home] = 20;
    load[moved] = 25;
    load[other] = 0;
    ck_assert_int_eq(cinfer_router_choose(r, ids, 488, up, load, &matched), home);
    ck_assert_uint_eq(matched, 480);
    /* Loads more than 32 apart: the least loaded wins over the cached prefix. */
    load[home] = 40;
    load[moved] = 45;
    ck_assert_int_eq(cinfer_router_choose(r, ids, 488, up, load, &matched), other);
    cinfer_router_forget(r, other);

    /* A restart forgets; so does the block limit (64 blocks: a 1,024-token prompt
     * evicts the 480-token one's blocks). */
    cinfer_router_forget(r, moved);
    load[0] = load[1] = load[2] = 0;
    ck_assert_int_eq(cinfer_router_choose(r, ids, 488, up, load, &matched), home);
    ck_assert_uint_eq(matched, 480); /* replica `home` still holds it */
    int32_t big[1024];
    make_prompt(big, 9, 0, 77, 1024);
    up[moved] = up[other] = 0;
    cinfer_router_choose(r, big, 1024, up, load, &matched);
    up[moved] = up[other] = 1;
    ck_assert_int_ge(cinfer_router_choose(r, ids, 488, up, load, &matched), 0);
    ck_assert_uint_eq(matched, 0); /* nobody holds it any more */

    /* Nothing up: -1. Short prompts (under one block) never match. */
    int none[3] = {0, 0, 0};
    ck_assert_int_eq(cinfer_router_choose(r, ids, 488, none, load, &matched), -1);
    ck_assert_int_ge(cinfer_router_choose(r, ids, BLOCK - 1, up, load, &matched), 0);
    ck_assert_uint_eq(matched, 0);
    cinfer_router_free(&r);
}
END_TEST

static Suite *suite_router(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, shared_prefixes_stick_and_the_rest_spread);
    tcase_add_test(tc, down_replicas_imbalance_and_forgetting);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_router)
