/* core/util/thread_pool.c — fork-join worker threads. A call bumps a generation number;
 * workers spin on it briefly (a decode step issues many short calls back to back, and a
 * futex wake costs more than the work) and then sleep on a condition variable. */
#include "util/thread_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPIN_ITERATIONS 20000

struct cinfer_thread_pool {
    int n_threads;
    pthread_t *threads; /* (n_threads - 1) workers */
    pthread_mutex_t lock;
    pthread_cond_t wake;   /* a new generation or shutdown */
    pthread_cond_t done;   /* the last worker finished */
    atomic_uint generation;
    atomic_int remaining;  /* workers still running this generation */
    atomic_int shutdown;
    cinfer_parallel_fn fn;
    void *arg;
};

struct worker_start {
    struct cinfer_thread_pool *pool;
    int index;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p)
{
    struct worker_start start = *(struct worker_start *)p;
    free(p);
    struct cinfer_thread_pool *pool = start.pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        for (int spin = 0; gen == seen && spin < SPIN_ITERATIONS && !atomic_load(&pool->shutdown); spin++) {
            cpu_relax();
            gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        }
        if (gen == seen) {
            pthread_mutex_lock(&pool->lock);
            while ((gen = atomic_load(&pool->generation)) == seen && !atomic_load(&pool->shutdown))
                pthread_cond_wait(&pool->wake, &pool->lock);
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load(&pool->shutdown))
            return NULL;
        seen = gen;
        pool->fn(pool->arg, start.index, pool->n_threads);
        if (atomic_fetch_sub_explicit(&pool->remaining, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
}

int cinfer_thread_pool_create(int n_threads, struct cinfer_thread_pool **out, struct cinfer_error *err)
{
    *out = NULL;
    if (n_threads < 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "thread pool: n_threads must be 0 (one per core) or more, got %d", n_threads);
    if (n_threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cores > 0 ? (int)cores : 1;
    }
    struct cinfer_thread_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "thread pool: out of memory");
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    if (!pool->threads) {
        free(pool);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_start *start = malloc(sizeof *start);
        if (start) {
            start->pool = pool;
            start->index = i;
        }
        int rc = start ? pthread_create(&pool->threads[i - 1], NULL, worker_main, start) : ENOMEM;
        if (rc != 0) {
            free(start);
            pool->n_threads = i; /* the ones started so far */
            cinfer_thread_pool_destroy(&pool);
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "thread pool: cannot start thread %d of %d: %s", i,
                                    n_threads, strerror(rc));
        }
    }
    *out = pool;
    return 0;
}

void cinfer_thread_pool_destroy(struct cinfer_thread_pool **pp)
{
    struct cinfer_thread_pool *pool = pp ? *pp : NULL;
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->shutdown, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i < pool->n_threads; i++)
        pthread_join(pool->threads[i - 1], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->lock);
    free(pool->threads);
    free(pool);
    *pp = NULL;
}

int cinfer_thread_pool_size(const struct cinfer_thread_pool *pool)
{
    return pool->n_threads;
}

void cinfer_thread_pool_run(struct cinfer_thread_pool *pool, cinfer_parallel_fn fn, void *arg)
{
    if (pool->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store(&pool->remaining, pool->n_threads - 1);
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    fn(arg, 0, pool->n_threads);

    for (int spin = 0; atomic_load_explicit(&pool->remaining, memory_order_acquire) > 0 && spin < SPIN_ITERATIONS;
         spin++)
        cpu_relax();
    if (atomic_load_explicit(&pool->remaining, memory_order_acquire) > 0) {
        pthread_mutex_lock(&pool->lock);
        while (atomic_load(&pool->remaining) > 0)
            pthread_cond_wait(&pool->done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
}

void cinfer_split_range(int n, int granule, int t, int n_threads, int *begin, int *end)
{
    if (granule < 1)
        granule = 1;
    int units = (n + granule - 1) / granule;
    int per = units / n_threads;
    int extra = units % n_threads;
    int first = t * per + (t < extra ? t : extra);
    int count = per + (t < extra ? 1 : 0);
    int b = first * granule;
    int e = (first + count) * granule;
    *begin = b < n ? b : n;
    *end = e < n ? e : n;
}
