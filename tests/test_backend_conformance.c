/* The backend conformance suite: every op of a backend's table run on random inputs and
 * compared with references, each within the tolerance of its type.
 *
 *   test_backend_conformance [--backend NAME|FILE] [--plugin-path DIRS] [--perturb]
 *
 * The backend under test is --backend (chosen as --device chooses: "cuda" is the
 * backend-cuda plugin), the built-in CPU backend by default. The references are the CPU
 * backend at the best kernel level this machine has, and the CPU backend with its
 * kernels forced to the scalar path; a machine without a GPU thus checks the CPU backend
 * against itself and against the scalar kernels, so the suite itself runs in CI. With
 * --backend naming a backend that is missing or not usable here it prints why and exits
 * 77 (ctest's skip); one the loader refuses fails. Exit 1 names every comparison beyond
 * its tolerance. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_select.h"
#include "backend/cpu_backend.h"
#include "cinfer/plugins.h"
#include "kernels.h"
#include "scheduler/sampler.h"
#include "support/random_model.h"

#define SKIP 77
#define N_THREADS 2

/* A backend to run a case on; level >= 0: the CPU backend at that kernel level. */
struct side {
    const char *label;
    const struct cinfer_backend_ops *ops;
    void *state;
    int level;
};

static int failures, comparisons;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static void fill(float *x, size_t n, float spread)
{
    for (size_t i = 0; i < n; i++)
        x[i] = spread * random_uniform(&rng);
}

static void enter(const struct side *s)
{
    cinfer_kernels_force_level(s->level >= 0 ? (enum cinfer_kernel_level)s->level : cinfer_kernels_best_level());
}

/* Host floats to a fresh backend buffer of side s. */
static float *to_backend(const struct side *s, const float *host, size_t n)
{
    float *b = s->ops->buffer_alloc(s->state, n * sizeof(float) + 64);
    if (!b) {
        fprintf(stderr, "%s: buffer_alloc of %zu floats failed\n", s->label, n);
        exit(1);
    }
    s->ops->upload(s->state, b, host, n * sizeof(float));
    return b;
}

static void to_host(const struct side *s, float *host, float *b, size_t n)
{
    s->ops->download(s->state, host, b, n * sizeof(float));
    s->ops->buffer_free(s->state, b);
}

static void check_status(const struct side *s, const char *what)
{
    struct cinfer_error err = {0};
    if (s->ops->status(s->state, &err) != 0) {
        fprintf(stderr, "%s: %s: device error: %s\n", s->label, what, err.message);
        exit(1);
    }
}

/* max |got - want| over max |want|: the error relative to the output's scale. */
static void compare(const char *what, const char *ref, const float *got, const float *want, size_t n, double tol)
{
    double diff = 0, scale = 1e-30;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= diff)) { /* NaN counts as the worst */
            diff = isnan(d) ? INFINITY : d;
            worst = i;
        }
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    }
    double rel = diff / scale;
    int ok = rel <= tol;
    comparisons++;
    failures += !ok;
    printf("%-44s vs %-10s max rel err %.2e (tol %.0e) %s", what, ref, rel, tol, ok ? "ok\n" : "FAIL");
    if (!ok)
        printf(" at %zu: got %g, want %g\n", worst, got[worst], want[worst]);
}

struct weight_type {
    uint32_t type;
    const char *name;
    double tol; /* of a matmul or embedding with these weights, against either reference */
};

/* The CPU's stored weight types. The 16-bit and quantized products round x (bf16, or
 * the q8 blocks of the quantized dot products) where the levels differ in how. */
static const struct weight_type weight_types[] = {
    {CINFER_TENSOR_F32, "f32", 1e-5},       {CINFER_TENSOR_F16, "f16", 4e-3},
    {CINFER_TENSOR_BF16, "bf16", 1.6e-2},   {CINFER_TENSOR_Q8_0, "q8_0", 1e-2},
    {CINFER_TENSOR_Q4_0, "q4_0", 1e-2},     {CINFER_TENSOR_Q4_1, "q4_1", 1e-2},
    {CINFER_TENSOR_Q5_0, "q5_0", 1e-2},     {CINFER_TENSOR_Q5_1, "q5_1", 1e-2},
    {CINFER_TENSOR_Q2_K, "q2_K", 1e-2},     {CINFER_TENSOR_Q3_K, "q3_K", 1e-2},
    {CINFER_TENSOR_Q4_K, "q4_K", 1e-2},     {CINFER_TENSOR_Q5_K, "q5_K", 1e-2},
    {CINFER_TENSOR_Q6_K, "q6_K", 1e-2},     {CINFER_TENSOR_IQ4_NL, "iq4_nl", 1e-2},
    {CINFER_TENSOR_IQ4_XS, "iq4_xs", 1e-2}, {CINFER_TENSOR_MXFP4, "mxfp4", 1e-2},
};

/* A stored weight (rows, cols) of random values. */
static struct cinfer_backend_weight make_weight(uint32_t type, int rows, int cols)
{
    struct cinfer_backend_weight w = {type, rows, cols, NULL, random_model_row_bytes((enum cinfer_dtype)type, cols)};
    uint8_t *data = malloc(w.row_bytes * (size_t)rows);
    float *row = malloc((size_t)cols * sizeof(float));
    for (int r = 0; r < rows; r++) {
        fill(row, (size_t)cols, 0.5f);
        random_model_store_row(row, cols, (enum cinfer_dtype)type, data + (size_t)r * w.row_bytes);
    }
    free(row);
    w.data = data;
    return w;
}

static struct cinfer_backend_weight prepare(const struct side *s, const struct cinfer_backend_weight *stored)
{
    struct cinfer_backend_weight p;
    struct cinfer_error err = {0};
    if (s->ops->weight_prepare(s->state, stored, &p, &err) != 0) {
        fprintf(stderr, "%s: weight_prepare: %s\n", s->label, err.message);
        exit(1);
    }
    return p;
}

/* ---- the cases: each runs on one side and leaves its outputs in host memory ---- */

struct matmul_case {
    const struct cinfer_backend_weight *w[2];
    const float *bias, *x;
    int n, exact_x;
};

static void run_matmul(const struct side *s, const struct matmul_case *c, float *y0, float *y1)
{
    int rows = (int)c->w[0]->rows, cols = (int)c->w[0]->cols;
    struct cinfer_backend_weight p0 = prepare(s, c->w[0]), p1 = prepare(s, c->w[1]);
    float *x = to_backend(s, c->x, (size_t)c->n * cols);
    float *bias = to_backend(s, c->bias, (size_t)rows);
    float *b0 = to_backend(s, y0, (size_t)c->n * rows), *b1 = to_backend(s, y1, (size_t)c->n * rows);
    struct cinfer_backend_matmul_out outs[2] = {{&p0, bias, b0, c->exact_x}, {&p1, NULL, b1, c->exact_x}};
    struct cinfer_error err = {0};
    if (s->ops->matmul(s->state, x, c->n, outs, 2, &err) != 0) {
        fprintf(stderr, "%s: matmul: %s\n", s->label, err.message);
        exit(1);
    }
    check_status(s, "matmul");
    to_host(s, y0, b0, (size_t)c->n * rows);
    to_host(s, y1, b1, (size_t)c->n * rows);
    s->ops->buffer_free(s->state, x);
    s->ops->buffer_free(s->state, bias);
    s->ops->weight_release(s->state, c->w[0]);
    s->ops->weight_release(s->state, c->w[1]);
}

static void run_embedding(const struct side *s, const struct cinfer_backend_weight *w, const int32_t *ids, int n,
                          float *out)
{
    struct cinfer_backend_weight p = prepare(s, w);
    float *b = to_backend(s, out, (size_t)n * w->cols);
    s->ops->embedding(s->state, &p, ids, n, b);
    check_status(s, "embedding");
    to_host(s, out, b, (size_t)n * w->cols);
    s->ops->weight_release(s->state, w);
}

enum elementwise { EW_RMSNORM, EW_ROPE, EW_ROPE_INTERLEAVED, EW_SILU_MUL, EW_GELU_TANH_MUL, EW_ADD, EW_SCALE,
                   EW_SOFTCAP, EW_COPY, EW_COUNT };
static const char *const ew_names[] = {"rmsnorm", "rope (halves)", "rope (interleaved)", "silu_mul", "gelu_tanh_mul",
                                       "add", "scale", "softcap", "copy"};

#define EW_TOKENS 7
#define EW_HEADS 3
#define EW_HEAD_DIM 64
#define EW_N (EW_TOKENS * EW_HEADS * EW_HEAD_DIM)

static void run_elementwise(const struct side *s, enum elementwise op, const float *a, const float *b, float *out)
{
    static float cosv[EW_TOKENS * EW_HEAD_DIM / 2], sinv[EW_TOKENS * EW_HEAD_DIM / 2];
    float *x = to_backend(s, a, EW_N), *y = to_backend(s, b, EW_N);
    switch (op) {
    case EW_RMSNORM: /* rows of EW_HEAD_DIM * EW_HEADS, b as the weight */
        s->ops->rmsnorm(s->state, y, x, EW_TOKENS, EW_HEADS * EW_HEAD_DIM, y, 1e-5f);
        break;
    case EW_ROPE:
    case EW_ROPE_INTERLEAVED: {
        double inv_freq[EW_HEAD_DIM / 2];
        for (int i = 0; i < EW_HEAD_DIM / 2; i++)
            inv_freq[i] = pow(10000.0, -2.0 * i / EW_HEAD_DIM);
        for (int t = 0; t < EW_TOKENS; t++)
            cinfer_kernel_rope_angles(3 + 5 * t, inv_freq, EW_HEAD_DIM, cosv + t * EW_HEAD_DIM / 2,
                                      sinv + t * EW_HEAD_DIM / 2);
        struct cinfer_backend_rope rope = {cosv, sinv, op == EW_ROPE_INTERLEAVED};
        s->ops->rope(s->state, x, EW_TOKENS, EW_HEADS, EW_HEAD_DIM, &rope);
        s->ops->copy(s->state, y, x, EW_N * sizeof(float));
        break;
    }
    case EW_SILU_MUL:
        s->ops->silu_mul(s->state, x, y, EW_N);
        s->ops->copy(s->state, y, x, EW_N * sizeof(float));
        break;
    case EW_GELU_TANH_MUL:
        s->ops->gelu_tanh_mul(s->state, x, y, EW_N);
        s->ops->copy(s->state, y, x, EW_N * sizeof(float));
        break;
    case EW_ADD:
        s->ops->add(s->state, y, x, EW_N);
        break;
    case EW_SCALE:
        s->ops->scale(s->state, y, EW_N, 0.37f);
        break;
    case EW_SOFTCAP:
        s->ops->softcap(s->state, y, EW_N, 1.5f);
        break;
    case EW_COPY:
    case EW_COUNT:
        s->ops->copy(s->state, y, x, EW_N * sizeof(float));
        break;
    }
    check_status(s, ew_names[op]);
    to_host(s, out, y, EW_N);
    s->ops->buffer_free(s->state, x);
}

/* Attention over paged KV: two sequences (a prefill chunk after cached positions, and a
 * one-token decode), GQA 8 query heads on 2 KV heads, pages in a scattered order. */
#define AT_HEADS 8
#define AT_KV_HEADS 2
#define AT_HEAD_DIM 64
#define AT_PAGE 16
#define AT_PAGES 12
#define AT_Q_DIM (AT_HEADS * AT_HEAD_DIM)
#define AT_KV_DIM (AT_KV_HEADS * AT_HEAD_DIM)

struct attn_case {
    uint32_t kv_type;
    struct cinfer_backend_attn_options opts;
    int windowed;
};

static const int at_starts[2] = {21, 40}, at_lens[2] = {9, 1};
static const int32_t at_tables[2][4] = {{7, 2, 9, 0}, {4, 11, 1, 5}};
#define AT_ROWS 10 /* 9 + 1 */

static void run_attention(const struct side *s, const struct attn_case *c, const float *k_all, const float *v_all,
                          const float *q_all, float *out)
{
    struct cinfer_backend_kv_layout layout = {2, AT_PAGES, AT_PAGE, AT_KV_DIM, AT_HEAD_DIM, c->kv_type};
    void *kv = NULL;
    struct cinfer_error err = {0};
    if (s->ops->kv_create(s->state, &layout, &kv, &err) != 0) {
        fprintf(stderr, "%s: kv_create: %s\n", s->label, err.message);
        exit(1);
    }
    struct cinfer_backend_attn_seq seqs[2];
    int row = 0;
    for (int q = 0; q < 2; q++) {
        int n_pos = at_starts[q] + at_lens[q];
        int32_t slots[64];
        for (int p = 0; p < n_pos; p++)
            slots[p] = at_tables[q][p / AT_PAGE] * AT_PAGE + p % AT_PAGE;
        /* every position's K/V, written for layer 1 (layer 0 holds other data) */
        const float *k = k_all + (size_t)q * 64 * AT_KV_DIM, *v = v_all + (size_t)q * 64 * AT_KV_DIM;
        float *kb = to_backend(s, k, (size_t)n_pos * AT_KV_DIM), *vb = to_backend(s, v, (size_t)n_pos * AT_KV_DIM);
        s->ops->kv_write(s->state, kv, 1, kb, vb, n_pos, slots);
        s->ops->kv_write(s->state, kv, 0, vb, kb, n_pos, slots);
        s->ops->buffer_free(s->state, kb);
        s->ops->buffer_free(s->state, vb);
        seqs[q] = (struct cinfer_backend_attn_seq){row, at_lens[q], at_starts[q], at_tables[q], 4};
        row += at_lens[q];
    }
    float *qb = to_backend(s, q_all, (size_t)AT_ROWS * AT_Q_DIM);
    float *ob = to_backend(s, out, (size_t)AT_ROWS * AT_Q_DIM);
    int rc = c->windowed ? s->ops->attention_windowed(s->state, kv, 1, qb, ob, seqs, 2, AT_HEADS, AT_KV_HEADS,
                                                      AT_HEAD_DIM, &c->opts, &err)
                         : s->ops->attention(s->state, kv, 1, qb, ob, seqs, 2, AT_HEADS, AT_KV_HEADS, AT_HEAD_DIM,
                                             &err);
    if (rc != 0) {
        fprintf(stderr, "%s: attention: %s\n", s->label, err.message);
        exit(1);
    }
    check_status(s, "attention");
    to_host(s, out, ob, (size_t)AT_ROWS * AT_Q_DIM);
    s->ops->buffer_free(s->state, qb);
    s->ops->kv_destroy(s->state, kv);
}

/* ---- the suite: each case on the backend under test, then on each reference ---- */

static void suite_matmul(const struct side *test, const struct side *refs, int n_refs)
{
    enum { ROWS = 48, COLS = 512 };
    for (size_t t = 0; t < sizeof weight_types / sizeof weight_types[0]; t++) {
        const struct weight_type *wt = &weight_types[t];
        struct cinfer_backend_weight w0 = make_weight(wt->type, ROWS, COLS), w1 = make_weight(wt->type, ROWS, COLS);
        static const int ns[] = {1, 5, 33};
        for (int ni = 0; ni < 3; ni++)
            for (int exact = 0; exact < 2; exact++) {
                int n = ns[ni];
                float *x = malloc(sizeof(float) * n * COLS), bias[ROWS];
                fill(x, (size_t)n * COLS, 1.0f);
                fill(bias, ROWS, 0.5f);
                struct matmul_case c = {{&w0, &w1}, bias, x, n, exact};
                float *got0 = calloc((size_t)n * ROWS, 4), *got1 = calloc((size_t)n * ROWS, 4);
                float *want0 = calloc((size_t)n * ROWS, 4), *want1 = calloc((size_t)n * ROWS, 4);
                enter(test);
                run_matmul(test, &c, got0, got1);
                for (int r = 0; r < n_refs; r++) {
                    enter(&refs[r]);
                    run_matmul(&refs[r], &c, want0, want1);
                    char what[96];
                    snprintf(what, sizeof what, "matmul %s n=%d%s (+bias, 2 outs)", wt->name, n,
                             exact ? " exact_x" : "");
                    /* exact_x takes the f32 path where the fast one rounds x to bf16 */
                    double tol = exact && (wt->type == CINFER_TENSOR_BF16) ? 1e-5 : wt->tol;
                    compare(what, refs[r].label, got0, want0, (size_t)n * ROWS, tol);
                    compare(what, refs[r].label, got1, want1, (size_t)n * ROWS, tol);
                }
                free(x);
                free(got0), free(got1), free(want0), free(want1);
            }
        free((void *)w0.data);
        free((void *)w1.data);
    }
}

static void suite_embedding(const struct side *test, const struct side *refs, int n_refs)
{
    enum { ROWS = 40, COLS = 256, N = 6 };
    const int32_t ids[N] = {0, 39, 7, -1, 40, 7}; /* -1 and 40: outside, rows of zeros */
    for (size_t t = 0; t < sizeof weight_types / sizeof weight_types[0]; t++) {
        struct cinfer_backend_weight w = make_weight(weight_types[t].type, ROWS, COLS);
        float got[N * COLS], want[N * COLS];
        enter(test);
        run_embedding(test, &w, ids, N, got);
        for (int r = 0; r < n_refs; r++) {
            enter(&refs[r]);
            run_embedding(&refs[r], &w, ids, N, want);
            char what[64];
            snprintf(what, sizeof what, "embedding %s", weight_types[t].name);
            compare(what, refs[r].label, got, want, N * COLS, 1e-6); /* widening is exact */
        }
        free((void *)w.data);
    }
}

static void suite_elementwise(const struct side *test, const struct side *refs, int n_refs)
{
    static float a[EW_N], b[EW_N], got[EW_N], want[EW_N];
    for (int op = 0; op < EW_COUNT; op++) {
        fill(a, EW_N, 3.0f);
        fill(b, EW_N, 2.0f);
        enter(test);
        run_elementwise(test, (enum elementwise)op, a, b, got);
        for (int r = 0; r < n_refs; r++) {
            enter(&refs[r]);
            run_elementwise(&refs[r], (enum elementwise)op, a, b, want);
            compare(ew_names[op], refs[r].label, got, want, EW_N, 2e-6);
        }
    }
}

static void suite_attention(const struct side *test, const struct side *refs, int n_refs)
{
    static const struct {
        uint32_t type;
        const char *name;
        double tol; /* the KV's own rounding is the same on both sides: what differs is order */
    } kv_types[] = {{CINFER_KV_F32, "f32", 1e-5}, {CINFER_KV_F16, "f16", 1e-4}, {CINFER_KV_BF16, "bf16", 1e-4},
                    {CINFER_KV_Q8_0, "q8_0", 1e-4}};
    static const struct attn_case shapes[] = {
        {0, {0, 0, 0, NULL}, 0}, {0, {8, 0, 0, NULL}, 1}, {0, {0, 0.05f, 30.0f, NULL}, 1}};
    static const char *const shape_names[] = {"causal", "window 8", "scale+softcap"};
    static float k[2 * 64 * AT_KV_DIM], v[2 * 64 * AT_KV_DIM], q[AT_ROWS * AT_Q_DIM], got[AT_ROWS * AT_Q_DIM],
        want[AT_ROWS * AT_Q_DIM];
    for (size_t t = 0; t < 4; t++)
        for (int sh = 0; sh < 3; sh++) {
            fill(k, sizeof k / sizeof k[0], 1.0f);
            fill(v, sizeof v / sizeof v[0], 1.0f);
            fill(q, sizeof q / sizeof q[0], 1.0f);
            struct attn_case c = shapes[sh];
            c.kv_type = kv_types[t].type;
            memset(got, 0, sizeof got);
            enter(test);
            run_attention(test, &c, k, v, q, got);
            for (int r = 0; r < n_refs; r++) {
                memset(want, 0, sizeof want);
                enter(&refs[r]);
                run_attention(&refs[r], &c, k, v, q, want);
                char what[64];
                snprintf(what, sizeof what, "attention %s, kv %s", shape_names[sh], kv_types[t].name);
                compare(what, refs[r].label, got, want, AT_ROWS * AT_Q_DIM, kv_types[t].tol);
            }
        }
}

/* The mixture-of-experts ops (version 7): moe_route's choices and weights, gather_rows,
 * scatter_add_rows with a row repeated (one token's experts onto its row) and zero. */
enum { MOE_N = 37, MOE_E = 16, MOE_K = 4, MOE_DIM = 96 };

static void run_moe(const struct side *s, const float *logits, const float *x, const int32_t *rows, float *weights_out,
                    int32_t *ids_out, float *gathered, float *summed)
{
    float *bl = to_backend(s, logits, MOE_N * MOE_E), *bx = to_backend(s, x, MOE_N * MOE_DIM);
    s->ops->moe_route(s->state, bl, MOE_N, MOE_E, MOE_K, 1, ids_out, weights_out); /* (N, K) host */
    float *bg = to_backend(s, x, MOE_N * MOE_DIM);
    s->ops->gather_rows(s->state, bg, bx, rows, MOE_N, MOE_DIM); /* (N, DIM) */
    float *by = to_backend(s, x, MOE_N * MOE_DIM);
    s->ops->zero(s->state, by, MOE_N * MOE_DIM);
    s->ops->scatter_add_rows(s->state, by, bx, rows, weights_out, MOE_N, MOE_DIM);
    check_status(s, "mixture-of-experts ops");
    to_host(s, gathered, bg, MOE_N * MOE_DIM);
    to_host(s, summed, by, MOE_N * MOE_DIM);
    s->ops->buffer_free(s->state, bl);
    s->ops->buffer_free(s->state, bx);
}

static void suite_moe(const struct side *test, const struct side *refs, int n_refs)
{
    static float logits[MOE_N * MOE_E], x[MOE_N * MOE_DIM], w0[MOE_N * MOE_K], w1[MOE_N * MOE_K];
    static float g0[MOE_N * MOE_DIM], g1[MOE_N * MOE_DIM], y0[MOE_N * MOE_DIM], y1[MOE_N * MOE_DIM];
    static int32_t ids0[MOE_N * MOE_K], ids1[MOE_N * MOE_K], rows[MOE_N];
    fill(logits, MOE_N * MOE_E, 4.0f);
    fill(x, MOE_N * MOE_DIM, 1.0f);
    for (int r = 0; r < MOE_N; r++)
        rows[r] = r % 5 == 0 ? 3 : (r * 7) % MOE_N; /* row 3 several times */
    enter(test);
    run_moe(test, logits, x, rows, w0, ids0, g0, y0);
    for (int r = 0; r < n_refs; r++) {
        enter(&refs[r]);
        run_moe(&refs[r], logits, x, rows, w1, ids1, g1, y1);
        int same = !memcmp(ids0, ids1, sizeof ids0);
        comparisons++;
        failures += !same;
        printf("%-44s vs %-10s %s\n", "moe_route choices", refs[r].label, same ? "identical ok" : "differ FAIL");
        compare("moe_route weights", refs[r].label, w0, w1, MOE_N * MOE_K, 1e-6);
        compare("gather_rows", refs[r].label, g0, g1, MOE_N * MOE_DIM, 0);
        compare("scatter_add_rows (a row repeated) + zero", refs[r].label, y0, y1, MOE_N * MOE_DIM, 1e-6);
    }
}

/* add_gated (version 9, Qwen2-MoE's shared expert): y row i += sigmoid(gate[i]) * x row
 * i, with gates from strongly negative to strongly positive; checked against the
 * formula in double as well as the references. A backend without the slot is said so. */
enum { GATED_N = 19, GATED_DIM = 72 };

static int has_add_gated(const struct side *s)
{
    return s->ops->version >= 9 && s->ops->add_gated;
}

static void run_add_gated(const struct side *s, const float *y, const float *x, const float *gate, float *out)
{
    float *by = to_backend(s, y, GATED_N * GATED_DIM), *bx = to_backend(s, x, GATED_N * GATED_DIM);
    float *bg = to_backend(s, gate, GATED_N);
    s->ops->add_gated(s->state, by, bx, bg, GATED_N, GATED_DIM); /* (N, DIM) */
    check_status(s, "add_gated");
    to_host(s, out, by, GATED_N * GATED_DIM);
    s->ops->buffer_free(s->state, bx);
    s->ops->buffer_free(s->state, bg);
}

static void suite_add_gated(const struct side *test, const struct side *refs, int n_refs)
{
    static float y[GATED_N * GATED_DIM], x[GATED_N * GATED_DIM], gate[GATED_N];
    static float got[GATED_N * GATED_DIM], want[GATED_N * GATED_DIM];
    if (!has_add_gated(test)) {
        printf("%-44s %s: not offered (ops version %u); models with shared experts are refused there\n",
               "add_gated", test->label, test->ops->version);
        return;
    }
    fill(y, GATED_N * GATED_DIM, 1.0f);
    fill(x, GATED_N * GATED_DIM, 2.0f);
    fill(gate, GATED_N, 12.0f); /* sigmoid from about 6e-6 to 1 - 6e-6 */
    enter(test);
    run_add_gated(test, y, x, gate, got);
    for (int i = 0; i < GATED_N * GATED_DIM; i++)
        want[i] = (float)((double)y[i] + (double)x[i] / (1.0 + exp(-(double)gate[i / GATED_DIM])));
    compare("add_gated", "formula", got, want, GATED_N * GATED_DIM, 1e-6);
    for (int r = 0; r < n_refs; r++) {
        enter(&refs[r]);
        run_add_gated(&refs[r], y, x, gate, want);
        compare("add_gated", refs[r].label, got, want, GATED_N * GATED_DIM, 1e-6);
    }
}

/* ---- matmul_grouped (version 10): products with inputs of their own, in one call ---- */

enum { GROUP_OUTS = 3, GROUP_ROWS = 40, GROUP_COLS = 256, GROUP_COLS_F32 = 96 };

static int has_matmul_grouped(const struct side *s)
{
    return s->ops->version >= 10 &&
           s->ops->struct_size >= offsetof(struct cinfer_backend_ops, matmul_grouped) + sizeof s->ops->matmul_grouped &&
           s->ops->matmul_grouped;
}

/* outs o (n, GROUP_ROWS) = xs[o] · w[o]ᵀ (+ bias on output 0): as one matmul_grouped call
 * (grouped 1) or one matmul per output (grouped 0: what the core does without the slot). */
static void run_matmul_grouped(const struct side *s, const struct cinfer_backend_weight *const *w,
                               const float *const *xs, const float *bias, int n, int grouped, float *const *ys)
{
    struct cinfer_backend_weight p[GROUP_OUTS];
    struct cinfer_backend_matmul_out outs[GROUP_OUTS];
    const float *bx[GROUP_OUTS];
    float *bias_b = to_backend(s, bias, GROUP_ROWS);
    for (int o = 0; o < GROUP_OUTS; o++) {
        p[o] = prepare(s, w[o]);
        bx[o] = to_backend(s, xs[o], (size_t)n * w[o]->cols);
        outs[o] = (struct cinfer_backend_matmul_out){&p[o], o == 0 ? bias_b : NULL,
                                                     to_backend(s, ys[o], (size_t)n * GROUP_ROWS), 0};
    }
    struct cinfer_error err = {0};
    int rc = grouped ? s->ops->matmul_grouped(s->state, bx, n, outs, GROUP_OUTS, &err) : 0;
    for (int o = 0; !grouped && o < GROUP_OUTS && rc == 0; o++)
        rc = s->ops->matmul(s->state, bx[o], n, &outs[o], 1, &err);
    if (rc != 0) {
        fprintf(stderr, "%s: matmul%s: %s\n", s->label, grouped ? "_grouped" : "", err.message);
        exit(1);
    }
    check_status(s, grouped ? "matmul_grouped" : "matmul");
    for (int o = 0; o < GROUP_OUTS; o++) {
        to_host(s, ys[o], outs[o].y, (size_t)n * GROUP_ROWS);
        s->ops->buffer_free(s->state, (void *)bx[o]);
        s->ops->weight_release(s->state, w[o]);
    }
    s->ops->buffer_free(s->state, bias_b);
}

/* Each weight type twice (two experts' down projections) and an f32 weight of other
 * columns in the same call: the backend must keep every output on its own input. */
static void suite_matmul_grouped(const struct side *test, const struct side *refs, int n_refs)
{
    if (!has_matmul_grouped(test)) {
        printf("%-44s %s: not offered (ops version %u); the core calls matmul once per output\n", "matmul_grouped",
               test->label, test->ops->version);
        return;
    }
    for (size_t t = 0; t < sizeof weight_types / sizeof weight_types[0]; t++) {
        const struct weight_type *wt = &weight_types[t];
        struct cinfer_backend_weight w[GROUP_OUTS] = {make_weight(wt->type, GROUP_ROWS, GROUP_COLS),
                                                      make_weight(wt->type, GROUP_ROWS, GROUP_COLS),
                                                      make_weight(CINFER_TENSOR_F32, GROUP_ROWS, GROUP_COLS_F32)};
        const struct cinfer_backend_weight *wp[GROUP_OUTS] = {&w[0], &w[1], &w[2]};
        static const int ns[] = {1, 5};
        for (int ni = 0; ni < 2; ni++) {
            int n = ns[ni];
            float bias[GROUP_ROWS], *xs[GROUP_OUTS], *got[GROUP_OUTS], *want[GROUP_OUTS];
            fill(bias, GROUP_ROWS, 0.5f);
            for (int o = 0; o < GROUP_OUTS; o++) {
                xs[o] = malloc(sizeof(float) * (size_t)n * w[o].cols);
                fill(xs[o], (size_t)n * w[o].cols, 1.0f);
                got[o] = calloc((size_t)n * GROUP_ROWS, sizeof(float));
                want[o] = calloc((size_t)n * GROUP_ROWS, sizeof(float));
            }
            enter(test);
            run_matmul_grouped(test, wp, (const float *const *)xs, bias, n, 1, got);
            for (int r = 0; r < n_refs; r++) {
                enter(&refs[r]);
                run_matmul_grouped(&refs[r], wp, (const float *const *)xs, bias, n, 0, want);
                for (int o = 0; o < GROUP_OUTS; o++) {
                    char what[96];
                    snprintf(what, sizeof what, "matmul_grouped %s n=%d out %d (%s)", wt->name, n, o,
                             o < 2 ? wt->name : "f32");
                    compare(what, refs[r].label, got[o], want[o], (size_t)n * GROUP_ROWS, o < 2 ? wt->tol : 1e-5);
                }
            }
            for (int o = 0; o < GROUP_OUTS; o++)
                free(xs[o]), free(got[o]), free(want[o]);
        }
        for (int o = 0; o < GROUP_OUTS; o++)
            free((void *)w[o].data);
    }
}

/* --perturb: the backend under test with rmsnorm and matmul outputs off by 0.1 %, to
 * show that the suite notices (ctest expects that run to fail). */
static struct cinfer_backend_ops perturbed;
/* ---- logits_top (version 11): rows of logits ranked where they are ---- */

enum { TOP_ROWS = 6, TOP_ASKED = 3, TOP_MAX_K = 64 };

static int has_logits_top(const struct side *s)
{
    return s->ops->version >= 11 &&
           s->ops->struct_size >= offsetof(struct cinfer_backend_ops, logits_top) + sizeof s->ops->logits_top &&
           s->ops->logits_top;
}

/* Rows of logits with what ranking has rules for: equal logits (row 1 repeats a few
 * values everywhere), banned entries at -inf (row 2 every third, index 0 included), a
 * NaN (row 3), a row banned whole (row 4), and plain random rows. */
static void fill_top_rows(float *x, int vocab)
{
    fill(x, (size_t)TOP_ROWS * vocab, 8.0f);
    for (int i = 0; i < vocab; i++) {
        x[1 * vocab + i] = (float)((i * 7) % 5);
        if (i % 3 == 0)
            x[2 * vocab + i] = -INFINITY;
        x[4 * vocab + i] = -INFINITY;
    }
    x[3 * vocab + vocab / 2] = NAN;
}

/* The asked rows' answers on side s, or from the definition (kernels/logits_rank.c) at
 * the kernel level of side s when define is 1. */
static void rank_rows(const struct side *s, int define, const float *host, const float *buffer, int vocab,
                      const int32_t *rows, int k, int with_lse, int32_t *ids, float *logits, int *n, double *lse)
{
    enter(s);
    if (define) {
        for (int r = 0; r < TOP_ASKED; r++) {
            const float *row = host + (size_t)rows[r] * vocab;
            n[r] = cinfer_kernel_logits_top(row, vocab, k, ids + (size_t)r * k, logits + (size_t)r * k);
            lse[r] = with_lse ? cinfer_kernel_log_sum_exp(row, vocab) : 0.0;
        }
        return;
    }
    struct cinfer_error err = {0};
    for (int r = 0; r < TOP_ASKED; r++)
        lse[r] = 0.0;
    if (s->ops->logits_top(s->state, buffer, vocab, rows, TOP_ASKED, k, ids, logits, n, with_lse ? lse : NULL,
                           &err) != 0) {
        fprintf(stderr, "%s: logits_top: %s\n", s->label, err.message);
        exit(1);
    }
    check_status(s, "logits_top");
}

/* Ids, logits and counts must be equal; the log-sum-exp within 1e-12 relative (a device
 * sums in another order). */
static void compare_top(const char *what, const char *ref, int k, const int32_t *got_ids, const float *got_logits,
                        const int *got_n, const double *got_lse, const int32_t *ids, const float *logits,
                        const int *n, const double *lse)
{
    const char *wrong = NULL;
    int at = -1;
    for (int r = 0; r < TOP_ASKED && !wrong; r++) {
        if (got_n[r] != n[r]) {
            wrong = "count";
            at = r;
        }
        for (int j = 0; j < n[r] && !wrong; j++)
            if (got_ids[r * k + j] != ids[r * k + j] || got_logits[r * k + j] != logits[r * k + j]) {
                wrong = "token";
                at = r;
            }
        double d = fabs(got_lse[r] - lse[r]);
        int same = got_lse[r] == lse[r] || (isnan(got_lse[r]) && isnan(lse[r])) || d <= 1e-12 * fabs(lse[r]);
        if (!wrong && !same) {
            wrong = "log-sum-exp";
            at = r;
        }
    }
    comparisons++;
    failures += wrong != NULL;
    printf("%-44s vs %-10s %s", what, ref, wrong ? "FAIL" : "ok\n");
    if (wrong)
        printf(": asked row %d differs in its %s (%d vs %d entries, lse %.17g vs %.17g)\n", at, wrong, got_n[at],
               n[at], got_lse[at], lse[at]);
}

struct ranked_entry {
    float logit;
    int32_t id;
};

static int by_rank(const void *a, const void *b)
{
    const struct ranked_entry *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The definition itself against a whole sort of the row's rankable entries. */
static void check_definition_by_sort(const float *host, int vocab, const int32_t *rows, int k, const int32_t *ids,
                                     const float *logits, const int *n)
{
    struct ranked_entry *all = malloc((size_t)vocab * sizeof *all);
    int bad = 0;
    for (int r = 0; r < TOP_ASKED; r++) {
        const float *row = host + (size_t)rows[r] * vocab;
        int m = 0;
        for (int i = 0; i < vocab; i++)
            if (!isnan(row[i]) && !(isinf(row[i]) && row[i] < 0))
                all[m++] = (struct ranked_entry){row[i], i};
        qsort(all, (size_t)m, sizeof *all, by_rank);
        int want = m < k ? m : k;
        bad |= n[r] != want;
        for (int j = 0; j < want && !bad; j++)
            bad |= ids[r * k + j] != all[j].id || logits[r * k + j] != all[j].logit;
    }
    free(all);
    comparisons++;
    failures += bad;
    printf("%-44s vs %-10s %s\n", "logits_top definition", "a sort", bad ? "FAIL" : "ok");
}

static void suite_logits_top(const struct side *test, const struct side *refs, int n_refs)
{
    if (!has_logits_top(test)) {
        printf("%-44s %s: not offered (ops version %u); the core ranks rows on the host\n", "logits_top",
               test->label, test->ops->version);
        return;
    }
    static const int vocabs[] = {1, 7, 300, 49152};
    static const int ks[] = {1, 5, 20, TOP_MAX_K};
    static const int32_t rows[TOP_ASKED] = {3, 0, 2};
    static const int32_t rows_ties[TOP_ASKED] = {1, 4, 5};
    int32_t got_ids[TOP_ASKED * TOP_MAX_K], ids[TOP_ASKED * TOP_MAX_K];
    float got_logits[TOP_ASKED * TOP_MAX_K], logits[TOP_ASKED * TOP_MAX_K];
    int got_n[TOP_ASKED], n[TOP_ASKED];
    double got_lse[TOP_ASKED], lse[TOP_ASKED];
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        int vocab = vocabs[v];
        float *host = malloc((size_t)TOP_ROWS * vocab * sizeof *host);
        fill_top_rows(host, vocab);
        enter(test);
        float *buffer = to_backend(test, host, (size_t)TOP_ROWS * vocab);
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int set = 0; set < 2; set++) {
                int k = ks[ki], with_lse = (set + (int)ki) % 2;
                const int32_t *asked = set ? rows_ties : rows;
                rank_rows(test, 0, host, buffer, vocab, asked, k, with_lse, got_ids, got_logits, got_n, got_lse);
                for (int r = 0; r < n_refs; r++) {
                    rank_rows(&refs[r], 1, host, NULL, vocab, asked, k, with_lse, ids, logits, n, lse);
                    char what[96];
                    snprintf(what, sizeof what, "logits_top vocab=%d k=%d rows %s%s", vocab, k,
                             set ? "ties/banned" : "nan/plain/banned", with_lse ? " lse" : "");
                    compare_top(what, refs[r].label, k, got_ids, got_logits, got_n, got_lse, ids, logits, n, lse);
                    check_definition_by_sort(host, vocab, asked, k, ids, logits, n);
                }
            }
        enter(test);
        test->ops->buffer_free(test->state, buffer);
        free(host);
    }
}

/* ---- sample (version 12): tokens drawn where the logits are ---- */

enum { SAMPLE_ASKED = 5 };

static int has_sample(const struct side *s)
{
    return s->ops->version >= 12 &&
           s->ops->struct_size >= offsetof(struct cinfer_backend_ops, sample) + sizeof s->ops->sample && s->ops->sample;
}

/* Draws rows asked (TOP_ROWS rows of vocab at host, a buffer of side s) with params:
 * on side s (its rows left divided by the temperature come back to divided), or by the
 * definition, the host's sampler (define 1: divided is the host copy, divided there). */
static void sample_rows(const struct side *s, int define, const float *host, int vocab, const int32_t *asked,
                        const struct cinfer_backend_sample_params *params, int32_t *ids, float *logits, float *divided)
{
    enter(s);
    memcpy(divided, host, (size_t)TOP_ROWS * vocab * sizeof *divided);
    if (define) {
        struct cinfer_sampler sampler;
        if (cinfer_sampler_init(&sampler, vocab) != 0) {
            fprintf(stderr, "sample: out of memory for a sampler of %d tokens\n", vocab);
            exit(1);
        }
        for (int r = 0; r < SAMPLE_ASKED; r++) {
            float *row = divided + (size_t)asked[r] * vocab;
            ids[r] = cinfer_sampler_draw(&sampler, row, &params[r]);
            logits[r] = row[ids[r]];
        }
        cinfer_sampler_free(&sampler);
        return;
    }
    float *buffer = to_backend(s, host, (size_t)TOP_ROWS * vocab);
    struct cinfer_error err = {0};
    if (s->ops->sample(s->state, buffer, vocab, asked, SAMPLE_ASKED, params, ids, logits, &err) != 0) {
        fprintf(stderr, "%s: sample: %s\n", s->label, err.message);
        exit(1);
    }
    check_status(s, "sample");
    to_host(s, divided, buffer, (size_t)TOP_ROWS * vocab);
}

/* Tokens and their logits equal, and every row bit for bit as the host's sampler leaves
 * it: the draws here land nowhere near a cut, where a device's sums in another order
 * could tip a token. */
static void suite_sample(const struct side *test, const struct side *refs, int n_refs)
{
    if (!has_sample(test)) {
        printf("%-44s %s: not offered (ops version %u); the core samples rows on the host\n", "sample", test->label,
               test->ops->version);
        return;
    }
    static const int vocabs[] = {7, 300, 49152};
    /* plain random, ties, every third banned, banned whole, plain random */
    static const int32_t asked[SAMPLE_ASKED] = {0, 1, 2, 4, 5};
    static const struct cinfer_backend_sample_params cases[][SAMPLE_ASKED] = {
        {{1.0f, 0, 1.0f, 0.0f, 0.31}, {0.7f, 0, 1.0f, 0.0f, 0.62}, {1.3f, 0, 1.0f, 0.0f, 0.05},
         {1.0f, 0, 1.0f, 0.0f, 0.5}, {0.5f, 0, 1.0f, 0.0f, 0.93}},
        {{0.8f, 40, 1.0f, 0.0f, 0.27}, {1.0f, 3, 1.0f, 0.0f, 0.71}, {0.6f, 1, 1.0f, 0.0f, 0.44},
         {1.0f, 5, 0.9f, 0.0f, 0.4}, {1.1f, 20, 0.8f, 0.1f, 0.66}},
        {{1.0f, 0, 0.9f, 0.0f, 0.12}, {0.7f, 0, 0.5f, 0.0f, 0.83}, {1.0f, 0, 0.95f, 0.05f, 0.58},
         {1.0f, 0, 1.0f, 0.2f, 0.3}, {0.9f, 0, 1.0f, 0.3f, 0.77}}};
    static const char *const case_names[] = {"temperature", "top-k (and top-p, min-p)", "top-p, min-p"};
    int32_t got_ids[SAMPLE_ASKED], ids[SAMPLE_ASKED];
    float got_logits[SAMPLE_ASKED], logits[SAMPLE_ASKED];
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        int vocab = vocabs[v];
        size_t n = (size_t)TOP_ROWS * vocab;
        float *host = malloc(n * sizeof *host), *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
        fill_top_rows(host, vocab);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            sample_rows(test, 0, host, vocab, asked, cases[c], got_ids, got_logits, got);
            for (int r = 0; r < n_refs; r++) {
                sample_rows(&refs[r], 1, host, vocab, asked, cases[c], ids, logits, want);
                int row = -1;
                for (int a = 0; a < SAMPLE_ASKED && row < 0; a++)
                    if (got_ids[a] != ids[a] || memcmp(&got_logits[a], &logits[a], sizeof logits[a]) ||
                        memcmp(got + (size_t)asked[a] * vocab, want + (size_t)asked[a] * vocab,
                               (size_t)vocab * sizeof *got))
                        row = a;
                char what[96];
                snprintf(what, sizeof what, "sample vocab=%d %s", vocab, case_names[c]);
                comparisons++;
                failures += row >= 0;
                printf("%-44s vs %-10s %s", what, refs[r].label, row >= 0 ? "FAIL" : "ok\n");
                if (row >= 0)
                    printf(": asked row %d: token %d (logit %.9g) vs %d (logit %.9g), or its divided logits differ\n",
                           asked[row], got_ids[row], (double)got_logits[row], ids[row], (double)logits[row]);
            }
        }
        free(host);
        free(got);
        free(want);
    }
}

static const struct cinfer_backend_ops *unperturbed;

static void perturbed_rmsnorm(void *state, float *y, const float *x, int n_rows, int dim, const float *w, float eps)
{
    unperturbed->rmsnorm(state, y, x, n_rows, dim, w, eps);
    unperturbed->scale(state, y, (size_t)n_rows * dim, 1.001f);
}

static int perturbed_matmul(void *state, const float *x, int n, const struct cinfer_backend_matmul_out *outs,
                            int n_outs, struct cinfer_error *err)
{
    int rc = unperturbed->matmul(state, x, n, outs, n_outs, err);
    for (int i = 0; rc == 0 && i < n_outs; i++)
        unperturbed->scale(state, outs[i].y, (size_t)n * outs[i].w->rows, 1.001f);
    return rc;
}

static int perturbed_logits_top(void *state, const float *logits, int vocab, const int32_t *rows, int n_rows, int k,
                                int32_t *top_ids, float *top_logits, int *n_top, double *log_sum_exp,
                                struct cinfer_error *err)
{
    int rc = unperturbed->logits_top(state, logits, vocab, rows, n_rows, k, top_ids, top_logits, n_top, log_sum_exp,
                                     err);
    for (int r = 0; rc == 0 && log_sum_exp && r < n_rows; r++)
        log_sum_exp[r] *= 1.001;
    return rc;
}

static int perturbed_sample(void *state, float *logits, int vocab, const int32_t *rows, int n_rows,
                            const struct cinfer_backend_sample_params *params, int32_t *token_ids,
                            float *token_logits, struct cinfer_error *err)
{
    int rc = unperturbed->sample(state, logits, vocab, rows, n_rows, params, token_ids, token_logits, err);
    for (int r = 0; rc == 0 && r < n_rows; r++)
        token_ids[r] = (token_ids[r] + 1) % vocab;
    return rc;
}

static const struct cinfer_backend_ops *perturb(const struct cinfer_backend_ops *ops)
{
    unperturbed = ops;
    perturbed = *ops;
    perturbed.rmsnorm = perturbed_rmsnorm;
    perturbed.matmul = perturbed_matmul;
    if (has_logits_top(&(struct side){.ops = ops}))
        perturbed.logits_top = perturbed_logits_top;
    if (has_sample(&(struct side){.ops = ops}))
        perturbed.sample = perturbed_sample;
    return &perturbed;
}

static void create_side(struct side *s, const struct cinfer_backend_ops *ops, const char *label, int level)
{
    s->label = label;
    s->ops = ops;
    s->level = level;
    enter(s);
    struct cinfer_backend_create_options o = {.struct_size = sizeof o, .n_threads = N_THREADS, .device = 0};
    struct cinfer_error err = {0};
    if (ops->create_on(&o, &s->state, &err) != 0) {
        fprintf(stderr, "%s: create_on: %s\n", label, err.message);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *backend = NULL, *plugin_path = NULL;
    int perturbing = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--perturb"))
            perturbing = 1;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--plugin-path") && i + 1 < argc)
            plugin_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--backend NAME|FILE] [--plugin-path DIRS] [--perturb]\n", argv[0]);
            return 2;
        }
    }
    struct cinfer_plugin *plugin = NULL;
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    if (backend) {
        struct cinfer_error err = {0};
        int rc = cinfer_backend_select(backend, plugin_path, &plugin, &err);
        /* missing, or no device here: a skip; a plugin that is there but refused is a failure */
        if (rc == CINFER_ERR_NOT_FOUND || rc == CINFER_ERR_UNSUPPORTED) {
            printf("SKIP: backend %s cannot run here: %s\n", backend, err.message);
            return SKIP;
        }
        if (rc != 0) {
            printf("FAIL: backend %s: %s\n", backend, err.message);
            return 1;
        }
        ops = cinfer_plugin_vtable(plugin);
    }
    if (perturbing)
        ops = perturb(ops);
    int best = (int)cinfer_kernels_best_level();
    char test_label[64];
    snprintf(test_label, sizeof test_label, "%s%s%s", ops->name, plugin ? "" : "/",
             plugin ? "" : cinfer_kernels_level_name((enum cinfer_kernel_level)best));
    struct side test, refs[2];
    create_side(&test, ops, test_label, plugin ? -1 : best);
    create_side(&refs[0], cinfer_cpu_backend_ops(), best == CINFER_KERNEL_AVX512 ? "cpu/avx512"
                                                    : best == CINFER_KERNEL_AVX2 ? "cpu/avx2" : "cpu/scalar", best);
    create_side(&refs[1], cinfer_cpu_backend_ops(), "scalar", CINFER_KERNEL_SCALAR);
    printf("backend under test: %s (%s); references: %s and the scalar kernels\n", test_label,
           plugin ? cinfer_plugin_file(plugin) : "built-in", refs[0].label);

    suite_embedding(&test, refs, 2);
    suite_matmul(&test, refs, 2);
    suite_elementwise(&test, refs, 2);
    suite_attention(&test, refs, 2);
    suite_moe(&test, refs, 2);
    suite_add_gated(&test, refs, 2);
    suite_matmul_grouped(&test, refs, 2);
    suite_logits_top(&test, refs, 2);
    suite_sample(&test, refs, 2);

    test.ops->destroy(test.state);
    refs[0].ops->destroy(refs[0].state);
    refs[1].ops->destroy(refs[1].state);
    cinfer_kernels_force_level((enum cinfer_kernel_level)best);
    cinfer_plugin_close(&plugin);
    printf("%d comparisons, %d beyond tolerance\n", comparisons, failures);
    return failures ? 1 : 0;
}
