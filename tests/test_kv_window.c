/* Sliding layers' KV pages released behind the window (core/model/kv_window.c and the
 * scheduler's release_passed_windows), on the committed random Gemma 2 (alternating
 * local and global layers) and Gemma 3 (five local to one global) files of
 * tests/data/models/architectures and a Mistral whose every layer slides (windows of
 * 32 tokens), and gpt-oss (a window of 8 on alternate layers, attention sinks).
 *
 * What a user would see: the same greedy tokens and the same log-probabilities, bit for
 * bit, as the runtime that keeps every page (the path test_model_reference holds to the
 * float64 reference), on sequences more than four windows long, alone, batched and
 * through the prefix cache; and the sliding layers' pages held at the end stay at about
 * a window per sequence while the context grows (measured and printed). Under tensor
 * parallelism (2 ranks) the followers map window pages as rank 0's plans say: the same
 * tokens as one rank, log-probabilities within the f32 bound, the same pages held. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "support/runner.h"
#include "support/tp_group.h"

#define ARCH_DIR CINFER_TEST_DATA_DIR "/models/architectures/"
#define MAX_REQUESTS 4
#define MAX_PROMPT 200
#define MAX_NEW 40
#define PAGE_TOKENS 16
#define CHUNK 32

/* Gemma 2 and 3 as committed GGUF files; Mistral with a window on every layer (no
 * full-attention layer at all: the main pages then hold no K/V) as the Hugging Face
 * folder test_model_reference's fixture writes. */
static const char *const files[] = {ARCH_DIR "gemma2.gguf", ARCH_DIR "gemma3.gguf",
                                    CINFER_REFERENCE_DIR "/models/mistral_swa-st-f32", ARCH_DIR "gpt_oss.gguf"};
static const int windows[] = {32, 32, 32, 8};

struct run {
    int n;
    int32_t prompts[MAX_REQUESTS][MAX_PROMPT];
    int n_prompt[MAX_REQUESTS];
    int32_t out[MAX_REQUESTS][MAX_NEW];
    float logprob[MAX_REQUESTS][MAX_NEW];
    int n_out[MAX_REQUESTS];
    int cached[MAX_REQUESTS];
    int most_window_pages; /* the largest window pool use seen after a step */
    int window_pages_total;
};

struct fixture {
    struct cinfer_model *model;
    struct cinfer_runtime *rt;
    struct cinfer_scheduler *s;
};

static struct cinfer_runtime_options runtime_options(const struct cinfer_model_config *c, int keep_window_pages)
{
    return (struct cinfer_runtime_options){
        .kv_cache_bytes = 4096 * cinfer_runtime_kv_token_bytes(c, CINFER_KV_CACHE_DTYPE_F32),
        .kv_page_tokens = PAGE_TOKENS,
        .n_threads = 2,
        .max_batch_tokens = 256,
        .kv_dtype = CINFER_KV_CACHE_DTYPE_F32,
        .keep_window_pages = keep_window_pages,
    };
}

/* The scheduler on a runtime made already (f->model and f->rt set). */
static void fixture_schedule(struct fixture *f)
{
    const struct cinfer_model_config *c = &f->model->config;
    struct cinfer_error err = {0};
    struct cinfer_scheduler_options so = {
        .max_running_requests = MAX_REQUESTS,
        .max_queued_requests = 16,
        .max_prefill_tokens = 256,
        .chunked_prefill_size = CHUNK,
        .context_length = 512,
        .vocab_size = c->vocab_size,
        .eos_ids = c->eos_token_ids,
        .n_eos = c->n_eos,
        .default_seed = 1,
    };
    ck_assert_msg(cinfer_scheduler_create(f->rt, &so, &f->s, &err) == 0, "%s", err.message);
}

static void fixture_open(struct fixture *f, const char *file, int window, int keep_window_pages)
{
    struct cinfer_model_load_options lo = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_model_load(file, &lo, &f->model, &err) == 0, "%s", err.message);
    const struct cinfer_model_config *c = &f->model->config;
    ck_assert_msg(c->sliding_window == window, "%s: sliding_window %d, expected the file's %d", file,
                  c->sliding_window, window);
    struct cinfer_runtime_options ro = runtime_options(c, keep_window_pages);
    ck_assert_msg(cinfer_runtime_create(f->model, &ro, &f->rt, &err) == 0, "%s", err.message);
    ck_assert_int_eq(cinfer_runtime_kv_window_tokens(f->rt), keep_window_pages ? 0 : window);
    fixture_schedule(f);
}

static void fixture_close(struct fixture *f)
{
    cinfer_scheduler_destroy(&f->s);
    cinfer_runtime_destroy(&f->rt);
    cinfer_model_free(&f->model);
}

static void add(struct fixture *f, struct run *w, int i)
{
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.temperature = 0;
    p.max_new_tokens = MAX_NEW;
    p.ignore_eos = 1;
    p.logprobs = 1;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_scheduler_add(f->s, (uint64_t)i, w->prompts[i], w->n_prompt[i], &p, &err) == 0, "%s",
                  err.message);
}

static void drain(struct fixture *f, struct run *w)
{
    struct cinfer_error err = {0};
    while (cinfer_scheduler_has_work(f->s)) {
        const struct cinfer_step_item *items;
        int n;
        ck_assert_msg(cinfer_scheduler_step(f->s, &items, &n, &err) == 0, "%s", err.message);
        for (int i = 0; i < n; i++) {
            int r = (int)items[i].rid;
            ck_assert_msg(!items[i].error, "request %d: %s", r, items[i].error);
            if (items[i].token < 0)
                continue;
            if (w->n_out[r] == 0)
                w->cached[r] = items[i].cached_tokens;
            w->logprob[r][w->n_out[r]] = items[i].logprob;
            w->out[r][w->n_out[r]++] = items[i].token;
        }
        int total, used;
        cinfer_runtime_kv_window_usage(f->rt, &total, &used);
        if (used > w->most_window_pages)
            w->most_window_pages = used;
        w->window_pages_total = total;
    }
}

static void prompts(struct run *w, int n, int vocab, int len, uint32_t seed)
{
    w->n = n;
    for (int i = 0; i < n; i++) {
        uint32_t x = seed + 7919u * (uint32_t)i;
        w->n_prompt[i] = len - 5 * i;
        for (int t = 0; t < w->n_prompt[i]; t++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            w->prompts[i][t] = 3 + (int32_t)(x % (uint32_t)(vocab - 3));
        }
    }
}

static void assert_same(const struct run *a, const struct run *b, const char *what)
{
    for (int i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->n_out[i], MAX_NEW);
        ck_assert_int_eq(b->n_out[i], MAX_NEW);
        for (int t = 0; t < MAX_NEW; t++) {
            ck_assert_msg(a->out[i][t] == b->out[i][t], "%s: request %d token %d is %d, keeping every page %d", what,
                          i, t, b->out[i][t], a->out[i][t]);
            ck_assert_msg(memcmp(&a->logprob[i][t], &b->logprob[i][t], sizeof(float)) == 0,
                          "%s: request %d token %d logprob %.9g, keeping every page %.9g", what, i, t,
                          (double)b->logprob[i][t], (double)a->logprob[i][t]);
        }
    }
}

/* Four concurrent sequences of 185-200 prompt tokens + 40 new (over seven windows),
 * prefilled in chunks of 32, then the first one again through the prefix cache. */
START_TEST(released_windows_give_the_same_outputs_and_bounded_pages)
{
    const char *file = files[_i], *name = strrchr(files[_i], '/') + 1;
    if (access(file, R_OK) != 0) { /* the reference fixture skips without numpy */
        printf("%s: not there (no /usr/bin/python3 with numpy to write it); not run\n", file);
        return;
    }
    struct run *kept = calloc(1, sizeof *kept), *released = calloc(1, sizeof *released);
    struct run *again = calloc(1, sizeof *again);
    int64_t capacity[2];
    for (int mode = 0; mode < 2; mode++) {
        struct fixture f = {0};
        fixture_open(&f, file, windows[_i], mode == 0);
        capacity[mode] = cinfer_scheduler_max_total_tokens(f.s);
        struct run *w = mode == 0 ? kept : released;
        prompts(w, MAX_REQUESTS, f.model->config.vocab_size, MAX_PROMPT, 12345u);
        for (int i = 0; i < w->n; i++)
            add(&f, w, i);
        drain(&f, w);
        if (mode == 1) {
            /* every request finished: only cached prefixes' tails keep window pages */
            int total, used;
            cinfer_runtime_kv_window_usage(f.rt, &total, &used);
            /* its window and chunk, and its prompt's last window (kept for the prefix cache) */
            int W = windows[_i];
            int per_sequence = (W + CHUNK + PAGE_TOKENS - 1) / PAGE_TOKENS + 2 + W / PAGE_TOKENS + 1;
            int context_pages = (MAX_PROMPT + MAX_NEW + PAGE_TOKENS - 1) / PAGE_TOKENS;
            printf("%s: sliding layers held at most %d window pages for %d sequences of up to %d tokens "
                   "(%d pages each if kept; bound %d per sequence); %d held by the prefix cache after; pool %d\n",
                   name, released->most_window_pages, MAX_REQUESTS, MAX_PROMPT + MAX_NEW, context_pages,
                   per_sequence, used, total);
            ck_assert_int_le(released->most_window_pages, MAX_REQUESTS * per_sequence);
            ck_assert_int_lt(released->most_window_pages, MAX_REQUESTS * context_pages / 2);
            ck_assert_int_le(used, MAX_REQUESTS * per_sequence);
            /* the same first prompt again: its cached prefix resumes where its last
             * window still has its pages, and the outputs are unchanged */
            memcpy(again->prompts[0], released->prompts[0], sizeof again->prompts[0]);
            again->n_prompt[0] = released->n_prompt[0];
            again->n = 1;
            add(&f, again, 0);
            drain(&f, again);
            printf("%s: the repeated prompt found %d of %d tokens in the prefix cache\n", name, again->cached[0],
                   again->n_prompt[0]);
            ck_assert_int_eq(again->cached[0], (again->n_prompt[0] - 1) / PAGE_TOKENS * PAGE_TOKENS);
            struct run first = *kept;
            first.n = 1;
            assert_same(&first, again, "through the prefix cache");
        }
        fixture_close(&f);
    }
    assert_same(kept, released, name);
    /* the same KV budget holds more context once sliding layers hold only windows */
    printf("%s: the same KV budget holds %lld tokens of context (%.2fx the %lld when every page is kept)\n", name,
           (long long)capacity[1], (double)capacity[1] / (double)capacity[0], (long long)capacity[0]);
    ck_assert_int_gt(capacity[1], capacity[0]);
    free(kept);
    free(released);
    free(again);
}
END_TEST

/* Rank 0 of a tensor-parallel group: the released run's workload through a scheduler on
 * this rank's runtime (the followers run its plans). */
struct tp_body {
    struct cinfer_model *model; /* rank 0's config source (the followers load their own) */
    struct run *w;
    int window_tokens;
};

static int scheduler_on_rank0(struct cinfer_runtime *rt, void *ctx, char *why, size_t why_bytes)
{
    struct tp_body *b = ctx;
    struct fixture f = {.model = b->model, .rt = rt};
    b->window_tokens = cinfer_runtime_kv_window_tokens(rt);
    fixture_schedule(&f);
    for (int i = 0; i < b->w->n; i++)
        add(&f, b->w, i);
    drain(&f, b->w);
    cinfer_scheduler_destroy(&f.s);
    (void)why, (void)why_bytes; /* failures are the check assertions' (the test's process ends) */
    return 0;
}

/* The released run at tp_size 2 (threads), against one rank. */
START_TEST(tensor_parallel_ranks_map_window_pages_as_rank_0)
{
    const char *file = files[_i], *name = strrchr(files[_i], '/') + 1;
    if (access(file, R_OK) != 0) {
        printf("%s: not there (no /usr/bin/python3 with numpy to write it); not run\n", file);
        return;
    }
    struct run *one = calloc(1, sizeof *one), *two = calloc(1, sizeof *two);
    struct fixture f = {0};
    fixture_open(&f, file, windows[_i], 0);
    prompts(one, MAX_REQUESTS, f.model->config.vocab_size, MAX_PROMPT, 777u);
    *two = *one;
    for (int i = 0; i < one->n; i++)
        add(&f, one, i);
    drain(&f, one);
    fixture_close(&f);

    struct cinfer_model_load_options lo = {0};
    struct cinfer_error err = {0};
    struct tp_body body = {.w = two};
    ck_assert_msg(cinfer_model_load(file, &lo, &body.model, &err) == 0, "%s", err.message);
    struct tp_group g = {.tp_size = 2, .mode = CINFER_TEST_RANKS_THREADS,
                         .options = runtime_options(&body.model->config, 0), .rank0_body = scheduler_on_rank0,
                         .rank0_ctx = &body};
    snprintf(g.model_path, sizeof g.model_path, "%s", file);
    char why[1024];
    ck_assert_msg(tp_group_run(&g, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(body.window_tokens, windows[_i]); /* the pool is on under tensor parallelism */
    double worst = 0;
    for (int i = 0; i < one->n; i++)
        for (int t = 0; t < MAX_NEW; t++) {
            ck_assert_msg(one->out[i][t] == two->out[i][t], "%s tp 2: request %d token %d is %d, one rank's %d",
                          name, i, t, two->out[i][t], one->out[i][t]);
            double d = fabs((double)one->logprob[i][t] - (double)two->logprob[i][t]);
            worst = d > worst ? d : worst;
        }
    printf("%s tp_size 2: %d requests x %d tokens as one rank's, logprobs within %.2g; window pages held at most %d "
           "(one rank: %d), pool %d\n",
           name, one->n, MAX_NEW, worst, two->most_window_pages, one->most_window_pages, two->window_pages_total);
    ck_assert_msg(worst < 1e-4, "%s tp 2: a logprob differs from one rank's by %.3g", name, worst);
    ck_assert_int_eq(two->most_window_pages, one->most_window_pages); /* the same scheduling, the same pages */
    ck_assert_int_gt(two->window_pages_total, 0);
    cinfer_model_free(&body.model);
    tp_group_free(&g);
    free(one);
    free(two);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv_window");
    TCase *tc = tcase_create("architectures");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, released_windows_give_the_same_outputs_and_bounded_pages, 0,
                        (int)(sizeof files / sizeof files[0]));
    tcase_add_loop_test(tc, tensor_parallel_ranks_map_window_pages_as_rank_0, 0, (int)(sizeof files / sizeof files[0]));
    suite_add_tcase(s, tc);
    return cinfer_test_run_suite(s);
}
