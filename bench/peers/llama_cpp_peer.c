/* llama_cpp_peer — llama.cpp's side of bench/bench_model.c and bench/bench_scheduler.c,
 * on llama.cpp built from source for this CPU (scripts/build-llama-cpp.sh). It takes
 * the command line of bench/peers/llama_cpp_bench.mjs (the node-llama-cpp peer) and
 * prints the same JSON, so either can be the --peer:
 *
 *   llama_cpp_peer --model FILE [--threads 2] [--prompt-tokens 512] [--prefill-reps 3]
 *                  [--decode-steps 32] [--batches 1,8,32] [--seed 1]
 *
 * One JSON object on stdout (everything else goes to stderr):
 *   { prefill_tok_s, prefill_runs_tok_s[], decode: [{batch, steps, tok_s}], greedy_tokens[],
 *     peak_rss_bytes, baseline_rss_bytes, llama_cpp_build, cpu_backend }
 * Prefill: one sequence evaluates the prompt (random ids from the xorshift32 stream
 * bench_model.c uses) from an empty KV cache in one llama_decode; after one warm-up run,
 * the median of --prefill-reps runs.
 * Decode at batch B: one context with B sequences; sequence s starts from token
 * prompt[0] + s at position 0 and adds its greedy token each step, all B in one
 * llama_decode (the sequences in lockstep, as node-llama-cpp batches them); two warm-up
 * steps, then --decode-steps timed steps: B x steps / time.
 * The context is set up as node-llama-cpp's would be for the same call (its addon
 * starts from llama_context_default_params): n_ctx = the per-sequence size x B rounded
 * up to 256 (llama.cpp gives each sequence at least 256 cells), n_batch = n_ubatch (512
 * at most for decode, the prompt for prefill), flash attention "auto", f16 KV cache,
 * kv_unified off, n_seq_max = B, n_threads = n_threads_batch.
 * Greedy is an argmax over the logits, as cinfer's side picks it. peak_rss_bytes is
 * this process's VmHWM; baseline_rss_bytes its VmRSS before llama.cpp starts.
 *
 * Built by scripts/bench-common.sh (bench_peer) against the source build in
 * .cache/llama.cpp; the main CMake build does not need llama.cpp.
 * LLAMA_CPP_PEER_BUILD (a -D string) names that build in llama_cpp_build. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

#ifndef LLAMA_CPP_PEER_BUILD
#define LLAMA_CPP_PEER_BUILD "llama.cpp built from source"
#endif

#define MAX_BATCHES 16
#define MAX_GREEDY 256
#define WARM_STEPS 2
#define FIRST_REGULAR_TOKEN 259 /* past <unk> <s> </s> and the 256 byte tokens */

struct options {
    const char *model;
    int n_threads;
    int prompt_tokens;
    int prefill_reps;
    int decode_steps;
    int batches[MAX_BATCHES];
    int n_batches;
    uint32_t seed;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llama_cpp_peer: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* llama.cpp's messages: errors and warnings only, on stderr. */
static void on_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

/* A line of /proc/self/status in bytes: VmRSS (now) or VmHWM (the peak). VmHWM rather
 * than getrusage's ru_maxrss: a process started by posix_spawn (vfork) inherits in
 * ru_maxrss the high-water mark of its parent's memory, which in bench_model includes a
 * 1 GiB bandwidth buffer; VmHWM is this program's own. */
static double status_bytes(const char *field)
{
    char line[256];
    double kib = 0;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            kib = strtod(line + n + 1, NULL);
    if (f)
        fclose(f);
    return kib * 1024.0;
}

/* ---- options ---------------------------------------------------------------- */

static int positive(const char *flag, const char *value, int max)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || v < 1 || v > max)
        die("%s: expected a number in 1..%d, found '%s'", flag, max, value);
    return (int)v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.n_threads = 2, .prompt_tokens = 512, .prefill_reps = 3, .decode_steps = 32,
                          .batches = {1, 8, 32}, .n_batches = 3, .seed = 1};
    for (int i = 1; i < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (!value)
            die("option %s needs a value", flag);
        if (!strcmp(flag, "--model")) {
            o->model = value;
        } else if (!strcmp(flag, "--threads")) {
            o->n_threads = positive(flag, value, 4096);
        } else if (!strcmp(flag, "--prompt-tokens")) {
            o->prompt_tokens = positive(flag, value, 8192);
        } else if (!strcmp(flag, "--prefill-reps")) {
            o->prefill_reps = positive(flag, value, 4096);
        } else if (!strcmp(flag, "--decode-steps")) {
            o->decode_steps = positive(flag, value, 4096);
        } else if (!strcmp(flag, "--seed")) {
            o->seed = (uint32_t)positive(flag, value, 1 << 30);
        } else if (!strcmp(flag, "--batches")) {
            o->n_batches = 0;
            for (const char *p = value; *p;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > 4096 || o->n_batches == MAX_BATCHES || (*end && *end != ','))
                    die("--batches: expected up to %d numbers in 1..4096 separated by commas, found '%s'", MAX_BATCHES,
                        value);
                o->batches[o->n_batches++] = (int)v;
                p = *end ? end + 1 : end;
            }
        } else {
            die("unknown option %s (see the comment at the top of bench/peers/llama_cpp_peer.c)", flag);
        }
    }
    if (!o->model)
        die("--model FILE is required");
}

/* ---- measurements -------------------------------------------------------------- */

/* The token stream bench_model.c uses: xorshift32, ids past the special and byte tokens. */
static void prompt_tokens(llama_token *out, int n, uint32_t seed, int vocab)
{
    uint32_t x = seed ? seed : 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out[i] = FIRST_REGULAR_TOKEN + (llama_token)(x % (uint32_t)(vocab - FIRST_REGULAR_TOKEN));
    }
}

/* A context as node-llama-cpp's createContext({contextSize, batchSize, sequences,
 * threads}) makes one. */
static struct llama_context *make_context(struct llama_model *model, const struct options *o, int ctx_per_seq,
                                          int batch_size, int sequences)
{
    struct llama_context_params p = llama_context_default_params();
    uint32_t n_ctx = (uint32_t)ctx_per_seq * (uint32_t)sequences;
    p.n_ctx = (n_ctx + 255) / 256 * 256;
    p.n_batch = p.n_ubatch = (uint32_t)batch_size;
    p.n_seq_max = (uint32_t)sequences;
    p.n_threads = p.n_threads_batch = o->n_threads;
    p.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, p);
    if (!ctx)
        die("%s: llama_init_from_model failed (see llama.cpp's message above)", o->model);
    return ctx;
}

static llama_token argmax(const float *logits, int n) /* logits: (vocab) */
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

/* Prefill tok/s of each timed run, into runs (prefill_reps). */
static void measure_prefill(struct llama_model *model, const struct options *o, const llama_token *prompt,
                            double *runs)
{
    struct llama_context *ctx = make_context(model, o, o->prompt_tokens + 16, o->prompt_tokens, 1);
    struct llama_batch batch = llama_batch_init(o->prompt_tokens, 0, 1);
    for (int rep = 0; rep <= o->prefill_reps; rep++) { /* rep 0 warms up */
        llama_memory_clear(llama_get_memory(ctx), true);
        batch.n_tokens = o->prompt_tokens;
        for (int i = 0; i < o->prompt_tokens; i++) {
            batch.token[i] = prompt[i];
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = i == o->prompt_tokens - 1;
        }
        double t0 = now_s();
        int rc = llama_decode(ctx, batch);
        llama_synchronize(ctx);
        double dt = now_s() - t0;
        if (rc != 0)
            die("%s: prefill: llama_decode returned %d", o->model, rc);
        if (rep > 0)
            runs[rep - 1] = o->prompt_tokens / dt;
    }
    llama_batch_free(batch);
    llama_free(ctx);
}

/* Decode tok/s at `sequences` in lockstep; the greedy tokens of sequence 0 into greedy. */
static double measure_decode(struct llama_model *model, const struct options *o, int sequences,
                             llama_token first_token, int vocab, llama_token *greedy, int *n_greedy)
{
    int ctx_per_seq = WARM_STEPS + o->decode_steps + 8;
    int n_ctx = ctx_per_seq * sequences;
    int batch_size = n_ctx < 512 ? n_ctx : 512;
    batch_size = batch_size > sequences ? batch_size : sequences;
    struct llama_context *ctx = make_context(model, o, ctx_per_seq, batch_size, sequences);
    struct llama_batch batch = llama_batch_init(sequences, 0, 1);
    llama_token *next = malloc(sizeof *next * (size_t)sequences); /* (sequences) */
    if (!next)
        die("out of memory");
    for (int s = 0; s < sequences; s++)
        next[s] = first_token + s;
    double t0 = 0;
    *n_greedy = 0;
    for (int step = 0; step < WARM_STEPS + o->decode_steps; step++) {
        if (step == WARM_STEPS)
            t0 = now_s();
        batch.n_tokens = sequences;
        for (int s = 0; s < sequences; s++) {
            batch.token[s] = next[s];
            batch.pos[s] = step;
            batch.n_seq_id[s] = 1;
            batch.seq_id[s][0] = s;
            batch.logits[s] = 1;
        }
        int rc = llama_decode(ctx, batch);
        if (rc != 0)
            die("%s: decode at batch %d: llama_decode returned %d", o->model, sequences, rc);
        for (int s = 0; s < sequences; s++)
            next[s] = argmax(llama_get_logits_ith(ctx, s), vocab);
        if (*n_greedy < MAX_GREEDY)
            greedy[(*n_greedy)++] = next[0];
    }
    double dt = now_s() - t0;
    free(next);
    llama_batch_free(batch);
    llama_free(ctx);
    return (double)sequences * o->decode_steps / dt;
}

int main(int argc, char **argv)
{
    struct options o;
    parse_options(argc, argv, &o);
    double baseline_rss_bytes = status_bytes("VmRSS");
    llama_log_set(on_log, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mode = LLAMA_LOAD_MODE_MMAP; /* as the node peer loads it (useMmap: true) */
    struct llama_model *model = llama_model_load_from_file(o.model, mp);
    if (!model)
        die("%s: llama_model_load_from_file failed (see llama.cpp's message above)", o.model);
    int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    fprintf(stderr, "llama_cpp_peer: %s; %s\n", LLAMA_CPP_PEER_BUILD, llama_print_system_info());

    llama_token *prompt = malloc(sizeof *prompt * (size_t)o.prompt_tokens); /* (prompt_tokens) */
    double *runs = malloc(sizeof *runs * (size_t)o.prefill_reps);          /* (prefill_reps) */
    if (!prompt || !runs)
        die("out of memory");
    prompt_tokens(prompt, o.prompt_tokens, o.seed, vocab);
    measure_prefill(model, &o, prompt, runs);

    double decode_tok_s[MAX_BATCHES];
    llama_token greedy[MAX_GREEDY], batch_greedy[MAX_GREEDY];
    int n_greedy = 0, n_batch_greedy = 0;
    for (int i = 0; i < o.n_batches; i++) {
        decode_tok_s[i] = measure_decode(model, &o, o.batches[i], prompt[0], vocab, batch_greedy, &n_batch_greedy);
        if (o.batches[i] == 1) {
            memcpy(greedy, batch_greedy, sizeof greedy[0] * (size_t)n_batch_greedy);
            n_greedy = n_batch_greedy;
        }
        fprintf(stderr, "llama.cpp decode batch %d: %.1f tok/s\n", o.batches[i], decode_tok_s[i]);
    }

    double sorted[4096]; /* (prefill_reps) */
    memcpy(sorted, runs, sizeof runs[0] * (size_t)o.prefill_reps);
    qsort(sorted, (size_t)o.prefill_reps, sizeof sorted[0], compare_doubles);

    printf("{\"prefill_tok_s\":%.3f,\"prefill_runs_tok_s\":[", sorted[o.prefill_reps / 2]);
    for (int i = 0; i < o.prefill_reps; i++)
        printf("%s%.3f", i ? "," : "", runs[i]);
    printf("],\"decode\":[");
    for (int i = 0; i < o.n_batches; i++)
        printf("%s{\"batch\":%d,\"steps\":%d,\"tok_s\":%.3f}", i ? "," : "", o.batches[i], o.decode_steps,
               decode_tok_s[i]);
    printf("],\"greedy_tokens\":[");
    for (int i = 0; i < n_greedy; i++)
        printf("%s%d", i ? "," : "", greedy[i]);
    /* the system info names only plain characters: CPU features and "= 1" flags */
    printf("],\"peak_rss_bytes\":%.0f,\"baseline_rss_bytes\":%.0f,\"llama_cpp_build\":\"%s\",\"cpu_backend\":\"%s\"}\n",
           status_bytes("VmHWM"), baseline_rss_bytes, LLAMA_CPP_PEER_BUILD, llama_print_system_info());

    free(prompt);
    free(runs);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
