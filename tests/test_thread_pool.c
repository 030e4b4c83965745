/* The thread pool runs every chunk of every job exactly once, on a thread index in
 * range, and a job's results are all visible when the call returns. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "support/runner.h"
#include "util/thread_pool.h"

struct count_job {
    atomic_int *runs;  /* (n_chunks) times each chunk ran */
    int *values;       /* (n_chunks) plain writes, read by the caller after the job */
    int n_threads;
    atomic_int bad_thread;
    int round;
};

static void count_chunk(void *arg, int chunk, int thread)
{
    struct count_job *job = arg;
    atomic_fetch_add(&job->runs[chunk], 1);
    job->values[chunk] = chunk * 7 + job->round;
    if (thread < 0 || thread >= job->n_threads)
        atomic_store(&job->bad_thread, 1);
}

START_TEST(every_chunk_once)
{
    const int thread_counts[] = {1, 2, 3, 5};
    for (size_t tc = 0; tc < sizeof thread_counts / sizeof thread_counts[0]; tc++) {
        struct cinfer_thread_pool *pool = NULL;
        ck_assert_int_eq(cinfer_thread_pool_create(thread_counts[tc], &pool, NULL), 0);
        ck_assert_int_eq(cinfer_thread_pool_size(pool), thread_counts[tc]);
        enum { MAX_CHUNKS = 300 };
        atomic_int runs[MAX_CHUNKS];
        int values[MAX_CHUNKS];
        /* many short jobs back to back, with sizes 1.. MAX_CHUNKS */
        for (int round = 0; round < 2000; round++) {
            int n = 1 + (round * 37) % MAX_CHUNKS;
            for (int i = 0; i < n; i++)
                atomic_init(&runs[i], 0);
            struct count_job job = {runs, values, thread_counts[tc], 0, round};
            cinfer_thread_pool_run_chunks(pool, count_chunk, &job, n);
            int wrong = 0; /* counted, then asserted once: each check assertion costs a syscall */
            for (int i = 0; i < n; i++)
                wrong += atomic_load(&runs[i]) != 1 || values[i] != i * 7 + round;
            ck_assert_msg(wrong == 0, "%d threads, job %d: %d of %d chunks ran other than once", thread_counts[tc],
                          round, wrong, n);
            ck_assert_int_eq(atomic_load(&job.bad_thread), 0);
        }
        cinfer_thread_pool_run_chunks(pool, count_chunk, NULL, 0); /* no chunks: nothing runs */
        cinfer_thread_pool_destroy(&pool);
        ck_assert_ptr_null(pool);
    }
}
END_TEST

START_TEST(split_range_covers_exactly)
{
    for (int n = 0; n < 200; n += 7)
        for (int parts = 1; parts < 9; parts++)
            for (int granule = 1; granule <= 16; granule *= 4) {
                int expect = 0;
                for (int p = 0; p < parts; p++) {
                    int b, e;
                    cinfer_split_range(n, granule, p, parts, &b, &e);
                    ck_assert_int_eq(b, expect);
                    ck_assert_int_le(b, e);
                    if (e < n)
                        ck_assert_int_eq(e % granule, 0);
                    expect = e;
                }
                ck_assert_int_eq(expect, n);
            }
}
END_TEST

START_TEST(zero_means_one_per_core)
{
    struct cinfer_thread_pool *pool = NULL;
    ck_assert_int_eq(cinfer_thread_pool_create(0, &pool, NULL), 0);
    ck_assert_int_ge(cinfer_thread_pool_size(pool), 1);
    cinfer_thread_pool_destroy(&pool);
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_thread_pool_create(-1, &pool, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(pool);
}
END_TEST

static Suite *suite_thread_pool(void)
{
    Suite *s = suite_create("thread_pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_chunk_once);
    tcase_add_test(tc, split_range_covers_exactly);
    tcase_add_test(tc, zero_means_one_per_core);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_thread_pool)
