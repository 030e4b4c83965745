/* bench_engine: what the multi-process pipeline costs. Decode tokens/s of the full
 * engine (main process -> scheduler -> detokenizer -> main, over ZeroMQ) against the
 * model runtime called in this process on the same model and batch, measured in the
 * same run, printed as a ratio, plus the added latency per token at batch 1.
 *
 *   bench_engine [--model PATH] [--tokens N] [--batch B]...   (defaults: the embedded
 *   default model, 128 tokens, batches 1 and 8) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/tokenizer.h"
#include "engine/default_model.h"
#include "worker/hooks.h"
#include "model/model.h"
#include "model/runtime.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define PROMPT "In the beginning"

/* ---- the runtime in this process: prefill B copies, then decode steps in one call ---- */
static double in_process_decode(const char *model_path, const int32_t *prompt, int n_prompt, int batch, int tokens,
                                int n_threads)
{
    struct cinfer_error err = {0};
    struct cinfer_model *m = NULL;
    struct cinfer_model_load_options lo = {0};
    if (cinfer_model_load(model_path, &lo, &m, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.message);
        exit(1);
    }
    const struct cinfer_model_config *c = &m->config;
    int total = n_prompt + tokens + 1;
    size_t per_token = (size_t)2 * (size_t)c->num_layers * (size_t)c->num_kv_heads * (size_t)c->head_dim * sizeof(float);
    struct cinfer_runtime_options ro = {.kv_cache_bytes = per_token * (size_t)(total + 32) * (size_t)batch,
                                        .kv_page_tokens = 16, .n_threads = n_threads,
                                        .max_batch_tokens = 4096};
    struct cinfer_runtime *rt = NULL;
    if (cinfer_runtime_create(m, &ro, &rt, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.message);
        exit(1);
    }
    int pages_per_seq = (total + 15) / 16;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)pages_per_seq * (size_t)batch);
    int32_t *seq_tokens = malloc(sizeof(int32_t) * (size_t)total * (size_t)batch);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)batch);
    struct cinfer_seq_chunk *chunks = calloc((size_t)batch, sizeof *chunks);
    for (int b = 0; b < batch; b++) {
        for (int p = 0; p < pages_per_seq; p++)
            cinfer_runtime_kv_page_alloc(rt, &pages[b * pages_per_seq + p]);
        memcpy(seq_tokens + (size_t)b * (size_t)total, prompt, sizeof(int32_t) * (size_t)n_prompt);
    }
    double t_decode = 0;
    for (int step = 0; step <= tokens; step++) {
        for (int b = 0; b < batch; b++) {
            int32_t *toks = seq_tokens + (size_t)b * (size_t)total;
            int pos = step == 0 ? 0 : n_prompt + step - 1;
            chunks[b] = (struct cinfer_seq_chunk){.tokens = toks + pos, .n_tokens = step == 0 ? n_prompt : 1,
                                                  .start_pos = pos, .page_table = pages + b * pages_per_seq,
                                                  .n_pages = pages_per_seq, .logits = CINFER_LOGITS_LAST,
                                                  .logits_out = logits + (size_t)b * (size_t)c->vocab_size};
        }
        double t0 = now_s();
        if (cinfer_runtime_forward(rt, chunks, batch, &err)) {
            fprintf(stderr, "bench_engine: %s\n", err.message);
            exit(1);
        }
        /* greedy, as the pipeline does */
        for (int b = 0; b < batch; b++) {
            const float *row = logits + (size_t)b * (size_t)c->vocab_size;
            int32_t best = 0;
            for (int v = 1; v < c->vocab_size; v++)
                if (row[v] > row[best])
                    best = v;
            seq_tokens[(size_t)b * (size_t)total + n_prompt + step] = best;
        }
        if (step > 0) /* the first token comes from the prefill: decode starts after it */
            t_decode += now_s() - t0;
    }
    free(pages);
    free(seq_tokens);
    free(logits);
    free(chunks);
    cinfer_runtime_destroy(&rt);
    cinfer_model_free(&m);
    return (double)tokens * batch / t_decode;
}

/* ---- the pipeline: B caller threads, each timing its chunks ---- */
struct caller {
    struct cinfer_engine *engine;
    int tokens;
    double *arrival; /* (tokens + 1) when each token reached this caller */
    int received;
};

static int on_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    struct caller *k = ctx;
    double t = now_s();
    for (size_t i = 0; i < c->n_ids && k->received <= k->tokens; i++)
        k->arrival[k->received++] = t;
    return 0;
}

static void *run_caller(void *arg)
{
    struct caller *k = arg;
    struct cinfer_generate_request req = {.prompt = PROMPT};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.ignore_eos = 1;
    req.sampling.max_new_tokens = k->tokens + 1;
    struct cinfer_error err = {0};
    if (cinfer_engine_generate_stream(k->engine, &req, on_chunk, k, &err))
        fprintf(stderr, "bench_engine: %s\n", err.message);
    return NULL;
}

/* Steady state only: the window in which every caller is decoding (from the last
 * caller's first token to the first caller's last), so that staggered arrivals and
 * prefills do not count against the pipeline. */
static double pipeline_decode(struct cinfer_engine *e, int batch, int tokens)
{
    struct caller *k = calloc((size_t)batch, sizeof *k);
    pthread_t *t = calloc((size_t)batch, sizeof *t);
    for (int b = 0; b < batch; b++) {
        k[b] = (struct caller){.engine = e, .tokens = tokens,
                               .arrival = calloc((size_t)tokens + 1, sizeof(double))};
        pthread_create(&t[b], NULL, run_caller, &k[b]);
    }
    double start = 0, end = 1e300;
    for (int b = 0; b < batch; b++) {
        pthread_join(t[b], NULL);
        if (k[b].received < 2)
            continue;
        if (k[b].arrival[0] > start)
            start = k[b].arrival[0];
        if (k[b].arrival[k[b].received - 1] < end)
            end = k[b].arrival[k[b].received - 1];
    }
    long decoded = 0;
    for (int b = 0; b < batch; b++) {
        for (int i = 0; i < k[b].received; i++)
            decoded += k[b].arrival[i] > start && k[b].arrival[i] <= end;
        free(k[b].arrival);
    }
    free(k);
    free(t);
    return end > start ? (double)decoded / (end - start) : 0;
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int tokens = 128, batches[8], n_batches = 0, threads = 2, in_process_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            tokens = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc && n_batches < 8)
            batches[n_batches++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--in-process-only"))
            in_process_only = 1;
        else {
            fprintf(stderr, "usage: bench_engine [--model PATH] [--tokens N] [--batch B]... [--threads T]\n");
            return 2;
        }
    }
    if (!n_batches) {
        batches[0] = 1;
        batches[1] = 8;
        n_batches = 2;
    }
    if (!model)
        model = cinfer_default_model_path();

    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    cinfer_server_args_init(&args, &err);
    args.model_path = strdup(model);
    args.log_level = CINFER_LOG_ERROR;
    args.num_threads = threads;
    args.context_length = tokens + 64;
    struct cinfer_tokenizer_ctx *tok = NULL;
    if (cinfer_default_init_tokenizer(&args, &tok, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.message);
        return 1;
    }
    struct cinfer_token_ids ids = {0};
    tok->ops->encode(tok->tok, PROMPT, strlen(PROMPT), 1, &ids, &err);

    if (in_process_only) { /* for profiling the runtime alone */
        for (int i = 0; i < n_batches; i++)
            printf("batch %d: in-process %.1f tok/s\n", batches[i],
                   in_process_decode(model, ids.ids, (int)ids.len, batches[i], tokens, threads));
        return 0;
    }
    struct cinfer_engine *engine = NULL;
    if (cinfer_engine_create(&args, NULL, &engine, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.message);
        return 1;
    }
    printf("model %s, %d decode tokens per sequence, %d threads\n", model, tokens, threads);
    printf("%6s %16s %16s %8s %18s\n", "batch", "pipeline tok/s", "in-process tok/s", "ratio", "added ms/token");
    for (int i = 0; i < n_batches; i++) {
        int b = batches[i];
        pipeline_decode(engine, b, 8); /* warm up both sides */
        in_process_decode(model, ids.ids, (int)ids.len, b, 8, threads);
        /* The machine is shared: interleave the two and keep each side's best of 5. */
        double inproc = 0, pipe = 0;
        for (int round = 0; round < 5; round++) {
            double x = in_process_decode(model, ids.ids, (int)ids.len, b, tokens, threads);
            double y = pipeline_decode(engine, b, tokens);
            inproc = x > inproc ? x : inproc;
            pipe = y > pipe ? y : pipe;
        }
        /* Per-step latency: a step yields b tokens in both. */
        double added_ms = (b / pipe - b / inproc) * 1000.0;
        printf("%6d %16.1f %16.1f %8.3f %18.3f\n", b, pipe, inproc, pipe / inproc, added_ms);
    }
    cinfer_engine_shutdown(&engine, 1000);
    cinfer_token_ids_free(&ids);
    cinfer_tokenizer_ctx_free(&tok);
    cinfer_server_args_free(&args);
    return 0;
}
