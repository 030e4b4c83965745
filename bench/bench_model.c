/* bench_model — CPU model runtime speed against llama.cpp, in one run.
 *
 * For each GGUF file given (scripts/bench-model.sh makes SmolLM-135M-shaped ones in
 * f32, f16, bf16 and Q8_0) it measures, for cinfer and then for llama.cpp on the same
 * file with the same number of threads:
 *   - prefill tokens/s: one sequence, a prompt of --prompt-tokens random ids, from an
 *     empty KV cache (median of --prefill-reps runs after one warm-up run);
 *   - decode tokens/s at each batch size B of --batches: B sequences that each add one
 *     token per step (greedy: each row's top token, as the scheduler asks for it, so a
 *     device backend ranks the row where it is), --decode-steps timed steps after two
 *     warm-up steps;
 *   - peak RSS of the process that did it (each side runs in its own child process);
 *   - the greedy tokens of the batch-1 decode, to show both sides compute the same model;
 *   - the tokens 1 GiB of KV cache holds in each KV type (f32, f16, bf16, q8_0): cinfer's
 *     runtime made with that budget (its pages x page size), beside llama.cpp's count
 *     for its f16 and q8_0 caches (1 GiB / its bytes a token: K and V of every layer,
 *     2 bytes a value or 34 bytes per 32).
 * With --rounds N the two sides take turns N times per model and each keeps its best
 * figures: other load on a shared machine only ever slows a run down.
 * and, once before and once after, the machine's read bandwidth: every thread streams
 * through its share of a buffer far larger than the caches, in huge pages. Decode at
 * batch 1 is then set against its floor: the weight bytes one token must read / that
 * bandwidth. On cinfer's side it is also set against a paired floor: each decode step
 * right after a plain read of as many bytes, the median of read time / step time (see
 * cinfer_paired_floor: the bandwidth here moves by 2x within a minute).
 *
 * llama.cpp runs as the --peer program: llama_cpp_peer (bench/peers/llama_cpp_peer.c,
 * llama.cpp built from source for this CPU by scripts/build-llama-cpp.sh; what
 * scripts/bench-model.sh passes) or, for a peer ending in .mjs or .js, `node PEER`
 * (bench/peers/llama_cpp_bench.mjs: node-llama-cpp's prebuilt CPU build). Both take the
 * same options and print the same JSON, read here with jansson.
 *
 *   bench_model --models a.gguf,b.gguf [--threads 2] [--prompt-tokens 512]
 *               [--prefill-reps 3] [--decode-steps 32] [--batches 1,8,32]
 *               [--bandwidth-mib 1024] [--peer build-bench/bin/llama_cpp_peer]
 *               [--node node] [--rounds 1] [--json out.json] [--device cpu|cuda|NAME]
 *               [--plugin-path DIR]
 * --device runs cinfer's side on that compute backend (as engine.device chooses it;
 * plugins from --plugin-path, then the default places); on a device the paired floor
 * (host reads) is not measured, and the floor column still uses the host's bandwidth:
 * scripts/gpu-check sets decode against the device's own peak.
 * The node peer's node_modules folder comes from CINFER_BENCH_NODE_MODULES. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/error.h"
#include "backend/backend_select.h"
#include "cinfer/plugins.h"
#include "../kernels/bench/stream_read.h" /* the plain read the floors use, as bench_matmul's */
#include "kernels.h" /* cinfer_kernel_argmax: the greedy pick, as the sampler makes it */
#include "model/model.h"
#include "model/runtime.h"

extern char **environ;

#define MAX_MODELS 8
#define MAX_BATCHES 8
#define MAX_GREEDY 64
#define WARM_STEPS 2
#define FIRST_REGULAR_TOKEN 259 /* past <unk> <s> </s> and the 256 byte tokens */

struct options {
    const char *models[MAX_MODELS];
    int n_models;
    int n_threads;
    int prompt_tokens;
    int prefill_reps;
    int decode_steps;
    int batches[MAX_BATCHES];
    int n_batches;
    size_t bandwidth_bytes;
    const char *peer_script; /* NULL: cinfer only */
    const char *node;
    const char *json_path;
    uint32_t seed;
    int rounds; /* each side measured this many times, alternating; best figures kept */
    const char *device;      /* NULL: the built-in CPU backend */
    const char *plugin_path; /* where --device's plugin is looked for first */
};

/* What one side measured on one model. */
struct side_result {
    int ok;
    char error[CINFER_ERROR_MESSAGE_BYTES + 64];
    double prefill_tok_s;
    double decode_tok_s[MAX_BATCHES];
    double peak_rss_bytes;
    double baseline_rss_bytes; /* the peer process before it loads anything (node's runtime for a .mjs peer) */
    char build[256];           /* the peer's llama_cpp_build: which llama.cpp, built how */
    double paired_floor_fraction; /* cinfer only: median of plain-read time / decode step time */
    int32_t greedy[MAX_GREEDY];
    int n_greedy;
};

/* What only cinfer's side can tell about the model. */
#define KV_TYPES 4
struct model_facts {
    double weight_bytes_per_token; /* bytes a batch-1 decode step must read */
    char dtype[16];
    int vocab_size;
    char types[160];              /* the matrices' types and counts: "q5_0 180, q6_K 14, ..." */
    long kv_tokens_1gib[KV_TYPES]; /* tokens a 1 GiB KV budget holds in f32, f16, bf16, q8_0 (-1: not usable) */
    double kv_values_per_token;   /* K and V values of one token in every layer */
};
static const char *const kv_type_names[KV_TYPES] = {"f32", "f16", "bf16", "q8_0"};
static const enum cinfer_kv_cache_dtype kv_types[KV_TYPES] = {CINFER_KV_CACHE_DTYPE_F32, CINFER_KV_CACHE_DTYPE_F16,
                                                             CINFER_KV_CACHE_DTYPE_BF16, CINFER_KV_CACHE_DTYPE_Q8_0};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *xs, int n)
{
    qsort(xs, (size_t)n, sizeof *xs, compare_doubles);
    return xs[n / 2];
}

/* ---- read bandwidth ------------------------------------------------------- */

/* n_threads threads that each stream through their slice of one buffer, one pass per
 * reader_pass(); created once, so a pass costs no thread start. */
struct reader {
    uint8_t *buf;
    size_t bytes, slice;
    int n_threads, stop;
    pthread_barrier_t start;
    pthread_t threads[64];
    uint64_t checksums[64]; /* keeps the loads alive */
    double began[64], ended[64]; /* of each thread's last pass */
    uint64_t expected;      /* the sum of the buffer's 64-bit words, mod 2^64 */
    int passes;
    struct reader_arg {
        struct reader *r;
        int t;
    } args[64]; /* each thread's start argument */
};

static void *reader_main(void *p)
{
    struct reader_arg *a = p;
    struct reader *r = a->r;
    const uint8_t *begin = r->buf + (size_t)a->t * r->slice;
    for (;;) {
        pthread_barrier_wait(&r->start);
        if (r->stop)
            return NULL;
        r->began[a->t] = now_s();
        r->checksums[a->t] += stream_read(begin, r->slice);
        r->ended[a->t] = now_s();
        pthread_barrier_wait(&r->start);
    }
}

/* A buffer of about `bytes` (whole pages per thread), filled. */
static int reader_open(struct reader *r, size_t bytes, int n_threads, struct cinfer_error *err)
{
    memset(r, 0, sizeof *r);
    r->n_threads = n_threads;
    r->slice = (bytes / (size_t)n_threads + 4095) / 4096 * 4096;
    r->bytes = r->slice * (size_t)n_threads;
    r->buf = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r->buf == MAP_FAILED)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "read bandwidth: mmap of %zu bytes failed: %s", r->bytes,
                                strerror(errno));
#ifdef MADV_HUGEPAGE
    /* In huge pages, as the loader maps the weights (core/util/mmap_file.c): the plain
     * read is then the fastest this machine does, not one slowed by 4 KiB page walks
     * (2 threads, 512 MiB, the same minute: 26.6-29.9 GB/s in 4 KiB pages against
     * 31.0-31.7 in huge ones). */
    madvise(r->buf, r->bytes, MADV_HUGEPAGE);
#endif
    /* Real pages, and no two alike (pages of equal bytes can be merged by the host's
     * same-page merging): every word differs. Their sum is the checksum. */
    uint64_t *words = (uint64_t *)r->buf;
    r->expected = 0;
    for (size_t i = 0; i < r->bytes / 8; i++) {
        words[i] = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        r->expected += words[i];
    }
    pthread_barrier_init(&r->start, NULL, (unsigned)n_threads + 1);
    for (int t = 0; t < n_threads; t++) {
        r->args[t] = (struct reader_arg){r, t};
        pthread_create(&r->threads[t], NULL, reader_main, &r->args[t]);
    }
    return 0;
}

/* One pass of every thread over its slice; returns its wall time in seconds, from the
 * first thread's start to the last one's end as the readers clock them. The caller's
 * clock would not do: with as many readers as cores, it is released from the barrier
 * but may get a core only when a reader is done, and the pass then looks shorter than
 * it was (passes of 143 MB "took" 0.04 ms that way, and a read rate of 93 GB/s came
 * out of 2 cores). */
static double reader_pass(struct reader *r)
{
    pthread_barrier_wait(&r->start);
    pthread_barrier_wait(&r->start);
    r->passes++;
    double first = r->began[0], last = r->ended[0];
    for (int t = 1; t < r->n_threads; t++) {
        first = r->began[t] < first ? r->began[t] : first;
        last = r->ended[t] > last ? r->ended[t] : last;
    }
    return last - first;
}

static int reader_close(struct reader *r, struct cinfer_error *err)
{
    r->stop = 1;
    pthread_barrier_wait(&r->start);
    uint64_t checksum = 0;
    for (int t = 0; t < r->n_threads; t++) {
        pthread_join(r->threads[t], NULL);
        checksum += r->checksums[t];
    }
    pthread_barrier_destroy(&r->start);
    munmap(r->buf, r->bytes);
    /* the sum proves each slice was read in full, every pass */
    uint64_t expected = r->expected * (uint64_t)r->passes;
    if (checksum != expected)
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "read bandwidth: checksum %llu does not match the buffer",
                                (unsigned long long)checksum);
    return 0;
}

/* Best of several passes in bytes/s, all threads reading their own slice at once. */
static int measure_read_bandwidth(size_t bytes, int n_threads, double *best_bytes_s, struct cinfer_error *err)
{
    enum { PASSES = 8 };
    struct reader r;
    if (reader_open(&r, bytes, n_threads, err) < 0)
        return -1;
    double best = 0;
    for (int p = 0; p < PASSES; p++) {
        double rate = (double)r.bytes / reader_pass(&r);
        if (rate > best)
            best = rate;
    }
    if (reader_close(&r, err) < 0)
        return -1;
    *best_bytes_s = best;
    return 0;
}

/* ---- prompt tokens (the same stream as the peer's) ------------------------ */

static void prompt_tokens(int32_t *out, int n, uint32_t seed, int vocab)
{
    uint32_t x = seed ? seed : 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out[i] = FIRST_REGULAR_TOKEN + (int32_t)(x % (uint32_t)(vocab - FIRST_REGULAR_TOKEN));
    }
}

/* ---- cinfer's side ---------------------------------------------------------- */

static double weight_bytes(const struct cinfer_weight *w)
{
    return w->data ? (double)w->rows * (double)w->row_bytes : 0.0;
}

/* A decode step reads every layer weight, the final norm, the whole LM head and one
 * embedding row (the LM head is the embedding matrix when tied, read in full there);
 * of a sparse layer (mixture of experts) the router and the n_experts_used experts a
 * token runs, and the shared expert with its gate where the model has one (Qwen2-MoE):
 * the floor counts the active weights only. */
static double decode_bytes_per_token(const struct cinfer_model *m)
{
    double sum = weight_bytes(&m->output_norm) + weight_bytes(&m->lm_head) + (double)m->tok_embeddings.row_bytes;
    for (int l = 0; l < m->config.num_layers; l++) {
        const struct cinfer_layer_weights *L = &m->layers[l];
        const struct cinfer_weight *all[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq,
                                             &L->bk, &L->bv, &L->q_norm, &L->k_norm, &L->ffn_norm,
                                             &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            sum += weight_bytes(all[i]);
        if (L->experts)
            sum += weight_bytes(&L->router) +
                   m->config.n_experts_used * (weight_bytes(&L->experts[0].gate) + weight_bytes(&L->experts[0].up) +
                                               weight_bytes(&L->experts[0].down));
        sum += weight_bytes(&L->shared_expert.gate) + weight_bytes(&L->shared_expert.up) +
               weight_bytes(&L->shared_expert.down) + weight_bytes(&L->shared_expert_gate);
    }
    return sum;
}

/* A sequence's pages, grown as its length grows. */
struct seq_pages {
    int32_t *table; /* (max_pages) */
    int n_pages;
};

static int pages_cover(struct cinfer_runtime *rt, struct seq_pages *s, int n_positions, struct cinfer_error *err)
{
    int page_tokens = cinfer_runtime_kv_page_tokens(rt);
    while (s->n_pages * page_tokens < n_positions) {
        int rc = cinfer_runtime_kv_page_alloc(rt, &s->table[s->n_pages]);
        if (rc < 0)
            return cinfer_error_set(err, rc, "KV cache: no free page for position %d (%d pages in all)",
                                    n_positions - 1, cinfer_runtime_kv_pages_total(rt));
        s->n_pages++;
    }
    return 0;
}

static void pages_release(struct cinfer_runtime *rt, struct seq_pages *s)
{
    for (int i = 0; i < s->n_pages; i++)
        cinfer_runtime_kv_page_unref(rt, s->table[i]);
    s->n_pages = 0;
}

static int cinfer_prefill(struct cinfer_runtime *rt, const struct options *o, const int32_t *prompt, float *logits,
                          struct seq_pages *pages, struct side_result *r, struct cinfer_error *err)
{
    double runs[64];
    for (int rep = 0; rep <= o->prefill_reps; rep++) { /* rep 0 warms up */
        int rc = pages_cover(rt, pages, o->prompt_tokens, err);
        if (rc < 0)
            return rc;
        struct cinfer_seq_chunk chunk = {.tokens = prompt, .n_tokens = o->prompt_tokens, .start_pos = 0,
                                         .page_table = pages->table, .n_pages = pages->n_pages,
                                         .logits = CINFER_LOGITS_LAST, .logits_out = logits};
        double t0 = now_s();
        rc = cinfer_runtime_forward(rt, &chunk, 1, err);
        double dt = now_s() - t0;
        pages_release(rt, pages);
        if (rc < 0)
            return cinfer_error_prefix(err, "prefill of %d tokens", o->prompt_tokens);
        if (rep > 0)
            runs[rep - 1] = o->prompt_tokens / dt;
    }
    r->prefill_tok_s = median(runs, o->prefill_reps);
    return 0;
}

/* B sequences, sequence s starting from token first_token + s at position 0, each
 * adding its own greedy token per step; returns tok/s over the timed steps. */
static int cinfer_decode(struct cinfer_runtime *rt, const struct options *o, int batch, int32_t first_token,
                         struct seq_pages *pages, struct side_result *r, double *tok_s, struct cinfer_error *err)
{
    int32_t next[64];                /* (batch) the token each sequence adds this step */
    struct cinfer_seq_chunk chunks[64]; /* (batch) */
    struct cinfer_logits_top tops[64];  /* (batch) each row's greedy token, as serving asks for it */
    for (int s = 0; s < batch; s++)
        next[s] = first_token + s;
    int rc = 0;
    double t0 = 0;
    int total_steps = WARM_STEPS + o->decode_steps;
    for (int step = 0; step < total_steps && rc == 0; step++) {
        if (step == WARM_STEPS)
            t0 = now_s();
        for (int s = 0; s < batch && rc == 0; s++) {
            rc = pages_cover(rt, &pages[s], step + 1, err);
            chunks[s] = (struct cinfer_seq_chunk){.tokens = &next[s], .n_tokens = 1, .start_pos = step,
                                                  .page_table = pages[s].table, .n_pages = pages[s].n_pages,
                                                  .logits = CINFER_LOGITS_LAST, .top_k = 1, .top_out = &tops[s]};
        }
        if (rc == 0)
            rc = cinfer_runtime_forward(rt, chunks, batch, err);
        for (int s = 0; s < batch && rc == 0; s++)
            next[s] = tops[s].n > 0 ? tops[s].ids[0] : 0;
        if (rc == 0 && batch == 1 && r->n_greedy < MAX_GREEDY)
            r->greedy[r->n_greedy++] = next[0];
    }
    double dt = now_s() - t0;
    for (int s = 0; s < batch; s++)
        pages_release(rt, &pages[s]);
    if (rc < 0)
        return cinfer_error_prefix(err, "decode at batch %d", batch);
    *tok_s = (double)batch * o->decode_steps / dt;
    return 0;
}

/* Batch-1 decode against its floor at the same moment. This machine's read bandwidth
 * moves by 2x within a minute with the other guests' load, so a floor measured before
 * and after the runs compares different moments. Here each decode step is paired with
 * a plain read, just before it, of as many bytes as the step's weights, from a buffer of
 * its own (so the read leaves none of the weights in cache); the fraction of a pair is
 * read time / step time, and the median over the steps is kept. */
static int cinfer_paired_floor(struct cinfer_runtime *rt, const struct options *o, double weight_bytes,
                               int32_t first_token, struct seq_pages *pages, double *fraction,
                               struct cinfer_error *err)
{
    struct reader rd;
    if (reader_open(&rd, (size_t)weight_bytes, o->n_threads, err) < 0)
        return -1;
    double ratios[MAX_GREEDY];
    int32_t next = first_token;
    int rc = 0, n = 0;
    for (int step = 0; step < WARM_STEPS + o->decode_steps && rc == 0; step++) {
        rc = pages_cover(rt, pages, step + 1, err);
        struct cinfer_logits_top top;
        struct cinfer_seq_chunk chunk = {.tokens = &next, .n_tokens = 1, .start_pos = step,
                                         .page_table = pages->table, .n_pages = pages->n_pages,
                                         .logits = CINFER_LOGITS_LAST, .top_k = 1, .top_out = &top};
        double read_s = reader_pass(&rd);
        double t0 = now_s();
        if (rc == 0)
            rc = cinfer_runtime_forward(rt, &chunk, 1, err);
        double step_s = now_s() - t0;
        next = top.n > 0 ? top.ids[0] : 0;
        if (step >= WARM_STEPS)
            ratios[n++] = read_s / step_s;
    }
    pages_release(rt, pages);
    if (reader_close(&rd, rc == 0 ? err : NULL) < 0 && rc == 0)
        rc = -1;
    if (rc < 0)
        return cinfer_error_prefix(err, "decode paired with plain reads");
    *fraction = median(ratios, n);
    return 0;
}

/* "q5_0 180, q4_K 16, ...": the types of the matrix weights as loaded. */
static void type_census(const struct cinfer_model *m, char *out, size_t cap)
{
    int counts[32] = {0};
    const struct cinfer_weight *lm = m->lm_head.data != m->tok_embeddings.data ? &m->lm_head : NULL;
    counts[m->tok_embeddings.dtype & 31]++;
    if (lm)
        counts[lm->dtype & 31]++;
    for (int l = 0; l < m->config.num_layers; l++) {
        const struct cinfer_layer_weights *L = &m->layers[l];
        const struct cinfer_weight *all[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < 7; i++)
            counts[all[i]->dtype & 31]++;
    }
    size_t used = 0;
    out[0] = 0;
    for (int best = 0; best >= 0;) { /* most numerous first */
        best = -1;
        for (int t = 0; t < 32; t++)
            if (counts[t] && (best < 0 || counts[t] > counts[best]))
                best = t;
        if (best >= 0 && used < cap) {
            used += (size_t)snprintf(out + used, cap - used, "%s%s %d", used ? ", " : "",
                                     cinfer_dtype_name((enum cinfer_dtype)best), counts[best]);
            counts[best] = 0;
        }
    }
}

/* Tokens each KV type's 1 GiB budget holds, from runtimes made with that budget. */
static void kv_capacity(const struct cinfer_model *m, const struct options *o, struct model_facts *f)
{
    for (int t = 0; t < KV_TYPES; t++) {
        struct cinfer_runtime_options ro = {.kv_cache_bytes = (size_t)1 << 30, .kv_page_tokens = 16,
                                            .n_threads = 1, .max_batch_tokens = 16, .kv_dtype = kv_types[t],
                                            .keep_stored_weights = 1};
        struct cinfer_runtime *rt = NULL;
        struct cinfer_error err = {0};
        f->kv_tokens_1gib[t] = -1;
        if (cinfer_runtime_create(m, &ro, &rt, &err) == 0)
            f->kv_tokens_1gib[t] = (long)cinfer_runtime_kv_pages_total(rt) * cinfer_runtime_kv_page_tokens(rt);
        cinfer_runtime_destroy(&rt);
    }
    (void)o;
    f->kv_values_per_token = 2.0 * m->config.num_layers * m->config.num_kv_heads * m->config.head_dim;
}

static int cinfer_measure(const struct options *o, const char *path, struct side_result *r, struct model_facts *f,
                          struct cinfer_error *err)
{
    struct cinfer_model *m = NULL;
    struct cinfer_runtime *rt = NULL;
    struct cinfer_plugin *backend = NULL;
    struct cinfer_model_load_options lo = {.show_progress = 0};
    int rc = o->device ? cinfer_backend_select(o->device, o->plugin_path, &backend, err) : 0;
    if (rc < 0)
        return rc;
    rc = cinfer_model_load(path, &lo, &m, err);
    if (rc < 0) {
        cinfer_plugin_close(&backend);
        return rc;
    }
    const struct cinfer_model_config *c = &m->config;
    f->weight_bytes_per_token = decode_bytes_per_token(m);
    f->vocab_size = c->vocab_size;
    snprintf(f->dtype, sizeof f->dtype, "%s", cinfer_dtype_name(m->layers[0].wq.dtype));
    type_census(m, f->types, sizeof f->types);
    kv_capacity(m, o, f);

    int max_batch = 1;
    for (int i = 0; i < o->n_batches; i++)
        max_batch = o->batches[i] > max_batch ? o->batches[i] : max_batch;
    /* KV budget: the prompt once, or every decoding sequence at full length, in f32
     * pages of 16 tokens, plus one spare page per sequence. */
    const int page_tokens = 16;
    int decode_len = WARM_STEPS + o->decode_steps;
    int pages_prefill = (o->prompt_tokens + page_tokens - 1) / page_tokens + 1;
    int pages_decode = max_batch * ((decode_len + page_tokens - 1) / page_tokens + 1);
    int pages_needed = pages_prefill > pages_decode ? pages_prefill : pages_decode;
    size_t kv_token_bytes = 2 * (size_t)c->num_layers * (size_t)c->num_kv_heads * (size_t)c->head_dim * sizeof(float);
    struct cinfer_runtime_options ro = {
        .kv_cache_bytes = (size_t)pages_needed * page_tokens * kv_token_bytes,
        .kv_page_tokens = page_tokens,
        .n_threads = o->n_threads,
        .max_batch_tokens = o->prompt_tokens > max_batch ? o->prompt_tokens : max_batch,
        .backend = backend ? cinfer_plugin_vtable(backend) : NULL,
    };

    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)o->prompt_tokens); /* (prompt_tokens) */
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size); /* (vocab) the prefill's last row */
    struct seq_pages pages[64];
    int max_pages = pages_needed + 1;
    for (int s = 0; s < max_batch; s++)
        pages[s] = (struct seq_pages){.table = malloc(sizeof(int32_t) * (size_t)max_pages), .n_pages = 0};
    if (!prompt || !logits) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "bench: out of memory for the prompt and logits");
        goto out;
    }
    prompt_tokens(prompt, o->prompt_tokens, o->seed, c->vocab_size);

    rc = cinfer_runtime_create(m, &ro, &rt, err);
    if (rc < 0)
        goto out;
    rc = cinfer_prefill(rt, o, prompt, logits, &pages[0], r, err);
    for (int i = 0; i < o->n_batches && rc == 0; i++)
        rc = cinfer_decode(rt, o, o->batches[i], prompt[0], pages, r, &r->decode_tok_s[i], err);
    /* the peak so far is the runtime's; the paired reads' buffer comes after */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->peak_rss_bytes = (double)ru.ru_maxrss * 1024.0;
    if (rc == 0 && !backend) /* host reads: the CPU's floor only */
        rc = cinfer_paired_floor(rt, o, f->weight_bytes_per_token, prompt[0], pages, &r->paired_floor_fraction,
                                 err);
out:
    cinfer_runtime_destroy(&rt);
    for (int s = 0; s < max_batch; s++)
        free(pages[s].table);
    free(prompt);
    free(logits);
    cinfer_model_free(&m);
    cinfer_plugin_close(&backend);
    if (rc == 0)
        r->ok = 1;
    return rc;
}

/* Runs cinfer's side in a child process so its peak RSS is its own; the result comes
 * back through a pipe. */
static void cinfer_side(const struct options *o, const char *path, struct side_result *r, struct model_facts *f)
{
    int fds[2];
    memset(r, 0, sizeof *r);
    if (pipe(fds) != 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        struct cinfer_error err = {0};
        struct side_result mine = {0};
        struct model_facts facts = {0};
        if (cinfer_measure(o, path, &mine, &facts, &err) < 0)
            snprintf(mine.error, sizeof mine.error, "%s", err.message);
        if (write(fds[1], &mine, sizeof mine) != (ssize_t)sizeof mine ||
            write(fds[1], &facts, sizeof facts) != (ssize_t)sizeof facts)
            _exit(2);
        _exit(0);
    }
    close(fds[1]);
    if (pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(fds[0]);
        return;
    }
    int got = read(fds[0], r, sizeof *r) == (ssize_t)sizeof *r && read(fds[0], f, sizeof *f) == (ssize_t)sizeof *f;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!got) {
        memset(r, 0, sizeof *r);
        snprintf(r->error, sizeof r->error, "the measuring child died (status 0x%x) before it answered", status);
    }
}

/* ---- llama.cpp's side -------------------------------------------------------- */

static int parse_peer_json(const char *text, const struct options *o, struct side_result *r)
{
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root) {
        snprintf(r->error, sizeof r->error, "peer answer is not JSON (line %d: %s): %.200s", jerr.line, jerr.text,
                 text);
        return -1;
    }
    json_t *decode = json_object_get(root, "decode");
    json_t *greedy = json_object_get(root, "greedy_tokens");
    r->prefill_tok_s = json_number_value(json_object_get(root, "prefill_tok_s"));
    r->baseline_rss_bytes = json_number_value(json_object_get(root, "baseline_rss_bytes"));
    r->peak_rss_bytes = json_number_value(json_object_get(root, "peak_rss_bytes"));
    const char *build = json_string_value(json_object_get(root, "llama_cpp_build"));
    snprintf(r->build, sizeof r->build, "%s", build ? build : "unknown");
    if (!json_is_array(decode) || (int)json_array_size(decode) != o->n_batches || !json_is_array(greedy)) {
        snprintf(r->error, sizeof r->error, "peer answer lacks 'decode' with %d entries or 'greedy_tokens': %.200s",
                 o->n_batches, text);
        json_decref(root);
        return -1;
    }
    for (int i = 0; i < o->n_batches; i++)
        r->decode_tok_s[i] = json_number_value(json_object_get(json_array_get(decode, (size_t)i), "tok_s"));
    for (size_t i = 0; i < json_array_size(greedy) && r->n_greedy < MAX_GREEDY; i++)
        r->greedy[r->n_greedy++] = (int32_t)json_integer_value(json_array_get(greedy, i));
    json_decref(root);
    r->ok = 1;
    return 0;
}

static void join_ints(char *out, size_t cap, const int *xs, int n)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%d", i ? "," : "", xs[i]);
}

/* A peer ending in .mjs or .js is a node script; anything else runs as it is. */
static int peer_is_script(const char *peer)
{
    size_t n = strlen(peer);
    return (n > 4 && !strcmp(peer + n - 4, ".mjs")) || (n > 3 && !strcmp(peer + n - 3, ".js"));
}

static void peer_side(const struct options *o, const char *path, struct side_result *r)
{
    memset(r, 0, sizeof *r);
    char threads[16], prompt[16], reps[16], steps[16], seed[16], batches[128];
    snprintf(threads, sizeof threads, "%d", o->n_threads);
    snprintf(prompt, sizeof prompt, "%d", o->prompt_tokens);
    snprintf(reps, sizeof reps, "%d", o->prefill_reps);
    snprintf(steps, sizeof steps, "%d", o->decode_steps);
    snprintf(seed, sizeof seed, "%u", o->seed);
    join_ints(batches, sizeof batches, o->batches, o->n_batches);
    char *argv[] = {(char *)o->node, (char *)o->peer_script, "--model", (char *)path, "--threads", threads,
                    "--prompt-tokens", prompt, "--prefill-reps", reps, "--decode-steps", steps,
                    "--batches", batches, "--seed", seed, NULL};
    char **args = peer_is_script(o->peer_script) ? argv : argv + 1; /* (node) peer options... */
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    int rc = posix_spawnp(&pid, args[0], &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        snprintf(r->error, sizeof r->error, "could not start '%s': %s", args[0], strerror(rc));
        close(fds[0]);
        return;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    ssize_t n;
    while (text && (n = read(fds[0], text + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    close(fds[0]);
    int status = 0;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    if (!text) {
        snprintf(r->error, sizeof r->error, "out of memory reading the peer's answer");
        return;
    }
    text[len] = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(r->error, sizeof r->error, "%s%s%s failed (status 0x%x); see its messages above",
                 args == argv ? o->node : "", args == argv ? " " : "", o->peer_script, status);
    /* The peer's own peak (its VmHWM): wait4's ru_maxrss of a child started by
     * posix_spawn (vfork) carries this process's high-water mark, the bandwidth
     * buffer's 1 GiB included, so every peer seemed to peak at about 1026 MiB. */
    else if (parse_peer_json(text, o, r) == 0 && !(r->peak_rss_bytes > 0))
        r->peak_rss_bytes = (double)ru.ru_maxrss * 1024.0;
    free(text);
}

/* Keeps the best of two measurements of the same side (other load only slows). */
static void keep_best(struct side_result *best, const struct side_result *r, int n_batches)
{
    if (!r->ok)
        return;
    if (!best->ok) {
        *best = *r;
        return;
    }
    if (r->prefill_tok_s > best->prefill_tok_s)
        best->prefill_tok_s = r->prefill_tok_s;
    for (int i = 0; i < n_batches; i++)
        if (r->decode_tok_s[i] > best->decode_tok_s[i])
            best->decode_tok_s[i] = r->decode_tok_s[i];
    if (r->peak_rss_bytes > best->peak_rss_bytes)
        best->peak_rss_bytes = r->peak_rss_bytes;
    if (r->paired_floor_fraction > best->paired_floor_fraction)
        best->paired_floor_fraction = r->paired_floor_fraction;
}

/* ---- report ------------------------------------------------------------------ */

static int greedy_agreement(const struct side_result *a, const struct side_result *b)
{
    int n = a->n_greedy < b->n_greedy ? a->n_greedy : b->n_greedy, same = 0;
    while (same < n && a->greedy[same] == b->greedy[same])
        same++;
    return same;
}

static void print_row(const struct options *o, const char *label, const char *side, const struct side_result *r,
                      double floor_tok_s)
{
    if (!r->ok) {
        printf("| %s | %s | failed: %s |\n", label, side, r->error);
        return;
    }
    printf("| %s | %s | %.0f |", label, side, r->prefill_tok_s);
    for (int i = 0; i < o->n_batches; i++)
        printf(" %.1f |", r->decode_tok_s[i]);
    printf(" %.0f%% |", o->batches[0] == 1 ? 100.0 * r->decode_tok_s[0] / floor_tok_s : 0.0);
    if (r->paired_floor_fraction > 0)
        printf(" %.0f%% |", 100.0 * r->paired_floor_fraction);
    else
        printf(" — |");
    printf(" %.0f |\n", r->peak_rss_bytes / 1048576.0);
}

static void print_ratio_row(const struct options *o, const char *label, const struct side_result *a,
                            const struct side_result *b)
{
    if (!a->ok || !b->ok)
        return;
    printf("| %s | **ours/llama.cpp** | **%.2f×** |", label, a->prefill_tok_s / b->prefill_tok_s);
    for (int i = 0; i < o->n_batches; i++)
        printf(" **%.2f×** |", a->decode_tok_s[i] / b->decode_tok_s[i]);
    printf(" | | %.2f× |\n", a->peak_rss_bytes / b->peak_rss_bytes);
}

static json_t *side_json(const struct options *o, const struct side_result *r)
{
    if (!r->ok)
        return json_pack("{s:s}", "error", r->error);
    json_t *decode = json_array();
    for (int i = 0; i < o->n_batches; i++)
        json_array_append_new(decode, json_pack("{s:i,s:f}", "batch", o->batches[i], "tok_s", r->decode_tok_s[i]));
    return json_pack("{s:f,s:o,s:f,s:f}", "prefill_tok_s", r->prefill_tok_s, "decode", decode, "peak_rss_bytes",
                     r->peak_rss_bytes, "b1_paired_floor_fraction", r->paired_floor_fraction);
}

/* ---- options ----------------------------------------------------------------- */

static int parse_int_list(const char *s, int *out, int cap, const char *what)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 1 || v > 64 || n == cap) {
            fprintf(stderr, "bench_model: %s: expected up to %d numbers in 1..64 separated by commas, found '%s'\n",
                    what, cap, s);
            exit(2);
        }
        out[n++] = (int)v;
    }
    free(copy);
    return n;
}

static int parse_positive(const char *flag, const char *value, int max)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || v < 1 || v > max) {
        fprintf(stderr, "bench_model: %s: expected a number in 1..%d, found '%s'\n", flag, max, value);
        exit(2);
    }
    return (int)v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.n_threads = 2, .prompt_tokens = 512, .prefill_reps = 3, .decode_steps = 32,
                          .batches = {1, 8, 32}, .n_batches = 3, .bandwidth_bytes = (size_t)1024 << 20,
                          .node = "node", .seed = 1, .rounds = 1};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) {
            fprintf(stderr, "bench_model: %s needs a value\n", flag);
            exit(2);
        }
        i++;
        if (!strcmp(flag, "--models")) {
            char *copy = strdup(value), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok && o->n_models < MAX_MODELS; tok = strtok_r(NULL, ",", &save))
                o->models[o->n_models++] = tok; /* copy lives until exit */
        } else if (!strcmp(flag, "--threads")) {
            o->n_threads = parse_positive(flag, value, 64);
        } else if (!strcmp(flag, "--prompt-tokens")) {
            o->prompt_tokens = parse_positive(flag, value, 8192);
        } else if (!strcmp(flag, "--prefill-reps")) {
            o->prefill_reps = parse_positive(flag, value, 63);
        } else if (!strcmp(flag, "--decode-steps")) {
            o->decode_steps = parse_positive(flag, value, MAX_GREEDY - WARM_STEPS);
        } else if (!strcmp(flag, "--batches")) {
            o->n_batches = parse_int_list(value, o->batches, MAX_BATCHES, flag);
        } else if (!strcmp(flag, "--bandwidth-mib")) {
            o->bandwidth_bytes = (size_t)parse_positive(flag, value, 1 << 16) << 20;
        } else if (!strcmp(flag, "--peer")) {
            o->peer_script = value;
        } else if (!strcmp(flag, "--node")) {
            o->node = value;
        } else if (!strcmp(flag, "--json")) {
            o->json_path = value;
        } else if (!strcmp(flag, "--rounds")) {
            o->rounds = parse_positive(flag, value, 20);
        } else if (!strcmp(flag, "--device")) {
            o->device = value;
        } else if (!strcmp(flag, "--plugin-path")) {
            o->plugin_path = value;
        } else if (!strcmp(flag, "--seed")) {
            o->seed = (uint32_t)parse_positive(flag, value, 1 << 30);
        } else {
            fprintf(stderr, "bench_model: unknown option %s (see the comment at the top of bench/bench_model.c)\n",
                    flag);
            exit(2);
        }
    }
    if (o->n_models == 0) {
        fprintf(stderr, "bench_model: --models FILE[,FILE...] is required\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    struct options o;
    parse_options(argc, argv, &o);
    struct cinfer_error err = {0};
    double bw_start = 0, bw_end = 0;
    if (measure_read_bandwidth(o.bandwidth_bytes, o.n_threads, &bw_start, &err) < 0) {
        fprintf(stderr, "bench_model: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "read bandwidth, %d threads over %zu MiB: %.1f GB/s\n", o.n_threads, o.bandwidth_bytes >> 20,
            bw_start / 1e9);

    static struct side_result ours[MAX_MODELS], peer[MAX_MODELS];
    struct model_facts facts[MAX_MODELS];
    memset(facts, 0, sizeof facts);
    for (int i = 0; i < o.n_models; i++) {
        snprintf(ours[i].error, sizeof ours[i].error, "no round succeeded");
        snprintf(peer[i].error, sizeof peer[i].error, o.peer_script ? "no round succeeded" : "not run (no --peer)");
    }
    for (int round = 0; round < o.rounds; round++) {
        for (int i = 0; i < o.n_models; i++) {
            struct side_result r;
            fprintf(stderr, "round %d/%d, %s: cinfer...\n", round + 1, o.rounds, o.models[i]);
            cinfer_side(&o, o.models[i], &r, &facts[i]);
            if (!r.ok)
                fprintf(stderr, "%s: cinfer failed: %s\n", o.models[i], r.error);
            keep_best(&ours[i], &r, o.n_batches);
            if (!o.peer_script)
                continue;
            fprintf(stderr, "round %d/%d, %s: llama.cpp...\n", round + 1, o.rounds, o.models[i]);
            peer_side(&o, o.models[i], &r);
            if (!r.ok)
                fprintf(stderr, "%s: llama.cpp failed: %s\n", o.models[i], r.error);
            keep_best(&peer[i], &r, o.n_batches);
        }
    }
    if (measure_read_bandwidth(o.bandwidth_bytes, o.n_threads, &bw_end, &err) < 0) {
        fprintf(stderr, "bench_model: %s\n", err.message);
        return 1;
    }
    double bw = bw_start > bw_end ? bw_start : bw_end;

    printf("\nthreads %d; read bandwidth %.1f GB/s before, %.1f GB/s after (floor uses %.1f); "
           "prefill %d tokens (median of %d), decode %d steps after %d warm-up; best of %d round(s)\n\n",
           o.n_threads, bw_start / 1e9, bw_end / 1e9, bw / 1e9, o.prompt_tokens, o.prefill_reps, o.decode_steps,
           WARM_STEPS, o.rounds);
    printf("| model | side | prefill tok/s |");
    for (int b = 0; b < o.n_batches; b++)
        printf(" decode b%d tok/s |", o.batches[b]);
    printf(" b1 / floor | b1 / paired floor | peak RSS MiB |\n|---|---|---:|");
    for (int b = 0; b < o.n_batches; b++)
        printf("---:|");
    printf("---:|---:|---:|\n");
    json_t *jmodels = json_array();
    for (int i = 0; i < o.n_models; i++) {
        const char *base = strrchr(o.models[i], '/') ? strrchr(o.models[i], '/') + 1 : o.models[i];
        double floor_tok_s = facts[i].weight_bytes_per_token > 0 ? bw / facts[i].weight_bytes_per_token : 0;
        char label[256];
        snprintf(label, sizeof label, "%s: %.1f MB read per token, floor %.1f tok/s", base,
                 facts[i].weight_bytes_per_token / 1e6, floor_tok_s);
        print_row(&o, label, "cinfer", &ours[i], floor_tok_s);
        if (o.peer_script) {
            print_row(&o, "", "llama.cpp", &peer[i], floor_tok_s);
            print_ratio_row(&o, "", &ours[i], &peer[i]);
        }
        json_t *kv = json_object();
        for (int t = 0; t < KV_TYPES; t++)
            json_object_set_new(kv, kv_type_names[t], json_integer(facts[i].kv_tokens_1gib[t]));
        json_array_append_new(jmodels, json_pack("{s:s,s:s,s:f,s:f,s:o,s:o,s:i,s:o}", "model", o.models[i], "matrices",
                                                 facts[i].types, "weight_bytes_per_token",
                                                 facts[i].weight_bytes_per_token, "floor_tok_s", floor_tok_s, "cinfer",
                                                 side_json(&o, &ours[i]), "llama_cpp", side_json(&o, &peer[i]),
                                                 "greedy_tokens_agreeing", greedy_agreement(&ours[i], &peer[i]),
                                                 "kv_tokens_per_gib", kv));
    }
    printf("\n");
    for (int i = 0; i < o.n_models; i++)
        if (facts[i].types[0])
            printf("%s: matrices %s\n", o.models[i], facts[i].types);
    printf("\nKV cache: tokens 1 GiB holds (cinfer: pages of 16 tokens of a runtime made with that budget; "
           "llama.cpp: 1 GiB / its bytes a token)\n\n| model | cinfer f32 | cinfer f16 | cinfer bf16 | cinfer q8_0 | "
           "llama.cpp f16 | llama.cpp q8_0 |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < o.n_models; i++) {
        if (!facts[i].types[0])
            continue;
        const char *base = strrchr(o.models[i], '/') ? strrchr(o.models[i], '/') + 1 : o.models[i];
        printf("| %s |", base);
        for (int t = 0; t < KV_TYPES; t++)
            printf(" %ld |", facts[i].kv_tokens_1gib[t]);
        double per_token = facts[i].kv_values_per_token;
        double gib = (double)(1 << 30);
        printf(" %.0f | %.0f |\n", gib / (per_token * 2.0), gib / (per_token * 34.0 / 32.0));
    }
    printf("\n");
    for (int i = 0; i < o.n_models; i++)
        if (ours[i].ok && peer[i].ok)
            printf("%s: greedy batch-1 tokens agree for the first %d of %d (cinfer vs llama.cpp)\n", o.models[i],
                   greedy_agreement(&ours[i], &peer[i]), ours[i].n_greedy);
    const char *peer_build = NULL;
    for (int i = 0; i < o.n_models && o.peer_script; i++)
        if (peer[i].ok && !peer_build)
            peer_build = peer[i].build;
    if (peer_build)
        printf("llama.cpp: %s (%s)\n", peer_build, o.peer_script);
    if (o.peer_script)
        for (int i = 0; i < o.n_models; i++)
            if (peer[i].ok)
                printf("%s: llama.cpp's peak RSS includes the %.0f MiB its process held before loading (%s)\n",
                       o.models[i], peer[i].baseline_rss_bytes / 1048576.0,
                       peer_is_script(o.peer_script) ? "node's runtime" : "the C peer");
    if (o.json_path) {
        json_t *root = json_pack("{s:i,s:f,s:f,s:o,s:s}", "threads", o.n_threads, "read_bandwidth_start_bytes_s",
                                 bw_start, "read_bandwidth_end_bytes_s", bw_end, "models", jmodels, "llama_cpp_build",
                                 peer_build ? peer_build : "");
        if (json_dump_file(root, o.json_path, JSON_INDENT(2)) != 0)
            fprintf(stderr, "bench_model: could not write %s\n", o.json_path);
        json_decref(root);
    } else {
        json_decref(jmodels);
    }
    for (int i = 0; i < o.n_models; i++)
        if (!ours[i].ok || (o.peer_script && !peer[i].ok))
            return 1;
    return 0;
}
