/* The shared check runner: a test file defines its suite and calls
 * CINFER_TEST_MAIN(suite_<area>). */
#ifndef CINFER_TEST_RUNNER_H
#define CINFER_TEST_RUNNER_H

#include <check.h>

int cinfer_test_run_suite(Suite *suite);

#define CINFER_TEST_MAIN(suite_fn)             \
    int main(void)                             \
    {                                          \
        return cinfer_test_run_suite(suite_fn()); \
    }

#endif
