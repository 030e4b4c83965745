/* Forward steps queued and replayed as the CUDA backend does it (backend.h's step_begin
 * and step_end, version 13; plugins/backend-cuda/cuda_step_log.c), run here on the CPU.
 *
 * A wrapper around the CPU backend plays the CUDA plugin's part with the plugin's own
 * step log: inside a step it queues every op that the plugin queues (as the plugin's
 * records), launches the queue when an op that answers the host arrives, and lets the
 * plugin's graph cache plan each queue: run it, "capture" it, or "replay" the queue
 * captured from an equal earlier step (here: run the captured records instead of the
 * current ones, which is what a CUDA graph does). Driving the real runtime through
 * prefill and decode steps of several models, it checks that
 *   - every output (whole logits rows, top-k answers, sampled tokens) is bit for bit the
 *     plain CPU backend's: the queue is launched before anything reads its results, and
 *     a replayed queue computes this step, not the captured one;
 *   - decode steps at a batch size repeat their queue record for record, so they are
 *     replayed (the property CUDA graphs need): counted, and at least most of them;
 *   - a dense model's decode step is one queue from the embedding to the logits, and
 *     every host array an op gets inside a step is one the core named at step_begin.
 *
 * With --backend cuda (scripts/gpu-check; skipped, 77, where no device is usable) the same
 * steps run on the CUDA backend with its graphs (captured and replayed) and without
 * (CINFER_CUDA_GRAPHS=0 when the backend is made): the same kernels, so the same bits. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_select.h"
#include "backend/cpu_backend.h"
#include "cinfer/plugins.h"
#include "cuda_step_log.h"
#include "model/model.h"
#include "model/runtime.h"
#include "support/random_model.h"
#include "support/runner.h"

#define ARCH_DIR CINFER_TEST_DATA_DIR "/models/architectures/"
#define STORIES_PATH CINFER_TEST_DATA_DIR "/models/stories260K.gguf"
#define PAGE_TOKENS 16
#define N_SEQS 6
#define DECODE_STEPS 24

static const struct cinfer_backend_ops *cpu;
static const struct cinfer_backend_ops *device_ops; /* --backend: its graphs against none */
static struct replaying *created; /* the wrapper's state made last */

/* The wrapper's state: the CPU backend's, and the step as the CUDA plugin keeps it. */
struct replaying {
    void *cpu;
    struct step_names names; /* the plugin's record of what the step named */
    int queueing;
    struct step_log log;
    struct step_graph_cache graphs;
    /* what the checks count */
    int unnamed;      /* ops inside a step that got a host array the step did not name */
    int steps;        /* step_begin calls */
    int longest_flush; /* the most records one queue held */
    int lm_head_queued; /* queues holding the exact_x matmul (the logits) */
    int padded;         /* decode steps padded to a bucket (rows beyond the batch) */
};

/* Found among the step's names as the plugin finds its arguments. */
static int named(const struct replaying *r, const void *host, size_t bytes)
{
    return step_names_array(&r->names, host, bytes) >= 0;
}

static int named_list(const struct replaying *r, const struct cinfer_backend_attn_seq *seqs, int n_seqs)
{
    return step_names_list(&r->names, seqs, n_seqs) >= 0;
}

static void run_queue(struct replaying *r, const struct step_log *log)
{
    for (int i = 0; i < log->n; i++) {
        struct cinfer_error err = {0};
        ck_assert_msg(step_op_run(cpu, r->cpu, &log->ops[i], &err) == 0, "queued op %d: %s", i, err.message);
    }
}

static void flush(struct replaying *r)
{
    if (!r->queueing)
        return;
    r->queueing = 0;
    if (r->log.n == 0)
        return;
    if (r->log.n > r->longest_flush)
        r->longest_flush = r->log.n;
    int lm_head = 0;
    for (int i = 0; i < r->log.n; i++)
        lm_head |= r->log.ops[i].kind == STEP_OP_MATMUL && r->log.ops[i].outs[0].exact_x;
    r->lm_head_queued += lm_head;
    struct step_graph_entry *entry = NULL;
    enum step_plan plan = step_graphs_plan(&r->graphs, &r->log, r->names.n_tokens, r->names.n_seqs, 0, &entry);
    if (plan == STEP_REPLAY) {
        run_queue(r, &entry->log); /* the captured queue, as a graph replays it */
    } else {
        run_queue(r, &r->log);
        if (plan == STEP_CAPTURE)
            step_graphs_captured(&r->graphs, entry, entry, 0); /* any non-NULL "graph" */
    }
    step_log_clear(&r->log);
}

/* Queues op (1) where the CUDA plugin would; else launches what is queued (0). */
static int take(struct replaying *r, struct step_op op, int queueable)
{
    if (r->queueing && queueable && op.kind != 0) {
        ck_assert_int_eq(step_log_append(&r->log, &op), 0);
        return 1;
    }
    flush(r);
    return 0;
}

/* ---- the wrapper's ops --------------------------------------------------------- */

static int w_create_on(const struct cinfer_backend_create_options *o, void **state, struct cinfer_error *err)
{
    struct replaying *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    int rc = cpu->create_on(o, &r->cpu, err);
    if (rc < 0) {
        free(r);
        return rc;
    }
    step_graphs_init(&r->graphs, NULL, NULL);
    created = r;
    *state = r;
    return 0;
}

static int w_create(int n_threads, void **state, struct cinfer_error *err)
{
    struct cinfer_backend_create_options o = {sizeof o, n_threads, 0, NULL};
    return w_create_on(&o, state, err);
}

static void w_destroy(void *s)
{
    struct replaying *r = s;
    cpu->destroy(r->cpu);
    step_log_free(&r->log);
    step_graphs_free(&r->graphs);
    free(r);
}

#define R ((struct replaying *)s)

static void *w_buffer_alloc(void *s, size_t bytes)
{
    flush(R);
    return cpu->buffer_alloc(R->cpu, bytes);
}

static void w_buffer_free(void *s, void *b)
{
    flush(R);
    cpu->buffer_free(R->cpu, b);
}

static void w_copy(void *s, void *dst, const void *src, size_t bytes)
{
    if (!take(R, step_record_copy(dst, src, bytes), 1))
        cpu->copy(R->cpu, dst, src, bytes);
}

static void w_download(void *s, void *dst, const void *src, size_t bytes)
{
    flush(R);
    cpu->download(R->cpu, dst, src, bytes);
}

static void w_upload(void *s, void *dst, const void *src, size_t bytes)
{
    flush(R);
    cpu->upload(R->cpu, dst, src, bytes);
}

static int w_kv_create(void *s, const struct cinfer_backend_kv_layout *l, void **kv, struct cinfer_error *err)
{
    flush(R);
    return cpu->kv_create(R->cpu, l, kv, err);
}

static void w_kv_destroy(void *s, void *kv)
{
    flush(R);
    cpu->kv_destroy(R->cpu, kv);
}

static void w_kv_write(void *s, void *kv, int layer, const float *k, const float *v, int n, const int32_t *slots)
{
    int ok = named(R, slots, (size_t)n * sizeof *slots);
    R->unnamed += R->names.open && !ok;
    if (!take(R, step_record_kv_write(kv, layer, k, v, n, slots), ok))
        cpu->kv_write(R->cpu, kv, layer, k, v, n, slots);
}

static void w_embedding(void *s, const struct cinfer_backend_weight *w, const int32_t *tokens, int n, float *out)
{
    int ok = named(R, tokens, (size_t)n * sizeof *tokens);
    R->unnamed += R->names.open && !ok;
    if (!take(R, step_record_embedding(w, tokens, n, out), ok))
        cpu->embedding(R->cpu, w, tokens, n, out);
}

static int w_matmul(void *s, const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs,
                    struct cinfer_error *err)
{
    if (take(R, step_record_matmul(x, n, outs, n_outs), 1))
        return 0;
    return cpu->matmul(R->cpu, x, n, outs, n_outs, err);
}

static void w_rmsnorm(void *s, float *y, const float *x, int n_rows, int dim, const float *w, float eps)
{
    if (!take(R, step_record_rmsnorm(y, x, n_rows, dim, w, eps), 1))
        cpu->rmsnorm(R->cpu, y, x, n_rows, dim, w, eps);
}

static void w_rope(void *s, float *x, int n_tokens, int n_heads, int head_dim, const struct cinfer_backend_rope *rope)
{
    size_t bytes = (size_t)n_tokens * (size_t)(head_dim / 2) * sizeof(float);
    int ok = named(R, rope->cos, bytes) && named(R, rope->sin, bytes);
    R->unnamed += R->names.open && !ok;
    if (!take(R, step_record_rope(x, n_tokens, n_heads, head_dim, rope), ok))
        cpu->rope(R->cpu, x, n_tokens, n_heads, head_dim, rope);
}

static void w_silu_mul(void *s, float *gate, const float *up, size_t n)
{
    if (!take(R, step_record_gated(STEP_OP_SILU_MUL, gate, up, n, 0.0f, 0.0f), 1))
        cpu->silu_mul(R->cpu, gate, up, n);
}

static void w_gelu_tanh_mul(void *s, float *gate, const float *up, size_t n)
{
    if (!take(R, step_record_gated(STEP_OP_GELU_TANH_MUL, gate, up, n, 0.0f, 0.0f), 1))
        cpu->gelu_tanh_mul(R->cpu, gate, up, n);
}

static void w_swiglu_oai(void *s, float *gate, const float *up, size_t n, float alpha, float limit)
{
    if (!take(R, step_record_gated(STEP_OP_SWIGLU_OAI, gate, up, n, alpha, limit), 1))
        cpu->swiglu_oai(R->cpu, gate, up, n, alpha, limit);
}

static void w_add(void *s, float *y, const float *x, size_t n)
{
    if (!take(R, step_record_add(y, x, n), 1))
        cpu->add(R->cpu, y, x, n);
}

static void w_scale(void *s, float *x, size_t n, float factor)
{
    if (!take(R, step_record_scaled(STEP_OP_SCALE, x, n, factor), 1))
        cpu->scale(R->cpu, x, n, factor);
}

static void w_softcap(void *s, float *x, size_t n, float cap)
{
    if (!take(R, step_record_scaled(STEP_OP_SOFTCAP, x, n, cap), 1))
        cpu->softcap(R->cpu, x, n, cap);
}

static void w_add_gated(void *s, float *y, const float *x, const float *gate, int n, int dim)
{
    if (!take(R, step_record_add_gated(y, x, gate, n, dim), 1))
        cpu->add_gated(R->cpu, y, x, gate, n, dim);
}

static void w_zero(void *s, float *x, size_t n)
{
    if (!take(R, step_record_zero(x, n), 1))
        cpu->zero(R->cpu, x, n);
}

static int w_attention_windowed(void *s, void *kv, int layer, const float *q, float *out,
                                const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                                int head_dim, const struct cinfer_backend_attn_options *opts,
                                struct cinfer_error *err)
{
    int ok = named_list(R, seqs, n_seqs);
    R->unnamed += R->names.open && !ok;
    if (take(R, step_record_attention(kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, opts), ok))
        return 0;
    return cpu->attention_windowed(R->cpu, kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, opts,
                                   err);
}

static int w_attention(void *s, void *kv, int layer, const float *q, float *out,
                       const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                       int head_dim, struct cinfer_error *err)
{
    struct cinfer_backend_attn_options plain = {0, 0.0f, 0.0f, NULL};
    return w_attention_windowed(s, kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, &plain, err);
}

static int w_weight_prepare(void *s, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                            struct cinfer_error *err)
{
    flush(R);
    return cpu->weight_prepare(R->cpu, w, out, err);
}

static void w_weight_release(void *s, const struct cinfer_backend_weight *w)
{
    flush(R);
    cpu->weight_release(R->cpu, w);
}

static void w_moe_route(void *s, const float *logits, int n, int n_experts, int k, int normalize, int32_t *ids,
                        float *weights)
{
    flush(R); /* answers the host */
    cpu->moe_route(R->cpu, logits, n, n_experts, k, normalize, ids, weights);
}

static void w_gather_rows(void *s, float *out, const float *x, const int32_t *rows, int n, int dim)
{
    flush(R);
    cpu->gather_rows(R->cpu, out, x, rows, n, dim);
}

static void w_scatter_add_rows(void *s, float *y, const float *x, const int32_t *rows, const float *weights, int n,
                               int dim)
{
    flush(R);
    cpu->scatter_add_rows(R->cpu, y, x, rows, weights, n, dim);
}

static int w_status(void *s, struct cinfer_error *err)
{
    flush(R);
    return cpu->status(R->cpu, err);
}

static int w_matmul_grouped(void *s, const float *const *xs, int n, const struct cinfer_backend_matmul_out *outs,
                            int n_outs, struct cinfer_error *err)
{
    flush(R);
    return cpu->matmul_grouped(R->cpu, xs, n, outs, n_outs, err);
}

static int w_logits_top(void *s, const float *logits, int vocab, const int32_t *rows, int n_rows, int k,
                        int32_t *top_ids, float *top_logits, int *n_top, double *lse, struct cinfer_error *err)
{
    flush(R);
    return cpu->logits_top(R->cpu, logits, vocab, rows, n_rows, k, top_ids, top_logits, n_top, lse, err);
}

static int w_sample(void *s, float *logits, int vocab, const int32_t *rows, int n_rows,
                    const struct cinfer_backend_sample_params *params, int32_t *ids, float *id_logits,
                    struct cinfer_error *err)
{
    flush(R);
    return cpu->sample(R->cpu, logits, vocab, rows, n_rows, params, ids, id_logits, err);
}

static int w_step_begin(void *s, const struct cinfer_backend_step *step, struct cinfer_error *err)
{
    (void)err;
    flush(R);
    ck_assert_int_eq(step_names_open(&R->names, step), 0);
    R->queueing = 1;
    R->steps++;
    step_log_clear(&R->log);
    return 0;
}

static int w_decode_bucket(void *s, int n)
{
    int rows = step_decode_bucket(n, 256); /* the CUDA plugin's rule */
    R->padded += rows > n;
    return rows;
}

static int w_step_end(void *s, struct cinfer_error *err)
{
    (void)err;
    flush(R);
    R->names.open = 0;
    return 0;
}

#undef R

static struct cinfer_backend_ops replaying_ops;

static void make_ops(void)
{
    cpu = cinfer_cpu_backend_ops();
    ck_assert_uint_ge(cpu->version, 12);
    replaying_ops = (struct cinfer_backend_ops){
        .version = CINFER_BACKEND_OPS_VERSION, .struct_size = sizeof replaying_ops, .name = "replaying cpu",
        .create = w_create, .destroy = w_destroy, .buffer_alloc = w_buffer_alloc, .buffer_free = w_buffer_free,
        .copy = w_copy, .download = w_download, .kv_create = w_kv_create, .kv_destroy = w_kv_destroy,
        .kv_write = w_kv_write, .embedding = w_embedding, .matmul = w_matmul, .rmsnorm = w_rmsnorm, .rope = w_rope,
        .silu_mul = w_silu_mul, .add = w_add, .attention = w_attention, .weight_prepare = w_weight_prepare,
        .weight_release = w_weight_release, .attention_windowed = w_attention_windowed,
        .gelu_tanh_mul = w_gelu_tanh_mul, .scale = w_scale, .softcap = w_softcap, .moe_route = w_moe_route,
        .gather_rows = w_gather_rows, .scatter_add_rows = w_scatter_add_rows, .zero = w_zero, .query = cpu->query,
        .create_on = w_create_on, .status = w_status, .upload = w_upload, .swiglu_oai = w_swiglu_oai,
        .add_gated = w_add_gated, .all_reduce_sum = NULL, .memory_info = NULL,
        .matmul_grouped = cpu->matmul_grouped ? w_matmul_grouped : NULL, .logits_top = w_logits_top,
        .sample = w_sample, .step_begin = w_step_begin, .step_end = w_step_end, .decode_bucket = w_decode_bucket};
}

/* ---- driving the runtime ---------------------------------------------------------- */

struct side {
    struct cinfer_runtime *rt;
    int32_t pages[N_SEQS][32];
    int n_pages[N_SEQS];
};

static void side_open(struct side *sd, const struct cinfer_model *m, const struct cinfer_backend_ops *ops)
{
    memset(sd, 0, sizeof *sd);
    struct cinfer_runtime_options o = {.kv_cache_bytes = 16u << 20, .kv_page_tokens = PAGE_TOKENS, .n_threads = 2,
                                       .max_batch_tokens = 256, .kv_dtype = CINFER_KV_CACHE_DTYPE_F32,
                                       .context_length = 512, .backend = ops};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_create(m, &o, &sd->rt, &err) == 0, "runtime: %s", err.message);
}

static void side_reserve(struct side *sd, int s, int positions)
{
    while (sd->n_pages[s] * PAGE_TOKENS < positions)
        ck_assert_int_eq(cinfer_runtime_kv_page_alloc(sd->rt, &sd->pages[s][sd->n_pages[s]++]), 0);
}

/* What one step asks of sequence s: its whole last row (s % 3 == 0), its top 5 with the
 * log-sum-exp (1), or a token drawn on the backend where it can (2; else its top 5). */
struct answers {
    float row[4096];
    struct cinfer_logits_top top;
    struct cinfer_sampled sampled;
};

static void step(struct side *sd, int vocab, const int32_t *const *tokens, const int *start, const int *n,
                 const int *active, const struct cinfer_backend_sample_params *params, struct answers *out)
{
    struct cinfer_seq_chunk c[N_SEQS];
    int k = 0;
    for (int s = 0; s < N_SEQS; s++) {
        if (!active[s])
            continue;
        side_reserve(sd, s, start[s] + n[s]);
        c[k] = (struct cinfer_seq_chunk){tokens[s] + start[s], n[s], start[s], sd->pages[s], sd->n_pages[s],
                                         CINFER_LOGITS_LAST, NULL, 0, 0, NULL, NULL, NULL};
        if (s % 3 == 0) {
            ck_assert_int_le(vocab, 4096);
            c[k].logits_out = out[s].row;
        } else if (s % 3 == 2 && cinfer_runtime_samples(sd->rt)) {
            c[k].sample = &params[s];
            c[k].sampled_out = &out[s].sampled;
        } else {
            c[k].top_k = 5;
            c[k].top_log_sum_exp = 1;
            c[k].top_out = &out[s].top;
        }
        k++;
    }
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_forward(sd->rt, c, k, &err) == 0, "forward: %s", err.message);
}

/* Steps of the model at path on side a's backend (NULL: the CPU) and side b's, made with
 * CINFER_CUDA_GRAPHS set to a_graphs and b_graphs (NULL: unset); b's outputs must equal
 * a's bit for bit. b is the replaying wrapper when counted: its counts are checked too. */
static void check_model_on(const char *path, const struct cinfer_backend_ops *a_ops, const char *a_graphs,
                           const struct cinfer_backend_ops *b_ops, const char *b_graphs, int counted)
{
    struct cinfer_model *m = NULL;
    struct cinfer_model_load_options lo = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_model_load(path, &lo, &m, &err) == 0, "%s: %s", path, err.message);
    int vocab = m->config.vocab_size;
    struct side plain, replayed;
    if (a_graphs)
        setenv("CINFER_CUDA_GRAPHS", a_graphs, 1);
    side_open(&plain, m, a_ops);
    unsetenv("CINFER_CUDA_GRAPHS");
    if (b_graphs)
        setenv("CINFER_CUDA_GRAPHS", b_graphs, 1);
    side_open(&replayed, m, b_ops);
    unsetenv("CINFER_CUDA_GRAPHS");

    /* prompts of 3 to 17 tokens, then DECODE_STEPS greedy tokens each (from the plain
     * side's answers, fed to both); sequence 1 stops halfway, so the batch shrinks */
    int32_t seq_tokens[N_SEQS][64];
    const int32_t *tokens[N_SEQS];
    int prompt[N_SEQS] = {5, 9, 17, 3, 12, 7}, start[N_SEQS] = {0}, active[N_SEQS], n[N_SEQS];
    uint64_t rng = 0x5eed;
    for (int s = 0; s < N_SEQS; s++) {
        tokens[s] = seq_tokens[s];
        active[s] = 1;
        n[s] = prompt[s];
    }
    for (int s = 0; s < N_SEQS; s++)
        for (int t = 0; t < prompt[s]; t++)
            seq_tokens[s][t] = 1 + (int32_t)((random_uniform(&rng) + 1.0f) * 0.5f * (float)(vocab - 1)) % (vocab - 1);
    static struct answers want[N_SEQS], got[N_SEQS];
    int compared_rows = 0, compared_tops = 0, compared_draws = 0;
    for (int i = 0; i <= DECODE_STEPS; i++) {
        struct cinfer_backend_sample_params params[N_SEQS] = {{0}};
        for (int s = 2; s < N_SEQS; s += 3)
            params[s] = (struct cinfer_backend_sample_params){0.8f, 0, 0.9f, 0.0f,
                                                              (random_uniform(&rng) + 1.0f) * 0.5};
        if (i == DECODE_STEPS / 2)
            active[1] = 0;
        memset(want, 0, sizeof want);
        memset(got, 0, sizeof got);
        step(&plain, vocab, tokens, start, n, active, params, want);
        step(&replayed, vocab, tokens, start, n, active, params, got);
        for (int s = 0; s < N_SEQS; s++) {
            if (!active[s])
                continue;
            int32_t next;
            if (s % 3 == 0) {
                ck_assert_msg(memcmp(want[s].row, got[s].row, sizeof(float) * (size_t)vocab) == 0,
                              "%s step %d: sequence %d's logits row differs", path, i, s);
                next = 0;
                for (int v = 1; v < vocab; v++)
                    next = want[s].row[v] > want[s].row[next] ? v : next;
                compared_rows++;
            } else if (s % 3 == 2 && cinfer_runtime_samples(plain.rt)) {
                ck_assert_msg(want[s].sampled.id == got[s].sampled.id &&
                                  memcmp(&want[s].sampled.logit, &got[s].sampled.logit, sizeof(float)) == 0,
                              "%s step %d: sequence %d drew %d, the plain backend %d", path, i, s, got[s].sampled.id,
                              want[s].sampled.id);
                next = want[s].sampled.id;
                compared_draws++;
            } else {
                ck_assert_msg(want[s].top.n == got[s].top.n &&
                                  memcmp(want[s].top.ids, got[s].top.ids, sizeof(int32_t) * (size_t)want[s].top.n) ==
                                      0 &&
                                  memcmp(want[s].top.logits, got[s].top.logits,
                                         sizeof(float) * (size_t)want[s].top.n) == 0 &&
                                  memcmp(&want[s].top.log_sum_exp, &got[s].top.log_sum_exp, sizeof(double)) == 0,
                              "%s step %d: sequence %d's top tokens differ", path, i, s);
                next = want[s].top.ids[0];
                compared_tops++;
            }
            start[s] += n[s];
            n[s] = 1;
            seq_tokens[s][start[s]] = next;
        }
    }
    const struct replaying *r = created;
    int dense = !m->config.n_experts;
    if (counted) { /* the wrapper's counts */
        printf("%s: %d steps; queues run %llu, captured %llu, replayed %llu; the longest %d ops (%d layers)%s\n", path,
               r->steps, (unsigned long long)r->graphs.runs, (unsigned long long)r->graphs.captures,
               (unsigned long long)r->graphs.replays, r->longest_flush, m->config.num_layers,
               dense ? "" : "; a mixture of experts: each step's queue ends at its first router");
        ck_assert_msg(r->unnamed == 0, "%s: %d ops inside a step got a host array the step did not name", path,
                      r->unnamed);
        ck_assert_int_eq(r->steps, DECODE_STEPS + 1); /* the plain side's steps went to no wrapper */
        /* batch 6 for 12 decode steps, batch 5 for 12. A dense model without a window pool
         * pads both to 8 rows: one queue, captured once, replayed from the second decode
         * step on (22). The others run each batch size once, capture it, then replay (20). */
        int pads = dense && !m->config.sliding_window;
        ck_assert_int_eq(r->padded, pads ? DECODE_STEPS : 0);
        ck_assert_msg(r->graphs.replays == (uint64_t)(pads ? DECODE_STEPS - 2 : DECODE_STEPS - 4),
                      "%s: %llu decode steps replayed", path, (unsigned long long)r->graphs.replays);
        ck_assert_uint_eq(r->graphs.captures, pads ? 1 : 2);
        if (dense) { /* the whole step, embedding to logits, is one queue: each layer's ops and the lm_head */
            ck_assert_msg(r->longest_flush >= 8 * m->config.num_layers, "%s: the longest queue held %d ops", path,
                          r->longest_flush);
            ck_assert_msg(r->lm_head_queued >= DECODE_STEPS, "%s: %d queues held the logits' matmul", path,
                          r->lm_head_queued);
        }
    }
    cinfer_runtime_destroy(&plain.rt);
    cinfer_runtime_destroy(&replayed.rt);
    cinfer_model_free(&m);
    printf("%s: %d logits rows, %d top-5 answers and %d draws equal to %s\n", path, compared_rows, compared_tops,
           compared_draws, counted ? "the plain CPU backend's" : "those without graphs");
}

static void check_model(const char *path)
{
    make_ops();
    if (device_ops)
        check_model_on(path, device_ops, "0", device_ops, NULL, 0);
    else
        check_model_on(path, NULL, NULL, &replaying_ops, NULL, 1);
}

START_TEST(stories260k_decode_steps_replay_with_equal_outputs)
{
    check_model(STORIES_PATH);
}
END_TEST

/* Qwen3 (per-head norms), Gemma 2 (sliding window pool, soft-capping), Gemma 3 (local
 * RoPE tables), gpt-oss (sinks, a window, experts: its queues end at the router). */
static const char *const arch_files[] = {ARCH_DIR "qwen3.gguf", ARCH_DIR "gemma2.gguf", ARCH_DIR "gemma3.gguf",
                                         ARCH_DIR "gpt_oss.gguf"};

START_TEST(architectures_decode_steps_replay_with_equal_outputs)
{
    check_model(arch_files[_i]);
}
END_TEST

/* The graph cache's rules on made-up queues: capture at the second equal sighting,
 * replay after; a different queue, a new generation or a failed capture start over; a
 * failing queue stops being captured; the least recently used entry makes room. */
static int drops;
static void count_drop(void *ctx, void *exec)
{
    (void)ctx;
    (void)exec;
    drops++;
}

START_TEST(graph_cache_rules)
{
    struct step_graph_cache c;
    step_graphs_init(&c, count_drop, NULL);
    drops = 0;
    struct step_log a = {0}, b = {0};
    float buf[4];
    ck_assert_int_eq(step_log_append(&a, &(struct step_op){0}), 0);
    struct step_op add = step_record_add(buf, buf + 1, 1), add2 = step_record_add(buf, buf + 2, 1);
    ck_assert_int_eq(step_log_append(&a, &add), 0);
    ck_assert_int_eq(step_log_copy(&b, &a), 0);
    b.ops[1] = add2; /* same shape, another argument */
    struct step_graph_entry *e = NULL;
    int token = 1;
    ck_assert_int_eq(step_graphs_plan(&c, &a, 1, 1, 0, &e), STEP_RUN);
    ck_assert_int_eq(step_graphs_plan(&c, &a, 1, 1, 0, &e), STEP_CAPTURE);
    step_graphs_captured(&c, e, &token, 0);
    ck_assert_int_eq(step_graphs_plan(&c, &a, 1, 1, 0, &e), STEP_REPLAY);
    ck_assert_ptr_eq(e->exec, &token);
    ck_assert_int_eq(step_graphs_plan(&c, &b, 1, 1, 0, &e), STEP_RUN); /* another queue: dropped */
    ck_assert_int_eq(drops, 1);
    ck_assert_int_eq(step_graphs_plan(&c, &b, 1, 1, 0, &e), STEP_CAPTURE);
    step_graphs_captured(&c, e, &token, 0);
    ck_assert_int_eq(step_graphs_plan(&c, &b, 1, 1, 1, &e), STEP_CAPTURE); /* generation 1: recaptured */
    ck_assert_int_eq(drops, 2);
    step_graphs_captured(&c, e, NULL, 1); /* a failed capture */
    ck_assert_int_eq(step_graphs_plan(&c, &b, 1, 1, 1, &e), STEP_RUN);
    ck_assert_int_eq(step_graphs_plan(&c, &b, 1, 1, 1, &e), STEP_CAPTURE);
    step_graphs_captured(&c, e, NULL, 1); /* failed again: STEP_CAPTURE_TRIES */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(step_graphs_plan(&c, &b, 1, 1, 1, &e), STEP_RUN);
    /* other shapes fill the cache; the oldest is dropped for the newest */
    for (int n = 2; n < 2 + STEP_GRAPHS_MAX; n++) {
        ck_assert_int_eq(step_graphs_plan(&c, &a, n, 1, 1, &e), STEP_RUN);
        ck_assert_int_eq(step_graphs_plan(&c, &a, n, 1, 1, &e), STEP_CAPTURE);
        step_graphs_captured(&c, e, &token, 1);
    }
    ck_assert_int_eq(drops, 2); /* n 33 took the place of n 1's entry, which held no graph */
    ck_assert_int_eq(step_graphs_plan(&c, &a, STEP_GRAPHS_MAX + 2, 1, 1, &e), STEP_RUN);
    ck_assert_int_eq(drops, 3); /* n 34 took n 2's, whose graph went */
    ck_assert_int_eq(step_graphs_plan(&c, &a, 3, 1, 1, &e), STEP_REPLAY);
    step_graphs_free(&c);
    ck_assert_int_eq(drops, 3 + STEP_GRAPHS_MAX - 1); /* the graphs of n 3 to 33 */
    step_log_free(&a);
    step_log_free(&b);
}
END_TEST

static Suite *suite_step_replay(void)
{
    Suite *s = suite_create("step_replay");
    TCase *tc = tcase_create("replay");
    if (!device_ops)
        tcase_add_test(tc, graph_cache_rules);
    tcase_add_test(tc, stories260k_decode_steps_replay_with_equal_outputs);
    tcase_add_loop_test(tc, architectures_decode_steps_replay_with_equal_outputs, 0,
                        (int)(sizeof arch_files / sizeof *arch_files));
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    const char *backend = NULL, *plugin_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(argv[i], "--plugin-path") && i + 1 < argc) {
            plugin_path = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--backend NAME|FILE] [--plugin-path DIRS]\n", argv[0]);
            return 2;
        }
    }
    struct cinfer_plugin *plugin = NULL;
    if (backend) {
        struct cinfer_error err = {0};
        int rc = cinfer_backend_select(backend, plugin_path, &plugin, &err);
        if (rc == CINFER_ERR_NOT_FOUND || rc == CINFER_ERR_UNSUPPORTED) { /* missing, or no device here */
            printf("SKIP: backend %s cannot run here: %s\n", backend, err.message);
            return 77;
        }
        if (rc != 0) {
            printf("FAIL: backend %s: %s\n", backend, err.message);
            return 1;
        }
        device_ops = cinfer_plugin_vtable(plugin);
    }
    int rc = cinfer_test_run_suite(suite_step_replay());
    cinfer_plugin_close(&plugin);
    return rc;
}
