/* Runs one suite with check and maps failures to the exit status ctest reads. */
#include <stdlib.h>

#include "support/runner.h"

int cinfer_test_run_suite(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
