/* The detokenizer's stop-string matcher (core/detokenizer/stop_matcher.c) against a
 * reference written here the obvious way: after each delta, look for every stop string
 * in the whole text so far; the first delta that completes one ends the output at the
 * earliest such occurrence (after it with no_trim). On seeded random texts over a small
 * alphabet (so stop strings occur, overlap and straddle deltas), with multi-byte UTF-8
 * characters, random stop sets and random delta splits, the matcher must give exactly
 * the reference's text and stop index, and while streaming it must never hand out half
 * a character or text that a stop string could still claim. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detokenizer/stop_matcher.h"
#include "support/runner.h"

/* ---- the reference ------------------------------------------------------------------- */

struct expected {
    size_t end;   /* bytes of text the caller sees */
    int matched;  /* index into the stop list as given (empty strings skipped), or -1 */
};

/* stops: the non-empty stop strings in order; cuts[0..n_cuts): the text length after
 * each delta (the last is the whole text). */
static struct expected reference(const char *text, char *const *stops, int n_stops, int no_trim,
                                 const size_t *cuts, int n_cuts)
{
    for (int c = 0; c < n_cuts; c++) {
        size_t seen = cuts[c];
        size_t best_at = SIZE_MAX;
        int best = -1;
        for (int i = 0; i < n_stops; i++) {
            size_t k = strlen(stops[i]);
            for (size_t at = 0; at + k <= seen; at++) {
                if (memcmp(text + at, stops[i], k) == 0) {
                    if (at < best_at) {
                        best_at = at;
                        best = i;
                    }
                    break;
                }
            }
        }
        if (best >= 0)
            return (struct expected){no_trim ? best_at + strlen(stops[best]) : best_at, best};
    }
    return (struct expected){cuts[n_cuts - 1], -1};
}

/* ---- helpers ------------------------------------------------------------------------- */

static uint64_t rng_state;
static uint32_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Pieces texts are built from: ASCII letters that repeat often, and 2-, 3- and 4-byte
 * characters so that holding back and cutting happen inside characters. */
static const char *const pieces[] = {"a", "b", "c", " ", "\n", "é", "€", "😀", "ab", "ba"};
#define N_PIECES (sizeof pieces / sizeof pieces[0])

static size_t random_text(char *out, size_t cap, size_t n_pieces)
{
    size_t len = 0;
    for (size_t i = 0; i < n_pieces; i++) {
        const char *p = pieces[next_random() % N_PIECES];
        size_t k = strlen(p);
        if (len + k + 1 > cap)
            break;
        memcpy(out + len, p, k);
        len += k;
    }
    out[len] = '\0';
    return len;
}

static int is_continuation_byte(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* Feeds text in the given deltas and checks what comes back against the reference. */
static void check_one(const char *text, size_t len, char *const *stops, int n_stops, int no_trim, const size_t *cuts,
                      int n_cuts, const char *what)
{
    /* the reference sees only the stop strings the matcher keeps: non-empty ones */
    char *kept[CINFER_MAX_STOP_STRINGS] = {0};
    int n_kept = 0;
    for (int i = 0; i < n_stops && i < CINFER_MAX_STOP_STRINGS; i++)
        if (stops[i] && stops[i][0])
            kept[n_kept++] = stops[i];
    struct expected want = reference(text, kept, n_kept, no_trim, cuts, n_cuts);

    struct cinfer_stop_matcher m;
    ck_assert_int_eq(cinfer_stop_matcher_init(&m, stops, n_stops, no_trim), 0);
    char *got = malloc(len + 1);
    size_t got_len = 0, fed = 0, longest_stop = 0;
    for (int i = 0; i < n_kept; i++)
        longest_stop = strlen(kept[i]) > longest_stop ? strlen(kept[i]) : longest_stop;
    int matched = 0;
    for (int c = 0; c < n_cuts && !matched; c++) {
        const char *out;
        size_t out_len;
        int final = c == n_cuts - 1;
        matched = cinfer_stop_matcher_feed(&m, text + fed, cuts[c] - fed, final, &out, &out_len);
        ck_assert_int_ge(matched, 0);
        fed = cuts[c];
        memcpy(got + got_len, out, out_len);
        got_len += out_len;
        /* never past the reference's end, never half a character */
        ck_assert_msg(got_len <= want.end, "%s: handed out %zu bytes, the output ends at %zu", what, got_len,
                      want.end);
        ck_assert_msg(got_len == fed || !is_continuation_byte((unsigned char)text[got_len]),
                      "%s: output cut inside a UTF-8 character at byte %zu", what, got_len);
        /* no more held back than a stop string's start and the character it cuts */
        if (!matched && !final)
            ck_assert_msg(fed - got_len <= (longest_stop ? longest_stop - 1 : 0) + 3,
                          "%s: holds back %zu bytes with stop strings of at most %zu", what, fed - got_len,
                          longest_stop);
    }
    ck_assert_msg(got_len == want.end && memcmp(got, text, got_len) == 0,
                  "%s: output of %zu bytes, expected %zu (text \"%s\")", what, got_len, want.end, text);
    ck_assert_msg(m.matched == want.matched, "%s: matched stop %d, expected %d (text \"%s\")", what, m.matched,
                  want.matched, text);
    if (want.matched >= 0) {
        ck_assert_str_eq(m.stops[m.matched], kept[want.matched]);
        /* once matched, more text changes nothing */
        const char *out;
        size_t out_len;
        ck_assert_int_eq(cinfer_stop_matcher_feed(&m, "abc", 3, 1, &out, &out_len), 1);
        ck_assert_uint_eq(out_len, 0);
    }
    cinfer_stop_matcher_free(&m);
    free(got);
}

/* ---- cases --------------------------------------------------------------------------- */

START_TEST(fixed_cases)
{
    char *stops1[] = {"stop"};
    size_t whole[] = {14};
    check_one("go on and stop", 14, stops1, 1, 0, whole, 1, "one delta, trimmed");
    check_one("go on and stop", 14, stops1, 1, 1, whole, 1, "one delta, no_trim");
    /* straddling two deltas: "st" + "op" */
    check_one("go on and stop here", 19, stops1, 1, 0, (size_t[]){12, 14, 19}, 3, "straddling deltas");
    /* the earliest of several in the same delta wins, whatever the list order */
    char *stops2[] = {"cd", "bc"};
    check_one("abcde", 5, stops2, 2, 0, (size_t[]){5}, 1, "earliest of two");
    /* a longer stop that starts earlier but is completed only by a later delta loses to
     * a shorter one already complete: the output stops as soon as a stop string shows */
    char *stops3[] = {"abcd", "c"};
    check_one("abcd", 4, stops3, 2, 0, (size_t[]){3, 4}, 2, "complete first wins");
    /* empty stop strings are ignored; no stop strings pass everything through */
    char *stops4[] = {"", "x"};
    check_one("abc", 3, stops4, 2, 0, (size_t[]){1, 3}, 2, "empty stop ignored");
    check_one("abc", 3, NULL, 0, 0, (size_t[]){1, 2, 3}, 3, "no stops");
    /* a stop string inside a multi-byte character's neighbourhood */
    char *stops5[] = {"€!"};
    check_one("a€€!b", 9, stops5, 1, 0, (size_t[]){2, 4, 8, 9}, 4, "multi-byte stop");
}
END_TEST

START_TEST(random_texts_and_splits)
{
    rng_state = 0x9E3779B97F4A7C15ull;
    char text[512], stop_store[CINFER_MAX_STOP_STRINGS][16];
    int checked = 0, matched_cases = 0;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = random_text(text, sizeof text, 1 + next_random() % 60);
        int n_stops = (int)(next_random() % 5);
        char *stops[CINFER_MAX_STOP_STRINGS];
        for (int i = 0; i < n_stops; i++) {
            /* half the time a piece of the text itself, so that it occurs */
            if (len && next_random() % 2) {
                size_t at = next_random() % len, k = 1 + next_random() % 6;
                while (at > 0 && is_continuation_byte((unsigned char)text[at]))
                    at--;
                if (at + k > len)
                    k = len - at;
                while (at + k < len && is_continuation_byte((unsigned char)text[at + k]))
                    k++;
                memcpy(stop_store[i], text + at, k);
                stop_store[i][k] = '\0';
            } else {
                random_text(stop_store[i], sizeof stop_store[i], 1 + next_random() % 3);
            }
            stops[i] = stop_store[i];
        }
        /* deltas: whole characters, as the incremental decoder hands them out */
        size_t cuts[64];
        int n_cuts = 0;
        size_t at = 0;
        while (at < len && n_cuts < 63) {
            at += 1 + next_random() % 7;
            while (at < len && is_continuation_byte((unsigned char)text[at]))
                at++;
            if (at > len)
                at = len;
            cuts[n_cuts++] = at;
        }
        if (!n_cuts || cuts[n_cuts - 1] != len)
            cuts[n_cuts++] = len;
        char what[64];
        snprintf(what, sizeof what, "random case %d", iter);
        int no_trim = (int)(next_random() % 2);
        check_one(text, len, stops, n_stops, no_trim, cuts, n_cuts, what);
        struct expected e = reference(text, stops, n_stops, no_trim, cuts, n_cuts);
        matched_cases += e.matched >= 0;
        checked++;
    }
    printf("stop_matcher: %d random cases, %d ending on a stop string\n", checked, matched_cases);
    ck_assert_int_gt(matched_cases, checked / 5);
}
END_TEST

static Suite *suite_stop_matcher(void)
{
    Suite *s = suite_create("stop_matcher");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fixed_cases);
    tcase_add_test(tc, random_texts_and_splits);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_stop_matcher)
