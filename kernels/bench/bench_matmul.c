/* kernels/bench/bench_matmul.c — speed of the CPU backend's matmul by weight type:
 * decode-shaped (n = 1..8 rows: GB/s of weights streamed, against a plain read of the
 * same bytes) and prefill-shaped (n = 128..512 rows: GFLOP/s).
 *   bench_matmul [threads] [m] [k] [decode]
 *   bench_matmul [threads] [m] [k] paired [rows per matrix] [pairs] [n]
 * Then, on one core, batch-1 decode on SmolLM-135M's weight shapes (576 wide): the
 * tile matmul against the decode GEMV at AVX-512 and AVX2 ("decode": only these).
 * One thread is timed by its CPU time, so a busy machine skews it less.
 * "paired": for each weight type, the (m, k) buffer is cut into matrices of the given
 * rows (a model's layers) and each pair is a plain read of the buffer, then n = 1
 * through the backend over every matrix in turn; it prints the median (and quartiles)
 * of read time / matmul time. The host's bandwidth moves from minute to minute, and a
 * pair compares two moments seconds apart: the quietest way found to see how close a
 * decode kernel streams to the read (docs/benchmarks.md). With n > 1 (a batched
 * decode step: n activation rows against weights that come from memory, as in a
 * model) it prints the median GFLOP/s of the matmuls instead.
 * Keep the matrices together well above the last-level cache (m 262144 with k 2048): the
 * read leaves its last bytes there, and with 75 MB of Q4_0 that flattered the kernel by
 * 20-30 % (q4_0 100-126 % of the read at 75 MB, 79 % at 302 MB in the same hour).
 * CINFER_BENCH_LEVEL=avx2 (or scalar, avx512) runs that kernel level; CINFER_BENCH_TYPES
 * (q4_0,q4_K,...) only those types in the paired mode.
 * The backend matmuls get the weights as a model's runtime hands them over, through
 * weight_prepare (Q8_0 repacked into panels at the AVX-512 level); "decode" times the
 * kernels on weights as stored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend/cpu_backend.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "stream_read.h"
#include "util/thread_pool.h"

static const char *const type_names[] = {"F32", "F16", "BF16", "Q8_0"}; /* by cinfer_kernel_wtype */

/* With one thread, CPU time of this thread (a shared machine's other load does not
 * count); with more, wall time. */
static int use_cpu_time;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(use_cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct read_job {
    const uint64_t *data;
    size_t words;
    uint64_t sums[64];
};

#define READ_PARTS 64

static void read_part(void *arg, int part, int thread)
{
    struct read_job *job = arg;
    (void)thread;
    int b, e;
    cinfer_split_range((int)(job->words / 16), 1, part, READ_PARTS, &b, &e); /* 128-byte steps */
    job->sums[part] ^= stream_read((const uint8_t *)(job->data + (size_t)b * 16), (size_t)(e - b) * 128);
}

/* Seconds per call of one single-threaded kernel call, run for at least 0.3 s. Each
 * call reads the next copy of the weights in a buffer far larger than the caches, as
 * a decode step reads each layer's weights once (a small matrix read again and again
 * would be served from L2 and measure nothing a model sees). */
static double time_kernel(enum cinfer_kernel_level level, int use_gemv, const float *x, const void *xq, int n, int k, const uint8_t *w,
                          size_t w_bytes, enum cinfer_kernel_wtype type, size_t row_bytes, int m, float *y)
{
    size_t matrix_bytes = row_bytes * m, copies = w_bytes / matrix_bytes, copy = 0;
    int iters = 0;
    double t0 = now_s(), t1;
    do {
        const uint8_t *wc = w + copy * matrix_bytes;
        copy = copy + 1 < copies ? copy + 1 : 0;
        if (level == CINFER_KERNEL_AVX512 && use_gemv)
            cinfer_gemv_avx512(x, xq, n, k, wc, type, row_bytes, 0, m, y, m);
        else if (level == CINFER_KERNEL_AVX512)
            cinfer_matmul_avx512(x, xq, n, k, wc, type, row_bytes, 0, m, y, m);
        else if (use_gemv)
            cinfer_gemv_avx2(x, xq, n, k, wc, type, row_bytes, 0, m, y, m);
        else
            cinfer_matmul_avx2(x, xq, n, k, wc, type, row_bytes, 0, m, y, m);
        iters++;
    } while ((t1 = now_s()) - t0 < 0.3);
    return (t1 - t0) / iters;
}

/* n = 1 on the shapes of SmolLM-135M (q/o 576x576, gate/up 1536x576, down 576x1536,
 * lm head 49152x576): the kernel alone on this thread, tile path against GEMV at one
 * level, weights streamed from memory. */
static void bench_decode_level(enum cinfer_kernel_level level, const uint8_t *w, size_t w_bytes, const float *x,
                               int x_cols, float *y, size_t y_len, double read_gbs)
{
    const int shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}}; /* m, k */
    printf("decode n=1, one thread, kernel only, %s: tile -> gemv (GB/s of weights, %% of plain read)\n",
           cinfer_kernels_level_name(level));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], k = shapes[s][1];
        if ((size_t)m * k * 4 > w_bytes || k > x_cols || (size_t)m > y_len) {
            printf("W (%d, %d): skipped (larger than the buffers of this run)\n", m, k);
            continue;
        }
        for (int type = 0; type < 4; type++) {
            enum cinfer_kernel_wtype wtype = (enum cinfer_kernel_wtype)type;
            size_t row_bytes = cinfer_kernel_row_bytes(wtype, k);
            size_t prepared_bytes = cinfer_kernel_prepared_bytes(wtype, 1, k);
            void *xq = prepared_bytes ? malloc(prepared_bytes) : NULL;
            cinfer_kernel_prepare_rows(wtype, x, k, 0, 1, xq);
            double bytes = (double)row_bytes * m;
            time_kernel(level, 0, x, xq, 1, k, w, w_bytes, wtype, row_bytes, m, y); /* warm */
            double tile_s = time_kernel(level, 0, x, xq, 1, k, w, w_bytes, wtype, row_bytes, m, y);
            double gemv_s = time_kernel(level, 1, x, xq, 1, k, w, w_bytes, wtype, row_bytes, m, y);
            printf("W (%5d, %4d) %-4s %8.1f us %6.1f GB/s (%3.0f%%) -> %8.1f us %6.1f GB/s (%3.0f%%)  x%.2f\n", m,
                   k, type_names[type], tile_s * 1e6, bytes / tile_s / 1e9, 100 * bytes / tile_s / 1e9 / read_gbs,
                   gemv_s * 1e6, bytes / gemv_s / 1e9, 100 * bytes / gemv_s / 1e9 / read_gbs, tile_s / gemv_s);
            free(xq);
        }
    }
}

static void bench_decode_shapes(const uint8_t *w, size_t w_bytes, const float *x, int x_cols, float *y,
                                size_t y_len, double read_gbs)
{
    int saved = use_cpu_time;
    use_cpu_time = 1;
    if (cinfer_kernels_best_level() >= CINFER_KERNEL_AVX512)
        bench_decode_level(CINFER_KERNEL_AVX512, w, w_bytes, x, x_cols, y, y_len, read_gbs);
    if (cinfer_kernels_best_level() >= CINFER_KERNEL_AVX2)
        bench_decode_level(CINFER_KERNEL_AVX2, w, w_bytes, x, x_cols, y, y_len, read_gbs);
    else
        printf("decode shapes: skipped (the GEMV needs AVX2 or AVX-512)\n");
    use_cpu_time = saved;
}

/* CINFER_BENCH_TYPES=q4_0,q4_K: only those types in the paired mode (all when unset) */
static int type_listed(const char *name)
{
    const char *list = getenv("CINFER_BENCH_TYPES");
    if (!list || !*list)
        return 1;
    size_t len = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The "paired" mode (see the top of the file). */
static void bench_paired(const struct cinfer_backend_ops *ops, void *be, struct cinfer_thread_pool *pool,
                         struct read_job *rj, const uint8_t *w, int m, int k, int rows_per, int pairs, int n,
                         const float *x, float *y)
{
    double *ratios = malloc(sizeof(double) * (size_t)pairs); /* read time / matmul time, or GFLOP/s */
    struct cinfer_error err;
    printf("paired: plain read of the buffer, then n = %d over (%d, %d) matrices; %s\n", n, rows_per, k,
           n == 1 ? "read time / matmul time" : "GFLOP/s of the matmuls");
    /* the float types, Q8_0, and the block-quantized types the common files hold (Q4_K_M,
     * Q5_K_M, Q6_K, Q4_0, Q3_K_M, Q2_K, IQ4_XS) */
    static const enum cinfer_kernel_wtype types[] = {
        CINFER_KW_F32,  CINFER_KW_F16,  CINFER_KW_BF16, CINFER_KW_Q8_0,   CINFER_KW_Q4_0,   CINFER_KW_Q5_0,
        CINFER_KW_Q4_K, CINFER_KW_Q5_K, CINFER_KW_Q6_K, CINFER_KW_Q3_K, CINFER_KW_Q2_K, CINFER_KW_IQ4_NL, CINFER_KW_Q4_1, CINFER_KW_Q5_1, CINFER_KW_MXFP4,
        CINFER_KW_IQ4_XS};
    for (size_t t = 0; t < sizeof types / sizeof types[0] && ratios; t++) {
        enum cinfer_kernel_wtype wtype = types[t];
        const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(wtype);
        int block = info ? info->block_values : 1;
        int type = (int)wtype;
        const char *name = info ? info->name : type_names[type];
        if (!type_listed(name))
            continue;
        size_t row_bytes = cinfer_kernel_row_bytes(wtype, k);
        int matrices = m / rows_per;
        if (k % block || matrices < 1)
            continue;
        size_t matrix_bytes = row_bytes * (size_t)rows_per;
        rj->words = matrix_bytes * (size_t)matrices / 8; /* the read covers what the matmuls read */
        /* the weights as a model's runtime hands them to the backend: prepared (Q8_0
         * repacked into panels at the AVX-512 level) */
        struct cinfer_backend_weight *prepared = malloc(sizeof *prepared * (size_t)matrices);
        for (int i = 0; prepared && i < matrices; i++) {
            struct cinfer_backend_weight stored = {(uint32_t)type, rows_per, k, w + (size_t)i * matrix_bytes,
                                                   row_bytes};
            if (ops->weight_prepare(be, &stored, &prepared[i], &err) < 0) {
                fprintf(stderr, "bench_matmul: %s\n", err.message);
                exit(1);
            }
        }
        for (int p = 0; p < pairs && prepared; p++) {
            double t0 = now_s();
            cinfer_thread_pool_run_chunks(pool, read_part, rj, READ_PARTS);
            double read_s = now_s() - t0;
            t0 = now_s();
            for (int i = 0; i < matrices; i++) {
                struct cinfer_backend_matmul_out out = {&prepared[i], NULL, y, 0};
                ops->matmul(be, x, n, &out, 1, &err);
            }
            double matmul_s = now_s() - t0;
            ratios[p] = n == 1 ? read_s / matmul_s : 2.0 * n * (double)rows_per * matrices * k / matmul_s / 1e9;
        }
        for (int i = 0; prepared && i < matrices; i++)
            ops->weight_release(be, &prepared[i]);
        free(prepared);
        qsort(ratios, (size_t)pairs, sizeof *ratios, compare_doubles);
        if (n == 1)
            printf("%-4s %d matrices, %.1f MB: median %.0f%% (quartiles %.0f%%, %.0f%%) of the read's rate\n",
                   name, matrices, matrix_bytes * (double)matrices / 1e6, 100 * ratios[pairs / 2],
                   100 * ratios[pairs / 4], 100 * ratios[3 * pairs / 4]);
        else
            printf("%-4s %d matrices, %.1f MB: median %.1f GFLOP/s (quartiles %.1f, %.1f)\n", name,
                   matrices, matrix_bytes * (double)matrices / 1e6, ratios[pairs / 2], ratios[pairs / 4],
                   ratios[3 * pairs / 4]);
    }
    free(ratios);
}

int main(int argc, char **argv)
{
    int n_threads = argc > 1 ? atoi(argv[1]) : 0;
    int m = argc > 2 ? atoi(argv[2]) : 8192;
    int k = argc > 3 ? atoi(argv[3]) : 4096;
    /* CINFER_BENCH_LEVEL=avx2 (or scalar): that level's kernels on a CPU that has a better one */
    const char *level_asked = getenv("CINFER_BENCH_LEVEL");
    if (level_asked) {
        enum cinfer_kernel_level level = !strcmp(level_asked, "scalar") ? CINFER_KERNEL_SCALAR
                                         : !strcmp(level_asked, "avx2") ? CINFER_KERNEL_AVX2
                                                                        : CINFER_KERNEL_AVX512;
        if (strcmp(level_asked, cinfer_kernels_level_name(level)) || cinfer_kernels_force_level(level) < 0) {
            fprintf(stderr, "bench_matmul: CINFER_BENCH_LEVEL: expected scalar, avx2 or avx512 (one this CPU runs), "
                            "found '%s'\n", level_asked);
            return 2;
        }
    }
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be;
    struct cinfer_error err;
    if (ops->create(n_threads, &be, &err) < 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    struct cinfer_thread_pool *pool;
    cinfer_thread_pool_create(n_threads, &pool, &err);
    use_cpu_time = cinfer_thread_pool_size(pool) == 1;
    printf("level %s, %d threads, W (%d, %d), %s time\n", cinfer_kernels_level_name(cinfer_kernels_level()),
           cinfer_thread_pool_size(pool), m, k, use_cpu_time ? "thread CPU" : "wall");

    size_t max_bytes = (size_t)m * k * 4;
    /* in huge pages, as the model loader maps weights (core/util/mmap_file.c) */
    const size_t huge = (size_t)2 << 20, w_bytes = (max_bytes + huge - 1) / huge * huge;
    uint8_t *w = aligned_alloc(huge, w_bytes);
#ifdef MADV_HUGEPAGE
    madvise(w, w_bytes, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < max_bytes; i++)
        w[i] = (uint8_t)(i * 2654435761u >> 13) & 0x3f; /* small finite values in every type */
    int max_n = 512;
    float *x = aligned_alloc(64, sizeof(float) * (size_t)max_n * k);
    float *y = aligned_alloc(64, sizeof(float) * (size_t)max_n * m);
    for (size_t i = 0; i < (size_t)max_n * k; i++)
        x[i] = (float)((i % 17) - 8) * 0.01f;

    /* the floor: reading the bytes as fast as plain code can */
    struct read_job rj = {(const uint64_t *)w, max_bytes / 8, {0}};
    cinfer_thread_pool_run_chunks(pool, read_part, &rj, READ_PARTS);
    double t0 = now_s();
    int reps = 10;
    for (int r = 0; r < reps; r++)
        cinfer_thread_pool_run_chunks(pool, read_part, &rj, READ_PARTS);
    double read_gbs = max_bytes * (double)reps / (now_s() - t0) / 1e9;
    printf("plain read of %zu MB: %.1f GB/s\n", max_bytes >> 20, read_gbs);

    if (argc > 4 && strcmp(argv[4], "paired") == 0) {
        int rows_per = argc > 5 ? atoi(argv[5]) : 576, pairs = argc > 6 ? atoi(argv[6]) : 30;
        int n = argc > 7 ? atoi(argv[7]) : 1;
        if (rows_per < 1 || rows_per > m || pairs < 4 || n < 1 || n > max_n) {
            fprintf(stderr,
                    "bench_matmul: paired needs 1 <= rows per matrix (%d) <= m (%d), pairs >= 4 (%d) and "
                    "1 <= n (%d) <= %d\n",
                    rows_per, m, pairs, n, max_n);
            return 2;
        }
        bench_paired(ops, be, pool, &rj, w, m, k, rows_per, pairs, n, x, y);
        cinfer_thread_pool_destroy(&pool);
        ops->destroy(be);
        free(w), free(x), free(y);
        return 0;
    }
    int decode_only = argc > 4 && strcmp(argv[4], "decode") == 0;
    for (int type = 0; type < 4 && !decode_only; type++) {
        struct cinfer_backend_weight stored = {(uint32_t)type, m, k, w,
                                               cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)type, k)};
        struct cinfer_backend_weight wt; /* as a model's runtime hands it to the backend */
        if (ops->weight_prepare(be, &stored, &wt, &err) < 0) {
            fprintf(stderr, "bench_matmul: %s\n", err.message);
            return 1;
        }
        struct cinfer_backend_matmul_out out = {&wt, NULL, y, 0};
        size_t bytes = wt.row_bytes * (size_t)m;
        const int decode_n[] = {1, 4, 8};
        for (size_t d = 0; d < 3; d++) {
            int n = decode_n[d];
            ops->matmul(be, x, n, &out, 1, &err);
            int iters = 0;
            t0 = now_s();
            double t1;
            do {
                ops->matmul(be, x, n, &out, 1, &err);
                iters++;
            } while ((t1 = now_s()) - t0 < 0.5);
            double s = (t1 - t0) / iters;
            printf("%-4s n=%-3d %7.3f ms  %6.1f GB/s weights (%3.0f%% of plain read)  %6.1f GFLOP/s\n",
                   type_names[type], n, s * 1e3, bytes / s / 1e9, 100 * bytes / s / 1e9 / read_gbs,
                   2.0 * n * m * k / s / 1e9);
        }
        const int prefill_n[] = {128, 512};
        for (size_t p = 0; p < 2; p++) {
            int n = prefill_n[p];
            int iters = 0;
            t0 = now_s();
            double t1;
            do {
                ops->matmul(be, x, n, &out, 1, &err);
                iters++;
            } while ((t1 = now_s()) - t0 < 1.0);
            double s = (t1 - t0) / iters;
            printf("%-4s n=%-3d %7.2f ms  %6.1f GFLOP/s\n", type_names[type], n, s * 1e3, 2.0 * n * m * k / s / 1e9);
        }
        ops->weight_release(be, &wt);
    }
    bench_decode_shapes(w, max_bytes, x, k, y, (size_t)max_n * m, read_gbs);
    cinfer_thread_pool_destroy(&pool);
    ops->destroy(be);
    free(w), free(x), free(y);
    return 0;
}
