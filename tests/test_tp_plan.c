/* The plan rank 0 sends its followers (core/model/tp_plan.c): what is encoded decodes
 * to the same sequences (only the pages their positions use), and every malformed plan
 * is refused with words that name the field and the numbers; no truncation or flipped
 * byte of a valid plan crashes the decoder or slips through changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp_plan.h"
#include "support/runner.h"

static const struct cinfer_tp_plan_limits limits = {.vocab = 272, .kv_pages = 64, .page_tokens = 4,
                                                     .max_batch_tokens = 64};

static const int32_t tokens_a[10] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 271};
static const int32_t token_b = 3;
static const int32_t tokens_c[3] = {0, 100, 200};
static const int32_t pages_a[8] = {7, 3, 9, 63, 1, 2, 4, 5}; /* more than A's positions use */
static const int32_t pages_b[6] = {11, 12, 13, 14, 15, 16};
static const int32_t pages_c[1] = {0};
static float sink[4];

/* A prefill chunk at positions [4, 14) asking every row, a decode step at 21 asking
 * its last, a first chunk asking none. */
static int make_seqs(struct cinfer_seq_chunk *seqs)
{
    seqs[0] = (struct cinfer_seq_chunk){tokens_a, 10, 4, pages_a, 8, CINFER_LOGITS_ALL, sink, 0, 0, NULL, NULL, NULL};
    seqs[1] = (struct cinfer_seq_chunk){&token_b, 1, 21, pages_b, 6, CINFER_LOGITS_LAST, sink, 0, 0, NULL, NULL, NULL};
    seqs[2] = (struct cinfer_seq_chunk){tokens_c, 3, 0, pages_c, 1, CINFER_LOGITS_NONE, NULL, 0, 0, NULL, NULL, NULL};
    return 3;
}

static uint8_t *encode(uint64_t step, size_t *bytes)
{
    struct cinfer_seq_chunk seqs[3];
    int n = make_seqs(seqs);
    *bytes = cinfer_tp_plan_bytes(seqs, n, &limits);
    uint8_t *plan = malloc(*bytes);
    cinfer_tp_plan_encode(step, &limits, seqs, n, NULL, plan);
    return plan;
}

START_TEST(a_plan_decodes_to_the_sequences_it_encodes)
{
    size_t bytes;
    uint8_t *plan = encode(0x100000007ull, &bytes);
    /* header 48, A 16 + 4 * (10 + 4 pages), B 16 + 4 * (1 + 6), C 16 + 4 * (3 + 1) */
    ck_assert_uint_eq(bytes, 48 + 72 + 44 + 32);
    struct cinfer_tp_plan p = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_tp_plan_decode(plan, bytes, &limits, &p, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(p.step, 0x100000007ull);
    ck_assert_int_eq(p.n_seqs, 3);
    ck_assert_int_eq(p.n_tokens, 14);
    struct cinfer_seq_chunk want[3];
    make_seqs(want);
    const int used_pages[3] = {4, 6, 1};
    for (int s = 0; s < 3; s++) {
        const struct cinfer_seq_chunk *got = &p.seqs[s];
        ck_assert_int_eq(got->n_tokens, want[s].n_tokens);
        ck_assert_int_eq(got->start_pos, want[s].start_pos);
        ck_assert_int_eq(got->logits, want[s].logits);
        ck_assert_ptr_null(got->logits_out);
        ck_assert_int_eq(got->n_pages, used_pages[s]);
        ck_assert_int_eq(memcmp(got->tokens, want[s].tokens, sizeof(int32_t) * (size_t)got->n_tokens), 0);
        ck_assert_int_eq(memcmp(got->page_table, want[s].page_table, sizeof(int32_t) * (size_t)got->n_pages), 0);
        ck_assert_ptr_null(p.window_of[s]); /* no sliding-window pool */
    }
    /* decoding again reuses the arrays */
    ck_assert_int_eq(cinfer_tp_plan_decode(plan, bytes, &limits, &p, &err), 0);
    cinfer_tp_plan_free(&p);
    free(plan);
}
END_TEST

static void put_u32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* the tests run little-endian, as the encoding is */
}

/* A copy of a good plan with u32 `value` at `offset`, which must be refused with words
 * containing want. */
static void expect_refused_at(size_t offset, uint32_t value, const char *want)
{
    size_t bytes;
    uint8_t *plan = encode(1, &bytes);
    put_u32(plan + offset, value);
    struct cinfer_tp_plan p = {0};
    struct cinfer_error err = {0};
    int rc = cinfer_tp_plan_decode(plan, bytes, &limits, &p, &err);
    printf("  u32 %u at byte %zu: %s\n", value, offset, rc ? err.message : "accepted");
    ck_assert_msg(rc == CINFER_ERR_PARSE, "u32 %u at byte %zu was accepted", value, offset);
    ck_assert_msg(strstr(err.message, want) != NULL, "\"%s\" lacks \"%s\"", err.message, want);
    cinfer_tp_plan_free(&p);
    free(plan);
}

START_TEST(malformed_plans_are_refused_naming_the_field)
{
    size_t a = 48, b = 48 + 72, c = 48 + 72 + 44; /* where each sequence's fields start */
    expect_refused_at(0, 0x50505444, "magic is 44 54 50 50, expected \"CTPP\"");
    expect_refused_at(4, 2, "plan: version 2, this build reads 3");
    expect_refused_at(8, 999, "plan: total bytes says 999, 196 were given");
    expect_refused_at(12, 0, "plan: n_seqs 0, expected 1 to n_tokens 14");
    expect_refused_at(12, 4, "sequence 3's fields run past the end");
    expect_refused_at(24, 0, "plan: n_tokens 0, expected 1 to max_batch_tokens 64");
    expect_refused_at(24, 13, "sequence 2 n_tokens 3, expected 1 to the 2 tokens the header leaves");
    expect_refused_at(24, 15, "the sequences carry 14 tokens, n_tokens says 15");
    expect_refused_at(28, 32, "plan: kv_pages 32 of page_tokens 4, this rank's cache has 64 pages of 4 tokens");
    expect_refused_at(32, 16, "this rank's cache has 64 pages of 4 tokens");
    expect_refused_at(36, 32000, "plan: vocab 32000, this rank's model has 272");
    expect_refused_at(40, 8, "plan: window_pages 8, this rank's sliding-window pool has 0 pages");
    expect_refused_at(44, 2, "plan: ep_size 2, this rank runs ep_size 1 (every rank must split the experts alike)");
    expect_refused_at(44, 0, "plan: ep_size 0, this rank runs ep_size 1");
    expect_refused_at(a + 4, 0x7fffffff, "sequence 0 start_pos 2147483647 is past any context");
    expect_refused_at(a + 8, 5, "sequence 0 n_pages 5, its positions [0, 14) take 4 pages of 4 tokens");
    expect_refused_at(b + 12, 3, "sequence 1 logits mode 3, expected 0, 1 or 2");
    expect_refused_at(a + 16 + 4 * 2, 999, "sequence 0 token 2 is id 999, outside the vocabulary [0, 272)");
    expect_refused_at(a + 16 + 4 * 3, 0xffffffff, "sequence 0 token 3 is id -1, outside the vocabulary [0, 272)");
    expect_refused_at(b + 16 + 4 + 4 * 5, 64, "sequence 1 page 5 is 64, outside the cache's [0, 64)");
    expect_refused_at(c + 16 + 4 * 3, 0x80000000u, "sequence 2 page 0 is -2147483648, outside the cache's [0, 64)");

    struct cinfer_tp_plan p = {0};
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_tp_plan_decode("CTPP", 4, &limits, &p, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "plan: 4 bytes, shorter than the 48-byte header") != NULL, "%s", err.message);
    ck_assert_int_eq(cinfer_tp_plan_decode(NULL, 0, &limits, &p, &err), CINFER_ERR_PARSE);
    /* bytes after the last sequence, with total bytes saying so */
    size_t bytes;
    uint8_t *plan = encode(1, &bytes);
    uint8_t *longer = calloc(1, bytes + 4);
    memcpy(longer, plan, bytes);
    put_u32(longer + 8, (uint32_t)bytes + 4);
    ck_assert_int_eq(cinfer_tp_plan_decode(longer, bytes + 4, &limits, &p, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "plan: 4 bytes after the last sequence") != NULL, "%s", err.message);
    free(longer);
    free(plan);
    cinfer_tp_plan_free(&p);
}
END_TEST

START_TEST(no_truncation_or_flipped_byte_slips_through)
{
    size_t bytes;
    uint8_t *plan = encode(5, &bytes);
    struct cinfer_tp_plan p = {0};
    struct cinfer_error err = {0};
    for (size_t n = 0; n < bytes; n++) { /* every prefix, total bytes patched to match */
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, plan, n);
        if (n >= 12)
            put_u32(cut + 8, (uint32_t)n);
        err.message[0] = '\0';
        ck_assert_msg(cinfer_tp_plan_decode(cut, n, &limits, &p, &err) == CINFER_ERR_PARSE && err.message[0],
                      "a plan cut to %zu of %zu bytes was accepted", n, bytes);
        free(cut);
    }
    int accepted = 0;
    for (size_t i = 0; i < bytes; i++)
        for (int bit = 0; bit < 8; bit++) {
            plan[i] ^= (uint8_t)(1u << bit);
            err.message[0] = '\0';
            int rc = cinfer_tp_plan_decode(plan, bytes, &limits, &p, &err);
            if (rc == 0) { /* then it is a valid plan, and says exactly these bytes */
                accepted++;
                uint8_t *again = malloc(bytes);
                ck_assert_uint_eq(cinfer_tp_plan_bytes(p.seqs, p.n_seqs, &limits), bytes);
                cinfer_tp_plan_encode(p.step, &limits, p.seqs, p.n_seqs, NULL, again);
                ck_assert_msg(memcmp(again, plan, bytes) == 0, "byte %zu bit %d: decoded and encoded differ", i, bit);
                free(again);
            } else {
                ck_assert_msg(err.message[0] != '\0', "byte %zu bit %d: refused without words", i, bit);
            }
            plan[i] ^= (uint8_t)(1u << bit);
        }
    printf("tp_plan: %zu one-bit flips of a %zu-byte plan: %d still valid plans (tokens, pages, step), the rest "
           "refused\n", bytes * 8, bytes, accepted);
    cinfer_tp_plan_free(&p);
    free(plan);
}
END_TEST

/* With a sliding-window pool (kv_window.c) the plan carries each page's window page, so a
 * follower maps pages as rank 0 did; one out of the pool, or a pool of another size, is
 * refused. */
START_TEST(window_pages_travel_with_the_pages)
{
    struct cinfer_tp_plan_limits windowed = limits;
    windowed.window_pages = 10;
    int32_t window_of[64];
    for (int i = 0; i < 64; i++)
        window_of[i] = i % 10;
    window_of[9] = -1; /* its window part released */
    struct cinfer_seq_chunk seqs[3];
    int n = make_seqs(seqs);
    size_t bytes = cinfer_tp_plan_bytes(seqs, n, &windowed);
    ck_assert_uint_eq(bytes, 48 + 72 + 44 + 32 + 4 * (4 + 6 + 1)); /* a window page per page */
    uint8_t *plan = malloc(bytes);
    cinfer_tp_plan_encode(3, &windowed, seqs, n, window_of, plan);
    struct cinfer_tp_plan p = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_tp_plan_decode(plan, bytes, &windowed, &p, &err) == 0, "%s", err.message);
    for (int s = 0; s < n; s++)
        for (int i = 0; i < p.seqs[s].n_pages; i++)
            ck_assert_int_eq(p.window_of[s][i], window_of[p.seqs[s].page_table[i]]);
    ck_assert_int_eq(p.window_of[1][5], 6);  /* page 16 */
    ck_assert_int_eq(p.window_of[0][2], -1); /* page 9 */
    /* a rank without the pool, or with another size, refuses it */
    ck_assert_int_eq(cinfer_tp_plan_decode(plan, bytes, &limits, &p, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "plan: window_pages 10, this rank's sliding-window pool has 0 pages") != NULL,
                  "%s", err.message);
    /* a window page outside the pool */
    size_t at = 48 + 16 + 4 * (10 + 4) + 4 * 1; /* sequence 0's second window page */
    put_u32(plan + at, 10);
    ck_assert_int_eq(cinfer_tp_plan_decode(plan, bytes, &windowed, &p, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "plan: sequence 0 page 1's window page is 10, expected -1 (released) or one of "
                                      "[0, 10)") != NULL,
                  "%s", err.message);
    put_u32(plan + at, (uint32_t)-2);
    ck_assert_int_eq(cinfer_tp_plan_decode(plan, bytes, &windowed, &p, &err), CINFER_ERR_PARSE);
    cinfer_tp_plan_free(&p);
    free(plan);
}
END_TEST

/* Expert parallelism (ep_size == tp_size): the plan says how rank 0 splits the experts,
 * and a follower that splits them otherwise (whole experts against slices of every
 * expert's width, or another group size) refuses it rather than summing a mix; 0 and 1
 * both mean none. */
START_TEST(a_follower_with_another_expert_split_refuses_the_plan)
{
    struct cinfer_tp_plan_limits ep4 = limits;
    ep4.ep_size = 4;
    struct cinfer_seq_chunk seqs[3];
    int n = make_seqs(seqs);
    size_t bytes = cinfer_tp_plan_bytes(seqs, n, &ep4);
    ck_assert_uint_eq(bytes, 48 + 72 + 44 + 32); /* the split is in the header only */
    uint8_t *plan = malloc(bytes);
    cinfer_tp_plan_encode(9, &ep4, seqs, n, NULL, plan);
    ck_assert_uint_eq(plan[44] | plan[45] << 8, 4);
    struct cinfer_tp_plan p = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_tp_plan_decode(plan, bytes, &ep4, &p, &err) == 0, "%s", err.message);
    ck_assert_int_eq(p.n_tokens, 14);
    const int others[] = {0, 1, 2};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        struct cinfer_tp_plan_limits follower = limits;
        follower.ep_size = others[i];
        ck_assert_int_eq(cinfer_tp_plan_decode(plan, bytes, &follower, &p, &err), CINFER_ERR_PARSE);
        printf("  follower at ep_size %d: %s\n", others[i], err.message);
        char want[96];
        snprintf(want, sizeof want, "plan: ep_size 4, this rank runs ep_size %d", others[i] > 1 ? others[i] : 1);
        ck_assert_msg(strstr(err.message, want) != NULL, "\"%s\" lacks \"%s\"", err.message, want);
    }
    /* ep_size 0 and 1 write the same plan */
    struct cinfer_tp_plan_limits one = limits;
    one.ep_size = 1;
    uint8_t *plan0 = malloc(bytes), *plan1 = malloc(bytes);
    cinfer_tp_plan_encode(9, &limits, seqs, n, NULL, plan0);
    cinfer_tp_plan_encode(9, &one, seqs, n, NULL, plan1);
    ck_assert_int_eq(memcmp(plan0, plan1, bytes), 0);
    ck_assert_int_eq(cinfer_tp_plan_decode(plan0, bytes, &one, &p, &err), 0);
    free(plan0);
    free(plan1);
    cinfer_tp_plan_free(&p);
    free(plan);
}
END_TEST

static Suite *suite_tp_plan(void)
{
    Suite *s = suite_create("tp_plan");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, a_plan_decodes_to_the_sequences_it_encodes);
    tcase_add_test(tc, malformed_plans_are_refused_naming_the_field);
    tcase_add_test(tc, no_truncation_or_flipped_byte_slips_through);
    tcase_add_test(tc, window_pages_travel_with_the_pages);
    tcase_add_test(tc, a_follower_with_another_expert_split_refuses_the_plan);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_tp_plan)
