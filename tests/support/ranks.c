/* Runs a function as a group's ranks: threads or forked processes (see ranks.h). */
#include "support/ranks.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WHY_BYTES 1024

struct rank_result {
    int done;
    int failed;
    char why[WHY_BYTES];
};

struct rank_thread {
    pthread_t thread;
    int rank, n_ranks;
    cinfer_test_rank_fn fn;
    void *arg;
    struct rank_result *result;
};

static void run_one(struct rank_thread *t)
{
    t->result->failed = t->fn(t->rank, t->n_ranks, t->arg, t->result->why, sizeof t->result->why) != 0;
    t->result->done = 1;
}

static void *thread_main(void *p)
{
    run_one(p);
    return NULL;
}

void *cinfer_test_shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(p != MAP_FAILED, "cannot map %zu shared bytes", bytes);
    return p;
}

void cinfer_test_shared_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}

void cinfer_test_shm_name(const char *tag, char *out, size_t out_bytes)
{
    static int counter;
    snprintf(out, out_bytes, "/cinfer-test-%d-%d-%s", (int)getpid(), counter++, tag);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cinfer_test_run_ranks(int n_ranks, enum cinfer_test_ranks_mode mode, cinfer_test_rank_fn fn, void *arg,
                          int timeout_s, char *why, size_t why_bytes)
{
    struct rank_result *results = cinfer_test_shared_alloc(sizeof *results * (size_t)n_ranks);
    struct rank_thread *ranks = calloc((size_t)n_ranks, sizeof *ranks);
    pid_t *pids = calloc((size_t)n_ranks, sizeof *pids);
    ck_assert(ranks && pids);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n_ranks; r++) {
        ranks[r] = (struct rank_thread){.rank = r, .n_ranks = n_ranks, .fn = fn, .arg = arg, .result = &results[r]};
        if (mode == CINFER_TEST_RANKS_THREADS) {
            ck_assert_int_eq(pthread_create(&ranks[r].thread, NULL, thread_main, &ranks[r]), 0);
        } else {
            pids[r] = fork();
            ck_assert_msg(pids[r] >= 0, "fork failed");
            if (pids[r] == 0) {
                run_one(&ranks[r]);
                fflush(stdout);
                _exit(0);
            }
        }
    }
    int n_failed = 0;
    why[0] = '\0';
    if (mode == CINFER_TEST_RANKS_THREADS) {
        for (int r = 0; r < n_ranks; r++)
            pthread_join(ranks[r].thread, NULL);
    } else {
        double deadline = now_s() + timeout_s;
        int left = n_ranks;
        int *status = calloc((size_t)n_ranks, sizeof *status);
        int *reaped = calloc((size_t)n_ranks, sizeof *reaped);
        while (left > 0) {
            for (int r = 0; r < n_ranks; r++)
                if (!reaped[r] && waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
                    reaped[r] = 1;
                    left--;
                }
            if (left > 0 && now_s() > deadline) {
                for (int r = 0; r < n_ranks; r++)
                    if (!reaped[r]) {
                        kill(pids[r], SIGKILL);
                        waitpid(pids[r], &status[r], 0);
                        reaped[r] = 1;
                        if (!results[r].done)
                            snprintf(results[r].why, WHY_BYTES, "still running after %d s: killed", timeout_s);
                    }
                left = 0;
            }
            if (left > 0)
                usleep(2000);
        }
        for (int r = 0; r < n_ranks; r++) {
            if (results[r].done)
                continue;
            results[r].failed = 1;
            if (WIFSIGNALED(status[r]))
                snprintf(results[r].why, WHY_BYTES, "died of signal %d (%s)", WTERMSIG(status[r]),
                         strsignal(WTERMSIG(status[r])));
            else if (!results[r].why[0])
                snprintf(results[r].why, WHY_BYTES, "exited with status %d before finishing",
                         WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1);
        }
        free(status);
        free(reaped);
    }
    for (int r = 0; r < n_ranks; r++)
        if (results[r].failed) {
            if (n_failed++ == 0)
                snprintf(why, why_bytes, "rank %d of %d (%s): %s", r, n_ranks,
                         mode == CINFER_TEST_RANKS_THREADS ? "threads" : "processes", results[r].why);
        }
    free(ranks);
    free(pids);
    cinfer_test_shared_free(results, sizeof *results * (size_t)n_ranks);
    return n_failed;
}
