/* Runs a shell command for a test and captures what it printed. */
#ifndef CINFER_TEST_RUN_COMMAND_H
#define CINFER_TEST_RUN_COMMAND_H

#include <stddef.h>

/* Runs cmd with sh -c, stdout and stderr together into out (NUL-terminated, cut
 * at out_bytes - 1). Returns the exit status, or -1 when it did not exit normally. */
int cinfer_test_run(const char *cmd, char *out, size_t out_bytes);

#endif
