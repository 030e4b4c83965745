/* core/util/thread_pool.h — a fixed set of worker threads sharing out the chunks of one
 * job at a time (fork-join), the caller working too. Used by the CPU backend to split
 * matmul rows, attention (sequence, head) pairs and element-wise rows. */
#ifndef CINFER_UTIL_THREAD_POOL_H
#define CINFER_UTIL_THREAD_POOL_H

#include "cinfer/error.h"

struct cinfer_thread_pool;

/* Does chunk number `chunk` of a job; called once per chunk, on any thread; thread is
 * the index of the thread running it, in [0, size) (0: the caller), for per-thread
 * scratch. */
typedef void (*cinfer_chunk_fn)(void *arg, int chunk, int thread);

/* n_threads: total, caller included; 0 means one per online core. */
int cinfer_thread_pool_create(int n_threads, struct cinfer_thread_pool **out, struct cinfer_error *err);
void cinfer_thread_pool_destroy(struct cinfer_thread_pool **pool);
int cinfer_thread_pool_size(const struct cinfer_thread_pool *pool);

/* Runs fn for chunks [0, n_chunks) and returns when all are done. Chunks go to whichever
 * thread asks first, the caller included, and the call does not wait for a worker that
 * took none: on a machine whose cores are busy with other work, a descheduled worker
 * costs nothing. Not reentrant: one caller at a time. n_chunks < 2^22. */
void cinfer_thread_pool_run_chunks(struct cinfer_thread_pool *pool, cinfer_chunk_fn fn, void *arg, int n_chunks);

/* [begin, end) of n items for part p of n_parts, in contiguous near-equal parts;
 * granule: parts are multiples of it (but the last). */
void cinfer_split_range(int n, int granule, int p, int n_parts, int *begin, int *end);

#endif
