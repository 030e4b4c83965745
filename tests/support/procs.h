/* Process checks for the fault tests: is a pid still running (zombies count as gone),
 * and which processes are children of a pid. */
#ifndef CINFER_TEST_PROCS_H
#define CINFER_TEST_PROCS_H

#include <sys/types.h>

int cinfer_test_pid_running(pid_t pid);
/* Waits up to timeout_ms for every pid to be gone; returns the first still running or 0. */
pid_t cinfer_test_wait_gone(const pid_t *pids, int n, int timeout_ms);
/* Fills out with the pids whose parent is parent; returns how many. */
int cinfer_test_children_of(pid_t parent, pid_t *out, int max);
/* The process's command line with NULs as spaces ("" if gone). */
void cinfer_test_cmdline(pid_t pid, char *buf, int buf_bytes);

#endif
