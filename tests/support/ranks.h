/* tests/support/ranks.h — runs one function as the ranks of a group, as threads of this
 * process or as forked processes, and gathers what each rank says, for the
 * communicator and tensor-parallel tests. */
#ifndef CINFER_TEST_RANKS_H
#define CINFER_TEST_RANKS_H

#include <stddef.h>

enum cinfer_test_ranks_mode { CINFER_TEST_RANKS_THREADS = 0, CINFER_TEST_RANKS_PROCESSES = 1 };

/* One rank's work: 0 when all went well, else nonzero with the reason in why. Runs in a
 * thread or a forked child, so it must not call ck_assert. */
typedef int (*cinfer_test_rank_fn)(int rank, int n_ranks, void *arg, char *why, size_t why_bytes);

/* Runs fn for ranks [0, n_ranks) at once and waits up to timeout_s for all of them
 * (processes past it are killed; threads are waited for). Returns how many failed (a
 * process that died or exited nonzero counts), the first one's reason in why. */
int cinfer_test_run_ranks(int n_ranks, enum cinfer_test_ranks_mode mode, cinfer_test_rank_fn fn, void *arg,
                          int timeout_s, char *why, size_t why_bytes);

/* Memory that forked ranks and this process share (MAP_SHARED | MAP_ANONYMOUS, zeroed);
 * fails the test when it cannot be mapped. */
void *cinfer_test_shared_alloc(size_t bytes);
void cinfer_test_shared_free(void *p, size_t bytes);

/* "/cinfer-test-<pid>-<n>-<tag>": a fresh shared-memory segment name. */
void cinfer_test_shm_name(const char *tag, char *out, size_t out_bytes);

#endif
