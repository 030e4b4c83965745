#include "support/serve_process.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

pid_t cinfer_test_spawn_serve(char *const argv[], int *err_fd)
{
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    *err_fd = pipefd[0];
    return pid;
}

int cinfer_test_read_listening_line(int fd, char *log, size_t log_bytes, char *name, size_t name_bytes)
{
    size_t used = 0;
    double deadline = now_s() + 60;
    while (now_s() < deadline && used + 1 < log_bytes) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t n = read(fd, log + used, log_bytes - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
        log[used] = '\0';
        const char *line = strstr(log, "cinfer serve: listening on http://127.0.0.1:");
        if (line && strchr(line, '\n')) {
            int port = 0;
            char model_name[256];
            if (sscanf(line, "cinfer serve: listening on http://127.0.0.1:%d (model %255[^)])", &port, model_name) == 2) {
                snprintf(name, name_bytes, "%s", model_name);
                return port;
            }
        }
    }
    log[used] = '\0';
    return -1;
}

void cinfer_test_read_to_eof(int fd, char *log, size_t log_bytes)
{
    size_t used = 0;
    ssize_t n;
    while (used + 1 < log_bytes && (n = read(fd, log + used, log_bytes - 1 - used)) > 0)
        used += (size_t)n;
    log[used] = '\0';
}

int cinfer_test_wait_exit(pid_t pid, int timeout_s)
{
    double deadline = now_s() + timeout_s;
    int status;
    while (now_s() < deadline) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}
