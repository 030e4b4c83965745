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
