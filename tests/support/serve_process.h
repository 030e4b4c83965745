/* Running `cinfer serve` as a child process in a test: start it with its stderr on a
 * pipe, read the port (and model name) from its "listening on" line, wait for it to
 * exit. Shared by test_http_server (start-up and SIGTERM) and test_http_load. */
#ifndef CINFER_TEST_SERVE_PROCESS_H
#define CINFER_TEST_SERVE_PROCESS_H

#include <stddef.h>
#include <sys/types.h>

/* Spawns argv (argv[0] a path) with stdout to /dev/null and stderr to a pipe whose
 * reading end goes to *err_fd. */
pid_t cinfer_test_spawn_serve(char *const argv[], int *err_fd);

/* Reads fd (the child's stderr) for up to 60 s until the line
 * "cinfer serve: listening on http://127.0.0.1:PORT (model NAME)"; returns PORT and
 * copies NAME to name, or returns -1. log holds what was read either way. */
int cinfer_test_read_listening_line(int fd, char *log, size_t log_bytes, char *name, size_t name_bytes);

/* Reads fd to its end (every process holding the pipe gone) into log, NUL-terminated,
 * cut at log_bytes - 1. */
void cinfer_test_read_to_eof(int fd, char *log, size_t log_bytes);

/* Waits up to timeout_s for pid to exit: its exit code, 128 + the signal that ended
 * it, or -1 when it was still running (it is then killed). */
int cinfer_test_wait_exit(pid_t pid, int timeout_s);

#endif
