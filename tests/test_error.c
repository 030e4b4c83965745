/* Every status code has words, and the error record formats and prefixes. */
#include <string.h>

#include "cinfer/error.h"
#include "support/runner.h"

START_TEST(every_code_has_words)
{
    for (int code = 0; code >= CINFER_STATUS_MIN; code--) {
        const char *words = cinfer_strerror(code);
        ck_assert_ptr_nonnull(words);
        ck_assert_str_ne(words, "unknown error");
    }
    ck_assert_str_eq(cinfer_strerror(CINFER_STATUS_MIN - 1), "unknown error");
    ck_assert_str_eq(cinfer_strerror(1), "unknown error");
    /* Each code its own words: a caller tells them apart without the number. */
    for (int a = 0; a >= CINFER_STATUS_MIN; a--)
        for (int b = a - 1; b >= CINFER_STATUS_MIN; b--)
            ck_assert_msg(strcmp(cinfer_strerror(a), cinfer_strerror(b)) != 0, "codes %d and %d both read '%s'", a, b,
                          cinfer_strerror(a));
    /* The codes the engine adds to tell a caller's fault from the engine's. */
    ck_assert_str_eq(cinfer_strerror(CINFER_ERR_OVERLOADED), "engine overloaded, retry later");
    ck_assert_str_eq(cinfer_strerror(CINFER_ERR_CONTEXT_LENGTH), "prompt too long for the context");
    ck_assert_str_eq(cinfer_strerror(CINFER_ERR_UNAVAILABLE), "engine not available");
    ck_assert_int_eq(CINFER_STATUS_MIN, -17);
}
END_TEST

START_TEST(error_set_and_prefix)
{
    struct cinfer_error err;
    int rc = cinfer_error_set(&err, CINFER_ERR_PARSE, "line %d: expected %s", 3, "'='");
    ck_assert_int_eq(rc, CINFER_ERR_PARSE);
    cinfer_error_prefix(&err, "%s", "cinfer.cfg");
    ck_assert_str_eq(err.message, "cinfer.cfg: line 3: expected '='");
    ck_assert_int_eq(err.code, CINFER_ERR_PARSE);
    ck_assert_int_eq(cinfer_error_set(NULL, CINFER_ERR_IO, "x"), CINFER_ERR_IO);
}
END_TEST

static Suite *suite_error(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_code_has_words);
    tcase_add_test(tc, error_set_and_prefix);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_error)
