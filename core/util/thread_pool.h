/* core/util/thread_pool.h — a fixed set of worker threads that all run one function
 * per call (fork-join), the caller taking part as thread 0. Used by the CPU backend to
 * split matmul output rows and attention (sequence, head) pairs. */
#ifndef CINFER_UTIL_THREAD_POOL_H
#define CINFER_UTIL_THREAD_POOL_H

#include "cinfer/error.h"

struct cinfer_thread_pool;

/* Runs on every thread of the pool: thread_index in [0, n_threads). */
typedef void (*cinfer_parallel_fn)(void *arg, int thread_index, int n_threads);

/* n_threads: total, caller included; 0 means one per online core. */
int cinfer_thread_pool_create(int n_threads, struct cinfer_thread_pool **out, struct cinfer_error *err);
void cinfer_thread_pool_destroy(struct cinfer_thread_pool **pool);
int cinfer_thread_pool_size(const struct cinfer_thread_pool *pool);
/* Calls fn on all threads and returns when every one has finished. Not reentrant:
 * one caller at a time. */
void cinfer_thread_pool_run(struct cinfer_thread_pool *pool, cinfer_parallel_fn fn, void *arg);

/* [begin, end) of n items for thread t of n_threads, in contiguous near-equal parts;
 * granule: parts are multiples of it (but the last). */
void cinfer_split_range(int n, int granule, int t, int n_threads, int *begin, int *end);

#endif
