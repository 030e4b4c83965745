/* Tensor parallelism on the random reference models of test_model_reference (every
 * family: llama with GQA, llama3 with one KV head and RoPE scaling, mistral with
 * head_dim 24, qwen2 with q/k/v biases, qwen3 with q/k norms; every format and weight
 * type: safetensors and GGUF, f32, f16, bf16, Q8_0). Each model runs the tp_group
 * scenario (mixed prefill and decode batches, a shared prefix, plans decoded by the
 * followers) at tp_size 2 as forked processes and at tp_size 4 as threads (4 query heads
 * over 4 ranks: one each, the KV heads shared by 2 or 4 ranks), and rank 0's logits must
 * equal tp_size 1's with the same greedy tokens: within the f32 bound (1e-4 relative)
 * where the weights multiply x as it is (f32, f16, BF16 without AVX512_BF16). Where the
 * kernels round x first (to int16 blocks for Q8_0 weights; to bf16 for BF16 weights on
 * CPUs with AVX512_BF16) an f32-rounding difference in the residual stream (the
 * all-reduce adds partial sums in another order) can move a value across a rounding
 * step, so the bound is the rounding's own: 1e-3 for Q8_0 (int16 steps of 2^-15 of a
 * block's largest value), and the backend's 16-bit bound 2e-2 for rounded bf16; the
 * block-quantized types (Q4_0 .. MXFP4) quantize x to int8 blocks, so a step is 1/127 of
 * a block's largest value: test_model_reference's bounds, 3e-2 for blocks of 32 and 4e-2
 * for 256. A shape that does not split (a block-typed wo or w_down whose per-rank columns
 * are not whole blocks) must be refused by cinfer_runtime_tp_check and by the runtime,
 * with the numbers (llamak's 256-column wo does not split the K-quants; llamakw, 1024
 * columns, splits them over 2 and 4 ranks). The mixtures of experts (qwen3_moe,
 * qwen3_moe_mixed, mixtral, qwen2_moe and qwen2_moe_mixed with the gated shared expert,
 * gpt_oss with biases, sinks and the clamped SwiGLU) run the same way, every expert's
 * width split over the ranks; where a Q8_0 expert's down columns leave a rank no whole
 * block (qwen3_moe's 32 at tp_size 2, mixtral's 64 at 4) the refusal names the model, the
 * tensor, the width, tp_size and the block. A second case runs each family's f32 file
 * at tp_size 2 with f16, bf16 and q8_0 KV against tp_size 1 with the same KV type. A
 * third holds every f32 mixture of experts at tp_size 2 and 4 to the float64 numpy
 * reference itself (its prompts, its greedy tokens, the f32 bound), and a fourth checks
 * the refusal of an expert width that does not split in whole blocks on its own. A fifth
 * holds an expert width that splits unevenly (qwen3_moe_uneven's 3 Q8_0 blocks over 2
 * ranks: 32 and 64 columns) to tp_size 1 and the float64 reference. Then expert
 * parallelism (ep_size == tp_size: whole experts per rank): every mixture of experts at
 * ep_size 2 and 4, decode batched and batch 1, each rank's model stripped of the experts it
 * does not own, against tp_size 1 and (f32) the float64 reference, with what each rank
 * reads in place; and the refusals of an ep_size other than 1 or tp_size and of fewer
 * experts than ranks. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model/model.h"
#include "model/runtime.h"
#include "model/runtime_internal.h"
#include "support/relative_error.h"
#include "support/runner.h"
#include "support/tp_group.h"

#define SKIP_EXIT_CODE 77
#define MAX_MODELS 160
#define TOLERANCE_F32 1e-4
#define TOLERANCE_Q8_X 1e-3
#define TOLERANCE_BF16_X 2e-2
#define TOLERANCE_INT8_X32 3e-2  /* block types: x in int8 blocks of 32, as test_model_reference bounds them */
#define TOLERANCE_INT8_X256 4e-2 /* and of 256 (the K-quants and IQ4_XS) */

static double tolerance_of(const char *wtype)
{
    if (!strcmp(wtype, "q8_0"))
        return TOLERANCE_Q8_X;
    if (!strcmp(wtype, "bf16") && cinfer_kernel_rounds_x_to_bf16(CINFER_KW_BF16))
        return TOLERANCE_BF16_X;
    for (int t = 0; t < CINFER_KW_TYPE_COUNT; t++) {
        const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info((enum cinfer_kernel_wtype)t);
        if (info && cinfer_kernel_is_block_quant((enum cinfer_kernel_wtype)t) && !strcmp(info->name, wtype))
            return info->block_values > 32 ? TOLERANCE_INT8_X256 : TOLERANCE_INT8_X32;
    }
    if (strcmp(wtype, "f32") && strcmp(wtype, "f16") && strcmp(wtype, "bf16"))
        return TOLERANCE_INT8_X256; /* a mix of types (q4_K_m) */
    return TOLERANCE_F32;
}

struct model_case {
    char name[96];
    char path[PATH_MAX];
    char wtype[16];
    char ref_path[PATH_MAX]; /* the float64 reference's .ref (model_reference.py documents it) */
};

static int manifest_read(struct model_case *cases, int max_cases)
{
    const char *manifest = CINFER_REFERENCE_DIR "/manifest.tsv";
    FILE *f = fopen(manifest, "r");
    ck_assert_msg(f != NULL, "%s is missing: the ctest fixture model_reference_data writes it", manifest);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *save = NULL;
        const char *fields[4];
        int k = 0;
        for (char *tok = strtok_r(line, "\t\n", &save); tok && k < 4; tok = strtok_r(NULL, "\t\n", &save))
            fields[k++] = tok;
        if (k == 0)
            continue;
        ck_assert_msg(k == 4 && n < max_cases, "%s: line %d is not name, path, type, .ref path", manifest, n + 1);
        snprintf(cases[n].name, sizeof cases[n].name, "%s", fields[0]);
        snprintf(cases[n].path, sizeof cases[n].path, "%s/%s", CINFER_REFERENCE_DIR, fields[1]);
        snprintf(cases[n].wtype, sizeof cases[n].wtype, "%s", fields[2]);
        snprintf(cases[n].ref_path, sizeof cases[n].ref_path, "%s/%s", CINFER_REFERENCE_DIR, fields[3]);
        n++;
    }
    fclose(f);
    ck_assert_msg(n > 0, "%s lists no models", manifest);
    return n;
}

static void reference_group_kv(struct tp_group *g, const char *path, int tp_size, enum cinfer_test_ranks_mode mode,
                               int vocab, enum cinfer_kv_cache_dtype kv_dtype)
{
    memset(g, 0, sizeof *g);
    snprintf(g->model_path, sizeof g->model_path, "%s", path);
    g->tp_size = tp_size;
    g->mode = mode;
    g->chunk_bytes = 4096; /* the prefill's all-reduces and the logits' gather take several chunks */
    g->options = (struct cinfer_runtime_options){
        .kv_cache_bytes = 1u << 20, .kv_page_tokens = 4, .n_threads = 1, .max_batch_tokens = 64,
        .kv_dtype = kv_dtype};
    struct tp_scenario *sc = &g->scenario;
    sc->na = 23;
    sc->nb = 6;
    sc->n_gen = 10;
    tp_scenario_prompt(sc->prompt_a, sc->na, vocab, 11);
    tp_scenario_prompt(sc->prompt_b, sc->nb, vocab, 12);
}

/* Held to the float64 reference: f32 K/V. */
static void reference_group(struct tp_group *g, const char *path, int tp_size, enum cinfer_test_ranks_mode mode,
                            int vocab)
{
    reference_group_kv(g, path, tp_size, mode, vocab, CINFER_KV_CACHE_DTYPE_F32);
}

START_TEST(reference_models_match_tp1_at_2_and_4_ranks)
{
    static struct model_case cases[MAX_MODELS];
    int n_cases = manifest_read(cases, MAX_MODELS);
    int n_run = 0, n_refused = 0;
    for (int i = 0; i < n_cases; i++) {
        const struct model_case *mc = &cases[i];
        struct cinfer_model *model = NULL;
        struct cinfer_error err = {0};
        struct cinfer_model_load_options lo = {.no_prefault = 1};
        ck_assert_msg(cinfer_model_load(mc->path, &lo, &model, &err) == 0, "%s: %s", mc->name, err.message);
        int vocab = model->config.vocab_size;
        char why[1024];
        struct tp_group base;
        reference_group(&base, mc->path, 1, CINFER_TEST_RANKS_THREADS, vocab);
        ck_assert_msg(tp_group_run(&base, why, sizeof why) == 0, "%s tp_size 1: %s", mc->name, why);
        const struct {
            int tp;
            enum cinfer_test_ranks_mode mode;
        } runs[] = {{2, CINFER_TEST_RANKS_PROCESSES}, {4, CINFER_TEST_RANKS_THREADS}};
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            struct tp_group g;
            reference_group(&g, mc->path, runs[k].tp, runs[k].mode, vocab);
            int int8_x = tolerance_of(mc->wtype) > TOLERANCE_BF16_X; /* x in int8 blocks */
            if (int8_x) { /* feed tp_size 1's tokens: a flip at a near tie must not change the rows after it */
                g.scenario.n_forced = base.shared->record.n_tokens;
                memcpy(g.scenario.forced, base.shared->record.tokens, sizeof(int32_t) * (size_t)g.scenario.n_forced);
            }
            if (cinfer_runtime_tp_check(model, runs[k].tp, &err) != 0) {
                printf("  %-24s %-5s tp_size %d: refused: %s\n", mc->name, mc->wtype, runs[k].tp, err.message);
                /* only block types refuse: whole blocks of wo's, w_down's or an expert's down columns */
                ck_assert_msg(strcmp(mc->wtype, "f32") && strcmp(mc->wtype, "f16") && strcmp(mc->wtype, "bf16") &&
                                  (strstr(err.message, "not whole blocks of") || strstr(err.message, "in blocks of") ||
                                   (strstr(err.message, "expert down is") && strstr(err.message, mc->path))),
                              "%s tp_size %d refused for another reason: %s", mc->name, runs[k].tp, err.message);
                /* the runtime refuses it the same way */
                int failed = tp_group_run(&g, why, sizeof why);
                ck_assert_msg(failed > 0 && (strstr(why, "not whole blocks of") || strstr(why, "in blocks of") ||
                                             strstr(why, "whole blocks of")),
                              "%s tp_size %d ran: %s", mc->name, runs[k].tp, why);
                n_refused++;
                tp_group_free(&g);
                continue;
            }
            int failed = tp_group_run(&g, why, sizeof why);
            ck_assert_msg(failed == 0, "%s tp_size %d: %s", mc->name, runs[k].tp, why);
            double rel, abs_diff;
            double tolerance = tolerance_of(mc->wtype);
            int bad = tp_record_compare(&base.shared->record, &g.shared->record, tolerance, &rel, &abs_diff, why,
                                        sizeof why);
            int flips = 0;
            for (int t = 0; int8_x && t < base.shared->record.n_tokens; t++)
                flips += base.shared->record.tokens[t] != g.shared->record.tokens[t];
            if (int8_x && bad && flips > 0 && !strncmp(why, "greedy token", 12))
                bad = 0; /* every row within the bound: the flips are near ties (counted below) */
            printf("  %-24s %-5s tp_size %d (%s): %d rows, worst relative error %.3g (bound %.0e), largest |diff| "
                   "%.3g, greedy %s (%d of %d tokens differ%s)\n",
                   mc->name, mc->wtype, runs[k].tp, runs[k].mode == CINFER_TEST_RANKS_THREADS ? "threads" : "processes",
                   g.shared->record.n_rows, rel, tolerance, abs_diff,
                   bad ? "DIFFERENT" : flips ? "flips at near ties" : "the same", flips,
                   base.shared->record.n_tokens, int8_x ? ", tp_size 1's fed" : "");
            ck_assert_msg(!bad, "%s tp_size %d against tp_size 1: %s", mc->name, runs[k].tp, why);
            n_run++;
            tp_group_free(&g);
        }
        tp_group_free(&base);
        cinfer_model_free(&model);
    }
    printf("%d tensor-parallel runs matched tp_size 1, %d shapes refused\n", n_run, n_refused);
    ck_assert_int_gt(n_run, 2 * n_cases - n_refused - 1);
}
END_TEST

/* The 16-bit and q8_0 KV caches under tensor parallelism: each rank stores its own heads'
 * K/V in the chosen type, and rank 0's logits must equal tp_size 1's with the same KV
 * type. A rank computes its heads' K/V from the same x as tp_size 1 but for the
 * all-reduce's order of partial sums, so a stored value may land one rounding step of
 * the KV type away: the bound is that step's (f16 2^-11, bf16 2^-8, q8_0 1/127 of a
 * block's largest value) carried through the softmax, with tp_size 1's tokens fed. */
START_TEST(kv_types_under_tp_match_tp1_with_the_same_kv)
{
    static struct model_case cases[MAX_MODELS];
    int n_cases = manifest_read(cases, MAX_MODELS);
    const struct {
        enum cinfer_kv_cache_dtype dtype;
        const char *name;
        double tolerance;
    } kv_types[] = {{CINFER_KV_CACHE_DTYPE_F16, "f16", 2e-3},
                    {CINFER_KV_CACHE_DTYPE_BF16, "bf16", 2e-2},
                    {CINFER_KV_CACHE_DTYPE_Q8_0, "q8_0", 2e-2}};
    int n_run = 0;
    for (int i = 0; i < n_cases; i++) {
        const struct model_case *mc = &cases[i];
        if (strcmp(mc->wtype, "f32") || !strstr(mc->name, "-gguf-"))
            continue; /* one file per family: the weights multiply x as it is */
        struct cinfer_model *model = NULL;
        struct cinfer_error err = {0};
        struct cinfer_model_load_options lo = {.no_prefault = 1};
        ck_assert_msg(cinfer_model_load(mc->path, &lo, &model, &err) == 0, "%s: %s", mc->name, err.message);
        int vocab = model->config.vocab_size, head_dim = model->config.head_dim;
        int splits = cinfer_runtime_tp_check(model, 2, &err) == 0;
        cinfer_model_free(&model);
        if (!splits)
            continue;
        for (size_t k = 0; k < sizeof kv_types / sizeof kv_types[0]; k++) {
            if (kv_types[k].dtype == CINFER_KV_CACHE_DTYPE_Q8_0 && head_dim % 32)
                continue; /* q8_0 K/V blocks of 32 per head: refused for this head_dim (test_kv_cache shows it) */
            char why[1024];
            struct tp_group base, g;
            reference_group_kv(&base, mc->path, 1, CINFER_TEST_RANKS_THREADS, vocab, kv_types[k].dtype);
            ck_assert_msg(tp_group_run(&base, why, sizeof why) == 0, "%s tp_size 1: %s", mc->name, why);
            reference_group_kv(&g, mc->path, 2, CINFER_TEST_RANKS_PROCESSES, vocab, kv_types[k].dtype);
            g.scenario.n_forced = base.shared->record.n_tokens;
            memcpy(g.scenario.forced, base.shared->record.tokens, sizeof(int32_t) * (size_t)g.scenario.n_forced);
            ck_assert_msg(tp_group_run(&g, why, sizeof why) == 0, "%s tp_size 2: %s", mc->name, why);
            double rel, abs_diff;
            int bad = tp_record_compare(&base.shared->record, &g.shared->record, kv_types[k].tolerance, &rel,
                                        &abs_diff, why, sizeof why);
            int flips = 0;
            for (int t = 0; t < base.shared->record.n_tokens; t++)
                flips += base.shared->record.tokens[t] != g.shared->record.tokens[t];
            if (bad && flips > 0 && !strncmp(why, "greedy token", 12))
                bad = 0; /* every row within the bound: the flips are near ties (counted below) */
            printf("  %-24s kv %-4s tp_size 2: %d rows, worst relative error %.3g (bound %.0e), largest |diff| %.3g, "
                   "%d of %d greedy tokens differ\n",
                   mc->name, kv_types[k].name, g.shared->record.n_rows, rel, kv_types[k].tolerance, abs_diff, flips,
                   base.shared->record.n_tokens);
            ck_assert_msg(!bad, "%s kv %s tp_size 2 against tp_size 1: %s", mc->name, kv_types[k].name, why);
            n_run++;
            tp_group_free(&g);
            tp_group_free(&base);
        }
    }
    printf("%d tensor-parallel runs with 16-bit and q8_0 KV matched tp_size 1 with the same KV\n", n_run);
    ck_assert_int_gt(n_run, 0);
}
END_TEST

/* ---- the float64 reference itself -------------------------------------------------- */

/* One sequence of a .ref file: the prompt and the reference's greedy continuation, and
 * the logits row after each token but the last. */
struct ref_seq {
    int n_prompt, n_gen;
    int32_t *tokens; /* (n_prompt + n_gen) */
    double *logits;  /* (n_prompt + n_gen - 1, vocab) */
};

/* Reads sequences A and B of a .ref file (model_reference.py write_ref: "CINFREF1", u32
 * vocab, u32 n_seqs, then per sequence u32 n_prompt, u32 n_gen, i32 tokens, f64 logits). */
static void ref_read(const char *path, int vocab, struct ref_seq seqs[2])
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    char magic[8];
    uint32_t header[2];
    ck_assert_msg(fread(magic, 1, 8, f) == 8 && memcmp(magic, "CINFREF1", 8) == 0, "%s: magic is not CINFREF1", path);
    ck_assert_msg(fread(header, 4, 2, f) == 2 && (int)header[0] == vocab && header[1] >= 2,
                  "%s: vocab %u and %u sequences, expected vocab %d and at least 2", path, header[0], header[1], vocab);
    for (int s = 0; s < 2; s++) {
        uint32_t counts[2];
        ck_assert_msg(fread(counts, 4, 2, f) == 2 && counts[0] > 1 && counts[0] <= TP_MAX_PROMPT && counts[1] > 1 &&
                          counts[1] <= TP_MAX_GEN,
                      "%s: sequence %d's counts are unreadable or out of the scenario's range", path, s);
        struct ref_seq *q = &seqs[s];
        q->n_prompt = (int)counts[0];
        q->n_gen = (int)counts[1];
        size_t n_tokens = (size_t)(q->n_prompt + q->n_gen), n_logits = (n_tokens - 1) * (size_t)vocab;
        q->tokens = malloc(n_tokens * sizeof *q->tokens);
        q->logits = malloc(n_logits * sizeof *q->logits);
        ck_assert(q->tokens && q->logits);
        ck_assert_msg(fread(q->tokens, sizeof *q->tokens, n_tokens, f) == n_tokens &&
                          fread(q->logits, sizeof *q->logits, n_logits, f) == n_logits,
                      "%s: sequence %d is truncated", path, s);
    }
    fclose(f);
}

/* Frees what ref_read read. */
static void ref_free(struct ref_seq seqs[2])
{
    for (int s = 0; s < 2; s++) {
        free(seqs[s].tokens);
        free(seqs[s].logits);
    }
}

/* Which reference row (sequence 0 = A, 1 = B; position) each row of a tp_group record is,
 * in the order support/tp_group.c's scenario asks them: A's second prefill part, B's last
 * prompt row, then per decode step A's row (at the first step C's rows, A's positions from
 * its first shared page on), then B's. Returns the count. */
static int scenario_rows(const struct tp_scenario *sc, int page_tokens, int *seq, int *pos, int cap)
{
    int n = 0, split = sc->na / 2, shared = (sc->na - 1) / page_tokens * page_tokens;
#define ROW(s, p) (n < cap ? (void)(seq[n] = (s), pos[n] = (p)) : (void)0, n++)
    for (int p = split; p < sc->na; p++)
        ROW(0, p);
    ROW(1, sc->nb - 1);
    for (int j = 0; j < sc->n_gen; j++) {
        ROW(0, sc->na + j);
        for (int p = shared; j == 0 && p < sc->na; p++)
            ROW(0, p);
        ROW(1, sc->nb + j);
    }
#undef ROW
    return n;
}

/* g's scenario on the float64 reference's own prompts A and B, every decode step fed the
 * reference's tokens. */
static void scenario_from_reference(struct tp_group *g, const struct ref_seq ref[2])
{
    struct tp_scenario *sc = &g->scenario;
    sc->na = ref[0].n_prompt;
    sc->nb = ref[1].n_prompt;
    memcpy(sc->prompt_a, ref[0].tokens, sizeof(int32_t) * (size_t)sc->na);
    memcpy(sc->prompt_b, ref[1].tokens, sizeof(int32_t) * (size_t)sc->nb);
    sc->n_gen = (ref[0].n_gen < ref[1].n_gen ? ref[0].n_gen : ref[1].n_gen) - 1;
    sc->n_forced = 2 * (sc->n_gen + 1); /* A's and B's reference tokens, step by step */
    for (int t = 0; t <= sc->n_gen; t++) {
        sc->forced[2 * t] = ref[0].tokens[ref[0].n_prompt + t];
        sc->forced[2 * t + 1] = ref[1].tokens[ref[1].n_prompt + t];
    }
}

/* How far a run of scenario_from_reference's scenario is from the reference: the worst
 * relative error of a logits row (NaN counts as worst) and which row it is (*worst_seq 0
 * A, 1 B; *worst_pos), and in *differ how many greedy tokens are not the reference's. */
static double error_against_reference(const struct tp_group *g, const struct ref_seq ref[2], int vocab,
                                      const char *name, int *worst_seq, int *worst_pos, int *differ)
{
    const struct tp_record *rec = &g->shared->record;
    const struct tp_scenario *sc = &g->scenario;
    int seq[256], pos[256];
    int n_rows = scenario_rows(sc, g->options.kv_page_tokens, seq, pos, 256);
    ck_assert_msg(n_rows == rec->n_rows && n_rows <= 256, "%s: the scenario asked %d rows, %d were recorded", name,
                  n_rows, rec->n_rows);
    double worst = 0;
    int worst_row = 0;
    for (int r = 0; r < n_rows; r++) {
        const struct ref_seq *q = &ref[seq[r]];
        double e = cinfer_test_relative_error(rec->logits + (size_t)r * vocab, q->logits + (size_t)pos[r] * vocab,
                                              vocab);
        if (!(e <= worst)) { /* NaN too */
            worst = e;
            worst_row = r;
        }
    }
    *differ = 0;
    for (int t = 0; t < rec->n_tokens; t++)
        *differ += rec->tokens[t] != sc->forced[t];
    *worst_seq = seq[worst_row];
    *worst_pos = pos[worst_row];
    return worst;
}

/* Every f32 mixture of experts at tp_size 1, 2 (processes) and 4 (threads) on the float64
 * reference's own prompts A and B, decode steps fed its tokens: every logits row within
 * the f32 bound (1e-4 relative, as test_model_reference holds tp_size 1 to it) and every
 * greedy choice the reference's. Each rank keeps its expert slices as views of the stored
 * weights (the CPU reads f32 as stored), at least 1/tp_size of the experts in place. */
START_TEST(moe_models_under_tp_match_the_float64_reference)
{
    static struct model_case cases[MAX_MODELS];
    int n_cases = manifest_read(cases, MAX_MODELS);
    int n_run = 0;
    for (int i = 0; i < n_cases; i++) {
        const struct model_case *mc = &cases[i];
        if (strcmp(mc->wtype, "f32"))
            continue;
        struct cinfer_model *model = NULL;
        struct cinfer_error err = {0};
        struct cinfer_model_load_options lo = {.no_prefault = 1};
        ck_assert_msg(cinfer_model_load(mc->path, &lo, &model, &err) == 0, "%s: %s", mc->name, err.message);
        const struct cinfer_model_config *c = &model->config;
        int vocab = c->vocab_size, moe = c->n_experts > 0;
        int splits4 = cinfer_runtime_tp_check(model, 4, &err) == 0;
        int n_sparse = 0;
        for (int l = 0; l < c->num_layers; l++)
            n_sparse += cinfer_model_layer_sparse(c, l);
        /* f32 bytes of every routed expert's gate, up and down at full width */
        size_t expert_bytes = (size_t)n_sparse * (size_t)c->n_experts * 3 * (size_t)c->hidden_size *
                              (size_t)c->moe_intermediate_size * sizeof(float);
        cinfer_model_free(&model);
        if (!moe)
            continue;
        struct ref_seq ref[2];
        ref_read(mc->ref_path, vocab, ref);
        const int tps[] = {1, 2, 4};
        for (size_t k = 0; k < sizeof tps / sizeof tps[0]; k++) {
            if (tps[k] == 4 && !splits4)
                continue;
            struct tp_group g;
            reference_group(&g, mc->path, tps[k], tps[k] == 2 ? CINFER_TEST_RANKS_PROCESSES : CINFER_TEST_RANKS_THREADS,
                            vocab);
            scenario_from_reference(&g, ref);
            char why[1024];
            ck_assert_msg(tp_group_run(&g, why, sizeof why) == 0, "%s tp_size %d: %s", mc->name, tps[k], why);
            const struct tp_record *rec = &g.shared->record;
            int worst_seq, worst_pos, differ;
            double worst = error_against_reference(&g, ref, vocab, mc->name, &worst_seq, &worst_pos, &differ);
            printf("  %-24s tp_size %d against float64: %d rows, worst relative error %.3g (bound %.0e, %s pos %d), "
                   "%d of %d greedy tokens differ from the reference's\n",
                   mc->name, tps[k], rec->n_rows, worst, TOLERANCE_F32, worst_seq ? "B" : "A", worst_pos, differ,
                   rec->n_tokens);
            ck_assert_msg(worst <= TOLERANCE_F32, "%s tp_size %d: relative error %.3g at %s pos %d, bound %.0e",
                          mc->name, tps[k], worst, worst_seq ? "B" : "A", worst_pos, TOLERANCE_F32);
            ck_assert_msg(differ == 0, "%s tp_size %d: %d greedy tokens differ from the float64 reference's",
                          mc->name, tps[k], differ);
            /* the experts' slices stay views of the stored f32 experts (read in place), while
             * the dense slices are copied: each rank reads at least 1/tp_size of the experts in place */
            for (int r = 0; tps[k] > 1 && r < tps[k]; r++) {
                const struct cinfer_runtime_memory *mem = &g.shared->ranks[r].memory;
                if (r == 0)
                    printf("    rank 0 of %d: %.1f KiB of weights copied, %.1f KiB read in place (the experts' "
                           "share: %.1f KiB)\n",
                           tps[k], mem->weight_copy_bytes / 1024.0, mem->weight_in_place_bytes / 1024.0,
                           expert_bytes / (double)tps[k] / 1024.0);
                ck_assert_msg(g.shared->ranks[r].set && mem->weight_in_place_bytes >= expert_bytes / (size_t)tps[k],
                              "%s tp_size %d rank %d: %zu bytes read in place, the experts' share is %zu", mc->name,
                              tps[k], r, mem->weight_in_place_bytes, expert_bytes / (size_t)tps[k]);
            }
            n_run += tps[k] > 1;
            tp_group_free(&g);
        }
        ref_free(ref);
    }
    printf("%d tensor-parallel runs of mixtures of experts matched the float64 reference\n", n_run);
    ck_assert_int_gt(n_run, 10);
}
END_TEST

/* An expert width that does not split in whole blocks: qwen3_moe's Q8_0 experts are 32
 * wide, one block, so tp_size 2 would leave a rank half a block of down's columns. The
 * check and the runtime refuse it, naming the model, the tensor, the width, tp_size and
 * the block; tp_size 1 passes the check. Likewise a shared expert's width. */
START_TEST(moe_expert_width_that_does_not_split_is_refused)
{
    const char *path = CINFER_REFERENCE_DIR "/models/qwen3_moe-gguf-q8_0.gguf";
    struct cinfer_model *model = NULL;
    struct cinfer_error err = {0};
    struct cinfer_model_load_options lo = {.no_prefault = 1};
    ck_assert_msg(cinfer_model_load(path, &lo, &model, &err) == 0, "%s: %s", path, err.message);
    ck_assert_int_eq(model->config.moe_intermediate_size, 32);
    ck_assert_msg(cinfer_runtime_tp_check(model, 1, &err) == 0, "tp_size 1: %s", err.message);
    ck_assert_int_ne(cinfer_runtime_tp_check(model, 2, &err), 0);
    printf("  tp_size 2: %s\n", err.message);
    const char *expect[] = {path, "expert down is q8_0", "whole blocks of 32", "width 32", "tp_size 2"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg(strstr(err.message, expect[i]) != NULL, "\"%s\" missing from: %s", expect[i], err.message);
    int vocab = model->config.vocab_size;
    cinfer_model_free(&model);
    char why[1024];
    struct tp_group g;
    reference_group(&g, path, 2, CINFER_TEST_RANKS_THREADS, vocab);
    int failed = tp_group_run(&g, why, sizeof why);
    printf("  the runtime at tp_size 2: %d ranks failed: %s\n", failed, why);
    ck_assert_msg(failed > 0 && strstr(why, "expert down is q8_0") && strstr(why, "width 32"),
                  "tp_size 2 ran, or failed for another reason: %s", why);
    tp_group_free(&g);

    /* Qwen2-MoE's shared expert is checked on its own: with the routed experts' down
     * taken as f32 (any width splits) and the shared width said to be 32 (one Q8_0 block),
     * the check names the shared expert. Only the check reads these; nothing runs. */
    const char *qwen2 = CINFER_REFERENCE_DIR "/models/qwen2_moe-gguf-q8_0.gguf";
    ck_assert_msg(cinfer_model_load(qwen2, &lo, &model, &err) == 0, "%s: %s", qwen2, err.message);
    ck_assert_msg(cinfer_runtime_tp_check(model, 2, &err) != 0 && strstr(err.message, "expert down is q8_0"),
                  "%s at tp_size 2: %s", qwen2, err.message);
    for (int l = 0; l < model->config.num_layers; l++)
        for (int e = 0; model->layers[l].experts && e < model->config.n_experts; e++)
            model->layers[l].experts[e].down.dtype = CINFER_DTYPE_F32;
    ck_assert_msg(cinfer_runtime_tp_check(model, 2, &err) == 0, "%s, routed experts as f32: %s", qwen2, err.message);
    model->config.shared_expert_intermediate_size = 32;
    ck_assert_int_ne(cinfer_runtime_tp_check(model, 2, &err), 0);
    printf("  shared expert 32 wide at tp_size 2: %s\n", err.message);
    ck_assert_msg(strstr(err.message, "shared expert down is q8_0") && strstr(err.message, "width 32") &&
                      strstr(err.message, qwen2),
                  "expected the shared expert named: %s", err.message);
    cinfer_model_free(&model);
}
END_TEST

/* An expert width that does not split evenly: qwen3_moe_uneven's experts are 96 wide, 3
 * Q8_0 blocks of 32, so tp_size 2 gives rank 0 one block of every expert's columns and rank
 * 1 two. On the float64 reference's prompts with its tokens fed, tp_size 2's logits must
 * match tp_size 1's and the reference's (computed on the dequantized Q8_0 weights) within
 * the Q8_0 bound (x in int16 steps), the greedy tokens tp_size 1's; rank 1 holds more of
 * the experts than rank 0. tp_size 4 would leave a rank no block: refused with the numbers. */
START_TEST(uneven_expert_width_matches_tp1_and_the_float64_reference)
{
    const char *name = "qwen3_moe_uneven-gguf-q8_0";
    const char *path = CINFER_REFERENCE_DIR "/models/qwen3_moe_uneven-gguf-q8_0.gguf";
    const char *ref_path = CINFER_REFERENCE_DIR "/qwen3_moe_uneven-gguf-q8_0.ref";
    struct cinfer_model *model = NULL;
    struct cinfer_error err = {0};
    struct cinfer_model_load_options lo = {.no_prefault = 1};
    ck_assert_msg(cinfer_model_load(path, &lo, &model, &err) == 0, "%s: %s", path, err.message);
    ck_assert_int_eq(model->config.moe_intermediate_size, 96);
    ck_assert_int_eq(model->layers[0].experts[0].down.dtype, CINFER_DTYPE_Q8_0);
    ck_assert_msg(cinfer_runtime_tp_check(model, 2, &err) == 0, "tp_size 2: %s", err.message);
    ck_assert_int_ne(cinfer_runtime_tp_check(model, 4, &err), 0);
    printf("  %s tp_size 4: %s\n", name, err.message);
    ck_assert_msg(strstr(err.message, "width 96 is 3 blocks") && strstr(err.message, "tp_size 4"), "%s", err.message);
    int vocab = model->config.vocab_size, hidden = model->config.hidden_size, n_experts = model->config.n_experts;
    int n_sparse = 0;
    for (int l = 0; l < model->config.num_layers; l++)
        n_sparse += cinfer_model_layer_sparse(&model->config, l);
    cinfer_model_free(&model);
    struct ref_seq ref[2];
    ref_read(ref_path, vocab, ref);
    struct tp_group g[2]; /* tp_size 1, 2 */
    double worst[2];
    int differ[2];
    for (int k = 0; k < 2; k++) {
        char why[1024];
        reference_group(&g[k], path, k + 1, k ? CINFER_TEST_RANKS_PROCESSES : CINFER_TEST_RANKS_THREADS, vocab);
        scenario_from_reference(&g[k], ref);
        ck_assert_msg(tp_group_run(&g[k], why, sizeof why) == 0, "%s tp_size %d: %s", name, k + 1, why);
        int worst_seq, worst_pos;
        worst[k] = error_against_reference(&g[k], ref, vocab, name, &worst_seq, &worst_pos, &differ[k]);
        printf("  %s tp_size %d against float64: %d rows, worst relative error %.3g (bound %.0e, %s pos %d), %d of "
               "%d greedy tokens differ from the reference's\n",
               name, k + 1, g[k].shared->record.n_rows, worst[k], TOLERANCE_Q8_X, worst_seq ? "B" : "A", worst_pos,
               differ[k], g[k].shared->record.n_tokens);
        ck_assert_msg(worst[k] <= TOLERANCE_Q8_X, "%s tp_size %d: relative error %.3g against float64, bound %.0e",
                      name, k + 1, worst[k], TOLERANCE_Q8_X);
    }
    char why[1024];
    double rel, abs_diff;
    int bad = tp_record_compare(&g[0].shared->record, &g[1].shared->record, TOLERANCE_Q8_X, &rel, &abs_diff, why,
                                sizeof why);
    printf("  %s tp_size 2 against tp_size 1: worst relative error %.3g (bound %.0e), largest |diff| %.3g, greedy %s\n",
           name, rel, TOLERANCE_Q8_X, abs_diff, bad ? why : "the same");
    ck_assert_msg(!bad, "%s tp_size 2 against tp_size 1: %s", name, why);
    ck_assert_int_eq(differ[1], differ[0]);
    size_t held[2];
    for (int r = 0; r < 2; r++) {
        const struct cinfer_runtime_memory *mem = &g[1].shared->ranks[r].memory;
        held[r] = mem->weight_copy_bytes + mem->weight_in_place_bytes;
        printf("    rank %d of 2: %.1f KiB of weights copied, %.1f KiB read in place\n", r,
               mem->weight_copy_bytes / 1024.0, mem->weight_in_place_bytes / 1024.0);
    }
    /* one Q8_0 block of every expert's columns more: gate and up 32 rows of hidden, down hidden rows of 32 */
    size_t block_share = (size_t)n_sparse * (size_t)n_experts *
                         (2 * 32 * cinfer_kernel_row_bytes(CINFER_KW_Q8_0, hidden) +
                          (size_t)hidden * cinfer_kernel_row_bytes(CINFER_KW_Q8_0, 32));
    printf("    rank 1 holds %.1f KiB more: one 32-column block of every expert, %.1f KiB\n",
           (double)(held[1] - held[0]) / 1024.0, block_share / 1024.0);
    ck_assert_msg(held[1] == held[0] + block_share,
                  "rank 1 (64 of every expert's 96 columns) holds %zu bytes, rank 0 (32) %zu: not one block apart",
                  held[1], held[0]);
    for (int k = 0; k < 2; k++)
        tp_group_free(&g[k]);
    ref_free(ref);
}
END_TEST

/* ---- expert parallelism ------------------------------------------------------------- */

/* Rank `rank` of n's experts under expert parallelism, as vLLM's and SGLang's expert map
 * gives them: [*first, *first + count), the first E % n ranks one more. */
static int owned_experts(int n_experts, int rank, int n, int *first)
{
    int base = n_experts / n, extra = n_experts % n;
    *first = rank * base + (rank < extra ? rank : extra);
    return base + (rank < extra);
}

/* Bytes of an f32 model's expert weights rank `rank` of n reads in place under expert
 * parallelism: in every sparse layer the router (whole), its own experts whole, and its
 * share of a shared expert's width with the shared gate's map; nothing of the other
 * ranks' experts. *own_bytes: its experts' part, *all_bytes: every expert's. */
static size_t ep_in_place_bytes(const struct cinfer_model_config *c, int rank, int n, size_t *own_bytes,
                                size_t *all_bytes)
{
    size_t h = (size_t)c->hidden_size, expert = 3 * h * (size_t)c->moe_intermediate_size * sizeof(float);
    int first, owned = owned_experts(c->n_experts, rank, n, &first);
    int shared = c->shared_expert_intermediate_size;
    int64_t s0 = (int64_t)shared * rank / n, s1 = (int64_t)shared * (rank + 1) / n; /* f32: granules of 1 */
    size_t bytes = 0;
    *own_bytes = *all_bytes = 0;
    for (int l = 0; l < c->num_layers; l++) {
        if (!cinfer_model_layer_sparse(c, l))
            continue;
        *own_bytes += (size_t)owned * expert;
        *all_bytes += (size_t)c->n_experts * expert;
        bytes += (size_t)c->n_experts * h * sizeof(float) + (size_t)owned * expert;
        if (shared > 0)
            bytes += (3 * (size_t)(s1 - s0) + 1) * h * sizeof(float);
    }
    return bytes;
}

/* Expert parallelism (ep_size == tp_size) on every mixture of experts, float and quantized:
 * at ep_size 2 (processes) with the decode steps batched, and at 4 (threads) with each in a
 * call of its own (batch-1 decode; a rank then often holds none of a token's experts; at 2
 * where 4 is refused), the prefill batched in both, on the float64 reference's prompts with its tokens fed,
 * rank 0's logits must equal tp_size 1's (the bounds of the first test; where the kernels
 * round x, Q8_0, bf16 with AVX512_BF16 and the block types, a greedy choice may flip only
 * at a near tie, every row within the bound, counted) and for f32 files the float64
 * reference's within the f32 bound with its greedy tokens. Each rank's model has lost every
 * expert the rank does not own before its runtime is made (data NULL), so a rank that bound
 * or read one would fail; and what an f32 rank reads in place is exactly its routers, its own
 * experts and its shared-expert share. A shape refused at ep_size 4 must be the attention's
 * block split (wo in Q8_0 blocks of 32, one head of 16 per rank), not the experts'. */
START_TEST(moe_models_under_ep_match_tp1_and_the_float64_reference)
{
    static struct model_case cases[MAX_MODELS];
    int n_cases = manifest_read(cases, MAX_MODELS);
    int n_run = 0, n_refused = 0, n_float64 = 0;
    double worst_tp1 = 0, worst_float64 = 0;
    for (int i = 0; i < n_cases; i++) {
        const struct model_case *mc = &cases[i];
        struct cinfer_model *model = NULL;
        struct cinfer_error err = {0};
        struct cinfer_model_load_options lo = {.no_prefault = 1};
        ck_assert_msg(cinfer_model_load(mc->path, &lo, &model, &err) == 0, "%s: %s", mc->name, err.message);
        if (model->config.n_experts == 0) {
            cinfer_model_free(&model);
            continue;
        }
        struct cinfer_model_config c = model->config;
        int vocab = c.vocab_size, f32 = !strcmp(mc->wtype, "f32");
        double tolerance = tolerance_of(mc->wtype);
        int rounds_x = tolerance > TOLERANCE_F32; /* x rounded (int16, bf16, int8 blocks): flips at near ties */
        struct ref_seq ref[2];
        ref_read(mc->ref_path, vocab, ref);
        char why[1024];
        struct tp_group base[2]; /* tp_size 1, decode steps batched (0) and apart (1) */
        for (int apart = 0; apart < 2; apart++) {
            reference_group(&base[apart], mc->path, 1, CINFER_TEST_RANKS_THREADS, vocab);
            scenario_from_reference(&base[apart], ref);
            base[apart].scenario.decode_apart = apart;
            ck_assert_msg(tp_group_run(&base[apart], why, sizeof why) == 0, "%s tp_size 1: %s", mc->name, why);
        }
        const struct {
            int ep, apart;
        } runs[] = {{2, 0}, {4, 1}};
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            int ep = runs[k].ep, apart = runs[k].apart;
            if (cinfer_runtime_parallel_check(model, ep, ep, &err) != 0) {
                printf("  %-24s %-5s ep_size %d: refused: %s\n", mc->name, mc->wtype, ep, err.message);
                ck_assert_msg(!f32 && strstr(err.message, "wo is") && strstr(err.message, "not whole blocks of"),
                              "%s ep_size %d refused for another reason than wo's blocks: %s", mc->name, ep,
                              err.message);
                n_refused++;
                ep = 2; /* batch-1 decode at ep_size 2 instead */
            }
            struct tp_group g;
            reference_group(&g, mc->path, ep, ep == 2 ? CINFER_TEST_RANKS_PROCESSES : CINFER_TEST_RANKS_THREADS, vocab);
            g.ep_size = ep;
            g.drop_unowned_experts = 1;
            scenario_from_reference(&g, ref);
            g.scenario.decode_apart = apart;
            ck_assert_msg(tp_group_run(&g, why, sizeof why) == 0, "%s ep_size %d: %s", mc->name, ep, why);
            const struct tp_record *b = &base[apart].shared->record, *rec = &g.shared->record;
            double rel, abs_diff;
            int bad = tp_record_compare(b, rec, tolerance, &rel, &abs_diff, why, sizeof why);
            int flips = 0;
            for (int t = 0; t < b->n_tokens; t++)
                flips += b->tokens[t] != rec->tokens[t];
            if (rounds_x && bad && flips > 0 && !strncmp(why, "greedy token", 12))
                bad = 0; /* every row within the bound: the flips are near ties (counted below) */
            printf("  %-24s %-5s ep_size %d, decode %s: %d rows, against tp_size 1 worst relative error %.3g (bound "
                   "%.0e), greedy %s (%d of %d tokens differ)",
                   mc->name, mc->wtype, ep, apart ? "batch 1" : "batched", rec->n_rows, rel, tolerance,
                   bad ? "DIFFERENT" : flips ? "flips at near ties" : "the same", flips, b->n_tokens);
            ck_assert_msg(!bad, "%s ep_size %d against tp_size 1: %s", mc->name, ep, why);
            worst_tp1 = rel > worst_tp1 ? rel : worst_tp1;
            if (f32) {
                int worst_seq, worst_pos, differ;
                double worst = error_against_reference(&g, ref, vocab, mc->name, &worst_seq, &worst_pos, &differ);
                printf("; against float64 %.3g (bound %.0e), %d greedy tokens differ", worst, TOLERANCE_F32,
                       differ);
                ck_assert_msg(worst <= TOLERANCE_F32 && differ == 0,
                              "%s ep_size %d: relative error %.3g at %s pos %d (bound %.0e), %d greedy tokens differ "
                              "from the float64 reference's",
                              mc->name, ep, worst, worst_seq ? "B" : "A", worst_pos, TOLERANCE_F32, differ);
                worst_float64 = worst > worst_float64 ? worst : worst_float64;
                n_float64++;
            }
            printf("\n");
            for (int r = 0; f32 && r < ep; r++) { /* what each rank reads in place: its own experts only */
                const struct cinfer_runtime_memory *mem = &g.shared->ranks[r].memory;
                size_t own, all, expected = ep_in_place_bytes(&c, r, ep, &own, &all);
                int first, owned = owned_experts(c.n_experts, r, ep, &first);
                printf("    rank %d of %d: experts [%d, %d), %.1f KiB read in place (its experts %.1f KiB of "
                           "the %.1f KiB of all; the rest routers and shared-expert share), %.1f KiB copied\n",
                           r, ep, first, first + owned, mem->weight_in_place_bytes / 1024.0, own / 1024.0,
                           all / 1024.0, mem->weight_copy_bytes / 1024.0);
                ck_assert_msg(g.shared->ranks[r].set && mem->weight_in_place_bytes == expected,
                              "%s ep_size %d rank %d: %zu bytes read in place, expected %zu (routers, experts [%d, "
                              "%d) whole, shared-expert share)",
                              mc->name, ep, r, mem->weight_in_place_bytes, expected, first, first + owned);
            }
            n_run++;
            tp_group_free(&g);
        }
        tp_group_free(&base[0]);
        tp_group_free(&base[1]);
        ref_free(ref);
        cinfer_model_free(&model);
    }
    printf("%d expert-parallel runs matched tp_size 1 (worst relative error %.3g), %d of them f32 runs the float64 "
           "reference (worst %.3g, bound %.0e); %d shapes refused (wo's blocks)\n",
           n_run, worst_tp1, n_float64, worst_float64, TOLERANCE_F32, n_refused);
    ck_assert_int_gt(n_run, 60);
    ck_assert_int_gt(n_float64, 20);
}
END_TEST

/* ep_size other than 1 or tp_size, and more expert-parallel ranks than experts, are
 * refused naming the numbers, by the check and by the runtime; experts that do not divide
 * by the ranks split as evenly as they go, the first ranks one more; a dense model takes
 * ep_size == tp_size as moot. */
START_TEST(ep_sizes_that_do_not_fit_are_refused)
{
    const char *path = CINFER_REFERENCE_DIR "/models/qwen3_moe-gguf-f32.gguf";
    struct cinfer_model *model = NULL;
    struct cinfer_error err = {0};
    struct cinfer_model_load_options lo = {.no_prefault = 1};
    ck_assert_msg(cinfer_model_load(path, &lo, &model, &err) == 0, "%s: %s", path, err.message);
    int vocab = model->config.vocab_size;
    ck_assert_int_eq(cinfer_runtime_parallel_check(model, 2, 2, &err), 0);
    ck_assert_int_eq(cinfer_runtime_parallel_check(model, 4, 2, &err), CINFER_ERR_CONFIG);
    printf("  tp_size 4, ep_size 2: %s\n", err.message);
    ck_assert_msg(strstr(err.message, "ep_size 2 with tp_size 4") != NULL, "%s", err.message);
    ck_assert_int_eq(cinfer_runtime_parallel_check(model, 1, 2, &err), CINFER_ERR_CONFIG);
    ck_assert_msg(strstr(err.message, "ep_size 2 with tp_size 1") != NULL, "%s", err.message);
    /* fewer experts than ranks: the config says 3 (only the check reads it; nothing runs) */
    model->config.n_experts = 3;
    ck_assert_int_eq(cinfer_runtime_parallel_check(model, 4, 4, &err), CINFER_ERR_CONFIG);
    printf("  3 experts at ep_size 4: %s\n", err.message);
    const char *expect[] = {path, "n_experts 3", "ep_size 4"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg(strstr(err.message, expect[i]) != NULL, "\"%s\" missing from: %s", expect[i], err.message);
    ck_assert_int_eq(cinfer_runtime_parallel_check(model, 4, 1, &err), 0); /* their width splits instead */
    /* experts that do not divide: 3 ranks (the config says 3 heads, 1 KV head, and 128
     * experts for the second; only the plan reads them, and under EP it reads no expert's
     * weights; nothing runs) get 3/3/2 of 8 and 43/43/42 of 128, the first ranks one more */
    model->config.num_heads = 3;
    model->config.num_kv_heads = 1;
    const struct {
        int n_experts, first[3], count[3];
    } splits[] = {{8, {0, 3, 6}, {3, 3, 2}}, {128, {0, 43, 86}, {43, 43, 42}}};
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        model->config.n_experts = splits[i].n_experts;
        for (int r = 0; r < 3; r++) {
            struct runtime_shard sh;
            ck_assert_msg(cinfer_runtime_shard_plan(model, r, 3, 3, &sh, &err) == 0, "%s", err.message);
            ck_assert_msg(sh.ep && sh.first_expert == splits[i].first[r] && sh.experts == splits[i].count[r] &&
                              sh.moe_ffn == model->config.moe_intermediate_size,
                          "%d experts, rank %d of 3: [%d, +%d), expected [%d, +%d)", splits[i].n_experts, r,
                          sh.first_expert, sh.experts, splits[i].first[r], splits[i].count[r]);
        }
        printf("  %d experts over ep_size 3: %d/%d/%d\n", splits[i].n_experts, splits[i].count[0],
               splits[i].count[1], splits[i].count[2]);
    }
    cinfer_model_free(&model);

    /* the runtime refuses ep_size 4 at tp_size 2 on every rank */
    char why[1024];
    struct tp_group g;
    reference_group(&g, path, 2, CINFER_TEST_RANKS_THREADS, vocab);
    g.ep_size = 4;
    int failed = tp_group_run(&g, why, sizeof why);
    printf("  the runtime at tp_size 2, ep_size 4: %d ranks failed: %s\n", failed, why);
    ck_assert_msg(failed == 2 && strstr(why, "ep_size 4 with tp_size 2"), "ran, or failed otherwise: %s", why);
    tp_group_free(&g);

    /* a dense model: ep_size is moot, and the run equals plain tensor parallelism's */
    const char *dense = CINFER_REFERENCE_DIR "/models/llama-gguf-f32.gguf";
    ck_assert_msg(cinfer_model_load(dense, &lo, &model, &err) == 0, "%s: %s", dense, err.message);
    ck_assert_msg(cinfer_runtime_parallel_check(model, 2, 2, &err) == 0, "%s: %s", dense, err.message);
    vocab = model->config.vocab_size;
    cinfer_model_free(&model);
    struct tp_group tp, ep;
    reference_group(&tp, dense, 2, CINFER_TEST_RANKS_THREADS, vocab);
    reference_group(&ep, dense, 2, CINFER_TEST_RANKS_THREADS, vocab);
    ep.ep_size = 2;
    ck_assert_msg(tp_group_run(&tp, why, sizeof why) == 0, "%s tp_size 2: %s", dense, why);
    ck_assert_msg(tp_group_run(&ep, why, sizeof why) == 0, "%s ep_size 2: %s", dense, why);
    ck_assert_int_eq(tp.shared->record.n_rows, ep.shared->record.n_rows);
    ck_assert_msg(memcmp(tp.shared->record.logits, ep.shared->record.logits,
                         sizeof(float) * (size_t)tp.shared->record.n_rows * (size_t)vocab) == 0,
                  "a dense model at ep_size 2 differs from tp_size 2");
    tp_group_free(&tp);
    tp_group_free(&ep);
}
END_TEST

static Suite *suite_tensor_parallel_reference(void)
{
    Suite *s = suite_create("tensor_parallel_reference");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, reference_models_match_tp1_at_2_and_4_ranks);
    tcase_add_test(tc, kv_types_under_tp_match_tp1_with_the_same_kv);
    tcase_add_test(tc, moe_models_under_tp_match_the_float64_reference);
    tcase_add_test(tc, moe_expert_width_that_does_not_split_is_refused);
    tcase_add_test(tc, uneven_expert_width_matches_tp1_and_the_float64_reference);
    tcase_add_test(tc, moe_models_under_ep_match_tp1_and_the_float64_reference);
    tcase_add_test(tc, ep_sizes_that_do_not_fit_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    FILE *skip = fopen(CINFER_REFERENCE_DIR "/SKIP", "r");
    if (skip) {
        char why[256] = "";
        if (!fgets(why, sizeof why, skip))
            why[0] = '\0';
        fclose(skip);
        printf("SKIP: %s", why);
        return SKIP_EXIT_CODE;
    }
    return cinfer_test_run_suite(suite_tensor_parallel_reference());
}
