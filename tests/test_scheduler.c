/* The batching core on the real stories260K model (f32), driven directly through
 * cinfer_scheduler_*: batched greedy outputs equal each request run alone, the prefix
 * cache saves prefill without changing outputs, KV pressure is survived by retraction,
 * aborts free pages at once, and admission refuses what it must with the numbers.
 * The model is tests/data/models/stories260K.gguf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu_backend.h"
#include "cinfer/config.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "grammar/constraint.h"
#include "ipc/messages.h"
#include "model/model.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "support/engine_fixture.h"
#include "scheduler/sampler.h"
#include "support/greedy_reference.h"
#include "support/runner.h"

#define MODEL_PATH CINFER_TEST_DATA_DIR "/models/stories260K.gguf"
#define MAX_NEW 24
#define MAX_REQUESTS 128
#define MAX_PROMPT 320

static struct cinfer_model *model;

struct workload {
    int n;
    int32_t prompts[MAX_REQUESTS][MAX_PROMPT];
    int n_prompt[MAX_REQUESTS];
    int32_t out[MAX_REQUESTS][MAX_NEW];
    int n_out[MAX_REQUESTS];
    enum cinfer_finish_reason finish[MAX_REQUESTS];
};

struct setup {
    int kv_tokens;
    int max_running;
    int max_queued;
    int disable_cache;
    enum cinfer_schedule_policy policy;
    int chunk;
    int fake_clock;             /* the timeouts read fake_now_ms */
    const struct cinfer_token_table *tokens; /* constrained decoding; NULL: off */
    enum cinfer_kv_cache_dtype kv_dtype;      /* AUTO (0): f16 */
    const struct cinfer_backend_ops *backend; /* NULL: the CPU backend */
};

static int64_t fake_now_ms;
static int64_t fake_clock(void) { return fake_now_ms; }

struct fixture {
    struct cinfer_runtime *rt;
    struct cinfer_scheduler *s;
};

static uint64_t rng_next(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static void random_ids(uint64_t *state, int32_t *ids, int n)
{
    /* Past the first few (special) ids of the 512-token vocabulary. */
    for (int i = 0; i < n; i++)
        ids[i] = 3 + (int32_t)(rng_next(state) % (uint64_t)(model->config.vocab_size - 3));
}

static void fixture_open(struct fixture *f, const struct setup *cfg)
{
    const struct cinfer_model_config *c = &model->config;
    size_t per_token = cinfer_runtime_kv_token_bytes(c, cfg->kv_dtype);
    struct cinfer_runtime_options ro = {.kv_cache_bytes = (size_t)cfg->kv_tokens * per_token, .kv_page_tokens = 16,
                                        .n_threads = 2, .max_batch_tokens = 1024 + cfg->max_running,
                                        .kv_dtype = cfg->kv_dtype, .backend = cfg->backend};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_create(model, &ro, &f->rt, &err) == 0, "%s", err.message);
    struct cinfer_scheduler_options so = {
        .max_running_requests = cfg->max_running,
        .max_queued_requests = cfg->max_queued,
        .max_prefill_tokens = 1024,
        .chunked_prefill_size = cfg->chunk,
        .context_length = c->max_position_embeddings > 0 ? c->max_position_embeddings : 512,
        .vocab_size = c->vocab_size,
        .eos_ids = c->eos_token_ids,
        .n_eos = c->n_eos,
        .default_seed = 1,
        .schedule_policy = cfg->policy,
        .disable_radix_cache = cfg->disable_cache,
        .now_ms = cfg->fake_clock ? fake_clock : NULL,
        .token_table = cfg->tokens,
    };
    ck_assert_msg(cinfer_scheduler_create(f->rt, &so, &f->s, &err) == 0, "%s", err.message);
}

static void fixture_close(struct fixture *f)
{
    cinfer_scheduler_destroy(&f->s);
    cinfer_runtime_destroy(&f->rt);
}

static void greedy(struct cinfer_sampling_params *p)
{
    cinfer_sampling_params_init(p);
    p->temperature = 0;
    p->max_new_tokens = MAX_NEW;
    p->ignore_eos = 1;
}

/* Steps until idle, collecting every request's tokens (rid = index). Returns steps. */
static int drain(struct cinfer_scheduler *s, struct workload *w)
{
    int steps = 0;
    struct cinfer_error err = {0};
    while (cinfer_scheduler_has_work(s)) {
        const struct cinfer_step_item *items;
        int n;
        ck_assert_msg(cinfer_scheduler_step(s, &items, &n, &err) == 0, "%s", err.message);
        for (int i = 0; i < n; i++) {
            int r = (int)items[i].rid;
            ck_assert_int_lt(r, w->n);
            if (items[i].token >= 0) {
                ck_assert_int_lt(w->n_out[r], MAX_NEW);
                w->out[r][w->n_out[r]++] = items[i].token;
            }
            if (items[i].finish_reason != CINFER_FINISH_NONE)
                w->finish[r] = items[i].finish_reason;
        }
        ck_assert_int_lt(++steps, 100000);
    }
    return steps;
}

static void run_together(const struct setup *cfg, struct workload *w, struct cinfer_scheduler_stats *stats)
{
    struct fixture f;
    fixture_open(&f, cfg);
    struct cinfer_sampling_params p;
    greedy(&p);
    struct cinfer_error err = {0};
    memset(w->n_out, 0, sizeof w->n_out);
    memset(w->finish, 0, sizeof w->finish);
    for (int i = 0; i < w->n; i++)
        ck_assert_msg(cinfer_scheduler_add(f.s, (uint64_t)i, w->prompts[i], w->n_prompt[i], &p, &err) == 0, "%s",
                      err.message);
    drain(f.s, w);
    if (stats)
        cinfer_scheduler_get_stats(f.s, stats);
    /* Nothing leaks: once idle, every page is free or held by the prefix cache. */
    struct cinfer_scheduler_stats now;
    cinfer_scheduler_get_stats(f.s, &now);
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt) + now.cached_pages, cinfer_runtime_kv_pages_total(f.rt));
    fixture_close(&f);
}

/* Each request alone in its own scheduler without the prefix cache, KV cache type kv. */
static void run_alone_kv(struct workload *w, enum cinfer_kv_cache_dtype kv)
{
    struct setup cfg = {.kv_tokens = MAX_PROMPT + MAX_NEW + 32, .max_running = 1, .disable_cache = 1, .kv_dtype = kv};
    struct fixture f;
    fixture_open(&f, &cfg);
    struct cinfer_sampling_params p;
    greedy(&p);
    struct cinfer_error err = {0};
    memset(w->n_out, 0, sizeof w->n_out);
    for (int i = 0; i < w->n; i++) {
        ck_assert_msg(cinfer_scheduler_add(f.s, (uint64_t)i, w->prompts[i], w->n_prompt[i], &p, &err) == 0, "%s",
                      err.message);
        drain(f.s, w);
        ck_assert_int_eq(w->n_out[i], MAX_NEW);
    }
    fixture_close(&f);
}

static void run_alone(struct workload *w)
{
    run_alone_kv(w, CINFER_KV_CACHE_DTYPE_AUTO);
}

static void assert_same_outputs(const struct workload *a, const struct workload *b, const char *what)
{
    for (int i = 0; i < a->n; i++) {
        ck_assert_msg(a->n_out[i] == b->n_out[i], "%s: request %d produced %d tokens, alone %d", what, i, a->n_out[i],
                      b->n_out[i]);
        for (int t = 0; t < a->n_out[i]; t++)
            ck_assert_msg(a->out[i][t] == b->out[i][t], "%s: request %d token %d is %d, alone %d", what, i, t,
                          a->out[i][t], b->out[i][t]);
    }
}

static struct workload *random_workload(int n, int min_len, int max_len, uint64_t seed)
{
    struct workload *w = calloc(1, sizeof *w);
    ck_assert_ptr_nonnull(w);
    w->n = n;
    for (int i = 0; i < n; i++) {
        w->n_prompt[i] = min_len + (int)(rng_next(&seed) % (uint64_t)(max_len - min_len + 1));
        random_ids(&seed, w->prompts[i], w->n_prompt[i]);
    }
    return w;
}

START_TEST(concurrent_64_equal_alone)
{
    struct workload *w = random_workload(64, 3, 90, 0x5eed0001);
    struct workload *alone = malloc(sizeof *alone);
    memcpy(alone, w, sizeof *w);
    run_alone(alone);
    /* The scheduler alone is itself checked against the runtime driven by hand. */
    for (int i = 0; i < 3; i++) {
        int32_t ref[MAX_NEW];
        int n = cinfer_test_greedy_reference(MODEL_PATH, w->prompts[i], w->n_prompt[i], MAX_NEW, 0, ref);
        ck_assert_int_eq(n, MAX_NEW);
        ck_assert_msg(!memcmp(ref, alone->out[i], sizeof ref), "request %d alone differs from the hand-driven runtime",
                      i);
    }
    struct setup cfg = {.kv_tokens = 64 * (90 + MAX_NEW + 16), .max_running = 64};
    run_together(&cfg, w, NULL);
    assert_same_outputs(w, alone, "64 concurrent");
    cfg.chunk = 32; /* chunked prefill: prompts split over steps */
    run_together(&cfg, w, NULL);
    assert_same_outputs(w, alone, "64 concurrent, chunked prefill");
    printf("64 concurrent greedy requests (prompts 3..90 tokens, %d new each): identical to alone, "
           "whole and chunked prefill\n", MAX_NEW);
    free(w);
    free(alone);
}
END_TEST

/* Every greedy step's token, logprob and top alternatives, by request. */
struct logprob_run {
    int n_out[16];
    int32_t token[16][MAX_NEW];
    float logprob[16][MAX_NEW];
    struct cinfer_token_logprob lp[16][MAX_NEW];
};

/* Request i's params (on top of greedy()) for a logprob run. */
typedef void (*logprob_params_fn)(struct cinfer_sampling_params *p, int i, int arg);

/* The workload's requests, each with params_of(p, i, arg), through backend (NULL: the
 * CPU backend) until idle, recording every token with its logprobs, which every request
 * (logprobs_every 1) or those of odd rid (2) asked for. */
static void run_logprobs(struct workload *w, const struct cinfer_backend_ops *backend, logprob_params_fn params_of,
                         int arg, int logprobs_every, struct logprob_run *out)
{
    struct setup cfg = {.kv_tokens = 16 * (90 + MAX_NEW + 16), .max_running = 16, .backend = backend};
    struct fixture f;
    fixture_open(&f, &cfg);
    struct cinfer_error err = {0};
    memset(out, 0, sizeof *out);
    for (int i = 0; i < w->n; i++) {
        struct cinfer_sampling_params p;
        greedy(&p);
        params_of(&p, i, arg);
        ck_assert_msg(cinfer_scheduler_add(f.s, (uint64_t)i, w->prompts[i], w->n_prompt[i], &p, &err) == 0, "%s",
                      err.message);
    }
    while (cinfer_scheduler_has_work(f.s)) {
        const struct cinfer_step_item *items;
        int n;
        ck_assert_msg(cinfer_scheduler_step(f.s, &items, &n, &err) == 0, "%s", err.message);
        for (int i = 0; i < n; i++) {
            int r = (int)items[i].rid;
            if (items[i].token < 0)
                continue;
            ck_assert_int_eq(items[i].has_logprobs, logprobs_every == 1 || r % 2 == 1);
            int t = out->n_out[r]++;
            out->token[r][t] = items[i].token;
            out->logprob[r][t] = items[i].logprob;
            out->lp[r][t] = items[i].logprobs;
        }
    }
    fixture_close(&f);
}

/* Greedy with logprobs; with zero_bias a logit bias of 0, which leaves the row as it is
 * but makes the sampler process it whole. */
static void greedy_logprob_params(struct cinfer_sampling_params *p, int i, int zero_bias)
{
    p->logprobs = 1;
    p->top_logprobs = (i * 7) % (CINFER_MAX_TOP_LOGPROBS + 1);
    if (zero_bias) {
        p->n_logit_bias = 1;
        p->logit_bias_ids[0] = 3 + i;
        p->logit_bias_values[0] = 0.0f;
    }
    ck_assert_int_eq(cinfer_sampler_takes_argmax_as_is(p, 0), !zero_bias);
}

/* Two runs' tokens, logprobs and alternatives, bit for bit (a_how and b_how name them
 * in a failure); returns how many alternatives were compared. */
static int compare_logprob_runs(const struct logprob_run *x, const struct logprob_run *y, int n, const char *a_how,
                                const char *b_how)
{
    int alternatives = 0;
    for (int r = 0; r < n; r++) {
        ck_assert_int_eq(x->n_out[r], MAX_NEW);
        ck_assert_int_eq(y->n_out[r], MAX_NEW);
        for (int t = 0; t < MAX_NEW; t++) {
            const struct cinfer_token_logprob *a = &x->lp[r][t], *b = &y->lp[r][t];
            ck_assert_msg(x->token[r][t] == y->token[r][t] && x->logprob[r][t] == y->logprob[r][t],
                          "request %d step %d: token %d logprob %.9g %s, %d %.9g %s", r, t, x->token[r][t],
                          x->logprob[r][t], a_how, y->token[r][t], y->logprob[r][t], b_how);
            ck_assert_int_eq(a->token, b->token);
            ck_assert(a->logprob == b->logprob);
            ck_assert_int_eq(a->n_top, b->n_top);
            for (int j = 0; j < a->n_top; j++)
                ck_assert_msg(a->top_ids[j] == b->top_ids[j] && a->top_logprobs[j] == b->top_logprobs[j],
                              "request %d step %d alternative %d: %d %.9g vs %d %.9g", r, t, j, a->top_ids[j],
                              a->top_logprobs[j], b->top_ids[j], b->top_logprobs[j]);
            alternatives += a->n_top;
        }
    }
    return alternatives;
}

/* A greedy request's token and logprobs come from its row's top tokens only (what a
 * device backend sends instead of the row): the same bits as the sampler's whole-row path,
 * which a zero logit bias forces. */
START_TEST(greedy_top_tokens_equal_whole_row)
{
    struct workload *w = random_workload(16, 3, 90, 0x5eed0007);
    struct logprob_run *top = malloc(sizeof *top), *whole = malloc(sizeof *whole);
    run_logprobs(w, NULL, greedy_logprob_params, 0, 1, top);
    run_logprobs(w, NULL, greedy_logprob_params, 1, 1, whole);
    int alternatives = compare_logprob_runs(top, whole, w->n, "from the top tokens", "from the row");
    for (int r = 0; r < w->n; r++)
        ck_assert_int_eq(top->lp[r][0].n_top, (r * 7) % (CINFER_MAX_TOP_LOGPROBS + 1));
    printf("16 greedy requests with logprobs, %d steps, %d top alternatives: the top-token path gives the "
           "whole row's tokens and logprobs bit for bit\n", 16 * MAX_NEW, alternatives);
    free(top);
    free(whole);
    free(w);
}
END_TEST

/* The CPU backend with its sample op counting the rows it draws, and without one. */
static const struct cinfer_backend_ops *cpu_ops;
static long rows_sampled;
static int counting_sample(void *state, float *logits, int vocab, const int32_t *rows, int n_rows,
                           const struct cinfer_backend_sample_params *params, int32_t *token_ids, float *token_logits,
                           struct cinfer_error *err)
{
    rows_sampled += n_rows;
    return cpu_ops->sample(state, logits, vocab, rows, n_rows, params, token_ids, token_logits, err);
}

/* Sampled (temperature, top-k, top-p, min-p; seeded; logprobs on odd rids). */
static void sampled_params(struct cinfer_sampling_params *p, int i, int unused)
{
    (void)unused;
    p->temperature = 0.6f + 0.2f * (float)(i % 5);
    p->top_k = (int[]){0, 20, 0, 5}[i % 4];
    p->top_p = (float[]){1.0f, 0.9f, 0.8f}[i % 3];
    p->min_p = i % 7 == 3 ? 0.05f : 0.0f;
    p->seed = 1000u + (uint64_t)i;
    p->has_seed = 1;
    p->logprobs = i % 2;
    p->top_logprobs = p->logprobs ? (i * 3) % (CINFER_MAX_TOP_LOGPROBS + 1) : 0;
    ck_assert(cinfer_sampler_draws_as_is(p, 0));
}

/* A sampled request's tokens drawn where the logits are (the backend's sample op, given
 * the request's next uniform number) are the ones the host's sampler draws from the
 * downloaded row, with the same logprobs and alternatives, bit for bit. */
START_TEST(sampled_tokens_equal_drawn_on_backend_or_host)
{
    struct workload *w = random_workload(16, 3, 90, 0x5eed0031);
    struct logprob_run *there = malloc(sizeof *there), *host = malloc(sizeof *host);
    cpu_ops = cinfer_cpu_backend_ops();
    struct cinfer_backend_ops counting = *cpu_ops, without = *cpu_ops;
    counting.sample = counting_sample;
    without.sample = NULL;
    rows_sampled = 0;
    run_logprobs(w, &counting, sampled_params, 0, 2, there);
    long drawn_there = rows_sampled;
    run_logprobs(w, &without, sampled_params, 0, 2, host);
    ck_assert_int_eq(rows_sampled, drawn_there); /* the host's run drew none there */
    ck_assert_int_eq(drawn_there, 16 * MAX_NEW);
    int alternatives = compare_logprob_runs(there, host, w->n, "drawn on the backend", "on the host");
    int differ_from_greedy = 0;
    for (int r = 1; r < w->n; r += 2) /* the requests with logprobs */
        for (int t = 0; t < MAX_NEW; t++)
            differ_from_greedy += there->lp[r][t].n_top > 0 && there->token[r][t] != there->lp[r][t].top_ids[0];
    ck_assert_int_gt(differ_from_greedy, 0); /* they are draws, not argmaxes */
    printf("16 sampled requests, %ld tokens drawn by the backend's sample op: tokens, logprobs and %d alternatives "
           "equal to the host sampler's (%d draws not the most likely token)\n",
           drawn_there, alternatives, differ_from_greedy);
    free(there);
    free(host);
    free(w);
}
END_TEST

START_TEST(shared_prefix_saves_prefill)
{
    /* One 96-token system prompt, 48 questions of 4..8 tokens (stories260K's context
     * is 128 tokens: prompt and 24 new tokens must fit). */
    struct workload *w = calloc(1, sizeof *w);
    uint64_t seed = 0x5eed0002;
    int32_t system[96];
    random_ids(&seed, system, 96);
    w->n = 48;
    for (int i = 0; i < w->n; i++) {
        int q = 4 + (int)(rng_next(&seed) % 5);
        memcpy(w->prompts[i], system, sizeof system);
        random_ids(&seed, w->prompts[i] + 96, q);
        w->n_prompt[i] = 96 + q;
    }
    struct workload *off = malloc(sizeof *off), *lpm = malloc(sizeof *lpm), *chunked = malloc(sizeof *chunked);
    memcpy(off, w, sizeof *w);
    memcpy(lpm, w, sizeof *w);
    memcpy(chunked, w, sizeof *w);
    struct setup cfg = {.kv_tokens = 48 * (128 + 16), .max_running = 16};
    struct cinfer_scheduler_stats on_stats, off_stats, lpm_stats;
    run_together(&cfg, w, &on_stats);
    cfg.policy = CINFER_SCHEDULE_LPM;
    run_together(&cfg, lpm, &lpm_stats);
    cfg.policy = CINFER_SCHEDULE_FCFS;
    struct cinfer_scheduler_stats chunked_stats;
    cfg.chunk = 32; /* the system prompt reaches the cache chunk by chunk */
    run_together(&cfg, chunked, &chunked_stats);
    cfg.chunk = 0;
    cfg.disable_cache = 1;
    run_together(&cfg, off, &off_stats);
    assert_same_outputs(chunked, off, "chunked prefill with prefix cache vs without cache");
    assert_same_outputs(w, off, "prefix cache on vs off");
    assert_same_outputs(lpm, off, "lpm with prefix cache vs fcfs without");
    double hit_rate = (double)on_stats.prefix_cache_hit_tokens / (double)on_stats.prefix_cache_query_tokens;
    double saving = 1.0 - (double)on_stats.prefill_tokens / (double)off_stats.prefill_tokens;
    printf("shared prefix (96-token system prompt, 48 questions): hit rate %.1f%% (%lld of %lld tokens), "
           "prefill tokens %lld with the cache vs %lld without: saving %.1f%% (lpm: %lld)\n",
           100 * hit_rate, (long long)on_stats.prefix_cache_hit_tokens, (long long)on_stats.prefix_cache_query_tokens,
           (long long)on_stats.prefill_tokens, (long long)off_stats.prefill_tokens, 100 * saving,
           (long long)lpm_stats.prefill_tokens);
    ck_assert_int_eq(off_stats.prefix_cache_hit_tokens, 0);
    ck_assert_msg(saving >= 0.80, "prefill saving %.3f < 0.80", saving);
    double chunked_saving = 1.0 - (double)chunked_stats.prefill_tokens / (double)off_stats.prefill_tokens;
    printf("  chunked prefill (32): prefill tokens %lld, saving %.1f%%\n", (long long)chunked_stats.prefill_tokens,
           100 * chunked_saving);
    ck_assert_msg(chunked_saving >= 0.80, "chunked prefill saving %.3f < 0.80", chunked_saving);
    free(chunked);
    free(w);
    free(off);
    free(lpm);
}
END_TEST

START_TEST(kv_pressure_retracts_and_completes)
{
    struct workload *w = random_workload(100, 20, 60, 0x5eed0003);
    struct workload *alone = malloc(sizeof *alone);
    memcpy(alone, w, sizeof *w);
    run_alone(alone);
    for (int disable = 0; disable <= 1; disable++) {
        /* Room for about four requests at full length, 100 admitted together. */
        struct setup cfg = {.kv_tokens = 4 * (60 + MAX_NEW + 16), .max_running = 100, .disable_cache = disable};
        struct cinfer_scheduler_stats stats;
        run_together(&cfg, w, &stats);
        assert_same_outputs(w, alone, disable ? "KV pressure, no prefix cache" : "KV pressure");
        for (int i = 0; i < w->n; i++)
            ck_assert_int_eq(w->finish[i], CINFER_FINISH_LENGTH);
        int prompt_total = 0;
        for (int i = 0; i < w->n; i++)
            prompt_total += w->n_prompt[i];
        printf("KV pressure (%d-token cache, 100 requests, prefix cache %s): all complete, identical to alone; "
               "%lld retractions; prefill tokens %lld for %d prompt tokens\n",
               cfg.kv_tokens, disable ? "off" : "on", (long long)stats.retractions, (long long)stats.prefill_tokens,
               prompt_total);
        ck_assert_int_gt(stats.retractions, 0);
    }
    free(w);
    free(alone);
}
END_TEST

/* With every KV cache type, on the default model (head_dim 32, so q8_0 fits): 60
 * requests, half of them sharing a 32-token prefix, in a cache with room for about four
 * at full length: the prefix cache hits, requests are retracted, and every request gets
 * the tokens it gets alone with the same KV type. */
START_TEST(kv_types_prefix_cache_and_retraction_equal_alone)
{
    static const enum cinfer_kv_cache_dtype types[] = {CINFER_KV_CACHE_DTYPE_F32, CINFER_KV_CACHE_DTYPE_F16,
                                                       CINFER_KV_CACHE_DTYPE_BF16, CINFER_KV_CACHE_DTYPE_Q8_0};
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    struct cinfer_model *stories = model, *m = NULL;
    struct cinfer_model_load_options lo = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_model_load(CINFER_SOURCE_DIR "/models/default", &lo, &m, &err) == 0, "%s", err.message);
    model = m; /* the fixture and random_ids read the global */
    struct workload *w = random_workload(60, 40, 80, 0x5eed0007);
    for (int i = 0; i < w->n; i += 2)
        memcpy(w->prompts[i], w->prompts[0], 32 * sizeof(int32_t));
    struct workload *alone = malloc(sizeof *alone);
    memcpy(alone, w, sizeof *w);
    run_alone_kv(alone, types[_i]);
    struct setup cfg = {.kv_tokens = 4 * (80 + MAX_NEW + 16), .max_running = 60, .kv_dtype = types[_i]};
    struct cinfer_scheduler_stats stats;
    run_together(&cfg, w, &stats);
    char what[64];
    snprintf(what, sizeof what, "kv %s, prefix cache and KV pressure", names[_i]);
    assert_same_outputs(w, alone, what);
    printf("kv cache %s: 60 requests in a %d-token cache: %lld retractions, %lld prefix-cache hit tokens; every "
           "request's tokens as alone\n",
           names[_i], cfg.kv_tokens, (long long)stats.retractions, (long long)stats.prefix_cache_hit_tokens);
    ck_assert_int_gt(stats.retractions, 0);
    ck_assert_int_gt(stats.prefix_cache_hit_tokens, 0);
    free(w);
    free(alone);
    model = stories;
    cinfer_model_free(&m);
}
END_TEST

/* Constrained and free requests in one batch under KV pressure: the free ones (greedy)
 * give exactly what they give alone, whatever the grammar did to their neighbours; the
 * constrained ones (sampled) all spell a sentence of the grammar and end with EOS, their
 * matchers surviving retraction; one grammar text is compiled once for all of them. */
START_TEST(constrained_and_free_requests_batch_together)
{
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, CINFER_BINARY_DIR "/lib/cinfer/plugins",
                                     &plugin, &err) == 0, "%s", err.message);
    const struct cinfer_tokenizer_ops *ops = cinfer_plugin_vtable(plugin);
    struct cinfer_tokenizer *tok = NULL;
    ck_assert_msg(ops->open(MODEL_PATH, &tok, &err) == 0, "%s", err.message);
    struct cinfer_tokenizer_ctx ctx = {.plugin = plugin, .ops = ops, .tok = tok};
    struct cinfer_token_table *tt = NULL;
    ck_assert_int_eq(cinfer_token_table_from_tokenizer(&ctx, model->config.vocab_size, &tt, &err), 0);

    struct workload *w = random_workload(40, 20, 60, 0x5eed0021);
    struct workload *alone = malloc(sizeof *alone);
    memcpy(alone, w, sizeof *w);
    run_alone(alone);
    struct setup cfg = {.kv_tokens = 6 * (60 + MAX_NEW + 16), .max_running = 40, .tokens = tt};
    struct fixture f;
    fixture_open(&f, &cfg);
    const char *regex = "[a-z]{1,6}( [a-z]{1,6}){2,4}\\.";
    for (int i = 0; i < w->n; i++) {
        struct cinfer_sampling_params p;
        greedy(&p);
        if (i % 2) { /* constrained: sampled, EOS allowed only after the '.' */
            p.temperature = 1.0f;
            p.ignore_eos = 0;
            p.seed = (uint64_t)i;
            p.has_seed = 1;
            p.regex = regex;
        }
        ck_assert_msg(cinfer_scheduler_add(f.s, (uint64_t)i, w->prompts[i], w->n_prompt[i], &p, &err) == 0, "%s",
                      err.message);
        w->n_out[i] = 0;
    }
    drain(f.s, w);
    struct cinfer_scheduler_stats stats;
    cinfer_scheduler_get_stats(f.s, &stats);
    for (int i = 0; i < w->n; i += 2) {
        ck_assert_int_eq(w->n_out[i], alone->n_out[i]);
        ck_assert_msg(memcmp(w->out[i], alone->out[i], (size_t)w->n_out[i] * sizeof w->out[i][0]) == 0,
                      "free request %d changed beside constrained ones", i);
    }
    int checked = 0;
    for (int i = 1; i < w->n; i += 2) {
        ck_assert_msg(w->finish[i] == CINFER_FINISH_STOP_TOKEN, "constrained request %d finished %d", i, w->finish[i]);
        char text[512];
        size_t len = 0;
        for (int k = 0; k + 1 < w->n_out[i]; k++) { /* the last token is EOS */
            int32_t id = w->out[i][k];
            memcpy(text + len, tt->bytes + tt->offset[id], tt->len[id]);
            len += tt->len[id];
        }
        text[len] = '\0';
        /* the regex by hand: words of 1-6 letters, 3 to 5 of them, one space apart, a '.' */
        int words = 0, run = 0, ok = len > 0 && text[len - 1] == '.';
        for (size_t k = 0; ok && k + 1 < len; k++) {
            if (text[k] >= 'a' && text[k] <= 'z') {
                ok = ++run <= 6;
            } else if (text[k] == ' ' && run > 0) {
                words++;
                run = 0;
            } else {
                ok = 0;
            }
        }
        words += run > 0;
        ok = ok && run > 0 && words >= 3 && words <= 5;
        ck_assert_msg(ok, "constrained request %d: \"%s\" does not match %s", i, text, regex);
        if (checked++ < 3)
            printf("constrained %d: \"%s\"\n", i, text);
    }
    printf("constrained and free together: %d free outputs as alone, %d constrained outputs match; %lld "
           "retractions; grammar compiled %lld time(s) for %lld requests\n",
           w->n / 2, checked, (long long)stats.retractions,
           (long long)(stats.grammar_lookups - stats.grammar_cache_hits), (long long)stats.grammar_lookups);
    ck_assert_int_eq(stats.grammar_lookups, w->n / 2);
    ck_assert_int_eq(stats.grammar_cache_hits, w->n / 2 - 1);
    fixture_close(&f);
    free(w);
    free(alone);
    cinfer_token_table_free(&tt);
    ops->close(tok);
    cinfer_plugin_close(&plugin);
}
END_TEST

START_TEST(abort_frees_pages_at_once)
{
    struct workload *w = random_workload(8, 40, 80, 0x5eed0004);
    for (int disable = 0; disable <= 1; disable++) {
        struct setup cfg = {.kv_tokens = 2048, .max_running = 4, .disable_cache = disable};
        struct fixture f;
        fixture_open(&f, &cfg);
        int total = cinfer_runtime_kv_pages_total(f.rt);
        ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), total);
        struct cinfer_sampling_params p;
        greedy(&p);
        struct cinfer_error err = {0};
        for (int i = 0; i < w->n; i++)
            ck_assert(cinfer_scheduler_add(f.s, (uint64_t)i, w->prompts[i], w->n_prompt[i], &p, &err) == 0);
        const struct cinfer_step_item *items;
        int n;
        for (int k = 0; k < 3; k++)
            ck_assert(cinfer_scheduler_step(f.s, &items, &n, &err) == 0);
        ck_assert_int_eq(cinfer_scheduler_running(f.s), 4);
        ck_assert_int_lt(cinfer_runtime_kv_pages_free(f.rt), total);
        /* flush is refused while requests run, with the counts. */
        ck_assert_int_eq(cinfer_scheduler_flush_cache(f.s, &err), CINFER_ERR_STATE);
        ck_assert_ptr_nonnull(strstr(err.message, "4 requests are running and 4 waiting"));
        for (int i = 0; i < w->n; i++)
            ck_assert_int_eq(cinfer_scheduler_abort(f.s, (uint64_t)i), 1);
        ck_assert_int_eq(cinfer_scheduler_abort(f.s, 99), 0);
        struct cinfer_scheduler_stats stats;
        cinfer_scheduler_get_stats(f.s, &stats);
        /* At once, before any further step: every page is free or in the prefix cache,
         * and nothing in the cache is locked by the aborted requests. */
        ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt) + stats.cached_pages, total);
        ck_assert_int_eq(stats.evictable_pages, stats.cached_pages);
        if (disable)
            ck_assert_int_eq(stats.cached_pages, 0);
        ck_assert(cinfer_scheduler_step(f.s, &items, &n, &err) == 0);
        ck_assert_int_eq(n, 8);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(items[i].finish_reason, CINFER_FINISH_ABORT);
        ck_assert(!cinfer_scheduler_has_work(f.s));
        ck_assert_int_eq(cinfer_scheduler_flush_cache(f.s, &err), 0);
        ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), total);
        fixture_close(&f);
    }
    free(w);
}
END_TEST

START_TEST(queue_full_and_too_long_refused)
{
    struct setup cfg = {.kv_tokens = 256, .max_running = 2, .max_queued = 3};
    struct fixture f;
    fixture_open(&f, &cfg);
    struct cinfer_sampling_params p;
    greedy(&p);
    struct cinfer_error err = {0};
    int32_t ids[600];
    uint64_t seed = 7;
    random_ids(&seed, ids, 600);
    for (int i = 0; i < 3; i++)
        ck_assert(cinfer_scheduler_add(f.s, (uint64_t)i, ids, 10, &p, &err) == 0);
    ck_assert_int_eq(cinfer_scheduler_add(f.s, 3, ids, 10, &p, &err), CINFER_ERR_OVERLOADED);
    ck_assert_str_eq(err.message, "queue full: 3 requests are waiting (max_queued_requests 3)");

    int context = model->config.max_position_embeddings > 0 ? model->config.max_position_embeddings : 512;
    int too_long = context < 600 ? context : 600;
    ck_assert_int_gt(context, 100);
    char expected[200];
    ck_assert_int_eq(cinfer_scheduler_add(f.s, 4, ids, too_long, &p, &err), CINFER_ERR_CONTEXT_LENGTH);
    snprintf(expected, sizeof expected,
             "prompt of %d tokens leaves no room for output in the context length of %d tokens", too_long, context);
    ck_assert_str_eq(err.message, expected);
    fixture_close(&f);
    /* Longer than the whole KV cache (64 tokens) though within the context. */
    struct setup small = {.kv_tokens = 64, .max_running = 2};
    fixture_open(&f, &small);
    ck_assert_int_eq(cinfer_scheduler_add(f.s, 5, ids, 100, &p, &err), CINFER_ERR_CONTEXT_LENGTH);
    ck_assert_str_eq(err.message, "prompt of 100 tokens does not fit the KV cache of 64 tokens");
    fixture_close(&f);
}
END_TEST

/* Steps once; returns the rid that got a token this step (-1 if none, -2 if several),
 * and the finish of rid `watch` in *finish / its error in *error when it finished. */
static int step_once(struct cinfer_scheduler *s, uint64_t watch, enum cinfer_finish_reason *finish, char *error)
{
    const struct cinfer_step_item *items;
    int n, got = -1;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_scheduler_step(s, &items, &n, &err) == 0, "%s", err.message);
    for (int i = 0; i < n; i++) {
        if (items[i].token >= 0)
            got = got == -1 ? (int)items[i].rid : -2;
        if (items[i].rid == watch && items[i].finish_reason != CINFER_FINISH_NONE) {
            *finish = items[i].finish_reason;
            snprintf(error, 64, "%s", items[i].error ? items[i].error : "");
        }
    }
    return got;
}

START_TEST(kv_pressure_retracts_the_lowest_priority)
{
    /* Two requests that cannot both grow in 6 pages: the older one has the lower
     * priority, so it is the one retracted, and the newer, higher one finishes first. */
    struct setup cfg = {.kv_tokens = 96, .max_running = 2, .disable_cache = 1};
    struct fixture f;
    fixture_open(&f, &cfg);
    struct cinfer_sampling_params p;
    greedy(&p);
    p.max_new_tokens = 60;
    struct cinfer_error err = {0};
    uint64_t seed = 23;
    int32_t a[16], b[16];
    random_ids(&seed, a, 16);
    random_ids(&seed, b, 16);
    p.priority = 0;
    ck_assert_int_eq(cinfer_scheduler_add(f.s, 0, a, 16, &p, &err), 0);
    enum cinfer_finish_reason finish;
    char why[64];
    step_once(f.s, 99, &finish, why); /* request 0 is running before request 1 arrives */
    p.priority = 5;
    ck_assert_int_eq(cinfer_scheduler_add(f.s, 1, b, 16, &p, &err), 0);
    int finished_first = -1, steps = 0;
    while (cinfer_scheduler_has_work(f.s) && steps++ < 2000) {
        const struct cinfer_step_item *items;
        int n;
        ck_assert_int_eq(cinfer_scheduler_step(f.s, &items, &n, &err), 0);
        for (int i = 0; i < n; i++)
            if (items[i].finish_reason != CINFER_FINISH_NONE && finished_first < 0)
                finished_first = (int)items[i].rid;
    }
    struct cinfer_scheduler_stats st;
    cinfer_scheduler_get_stats(f.s, &st);
    ck_assert_msg(st.retractions > 0, "the cache was not under pressure");
    ck_assert_int_eq(finished_first, 1);
    fixture_close(&f);
}
END_TEST

START_TEST(priority_then_policy_orders_the_queue)
{
    struct cinfer_sampling_params p;
    greedy(&p);
    p.max_new_tokens = 1;
    struct cinfer_error err = {0};
    uint64_t seed = 11;
    int32_t a[40], b[40];
    random_ids(&seed, a, 40);
    random_ids(&seed, b, 40);
    enum cinfer_finish_reason finish;
    char why[64];
    /* One request at a time: the order requests start in is the order they finish. */
    {
        struct setup cfg = {.kv_tokens = 1024, .max_running = 1};
        struct fixture f;
        fixture_open(&f, &cfg);
        int prio[4] = {0, 5, 1, 5};
        for (int i = 0; i < 4; i++) {
            p.priority = prio[i];
            ck_assert(cinfer_scheduler_add(f.s, (uint64_t)i, a + i, 10, &p, &err) == 0);
        }
        int order[4], expected[4] = {1, 3, 2, 0}; /* higher first, arrival among equals */
        for (int i = 0; i < 4; i++)
            order[i] = step_once(f.s, 99, &finish, why);
        ck_assert(!memcmp(order, expected, sizeof order));
        fixture_close(&f);
    }
    /* lpm starts the request with the longer cached prefix first; fcfs keeps arrival. */
    p.priority = 0;
    for (int lpm = 0; lpm <= 1; lpm++) {
        struct setup cfg = {.kv_tokens = 1024, .max_running = 1, .policy = lpm ? CINFER_SCHEDULE_LPM : CINFER_SCHEDULE_FCFS};
        struct fixture f;
        fixture_open(&f, &cfg);
        ck_assert(cinfer_scheduler_add(f.s, 10, b, 40, &p, &err) == 0); /* caches b's pages */
        ck_assert_int_eq(step_once(f.s, 99, &finish, why), 10);
        int32_t b2[40];
        memcpy(b2, b, sizeof b2);
        b2[39] = b[39] == 3 ? 4 : 3;
        ck_assert(cinfer_scheduler_add(f.s, 11, a, 40, &p, &err) == 0);
        ck_assert(cinfer_scheduler_add(f.s, 12, b2, 40, &p, &err) == 0);
        int first = step_once(f.s, 99, &finish, why), second = step_once(f.s, 99, &finish, why);
        ck_assert_int_eq(first, lpm ? 12 : 11);
        ck_assert_int_eq(second, lpm ? 11 : 12);
        struct cinfer_scheduler_stats st;
        cinfer_scheduler_get_stats(f.s, &st);
        ck_assert_int_eq(st.prefix_cache_hit_tokens, 32); /* b2 found b's two whole pages */
        fixture_close(&f);
    }
}
END_TEST

START_TEST(waiting_and_running_timeouts_abort)
{
    struct setup cfg = {.kv_tokens = 1024, .max_running = 1, .fake_clock = 1, .disable_cache = 1};
    struct fixture f;
    fixture_open(&f, &cfg);
    int total = cinfer_runtime_kv_pages_total(f.rt);
    struct cinfer_sampling_params p;
    greedy(&p);
    struct cinfer_error err = {0};
    int32_t ids[20];
    uint64_t seed = 5;
    random_ids(&seed, ids, 20);
    fake_now_ms = 1000;
    p.running_timeout_ms = 100;
    ck_assert(cinfer_scheduler_add(f.s, 1, ids, 20, &p, &err) == 0);
    p.running_timeout_ms = 0;
    p.waiting_timeout_ms = 50;
    ck_assert(cinfer_scheduler_add(f.s, 2, ids, 20, &p, &err) == 0); /* waits behind 1 */
    enum cinfer_finish_reason finish = CINFER_FINISH_NONE;
    char why[64] = "";
    ck_assert_int_eq(step_once(f.s, 2, &finish, why), 1);
    fake_now_ms += 49;
    ck_assert_int_eq(step_once(f.s, 2, &finish, why), 1);
    ck_assert_int_eq(finish, CINFER_FINISH_NONE);
    fake_now_ms += 1;
    ck_assert_int_eq(step_once(f.s, 2, &finish, why), 1);
    ck_assert_int_eq(finish, CINFER_FINISH_ABORT);
    ck_assert_str_eq(why, "waiting timeout of 50 ms");
    ck_assert_int_eq(cinfer_scheduler_queued(f.s), 0);
    fake_now_ms += 50; /* 100 ms since request 1 started */
    finish = CINFER_FINISH_NONE;
    ck_assert_int_eq(step_once(f.s, 1, &finish, why), -1);
    ck_assert_int_eq(finish, CINFER_FINISH_ABORT);
    ck_assert_str_eq(why, "running timeout of 100 ms");
    ck_assert(!cinfer_scheduler_has_work(f.s));
    ck_assert_int_eq(cinfer_runtime_kv_pages_free(f.rt), total);
    fixture_close(&f);
}
END_TEST

START_TEST(priority_and_timeouts_cross_the_wire)
{
    struct cinfer_msg_generate g = {.rid = 9, .n_ids = 2};
    int32_t ids[2] = {5, 6};
    g.ids = ids;
    greedy(&g.sampling);
    g.sampling.priority = -7;
    g.sampling.waiting_timeout_ms = 1500;
    g.sampling.running_timeout_ms = 30000;
    void *frame = NULL;
    size_t len = 0;
    ck_assert_int_eq(cinfer_msg_encode_generate(&g, &frame, &len), 0);
    struct cinfer_msg_generate back;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_msg_decode_generate(frame, len, &back, &err) == 0, "%s", err.message);
    ck_assert_int_eq(back.sampling.priority, -7);
    ck_assert_int_eq(back.sampling.waiting_timeout_ms, 1500);
    ck_assert_int_eq(back.sampling.running_timeout_ms, 30000);
    cinfer_msg_generate_free(&back);
    free(frame);
}
END_TEST

/* Through the real engine processes: the scheduler's counters reach server_info, a
 * request sharing a cached prefix still answers as the hand-driven runtime does, and
 * flush_cache empties the cache when idle. */
static void engine_prefix_run(int disable_cache)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, MODEL_PATH);
    args.disable_radix_cache = disable_cache;
    args.page_size = 16;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "%s", err.message);
    uint64_t seed = 0x5eed0005;
    int32_t prompt[2][60];
    random_ids(&seed, prompt[0], 60);
    memcpy(prompt[1], prompt[0], 40 * sizeof(int32_t)); /* 40 shared tokens: two whole pages */
    random_ids(&seed, prompt[1] + 40, 20);
    for (int i = 0; i < 2; i++) {
        struct cinfer_generate_request req = {.input_ids = prompt[i], .n_input_ids = 60};
        greedy(&req.sampling);
        struct cinfer_generate_result res = {0};
        ck_assert_msg(cinfer_engine_generate(e, &req, &res, &err) == 0, "%s", err.message);
        int32_t ref[MAX_NEW];
        ck_assert_int_eq(cinfer_test_greedy_reference(MODEL_PATH, prompt[i], 60, MAX_NEW, 0, ref), MAX_NEW);
        ck_assert_int_eq((int)res.n_output_ids, MAX_NEW);
        ck_assert(!memcmp(res.output_ids, ref, sizeof ref));
        cinfer_generate_result_free(&res);
    }
    struct cinfer_server_info info;
    ck_assert_msg(cinfer_engine_server_info(e, &info, &err) == 0, "%s", err.message);
    ck_assert_int_eq(info.prefix_cache_query_tokens, 120);
    ck_assert_int_eq(info.prefix_cache_hit_tokens, disable_cache ? 0 : 32);
    printf("engine (prefix cache %s): server_info prefix_cache_hit_tokens %lld of prefix_cache_query_tokens %lld\n",
           disable_cache ? "off" : "on", (long long)info.prefix_cache_hit_tokens,
           (long long)info.prefix_cache_query_tokens);
    ck_assert_msg(cinfer_engine_flush_cache(e, &err) == 0, "%s", err.message);
    cinfer_engine_shutdown(&e, 1000);
    cinfer_server_args_free(&args);
}

START_TEST(engine_reports_prefix_cache)
{
    engine_prefix_run(0);
    engine_prefix_run(1);
}
END_TEST

static Suite *suite_scheduler(void)
{
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("stories260K");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, concurrent_64_equal_alone);
    tcase_add_test(tc, greedy_top_tokens_equal_whole_row);
    tcase_add_test(tc, sampled_tokens_equal_drawn_on_backend_or_host);
    tcase_add_test(tc, shared_prefix_saves_prefill);
    tcase_add_test(tc, kv_pressure_retracts_and_completes);
    tcase_add_loop_test(tc, kv_types_prefix_cache_and_retraction_equal_alone, 0, 4);
    tcase_add_test(tc, constrained_and_free_requests_batch_together);
    tcase_add_test(tc, kv_pressure_retracts_the_lowest_priority);
    tcase_add_test(tc, abort_frees_pages_at_once);
    tcase_add_test(tc, queue_full_and_too_long_refused);
    tcase_add_test(tc, priority_then_policy_orders_the_queue);
    tcase_add_test(tc, waiting_and_running_timeouts_abort);
    tcase_add_test(tc, priority_and_timeouts_cross_the_wire);
    tcase_add_test(tc, engine_reports_prefix_cache);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    struct cinfer_model_load_options lo = {0};
    struct cinfer_error err = {0};
    if (cinfer_model_load(MODEL_PATH, &lo, &model, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    int rc = cinfer_test_run_suite(suite_scheduler());
    cinfer_model_free(&model);
    return rc;
}
