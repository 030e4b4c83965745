/* Sampler cost per token, in CPU time of this process (so other load on the machine
 * does not count), for the vocabulary sizes of SmolLM (49,152) and Qwen2/3 (151,936)
 * and the usual parameter sets. Logits are shaped like a language model's: a Zipf-like
 * fall-off with rank plus noise, in a random id order. Each token copies a fresh row
 * (the sampler works in place), which is included.
 *
 * Then a decode step's rows through the CPU backend's sample op (backend.h version 12),
 * which draws a batch's rows on its thread pool: wall time per row for 32 rows of 151,936
 * logits, on 1 thread and on every core (run it on a quiet machine: this is wall time).
 *
 *   bench_sampler [tokens_per_case]   (default 300) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu_backend.h"
#include "scheduler/sampler.h"

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* (vocab) logits: -1.1 * log(rank) + noise, ranks shuffled over the ids. */
static void lm_like_logits(float *logits, int vocab, struct cinfer_rng *rng)
{
    for (int i = 0; i < vocab; i++)
        logits[i] = (float)(-1.1 * log((double)i + 1.0) + 0.5 * cinfer_rng_uniform(rng));
    for (int i = vocab - 1; i > 0; i--) {
        int j = (int)(cinfer_rng_uniform(rng) * (i + 1));
        float t = logits[i];
        logits[i] = logits[j];
        logits[j] = t;
    }
}

struct bench_case {
    const char *name;
    float temperature;
    int top_k;
    float top_p;
    float min_p;
    int logprobs; /* also the 5 best alternatives */
};

static double wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 32 rows at once through the CPU backend's sample op, on 1 thread and on every core. */
static int bench_backend_rows(int tokens)
{
    enum { ROWS = 32, VOCAB = 151936 };
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    float *base = malloc((size_t)ROWS * VOCAB * sizeof *base), *rows = malloc((size_t)ROWS * VOCAB * sizeof *rows);
    if (!base || !rows) {
        fprintf(stderr, "bench_sampler: out of memory for %d rows of %d\n", ROWS, VOCAB);
        return 1;
    }
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 2);
    for (int r = 0; r < ROWS; r++)
        lm_like_logits(base + (size_t)r * VOCAB, VOCAB, &rng);
    int32_t asked[ROWS], ids[ROWS];
    float logits[ROWS];
    struct cinfer_backend_sample_params params[ROWS];
    static const struct cinfer_backend_sample_params kinds[] = {
        {0.8f, 0, 1.0f, 0.0f, 0}, {0.8f, 0, 0.95f, 0.0f, 0}, {0.8f, 50, 0.9f, 0.0f, 0}};
    static const char *const kind_names[] = {"temperature 0.8", "top_p 0.95", "top_k 50 top_p 0.9"};
    int steps = tokens / ROWS > 2 ? tokens / ROWS : 2;
    printf("\nthe CPU backend's sample op, %d rows of %d logits a call (wall ms per row)\n", ROWS, VOCAB);
    printf("%-26s %10s %10s %8s\n", "case", "1 thread", "all cores", "ratio");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        double per_row[2];
        for (int side = 0; side < 2; side++) {
            void *be;
            struct cinfer_error err;
            if (ops->create(side == 0 ? 1 : 0, &be, &err) < 0) {
                fprintf(stderr, "bench_sampler: %s\n", err.message);
                return 1;
            }
            double spent = 0;
            for (int step = 0; step <= steps; step++) { /* step 0 warms the scratch */
                memcpy(rows, base, (size_t)ROWS * VOCAB * sizeof *rows);
                for (int r = 0; r < ROWS; r++) {
                    asked[r] = r;
                    params[r] = kinds[k];
                    params[r].uniform = cinfer_rng_uniform(&rng);
                }
                double t0 = wall_seconds();
                if (ops->sample(be, rows, VOCAB, asked, ROWS, params, ids, logits, &err) < 0) {
                    fprintf(stderr, "bench_sampler: %s\n", err.message);
                    return 1;
                }
                if (step > 0)
                    spent += wall_seconds() - t0;
            }
            ops->destroy(be);
            per_row[side] = spent * 1e3 / ((double)steps * ROWS);
        }
        printf("%-26s %10.3f %10.3f %7.2fx\n", kind_names[k], per_row[0], per_row[1], per_row[0] / per_row[1]);
    }
    free(base);
    free(rows);
    return 0;
}

int main(int argc, char **argv)
{
    int tokens = argc > 1 ? atoi(argv[1]) : 300;
    if (tokens <= 0)
        tokens = 300;
    static const struct bench_case cases[] = {
        {"greedy", 0.0f, -1, 1.0f, 0.0f, 0},
        {"temperature 0.8", 0.8f, -1, 1.0f, 0.0f, 0},
        {"top_k 40", 0.8f, 40, 1.0f, 0.0f, 0},
        {"top_p 0.95", 0.8f, -1, 0.95f, 0.0f, 0},
        {"min_p 0.05", 0.8f, -1, 1.0f, 0.05f, 0},
        {"top_k 50 top_p 0.9", 0.8f, 50, 0.9f, 0.0f, 0},
        {"top_p 0.95 + logprobs(5)", 0.8f, -1, 0.95f, 0.0f, 1},
    };
    static const int vocabs[] = {49152, 151936};
    printf("%-26s %8s %12s\n", "case", "vocab", "ms/token");
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        int vocab = vocabs[v];
        struct cinfer_sampler s;
        float *base = malloc((size_t)vocab * sizeof *base); /* (vocab) */
        float *row = malloc((size_t)vocab * sizeof *row);   /* (vocab) */
        if (!base || !row || cinfer_sampler_init(&s, vocab)) {
            fprintf(stderr, "bench_sampler: out of memory for a vocabulary of %d\n", vocab);
            return 1;
        }
        struct cinfer_rng rng;
        cinfer_rng_seed(&rng, 1);
        lm_like_logits(base, vocab, &rng);
        struct cinfer_sample_context ctx = {0};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            struct cinfer_sampling_params p;
            cinfer_sampling_params_init(&p);
            p.temperature = cases[c].temperature;
            p.top_k = cases[c].top_k;
            p.top_p = cases[c].top_p;
            p.min_p = cases[c].min_p;
            double start = cpu_seconds();
            long checksum = 0;
            for (int t = 0; t < tokens; t++) {
                memcpy(row, base, (size_t)vocab * sizeof *row);
                int32_t id = cinfer_sample(&s, row, &p, &ctx, &rng, NULL);
                if (cases[c].logprobs) {
                    struct cinfer_token_logprobs lp;
                    cinfer_sample_logprobs(row, vocab, id, 5, &lp);
                    checksum += lp.top_ids[0];
                }
                checksum += id;
            }
            double ms = (cpu_seconds() - start) * 1e3 / tokens;
            printf("%-26s %8d %12.3f   (checksum %ld)\n", cases[c].name, vocab, ms, checksum);
        }
        cinfer_sampler_free(&s);
        free(base);
        free(row);
    }
    return bench_backend_rows(tokens);
}
