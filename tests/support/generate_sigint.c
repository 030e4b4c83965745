#include "support/generate_sigint.h"

#include <check.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/procs.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cinfer_test_generate_sigint(const char *model, const char *const *extra, const char *prompt)
{
    /* argv is built before fork, so the child only execs */
    const char *argv[32] = {CINFER_BINARY_DIR "/bin/cinfer", "generate", "--model", model, "--max-new-tokens",
                            "100000", "--ignore-eos", "--log-level", "error", "--kv-cache-bytes", "67108864",
                            "--context-length", "60000"};
    int argc = 13;
    for (; *extra; extra++) {
        ck_assert_int_lt(argc, 30);
        argv[argc++] = *extra;
    }
    argv[argc++] = prompt;
    argv[argc] = NULL;

    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    pid_t cli = fork();
    if (cli == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    char buf[256];
    ck_assert_int_gt(read(out[0], buf, sizeof buf), 0); /* it is streaming */
    usleep(100000);
    pid_t workers[8];
    int n = cinfer_test_children_of(cli, workers, 8);
    ck_assert_int_eq(n, 2);
    kill(cli, SIGINT);
    double t0 = now_s();
    while (read(out[0], buf, sizeof buf) > 0)
        ;
    int status = 0;
    waitpid(cli, &status, 0);
    double took = now_s() - t0;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    ck_assert_msg(took < 10.0, "exit took %.1f s", took);
    ck_assert_int_eq(cinfer_test_wait_gone(workers, n, 2000), 0);
    close(out[0]);
}
