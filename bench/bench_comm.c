/* bench_comm — the shared-memory communicator and tensor-parallel decode, in one run.
 *
 * 1. all-reduce: 2 ranks as forked processes on one segment (core/comm/comm_shm.c,
 *    default chunks); rank 0 times each all_reduce_sum_f32 call of n floats, back to
 *    back (--iters calls after 200 warm-up calls), for n = hidden sizes 576 to 8192 (a
 *    decode step's wo / w_down output at batch 1) and 32 x each (batch 32); median and
 *    90th percentile in microseconds. Then all_gather of a decode step's logits
 *    (vocabulary 49152 split over the 2 ranks) at batch 1 and 32.
 * 2. decode: for each --model FILE:TP, B sequences of --context prefilled tokens each
 *    add one token per step, --steps timed steps after 3 warm-up ones (median ms per
 *    step, B / that as tokens/s), at each batch of --batches, run as
 *      tp_size 1 with 1 thread, tp_size 1 with --threads threads, and
 *      tp_size TP with max(1, --threads / TP) threads per rank,
 *    each group in processes of its own (rank 0 hands its plans to the others over
 *    pipes, as the engine will over ZeroMQ). Each rank's weight bytes are printed too.
 *
 *   bench_comm [--iters 2000] [--threads N (default: online cores)] [--steps 16]
 *              [--context 64] [--batches 1,32] [--model FILE:TP ...] [--no-allreduce]
 *              [--rounds 1]
 * With --rounds N every measurement is taken N times, the configurations in turns, and
 * each keeps its best median: on a shared machine other load only ever slows a run.
 * Without --model it takes build/bench-models/smollm-shaped-f16.gguf at tp_size 3 and
 * smollm-shaped-h8kv4-f16.gguf at tp_size 2 where they exist (bench/make_smollm_shaped.py
 * makes both; docs/benchmarks.md says how). Speed is measured here, never asserted. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_shm.h"
#include "kernels.h"
#include "model/model.h"
#include "model/runtime.h"

#define MAX_RANKS 16
#define MAX_MODELS 8
#define MAX_BATCHES 8
#define MAX_STEPS 256
#define WARM_CALLS 200
#define WARM_STEPS 3
#define VOCAB_FOR_GATHER 49152
#define FIRST_REGULAR_TOKEN 259

struct options {
    int iters, threads, steps, context, rounds;
    int batches[MAX_BATCHES], n_batches;
    const char *models[MAX_MODELS];
    int tps[MAX_MODELS], n_models;
    int allreduce;
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of n sorted values. */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

static void *shared_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("bench_comm: mmap");
        exit(1);
    }
    return p;
}

static void shm_name(const char *tag, char *out, size_t bytes)
{
    static int n;
    snprintf(out, bytes, "/cinfer-bench-%d-%d-%s", (int)getpid(), n++, tag);
}

/* Runs fn(rank, arg) in n_ranks forked processes; returns how many failed. */
static int run_processes(int n_ranks, int (*fn)(int rank, int n_ranks, void *arg), void *arg)
{
    pid_t pids[MAX_RANKS];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n_ranks; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("bench_comm: fork");
            exit(1);
        }
        if (pids[r] == 0)
            _exit(fn(r, n_ranks, arg) == 0 ? 0 : 1);
    }
    int failed = 0;
    for (int r = 0; r < n_ranks; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return failed;
}

/* ---- 1. collectives ---------------------------------------------------------------------- */

#define N_SIZES 5
static const int hidden_sizes[N_SIZES] = {576, 1024, 2048, 4096, 8192};

struct collective_result {
    double median_us, p90_us;
};

struct collective_job {
    char name[128];
    int iters;
    struct collective_result reduce[2][N_SIZES]; /* [batch 1, batch 32][size] */
    struct collective_result gather[2];          /* batch 1, 32 */
};

static int time_calls(struct cinfer_comm *comm, int iters, int gather, size_t n, struct collective_result *out,
                      double *times)
{
    float *data = calloc(n * 2, sizeof *data), *recv = calloc(n * 2, sizeof *recv);
    struct cinfer_error err = {0};
    int rc = 0;
    for (int i = 0; i < WARM_CALLS + iters && rc == 0; i++) {
        double t0 = now_us();
        rc = gather ? comm->ops->all_gather(comm->state, data, n * sizeof(float), recv, &err)
                    : comm->ops->all_reduce_sum_f32(comm->state, data, n, &err);
        if (i >= WARM_CALLS)
            times[i - WARM_CALLS] = now_us() - t0;
    }
    if (rc != 0)
        fprintf(stderr, "bench_comm: %s\n", err.message);
    out->median_us = quantile(times, iters, 0.5);
    out->p90_us = quantile(times, iters, 0.9);
    free(data);
    free(recv);
    return rc;
}

static int collective_rank(int rank, int n_ranks, void *arg)
{
    struct collective_job *job = arg;
    struct cinfer_comm *comm = NULL;
    struct cinfer_error err = {0};
    if (cinfer_comm_shm_attach(job->name, rank, &comm, &err) != 0) {
        fprintf(stderr, "bench_comm: %s\n", err.message);
        return 1;
    }
    double *times = malloc(sizeof(double) * (size_t)job->iters);
    int rc = 0;
    for (int b = 0; b < 2 && rc == 0; b++)
        for (int s = 0; s < N_SIZES && rc == 0; s++) {
            struct collective_result res;
            rc = time_calls(comm, job->iters, 0, (size_t)hidden_sizes[s] * (b ? 32 : 1), &res, times);
            if (rank == 0)
                job->reduce[b][s] = res;
        }
    for (int b = 0; b < 2 && rc == 0; b++) {
        struct collective_result res; /* each rank's half of the vocabulary's logits */
        rc = time_calls(comm, job->iters / 4 + 1, 1, (size_t)VOCAB_FOR_GATHER / n_ranks * (b ? 32 : 1), &res, times);
        if (rank == 0)
            job->gather[b] = res;
    }
    free(times);
    cinfer_comm_destroy(&comm);
    return rc;
}

static void keep_best(struct collective_result *best, const struct collective_result *now, int first)
{
    if (first || now->median_us < best->median_us)
        *best = *now;
}

static void bench_collectives(const struct options *o)
{
    struct collective_job *job = shared_alloc(sizeof *job), best;
    for (int round = 0; round < o->rounds; round++) {
        memset(job, 0, sizeof *job);
        job->iters = o->iters;
        shm_name("reduce", job->name, sizeof job->name);
        struct cinfer_error err = {0};
        if (cinfer_comm_shm_create(job->name, 2, 0, &err) != 0) {
            fprintf(stderr, "bench_comm: %s\n", err.message);
            exit(1);
        }
        int failed = run_processes(2, collective_rank, job);
        cinfer_comm_shm_unlink(job->name, &err);
        if (failed) {
            fprintf(stderr, "bench_comm: a collective rank failed\n");
            exit(1);
        }
        for (int b = 0; b < 2; b++) {
            for (int s = 0; s < N_SIZES; s++)
                keep_best(&best.reduce[b][s], &job->reduce[b][s], round == 0);
            keep_best(&best.gather[b], &job->gather[b], round == 0);
        }
    }
    memcpy(job->reduce, best.reduce, sizeof best.reduce);
    memcpy(job->gather, best.gather, sizeof best.gather);
    printf("all_reduce_sum_f32, 2 ranks as processes, %zu KiB chunks, %d calls per size (rank 0's time per call), "
           "best of %d round%s\n",
           CINFER_COMM_SHM_DEFAULT_CHUNK_BYTES >> 10, o->iters, o->rounds, o->rounds > 1 ? "s" : "");
    printf("  %-8s %-6s %10s %10s %10s\n", "hidden", "batch", "floats", "median us", "p90 us");
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < N_SIZES; s++)
            printf("  %-8d %-6d %10d %10.2f %10.2f\n", hidden_sizes[s], b ? 32 : 1, hidden_sizes[s] * (b ? 32 : 1),
                   job->reduce[b][s].median_us, job->reduce[b][s].p90_us);
    printf("all_gather of decode logits, vocabulary %d over 2 ranks (%d floats each per row)\n", VOCAB_FOR_GATHER,
           VOCAB_FOR_GATHER / 2);
    for (int b = 0; b < 2; b++)
        printf("  batch %-3d median %.1f us, p90 %.1f us\n", b ? 32 : 1, job->gather[b].median_us,
               job->gather[b].p90_us);
    munmap(job, sizeof *job);
}

/* ---- 2. decode ------------------------------------------------------------------------------ */

struct decode_result {
    int ok;
    double step_ms[MAX_BATCHES];
    double prefill_ms[MAX_BATCHES];
    struct cinfer_runtime_memory memory[MAX_RANKS];
    int32_t first_tokens[8]; /* batch 1's greedy tokens: every configuration computes the same model */
};

struct decode_job {
    const struct options *o;
    const char *model;
    int tp, threads;
    char shm[128];
    int pipes[MAX_RANKS][2];
    struct decode_result *result;
};

static int write_all(int fd, const void *p, size_t n)
{
    for (const uint8_t *b = p; n > 0;) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    for (uint8_t *b = p; n > 0;) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int publish(void *ctx, const void *plan, size_t bytes, struct cinfer_error *err)
{
    const struct decode_job *job = ctx;
    uint32_t len = (uint32_t)bytes;
    for (int r = 1; r < job->tp; r++)
        if (write_all(job->pipes[r][1], &len, 4) || write_all(job->pipes[r][1], plan, bytes))
            return cinfer_error_set(err, CINFER_ERR_IO, "bench publish: rank %d's pipe", r);
    return 0;
}

/* Rank 0's measurement: for each batch size, prefill B sequences, then time decode steps. */
static int decode_leader(struct decode_job *job, struct cinfer_runtime *rt, int vocab)
{
    const struct options *o = job->o;
    int pt = cinfer_runtime_kv_page_tokens(rt);
    int positions = o->context + WARM_STEPS + o->steps;
    int pages_per_seq = (positions + pt - 1) / pt;
    int most = 0;
    for (int b = 0; b < o->n_batches; b++)
        most = o->batches[b] > most ? o->batches[b] : most;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)most * pages_per_seq);
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)o->context), *next = malloc(sizeof(int32_t) * (size_t)most);
    float *logits = malloc(sizeof(float) * (size_t)most * vocab);
    struct cinfer_seq_chunk *seqs = malloc(sizeof *seqs * (size_t)most);
    double times[MAX_STEPS];
    struct cinfer_error err = {0};
    for (int i = 0; i < o->context; i++)
        prompt[i] = FIRST_REGULAR_TOKEN + (int32_t)((i * 7919u) % (unsigned)(vocab - FIRST_REGULAR_TOKEN));
    for (int bi = 0; bi < o->n_batches; bi++) {
        int B = o->batches[bi];
        for (int i = 0; i < B * pages_per_seq; i++)
            if (cinfer_runtime_kv_page_alloc(rt, &pages[i]) != 0) {
                fprintf(stderr, "bench_comm: the KV cache holds too few pages\n");
                return 1;
            }
        /* prefill: as many sequences per call as max_batch_tokens allows */
        double t0 = now_us();
        int per_call = 2048 / o->context > 0 ? 2048 / o->context : 1;
        for (int first = 0; first < B; first += per_call) {
            int n = B - first < per_call ? B - first : per_call;
            for (int s = 0; s < n; s++)
                seqs[s] = (struct cinfer_seq_chunk){prompt, o->context, 0, pages + (size_t)(first + s) * pages_per_seq,
                                                    pages_per_seq, CINFER_LOGITS_LAST,
                                                    logits + (size_t)(first + s) * vocab, 0, 0, NULL, NULL, NULL};
            if (cinfer_runtime_forward(rt, seqs, n, &err) != 0) {
                fprintf(stderr, "bench_comm: prefill: %s\n", err.message);
                return 1;
            }
        }
        job->result->prefill_ms[bi] = (now_us() - t0) / 1e3;
        for (int s = 0; s < B; s++)
            next[s] = cinfer_kernel_argmax(logits + (size_t)s * vocab, vocab);
        for (int step = 0; step < WARM_STEPS + o->steps; step++) {
            for (int s = 0; s < B; s++)
                seqs[s] = (struct cinfer_seq_chunk){&next[s], 1, o->context + step, pages + (size_t)s * pages_per_seq,
                                                    pages_per_seq, CINFER_LOGITS_LAST, logits + (size_t)s * vocab,
                                                    0, 0, NULL, NULL, NULL};
            double s0 = now_us();
            if (cinfer_runtime_forward(rt, seqs, B, &err) != 0) {
                fprintf(stderr, "bench_comm: decode: %s\n", err.message);
                return 1;
            }
            if (step >= WARM_STEPS)
                times[step - WARM_STEPS] = (now_us() - s0) / 1e3;
            for (int s = 0; s < B; s++)
                next[s] = cinfer_kernel_argmax(logits + (size_t)s * vocab, vocab);
            if (B == 1 && step < 8)
                job->result->first_tokens[step] = next[0];
        }
        job->result->step_ms[bi] = quantile(times, o->steps, 0.5);
        for (int i = 0; i < B * pages_per_seq; i++)
            cinfer_runtime_kv_page_unref(rt, pages[i]);
    }
    free(pages);
    free(prompt);
    free(next);
    free(logits);
    free(seqs);
    return 0;
}

static int decode_follower(struct decode_job *job, int rank, struct cinfer_runtime *rt)
{
    uint8_t *plan = NULL;
    size_t cap = 0;
    struct cinfer_error err = {0};
    for (;;) {
        uint32_t len;
        if (read_all(job->pipes[rank][0], &len, 4) != 0 || len == 0)
            break;
        if (len > cap) {
            free(plan);
            plan = malloc(len);
            cap = len;
        }
        if (read_all(job->pipes[rank][0], plan, len) != 0 || cinfer_runtime_forward_plan(rt, plan, len, &err) != 0) {
            fprintf(stderr, "bench_comm: rank %d: %s\n", rank, err.message);
            free(plan);
            return 1;
        }
    }
    free(plan);
    return 0;
}

static int decode_rank(int rank, int n_ranks, void *arg)
{
    struct decode_job *job = arg;
    const struct options *o = job->o;
    struct cinfer_model *model = NULL;
    struct cinfer_comm *comm = NULL;
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    int rc = 1;
    struct cinfer_model_load_options lo = {.no_prefault = n_ranks > 1};
    if (cinfer_model_load(job->model, &lo, &model, &err) != 0 ||
        (n_ranks > 1 && cinfer_comm_shm_attach(job->shm, rank, &comm, &err) != 0)) {
        fprintf(stderr, "bench_comm: rank %d: %s\n", rank, err.message);
        goto out;
    }
    int most = 1;
    for (int b = 0; b < o->n_batches; b++)
        most = o->batches[b] > most ? o->batches[b] : most;
    const struct cinfer_model_config *c = &model->config;
    int pt = 16, positions = o->context + WARM_STEPS + o->steps;
    size_t per_token = (size_t)2 * c->num_layers * c->num_kv_heads * c->head_dim * sizeof(float);
    struct cinfer_runtime_options ro = {
        .kv_cache_bytes = per_token * (size_t)((positions + pt - 1) / pt * pt) * most + (1u << 20),
        .kv_page_tokens = pt,
        .n_threads = job->threads,
        .max_batch_tokens = 2048 > most ? 2048 : most,
        .tp_rank = rank,
        .tp_size = n_ranks,
        .comm = comm,
        .publish_plan = rank == 0 && n_ranks > 1 ? publish : NULL,
        .publish_ctx = job,
    };
    if (cinfer_runtime_create(model, &ro, &rt, &err) != 0) {
        fprintf(stderr, "bench_comm: rank %d: %s\n", rank, err.message);
        goto out;
    }
    cinfer_runtime_memory(rt, &job->result->memory[rank]);
    rc = rank == 0 ? decode_leader(job, rt, c->vocab_size) : decode_follower(job, rank, rt);
out:
    if (rc != 0 && comm && comm->ops->abort)
        comm->ops->abort(comm->state, "bench rank failed", NULL);
    if (rank == 0) {
        uint32_t end = 0;
        for (int r = 1; r < n_ranks; r++)
            write_all(job->pipes[r][1], &end, 4);
        job->result->ok = rc == 0;
    }
    cinfer_runtime_destroy(&rt);
    cinfer_comm_destroy(&comm);
    cinfer_model_free(&model);
    return rc;
}

static void run_decode(const struct options *o, const char *model, int tp, int threads, struct decode_result *res)
{
    struct decode_job job = {.o = o, .model = model, .tp = tp, .threads = threads, .result = res};
    memset(res, 0, sizeof *res);
    struct cinfer_error err = {0};
    if (tp > 1) {
        shm_name("decode", job.shm, sizeof job.shm);
        if (cinfer_comm_shm_create(job.shm, tp, 0, &err) != 0) {
            fprintf(stderr, "bench_comm: %s\n", err.message);
            return;
        }
    }
    for (int r = 0; r < tp; r++)
        if (pipe(job.pipes[r]) != 0) {
            perror("bench_comm: pipe");
            exit(1);
        }
    run_processes(tp, decode_rank, &job);
    for (int r = 0; r < tp; r++) {
        close(job.pipes[r][0]);
        close(job.pipes[r][1]);
    }
    if (tp > 1)
        cinfer_comm_shm_unlink(job.shm, &err);
}

static void print_decode(const struct options *o, const char *label, int tp, const struct decode_result *res,
                         const struct decode_result *base)
{
    if (!res->ok) {
        printf("  %-26s failed (see above)\n", label);
        return;
    }
    printf("  %-26s", label);
    for (int b = 0; b < o->n_batches; b++) {
        double tok_s = o->batches[b] * 1e3 / res->step_ms[b];
        printf(" | batch %2d: %7.2f ms/step %8.1f tok/s", o->batches[b], res->step_ms[b], tok_s);
        if (base && base->ok)
            printf(" (%.2fx)", base->step_ms[b] / res->step_ms[b]);
    }
    double copies = 0;
    for (int r = 0; r < tp; r++)
        copies += (double)res->memory[r].weight_copy_bytes + (double)res->memory[r].weight_in_place_bytes;
    printf(" | weights %.1f MiB per rank", copies / tp / 1048576.0);
    if (base && base->ok && memcmp(res->first_tokens, base->first_tokens, sizeof res->first_tokens) != 0)
        printf(" | greedy tokens differ from tp_size 1's");
    printf("\n");
}

static void bench_decode(const struct options *o)
{
    /* the ranks are processes: what rank 0 measures lands in shared memory */
    struct decode_result *one = shared_alloc(sizeof *one), *many = shared_alloc(sizeof *many);
    struct decode_result *tp = shared_alloc(sizeof *tp);
    for (int m = 0; m < o->n_models; m++) {
        struct cinfer_model *model = NULL;
        struct cinfer_error err = {0};
        struct cinfer_model_load_options lo = {.no_prefault = 1};
        if (cinfer_model_load(o->models[m], &lo, &model, &err) != 0) {
            fprintf(stderr, "bench_comm: %s\n", err.message);
            continue;
        }
        const struct cinfer_model_config *c = &model->config;
        printf("decode %s: %d layers, hidden %d, %d heads, %d KV heads, intermediate %d, vocabulary %d, %s\n",
               o->models[m], c->num_layers, c->hidden_size, c->num_heads, c->num_kv_heads, c->intermediate_size,
               c->vocab_size, cinfer_dtype_name(model->layers[0].wq.dtype));
        printf("  %d prefilled tokens per sequence, median of %d steps after %d warm-up, best of %d round%s; %d core(s) "
               "for each group\n",
               o->context, o->steps, WARM_STEPS, o->rounds, o->rounds > 1 ? "s" : "", o->threads);
        int tp_ok = cinfer_runtime_tp_check(model, o->tps[m], &err) == 0;
        cinfer_model_free(&model);
        if (!tp_ok) {
            printf("  tp_size %d refused: %s\n", o->tps[m], err.message);
            continue;
        }
        int per_rank = o->threads / o->tps[m] > 0 ? o->threads / o->tps[m] : 1;
        struct {
            int tp, threads;
            struct decode_result *res, best;
        } configs[3] = {{.tp = 1, .threads = 1, .res = one},
                        {.tp = 1, .threads = o->threads, .res = many},
                        {.tp = o->tps[m], .threads = per_rank, .res = tp}};
        int n_configs = 3;
        for (int round = 0; round < o->rounds; round++) /* in turns, each keeping its best */
            for (int k = 0; k < n_configs; k++) {
                if (k == 1 && o->threads == 1)
                    continue;
                run_decode(o, o->models[m], configs[k].tp, configs[k].threads, configs[k].res);
                if (round == 0 || !configs[k].best.ok)
                    configs[k].best = *configs[k].res;
                else if (configs[k].res->ok)
                    for (int b = 0; b < o->n_batches; b++)
                        if (configs[k].res->step_ms[b] < configs[k].best.step_ms[b])
                            configs[k].best.step_ms[b] = configs[k].res->step_ms[b];
            }
        char label[64];
        print_decode(o, "tp_size 1 x 1 thread", 1, &configs[0].best, NULL);
        if (o->threads > 1) {
            snprintf(label, sizeof label, "tp_size 1 x %d threads", o->threads);
            print_decode(o, label, 1, &configs[1].best, &configs[0].best);
        }
        snprintf(label, sizeof label, "tp_size %d x %d thread%s", o->tps[m], per_rank, per_rank > 1 ? "s" : "");
        print_decode(o, label, o->tps[m], &configs[2].best, &configs[0].best);
    }
    munmap(one, sizeof *one);
    munmap(many, sizeof *many);
    munmap(tp, sizeof *tp);
}

/* ---- options ---------------------------------------------------------------------------------- */

static int positive(const char *flag, const char *value, int most)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || v < 1 || v > most) {
        fprintf(stderr, "bench_comm: %s %s: expected 1 to %d\n", flag, value, most);
        exit(2);
    }
    return (int)v;
}

static void add_model(struct options *o, const char *spec)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || o->n_models == MAX_MODELS) {
        fprintf(stderr, "bench_comm: --model %s: expected FILE:TP (at most %d)\n", spec, MAX_MODELS);
        exit(2);
    }
    o->models[o->n_models] = strndup(spec, (size_t)(colon - spec));
    o->tps[o->n_models++] = positive("--model", colon + 1, MAX_RANKS);
}

int main(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    struct options o = {.iters = 2000, .threads = cores > 0 ? (int)cores : 1, .steps = 16, .context = 64,
                        .batches = {1, 32}, .n_batches = 2, .allreduce = 1, .rounds = 1};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "--no-allreduce")) {
            o.allreduce = 0;
            continue;
        }
        const char *value = i + 1 < argc ? argv[++i] : NULL;
        if (!value) {
            fprintf(stderr, "bench_comm: %s needs a value (see the top of bench/bench_comm.c)\n", flag);
            return 2;
        }
        if (!strcmp(flag, "--iters"))
            o.iters = positive(flag, value, 1000000);
        else if (!strcmp(flag, "--threads"))
            o.threads = positive(flag, value, 256);
        else if (!strcmp(flag, "--steps"))
            o.steps = positive(flag, value, MAX_STEPS);
        else if (!strcmp(flag, "--rounds"))
            o.rounds = positive(flag, value, 100);
        else if (!strcmp(flag, "--context"))
            o.context = positive(flag, value, 1024);
        else if (!strcmp(flag, "--model"))
            add_model(&o, value);
        else if (!strcmp(flag, "--batches")) {
            o.n_batches = 0;
            char *copy = strdup(value), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && o.n_batches < MAX_BATCHES; t = strtok_r(NULL, ",", &save))
                o.batches[o.n_batches++] = positive(flag, t, 256);
            free(copy);
        } else {
            fprintf(stderr, "bench_comm: unknown option %s (see the top of bench/bench_comm.c)\n", flag);
            return 2;
        }
    }
    if (o.n_models == 0) {
        const char *defaults[] = {CINFER_BINARY_DIR "/bench-models/smollm-shaped-f16.gguf:3",
                                  CINFER_BINARY_DIR "/bench-models/smollm-shaped-h8kv4-f16.gguf:2"};
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s", defaults[i]);
            *strrchr(path, ':') = '\0';
            if (access(path, R_OK) == 0)
                add_model(&o, defaults[i]);
            else
                fprintf(stderr, "bench_comm: %s is absent (bench/make_smollm_shaped.py makes it)\n", path);
        }
    }
    signal(SIGPIPE, SIG_IGN);
    printf("bench_comm: %ld online cores, kernels at level %s\n", cores, cinfer_kernels_level_name(cinfer_kernels_level()));
    if (o.allreduce)
        bench_collectives(&o);
    bench_decode(&o);
    return 0;
}
