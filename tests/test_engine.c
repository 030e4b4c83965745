/* The engine end to end, through the real processes: greedy output equals the model
 * runtime's own single-process greedy output; 32 threads each get their own right
 * answer; streaming (callback and iterator) yields the same text as blocking; hooks
 * overridden by an embedder run; workers are named for ps; RPC reaches every rank, and
 * its answers (errors included, whatever their words) are valid JSON; two engines in
 * one process keep to themselves; logprobs equal the log-softmax of the runtime's own
 * logits; n choices each reproduce alone with their seed; each refusal (empty prompt,
 * token outside the vocabulary, prompt past the context or the KV cache, full queue)
 * reaches the caller with its own status code from every entry point; the output text
 * reads as it does after the prompt (decode(prompt + output) past decode(prompt), by the
 * tokenizer's decode()) on stories260K and the default model, every way the C API
 * returns it, with stop strings, with special tokens kept, and for n = 2. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/tokenizer.h"
#include "model/model.h"
#include "model/runtime.h"
#include "support/engine_fixture.h"
#include "support/greedy_reference.h"
#include "support/procs.h"
#include "support/runner.h"
#include "support/text_after_prompt.h"
#include "worker/hooks.h"

#define MAX_NEW 24

static const char *const prompts[] = {
    "Once upon a time", "One day, a little girl", "The cat sat", "Tom and his dog", "There was a big tree",
    "Lily liked to", "The sun was", "A bird flew", "Mom said", "He ran to the park",
};
#define N_PROMPTS ((int)(sizeof prompts / sizeof prompts[0]))

static const char *model;

/* The prompt's ids as the engine will see them, and the runtime's own greedy answer. */
struct expectation {
    int32_t ids[MAX_NEW];
    int n;
};
static struct expectation expected[N_PROMPTS];

static void compute_expectations(void)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    struct cinfer_tokenizer_ctx *tok = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_default_init_tokenizer(&args, &tok, &err) == 0, "%s", err.message);
    for (int p = 0; p < N_PROMPTS; p++) {
        struct cinfer_token_ids ids = {0};
        ck_assert_int_eq(tok->ops->encode(tok->tok, prompts[p], strlen(prompts[p]), 1, &ids, &err), 0);
        expected[p].n = cinfer_test_greedy_reference(model, ids.ids, (int)ids.len, MAX_NEW, 1, expected[p].ids);
        ck_assert_int_gt(expected[p].n, 0);
        cinfer_token_ids_free(&ids);
    }
    cinfer_tokenizer_ctx_free(&tok);
    cinfer_server_args_free(&args);
}

/* context_length 0: the model's own. */
static struct cinfer_engine *start_engine_kv(const struct cinfer_engine_hooks *hooks, int context_length,
                                             enum cinfer_kv_cache_dtype kv_dtype)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.context_length = context_length;
    args.kv_cache_dtype = kv_dtype;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_engine_create(&args, hooks, &e, &err);
    ck_assert_msg(rc == 0, "engine create: %s", err.message);
    cinfer_server_args_free(&args);
    return e;
}

static struct cinfer_engine *start_engine_with_context(const struct cinfer_engine_hooks *hooks, int context_length)
{
    return start_engine_kv(hooks, context_length, CINFER_KV_CACHE_DTYPE_AUTO);
}

static struct cinfer_engine *start_engine(const struct cinfer_engine_hooks *hooks)
{
    return start_engine_with_context(hooks, 0);
}

static struct cinfer_generate_request greedy(const char *prompt)
{
    struct cinfer_generate_request req = {.prompt = prompt};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.max_new_tokens = MAX_NEW;
    return req;
}

static void assert_matches(int p, const struct cinfer_generate_result *r)
{
    ck_assert_msg((int)r->n_output_ids == expected[p].n, "prompt %d: %zu ids from the engine, %d from the runtime", p,
                  r->n_output_ids, expected[p].n);
    for (int i = 0; i < expected[p].n; i++)
        ck_assert_msg(r->output_ids[i] == expected[p].ids[i], "prompt %d: id %d differs: engine %d, runtime %d", p, i,
                      r->output_ids[i], expected[p].ids[i]);
}

static void setup(void)
{
    model = cinfer_test_engine_model();
    if (model)
        compute_expectations();
}

START_TEST(greedy_output_equals_the_runtime)
{
    if (!model)
        return;
    struct cinfer_engine *e = start_engine(NULL);
    for (int p = 0; p < 3; p++) {
        struct cinfer_generate_request req = greedy(prompts[p]);
        struct cinfer_generate_result r;
        struct cinfer_error err = {0};
        ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
        assert_matches(p, &r);
        ck_assert(r.finish_reason == CINFER_FINISH_LENGTH || r.finish_reason == CINFER_FINISH_STOP_TOKEN);
        ck_assert_int_eq(r.completion_tokens, (int)r.n_output_ids);
        ck_assert_int_gt((int)r.text_len, 0);
        cinfer_generate_result_free(&r);
    }
    cinfer_engine_shutdown(&e, 1000);
    ck_assert_ptr_null(e);
}
END_TEST

struct caller {
    struct cinfer_engine *engine;
    int prompt;
    int ok;
    char why[1100];
};

static void *call(void *arg)
{
    struct caller *c = arg;
    struct cinfer_generate_request req = greedy(prompts[c->prompt]);
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    if (cinfer_engine_generate(c->engine, &req, &r, &err) != 0) {
        snprintf(c->why, sizeof c->why, "%s", err.message);
        return NULL;
    }
    c->ok = (int)r.n_output_ids == expected[c->prompt].n &&
            !memcmp(r.output_ids, expected[c->prompt].ids, r.n_output_ids * sizeof(int32_t));
    if (!c->ok)
        snprintf(c->why, sizeof c->why, "wrong answer for prompt %d", c->prompt);
    cinfer_generate_result_free(&r);
    return NULL;
}

START_TEST(thirty_two_concurrent_callers_each_get_their_answer)
{
    if (!model)
        return;
    struct cinfer_engine *e = start_engine(NULL);
    struct caller callers[32];
    pthread_t threads[32];
    for (int i = 0; i < 32; i++) {
        callers[i] = (struct caller){.engine = e, .prompt = i % N_PROMPTS};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, call, &callers[i]), 0);
    }
    for (int i = 0; i < 32; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_msg(callers[i].ok, "caller %d: %s", i, callers[i].why);
    }
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* ---- KV cache types through the engine -------------------------------------------- */

#define KV_REQUESTS 64
#define KV_NEW 16
#define KV_MODEL CINFER_SOURCE_DIR "/models/default" /* head_dim 32: q8_0 K/V can hold it */

struct kv_caller {
    struct cinfer_engine *engine;
    int32_t prompt[24];
    int n_prompt;
    int32_t out[KV_NEW];
    int n_out;
    char why[CINFER_ERROR_MESSAGE_BYTES];
};

static void *kv_call(void *arg)
{
    struct kv_caller *c = arg;
    struct cinfer_generate_request req = greedy(NULL);
    req.input_ids = c->prompt;
    req.n_input_ids = (size_t)c->n_prompt;
    req.sampling.max_new_tokens = KV_NEW;
    req.sampling.ignore_eos = 1;
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    c->n_out = -1;
    if (cinfer_engine_generate(c->engine, &req, &r, &err) != 0) {
        snprintf(c->why, sizeof c->why, "%s", err.message);
        return NULL;
    }
    c->n_out = (int)r.n_output_ids;
    memcpy(c->out, r.output_ids, sizeof(int32_t) * (r.n_output_ids < KV_NEW ? r.n_output_ids : KV_NEW));
    cinfer_generate_result_free(&r);
    return NULL;
}

/* With every KV cache type, 64 requests at once (batched decode, chunked prefills side by
 * side) each get exactly the tokens the same request gets alone. */
START_TEST(kv_types_64_concurrent_requests_equal_each_alone)
{
    static const enum cinfer_kv_cache_dtype types[] = {CINFER_KV_CACHE_DTYPE_F32, CINFER_KV_CACHE_DTYPE_F16,
                                                       CINFER_KV_CACHE_DTYPE_BF16, CINFER_KV_CACHE_DTYPE_Q8_0};
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, KV_MODEL);
    args.kv_cache_dtype = types[_i];
    args.num_threads = 2;
    args.max_running_requests = KV_REQUESTS;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "engine (kv %s): %s", names[_i], err.message);
    cinfer_server_args_free(&args);
    static struct kv_caller together[KV_REQUESTS], alone[KV_REQUESTS];
    uint64_t rng = 1234;
    for (int i = 0; i < KV_REQUESTS; i++) {
        together[i] = (struct kv_caller){.engine = e, .n_prompt = 4 + i % 20};
        for (int t = 0; t < together[i].n_prompt; t++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            together[i].prompt[t] = (int32_t)((rng >> 33) % 3071);
        }
        alone[i] = together[i];
    }
    pthread_t threads[KV_REQUESTS];
    for (int i = 0; i < KV_REQUESTS; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, kv_call, &together[i]), 0);
    for (int i = 0; i < KV_REQUESTS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < KV_REQUESTS; i++) {
        kv_call(&alone[i]);
        ck_assert_msg(together[i].n_out == KV_NEW && alone[i].n_out == KV_NEW, "kv %s, request %d: %s%s", names[_i], i,
                      together[i].why, alone[i].why);
        ck_assert_msg(!memcmp(together[i].out, alone[i].out, sizeof(int32_t) * KV_NEW),
                      "kv %s, request %d: among 64 its tokens differ from alone", names[_i], i);
    }
    printf("kv cache %s: %d concurrent requests each got the %d tokens it gets alone\n", names[_i], KV_REQUESTS,
           KV_NEW);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

struct text_buf {
    char text[8192];
    size_t len;
    int chunks;
};

static int append(const struct cinfer_stream_chunk *c, void *ctx)
{
    struct text_buf *b = ctx;
    memcpy(b->text + b->len, c->text, c->text_len);
    b->len += c->text_len;
    b->text[b->len] = '\0';
    b->chunks++;
    return 0;
}

START_TEST(streaming_yields_the_blocking_text)
{
    if (!model)
        return;
    struct cinfer_engine *e = start_engine(NULL);
    struct cinfer_error err = {0};
    struct cinfer_generate_request req = greedy(prompts[0]);
    struct cinfer_generate_result blocking;
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &blocking, &err), 0);

    struct text_buf streamed = {0};
    ck_assert_int_eq(cinfer_engine_generate_stream(e, &req, append, &streamed, &err), 0);
    ck_assert_str_eq(streamed.text, blocking.text);
    ck_assert_int_gt(streamed.chunks, 1); /* really streamed, not one lump */

    struct cinfer_stream *s = NULL;
    ck_assert_int_eq(cinfer_engine_stream_open(e, &req, &s, &err), 0);
    struct text_buf iterated = {0};
    for (;;) {
        struct cinfer_stream_chunk c;
        ck_assert_msg(cinfer_stream_next(s, &c, 10000, &err) == 0, "%s", err.message);
        append(&c, &iterated);
        if (c.finish_reason != CINFER_FINISH_NONE)
            break;
    }
    cinfer_stream_close(&s);
    ck_assert_str_eq(iterated.text, blocking.text);
    cinfer_generate_result_free(&blocking);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

START_TEST(stop_strings_end_the_text_and_are_trimmed)
{
    if (!model)
        return;
    struct cinfer_engine *e = start_engine(NULL);
    struct cinfer_error err = {0};
    struct cinfer_generate_request req = greedy(prompts[0]);
    struct cinfer_generate_result full;
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &full, &err), 0);
    ck_assert_int_gt((int)full.text_len, 8);
    /* Stop on a piece of the middle of the greedy text: the text must end right before it. */
    char stop[4];
    memcpy(stop, full.text + full.text_len / 2, 3);
    stop[3] = '\0';
    const char *first = strstr(full.text, stop);
    req.sampling.stop[0] = stop;
    req.sampling.n_stop = 1;
    struct cinfer_generate_result cut;
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &cut, &err), 0);
    ck_assert_int_eq(cut.finish_reason, CINFER_FINISH_STOP_STRING);
    ck_assert_str_eq(cut.matched_stop, stop);
    ck_assert_int_eq((int)cut.text_len, (int)(first - full.text));
    ck_assert(!strncmp(cut.text, full.text, cut.text_len));
    cinfer_generate_result_free(&full);
    cinfer_generate_result_free(&cut);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* ---- hooks --------------------------------------------------------------------- */

static char marker_dir[256];

static void touch(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", marker_dir, name);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static int my_scheduler(const struct cinfer_server_args *a, const struct cinfer_port_args *p, int gpu, int tp, int dp)
{
    touch("scheduler-hook-ran");
    return cinfer_default_run_scheduler_process(a, p, gpu, tp, dp);
}

static int my_detokenizer(const struct cinfer_server_args *a, const struct cinfer_port_args *p)
{
    touch("detokenizer-hook-ran");
    return cinfer_default_run_detokenizer_process(a, p);
}

static int my_tokenizer(const struct cinfer_server_args *a, struct cinfer_tokenizer_ctx **out, struct cinfer_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "tokenizer-hook-ran-in-%d", (int)getpid());
    touch(name);
    touch("tokenizer-hook-ran");
    return cinfer_default_init_tokenizer(a, out, err);
}

static int exists(const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", marker_dir, name);
    return stat(path, &st) == 0;
}

START_TEST(overridden_hooks_run)
{
    if (!model)
        return;
    snprintf(marker_dir, sizeof marker_dir, "%s/hook-markers-%d", CINFER_BINARY_DIR, (int)getpid());
    mkdir(marker_dir, 0700);
    struct cinfer_engine_hooks hooks;
    cinfer_engine_default_hooks(&hooks);
    hooks.run_scheduler_process = my_scheduler;
    hooks.run_detokenizer_process = my_detokenizer;
    hooks.init_tokenizer = my_tokenizer;
    struct cinfer_engine *e = start_engine(&hooks);
    ck_assert_msg(exists("scheduler-hook-ran"), "the scheduler hook did not run");
    ck_assert_msg(exists("detokenizer-hook-ran"), "the detokenizer hook did not run");
    char mine[64];
    snprintf(mine, sizeof mine, "tokenizer-hook-ran-in-%d", (int)getpid());
    ck_assert_msg(exists(mine), "init_tokenizer did not run in the main process");
    /* And the overridden pipeline still answers correctly. */
    struct cinfer_generate_request req = greedy(prompts[1]);
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &r, &err), 0);
    assert_matches(1, &r);
    cinfer_generate_result_free(&r);
    cinfer_engine_shutdown(&e, 1000);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", marker_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Two engines of two replicas each, alive at once in one process, each with its own
 * scheduler hook: every worker runs its own engine's hook (the jobs a forked worker runs
 * belong to its engine, not to the process). */
static int hook_a(const struct cinfer_server_args *a, const struct cinfer_port_args *p, int gpu, int tp, int dp)
{
    char name[64];
    snprintf(name, sizeof name, "engine-a-dp%d", dp);
    touch(name);
    return cinfer_default_run_scheduler_process(a, p, gpu, tp, dp);
}

static int hook_b(const struct cinfer_server_args *a, const struct cinfer_port_args *p, int gpu, int tp, int dp)
{
    char name[64];
    snprintf(name, sizeof name, "engine-b-dp%d", dp);
    touch(name);
    return cinfer_default_run_scheduler_process(a, p, gpu, tp, dp);
}

START_TEST(two_engines_with_their_own_hooks)
{
    snprintf(marker_dir, sizeof marker_dir, "%s/hook-markers-%d", CINFER_BINARY_DIR, (int)getpid());
    mkdir(marker_dir, 0700);
    struct cinfer_engine_hooks ha, hb;
    cinfer_engine_default_hooks(&ha);
    cinfer_engine_default_hooks(&hb);
    ha.run_scheduler_process = hook_a;
    hb.run_scheduler_process = hook_b;
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.dp_size = 2;
    struct cinfer_engine *a = NULL, *b = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, &ha, &a, &err) == 0, "%s", err.message);
    ck_assert_msg(cinfer_engine_create(&args, &hb, &b, &err) == 0, "%s", err.message);
    for (int dp = 0; dp < 2; dp++) {
        char name[64];
        snprintf(name, sizeof name, "engine-a-dp%d", dp);
        ck_assert_msg(exists(name), "%s is missing", name);
        snprintf(name, sizeof name, "engine-b-dp%d", dp);
        ck_assert_msg(exists(name), "%s is missing", name);
    }
    struct cinfer_generate_request req = greedy(prompts[4]);
    struct cinfer_generate_result r;
    ck_assert_int_eq(cinfer_engine_generate(a, &req, &r, &err), 0);
    assert_matches(4, &r);
    cinfer_generate_result_free(&r);
    ck_assert_int_eq(cinfer_engine_generate(b, &req, &r, &err), 0);
    assert_matches(4, &r);
    cinfer_generate_result_free(&r);
    cinfer_engine_shutdown(&a, 1000);
    cinfer_engine_shutdown(&b, 1000);

    /* Hooks that do not say their version are refused; a caller built against an older,
     * shorter struct gets the defaults for the slots it lacks. */
    struct cinfer_engine_hooks bare = {0};
    bare.run_scheduler_process = hook_a;
    ck_assert_int_eq(cinfer_engine_create(&args, &bare, &a, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "engine hooks have version 0 and struct_size 0: fill them with "
                                      "cinfer_engine_default_hooks()"), "%s", err.message);
    struct cinfer_engine_hooks older;
    cinfer_engine_default_hooks(&older);
    older.struct_size = offsetof(struct cinfer_engine_hooks, run_detokenizer_process); /* only the scheduler slot */
    older.run_detokenizer_process = NULL; /* beyond its struct: never read */
    ck_assert_msg(cinfer_engine_create(&args, &older, &a, &err) == 0, "%s", err.message);
    ck_assert_int_eq(cinfer_engine_generate(a, &req, &r, &err), 0);
    cinfer_generate_result_free(&r);
    cinfer_engine_shutdown(&a, 1000);
    cinfer_server_args_free(&args);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", marker_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Parses an RPC answer; fails the test, showing the text, when it is not JSON. */
static json_t *rpc_json(const struct cinfer_rpc_reply *r)
{
    json_error_t jerr;
    json_t *j = json_loads(r->payload, 0, &jerr);
    ck_assert_msg(json_is_object(j), "RPC answer of tp%d is not a JSON object (%s): %s", r->tp_rank, jerr.text,
                  r->payload);
    return j;
}

/* The scheduler's answers are JSON whatever text they carry: an error naming a method
 * full of quotes, backslashes and control characters, the server info, and a
 * flush_cache refused while a request runs (its words reach the caller without JSON
 * around them). */
static void assert_rpc_answers_are_json(struct cinfer_engine *e)
{
    static const char nasty[] = "say \"hi\" \\ back\nand\r\tthen {\"x\": 1} \x01 caf\xc3\xa9 '";
    struct cinfer_rpc_reply *replies;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_collective_rpc(e, nasty, "{}", 2000, &replies, &n, &err), 0);
    ck_assert_int_eq(replies[0].status, CINFER_ERR_NOT_FOUND);
    json_t *j = rpc_json(&replies[0]);
    char want[256];
    snprintf(want, sizeof want, "unknown method '%s'", nasty);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), want);
    printf("RPC error answer for a method with quotes, backslashes and newlines: %s\n", replies[0].payload);
    json_decref(j);
    cinfer_rpc_replies_free(replies, n);
    /* A name that is not UTF-8 cannot be quoted in JSON: the answer still is JSON. */
    ck_assert_int_eq(cinfer_engine_collective_rpc(e, "bad \xff\xfe name", "{}", 2000, &replies, &n, &err), 0);
    ck_assert_int_eq(replies[0].status, CINFER_ERR_NOT_FOUND);
    j = rpc_json(&replies[0]);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), "unknown method (its name is not UTF-8)");
    json_decref(j);
    cinfer_rpc_replies_free(replies, n);

    ck_assert_int_eq(cinfer_engine_collective_rpc(e, "server_info", "{}", 2000, &replies, &n, &err), 0);
    j = rpc_json(&replies[0]);
    ck_assert(json_is_integer(json_object_get(j, "running_requests")));
    ck_assert(json_is_integer(json_object_get(j, "max_total_tokens")));
    ck_assert(json_is_boolean(json_object_get(j, "prefix_cache_enabled")));
    json_decref(j);
    cinfer_rpc_replies_free(replies, n);

    /* A request running: flush_cache is refused, as JSON with the words inside. */
    struct cinfer_generate_request req = greedy(prompts[0]);
    req.sampling.ignore_eos = 1;
    req.sampling.max_new_tokens = 100000; /* runs until closed (or the context ends it) */
    struct cinfer_stream *s = NULL;
    ck_assert_int_eq(cinfer_engine_stream_open(e, &req, &s, &err), 0);
    struct cinfer_stream_chunk c;
    ck_assert_msg(cinfer_stream_next(s, &c, 10000, &err) == 0, "%s", err.message);
    ck_assert_int_eq(c.finish_reason, CINFER_FINISH_NONE);
    ck_assert_int_eq(cinfer_engine_collective_rpc(e, "flush_cache", "{}", 2000, &replies, &n, &err), 0);
    ck_assert_int_eq(replies[0].status, CINFER_ERR_STATE);
    j = rpc_json(&replies[0]);
    ck_assert(json_is_false(json_object_get(j, "flushed")));
    const char *why = json_string_value(json_object_get(j, "error"));
    ck_assert_msg(why && strstr(why, "1 requests are running"), "%s", replies[0].payload);
    snprintf(want, sizeof want, "scheduler tp0: %s", why);
    json_decref(j);
    cinfer_rpc_replies_free(replies, n);
    ck_assert_int_eq(cinfer_engine_flush_cache(e, &err), CINFER_ERR_STATE);
    ck_assert_int_eq(err.code, CINFER_ERR_STATE);
    ck_assert_str_eq(err.message, want);
    cinfer_stream_close(&s);
}

START_TEST(workers_are_named_for_ps_and_rpc_reaches_every_rank)
{
    if (!model)
        return;
    /* A long context, so the request that runs while flush_cache is refused is still
     * running when the second refusal is asked for. */
    struct cinfer_engine *e = start_engine_with_context(NULL, 60000);
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_server_info(e, &info, &err), 0);
    ck_assert_int_eq(info.n_workers, 2);
    struct test_worker_pids wp = cinfer_test_worker_pids(e);
    char cmdline[256];
    cinfer_test_cmdline(wp.pid[0], cmdline, sizeof cmdline);
    ck_assert_str_eq(cmdline, "cinfer-worker detokenizer");
    cinfer_test_cmdline(wp.pid[1], cmdline, sizeof cmdline);
    ck_assert_str_eq(cmdline, "cinfer-worker scheduler dp0 tp0");
    ck_assert_int_gt((int)info.max_total_tokens, 0);
    ck_assert_int_gt(info.max_request_len, 0);
    ck_assert_int_eq(info.tp_size, 1);
    struct stat st;
    ck_assert_int_eq(stat(info.run_dir, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);

    struct cinfer_rpc_reply *replies;
    int n;
    ck_assert_int_eq(cinfer_engine_collective_rpc(e, "echo", "{\"hello\":1}", 2000, &replies, &n, &err), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(replies[0].tp_rank, 0);
    ck_assert_int_eq(replies[0].status, 0);
    ck_assert_str_eq(replies[0].payload, "{\"hello\":1}");
    cinfer_rpc_replies_free(replies, n);
    ck_assert_int_eq(cinfer_engine_collective_rpc(e, "no_such_method", "{}", 2000, &replies, &n, &err), 0);
    ck_assert_int_eq(replies[0].status, CINFER_ERR_NOT_FOUND);
    cinfer_rpc_replies_free(replies, n);
    ck_assert_int_eq(cinfer_engine_flush_cache(e, &err), 0);
    assert_rpc_answers_are_json(e);

    char run_dir[192];
    snprintf(run_dir, sizeof run_dir, "%s", info.run_dir);
    pid_t pids[2] = {wp.pid[0], wp.pid[1]};
    cinfer_engine_shutdown(&e, 1000);
    ck_assert_int_eq(cinfer_test_wait_gone(pids, 2, 0), 0);
    ck_assert_int_ne(stat(run_dir, &st), 0); /* removed at shutdown */
}
END_TEST

START_TEST(two_engines_in_one_process_keep_to_themselves)
{
    if (!model)
        return;
    struct cinfer_engine *a = start_engine(NULL);
    struct cinfer_engine *b = start_engine(NULL);
    struct cinfer_error err = {0};
    struct cinfer_generate_request ra = greedy(prompts[2]), rb = greedy(prompts[3]);
    struct cinfer_generate_result oa, ob;
    ck_assert_int_eq(cinfer_engine_generate(a, &ra, &oa, &err), 0);
    ck_assert_int_eq(cinfer_engine_generate(b, &rb, &ob, &err), 0);
    assert_matches(2, &oa);
    assert_matches(3, &ob);
    cinfer_generate_result_free(&oa);
    cinfer_generate_result_free(&ob);
    cinfer_engine_shutdown(&a, 1000);
    /* b is untouched by a's shutdown. */
    ck_assert(cinfer_engine_healthy(b));
    ck_assert_int_eq(cinfer_engine_generate(b, &ra, &oa, &err), 0);
    assert_matches(2, &oa);
    cinfer_generate_result_free(&oa);
    cinfer_engine_shutdown(&b, 1000);
}
END_TEST

/* ---- logprobs and n > 1 ------------------------------------------------------------ */

static int tokenize(const char *prompt, int32_t *ids, int cap)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    struct cinfer_tokenizer_ctx *tok = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_default_init_tokenizer(&args, &tok, &err) == 0, "%s", err.message);
    struct cinfer_token_ids t = {0};
    ck_assert_int_eq(tok->ops->encode(tok->tok, prompt, strlen(prompt), 1, &t, &err), 0);
    ck_assert_int_le((int)t.len, cap);
    memcpy(ids, t.ids, t.len * sizeof *ids);
    int n = (int)t.len;
    cinfer_token_ids_free(&t);
    cinfer_tokenizer_ctx_free(&tok);
    cinfer_server_args_free(&args);
    return n;
}

/* The runtime's own logits, in this process and without scheduler or sampler: one
 * prefill of prompt + output (all but the last output token) with the logits of every
 * position. Row i (vocab) is the distribution output[i] was drawn from. */
static float *reference_logits(const int32_t *prompt, int n_prompt, const int32_t *output, int n_output, int *vocab)
{
    struct cinfer_error err = {0};
    struct cinfer_model *m = NULL;
    struct cinfer_model_load_options lo = {0};
    ck_assert_msg(cinfer_model_load(model, &lo, &m, &err) == 0, "%s", err.message);
    const struct cinfer_model_config *c = &m->config;
    int n = n_prompt + n_output - 1;
    /* f32 K/V, as the engines of the tests that compare with these logits hold them: the
     * engine decodes step by step, this prefills at once, and only the sums' order differs */
    struct cinfer_runtime_options ro = {.kv_page_tokens = 16, .n_threads = 1, .max_batch_tokens = n,
                                        .kv_dtype = CINFER_KV_CACHE_DTYPE_F32};
    ro.kv_cache_bytes = (size_t)(n + 32) * 2 * (size_t)c->num_layers * (size_t)c->num_kv_heads * (size_t)c->head_dim *
                        sizeof(float);
    struct cinfer_runtime *rt = NULL;
    ck_assert_msg(cinfer_runtime_create(m, &ro, &rt, &err) == 0, "%s", err.message);
    int page_tokens = cinfer_runtime_kv_page_tokens(rt);
    int n_pages = (n + page_tokens - 1) / page_tokens;
    int32_t *pages = malloc((size_t)n_pages * sizeof *pages);
    int32_t *tokens = malloc((size_t)n * sizeof *tokens);                     /* (n) */
    float *all = malloc((size_t)n * (size_t)c->vocab_size * sizeof *all);      /* (n, vocab) */
    float *rows = malloc((size_t)n_output * (size_t)c->vocab_size * sizeof *rows); /* (n_output, vocab) */
    ck_assert(pages && tokens && all && rows);
    for (int i = 0; i < n_pages; i++)
        ck_assert_int_eq(cinfer_runtime_kv_page_alloc(rt, &pages[i]), 0);
    memcpy(tokens, prompt, (size_t)n_prompt * sizeof *tokens);
    memcpy(tokens + n_prompt, output, (size_t)(n_output - 1) * sizeof *tokens);
    struct cinfer_seq_chunk chunk = {.tokens = tokens, .n_tokens = n, .start_pos = 0, .page_table = pages,
                                     .n_pages = n_pages, .logits = CINFER_LOGITS_ALL, .logits_out = all};
    ck_assert_msg(cinfer_runtime_forward(rt, &chunk, 1, &err) == 0, "%s", err.message);
    memcpy(rows, all + (size_t)(n_prompt - 1) * (size_t)c->vocab_size,
           (size_t)n_output * (size_t)c->vocab_size * sizeof *rows);
    *vocab = c->vocab_size;
    free(pages);
    free(tokens);
    free(all);
    cinfer_runtime_destroy(&rt);
    cinfer_model_free(&m);
    return rows;
}

static double log_sum_exp(const float *row, int vocab)
{
    double max = row[0], sum = 0;
    for (int v = 1; v < vocab; v++)
        if (row[v] > max)
            max = row[v];
    for (int v = 0; v < vocab; v++)
        sum += exp((double)row[v] - max);
    return max + log(sum);
}

struct logprob_buf {
    struct cinfer_token_logprob lp[MAX_NEW];
    int n;
    int chunks_without;
};

static int gather_logprobs(const struct cinfer_stream_chunk *c, void *ctx)
{
    struct logprob_buf *b = ctx;
    if (c->n_ids && c->n_logprobs != c->n_ids)
        b->chunks_without++;
    for (size_t i = 0; i < c->n_logprobs && b->n < MAX_NEW; i++)
        b->lp[b->n++] = c->logprobs[i];
    return 0;
}

START_TEST(logprobs_are_the_log_softmax_of_the_runtime_logits)
{
    if (!model)
        return;
    enum { TOP = 5 };
    struct cinfer_engine *e = start_engine_kv(NULL, 0, CINFER_KV_CACHE_DTYPE_F32);
    int32_t prompt[64];
    int n_prompt = tokenize(prompts[4], prompt, 64);
    struct cinfer_generate_request req = greedy(NULL);
    req.input_ids = prompt;
    req.n_input_ids = (size_t)n_prompt;
    req.sampling.logprobs = 1;
    req.sampling.top_logprobs = TOP;
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
    ck_assert_int_gt((int)r.n_output_ids, 1);
    ck_assert_uint_eq(r.n_logprobs, r.n_output_ids);

    int vocab = 0;
    float *rows = reference_logits(prompt, n_prompt, r.output_ids, (int)r.n_output_ids, &vocab);
    double worst = 0;
    for (size_t i = 0; i < r.n_output_ids; i++) {
        const float *row = rows + i * (size_t)vocab; /* (vocab) */
        double lse = log_sum_exp(row, vocab);
        const struct cinfer_token_logprob *lp = &r.logprobs[i];
        ck_assert_int_eq(lp->token, r.output_ids[i]);
        double want = (double)row[lp->token] - lse;
        ck_assert_msg(fabs(lp->logprob - want) < 1e-4, "token %zu (id %d): logprob %.7f, log-softmax %.7f", i,
                      lp->token, lp->logprob, want);
        worst = fmax(worst, fabs(lp->logprob - want));
        /* Greedy: the chosen token is the most likely alternative. */
        ck_assert_int_eq(lp->n_top, TOP);
        ck_assert_int_eq(lp->top_ids[0], lp->token);
        ck_assert_float_eq(lp->top_logprobs[0], lp->logprob);
        for (int k = 0; k < TOP; k++) {
            double want_k = (double)row[lp->top_ids[k]] - lse;
            ck_assert_msg(fabs(lp->top_logprobs[k] - want_k) < 1e-4, "token %zu alternative %d: %.7f, expected %.7f", i,
                          k, lp->top_logprobs[k], want_k);
            if (k)
                ck_assert(lp->top_logprobs[k] <= lp->top_logprobs[k - 1]);
        }
        /* And they are the top: no other token beats the last alternative. */
        int better = 0;
        for (int v = 0; v < vocab; v++)
            better += (double)row[v] - lse > lp->top_logprobs[TOP - 1] + 1e-4;
        ck_assert_int_lt(better, TOP);
    }
    fprintf(stderr, "logprobs: %zu tokens, worst |engine - log-softmax(runtime logits)| = %.3g\n", r.n_output_ids,
            worst);
    free(rows);

    /* The stream carries the same logprobs, one per id. */
    struct logprob_buf streamed = {0};
    ck_assert_int_eq(cinfer_engine_generate_stream(e, &req, gather_logprobs, &streamed, &err), 0);
    ck_assert_int_eq(streamed.chunks_without, 0);
    ck_assert_int_eq(streamed.n, (int)r.n_logprobs);
    for (int i = 0; i < streamed.n; i++) {
        ck_assert_int_eq(streamed.lp[i].token, r.logprobs[i].token);
        ck_assert_float_eq(streamed.lp[i].logprob, r.logprobs[i].logprob);
    }
    cinfer_generate_result_free(&r);

    /* Not asked, not sent. */
    req.sampling.logprobs = 0;
    req.sampling.top_logprobs = 0;
    ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
    ck_assert_ptr_null(r.logprobs);
    ck_assert_uint_eq(r.n_logprobs, 0);
    cinfer_generate_result_free(&r);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

START_TEST(n_choices_each_reproduce_alone_with_their_seed)
{
    if (!model)
        return;
    enum { N = 3 };
    struct cinfer_engine *e = start_engine_kv(NULL, 0, CINFER_KV_CACHE_DTYPE_F32);
    struct cinfer_generate_request req = greedy(prompts[0]);
    req.sampling.temperature = 0.8f;
    req.sampling.seed = 1234;
    req.sampling.has_seed = 1;
    req.sampling.logprobs = 1;
    req.n = N;
    struct cinfer_generate_result choices[N];
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_generate_n(e, &req, choices, N, &err) == 0, "%s", err.message);
    int32_t prompt[64];
    int n_prompt = tokenize(prompts[0], prompt, 64);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_gt((int)choices[i].n_output_ids, 0);
        for (int j = 0; j < i; j++)
            ck_assert_uint_ne(choices[i].request_id, choices[j].request_id);
        /* Sampled tokens' logprobs describe the tempered distribution: log-softmax of
         * the runtime's logits divided by the temperature. */
        ck_assert_uint_eq(choices[i].n_logprobs, choices[i].n_output_ids);
        int vocab = 0;
        float *rows = reference_logits(prompt, n_prompt, choices[i].output_ids, (int)choices[i].n_output_ids, &vocab);
        for (size_t t = 0; t < choices[i].n_output_ids; t++) {
            float *row = rows + t * (size_t)vocab; /* (vocab) */
            for (int v = 0; v < vocab; v++)
                row[v] /= req.sampling.temperature;
            double want = (double)row[choices[i].output_ids[t]] - log_sum_exp(row, vocab);
            double got = choices[i].logprobs[t].logprob;
            ck_assert_msg(fabs(got - want) < 1e-4, "choice %d token %zu: logprob %.7f, tempered log-softmax %.7f", i, t,
                          got, want);
            worst = fmax(worst, fabs(got - want));
        }
        free(rows);
    }
    fprintf(stderr, "n=%d at temperature 0.8: worst |logprob - tempered log-softmax| = %.3g\n", N, worst);
    /* Different seeds give different samples (fixed seeds: this cannot flicker). */
    int all_same = 1;
    for (int i = 1; i < N; i++)
        all_same &= choices[i].n_output_ids == choices[0].n_output_ids &&
                    !memcmp(choices[i].output_ids, choices[0].output_ids, choices[0].n_output_ids * sizeof(int32_t));
    ck_assert_msg(!all_same, "three choices at temperature 0.8 came out identical");

    /* Each choice alone, with seed + i, is the same text. */
    for (int i = 0; i < N; i++) {
        struct cinfer_generate_request alone = req;
        alone.n = 1;
        alone.sampling.seed = req.sampling.seed + (uint64_t)i;
        struct cinfer_generate_result r;
        ck_assert_msg(cinfer_engine_generate(e, &alone, &r, &err) == 0, "%s", err.message);
        ck_assert_msg(r.n_output_ids == choices[i].n_output_ids &&
                          !memcmp(r.output_ids, choices[i].output_ids, r.n_output_ids * sizeof(int32_t)),
                      "choice %d differs from its seed %llu alone", i, (unsigned long long)alone.sampling.seed);
        ck_assert_str_eq(r.text, choices[i].text);
        cinfer_generate_result_free(&r);
    }
    for (int i = 0; i < N; i++)
        cinfer_generate_result_free(&choices[i]);

    /* The single-choice calls refuse n > 1 instead of dropping choices, and too few
     * result slots are refused. */
    struct cinfer_generate_result r;
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &r, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err.message, "request n is 3: cinfer_engine_generate returns one choice; use cinfer_engine_generate_n");
    ck_assert_int_eq(cinfer_engine_generate_n(e, &req, choices, 2, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err.message, "request n is 3 but results has room for 2");
    req.n = CINFER_MAX_CHOICES + 1;
    ck_assert_int_eq(cinfer_engine_generate_n(e, &req, choices, N, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err.message, "request n is 129, expected 0..128 choices");
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

START_TEST(a_failed_choice_fails_the_call_and_aborts_the_rest)
{
    if (!model)
        return;
    /* One running and two waiting at most: of 8 choices sent at once, some are
     * refused with "queue full". */
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.max_running_requests = 1;
    args.max_queued_requests = 2;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "%s", err.message);
    cinfer_server_args_free(&args);
    struct cinfer_generate_request req = greedy(prompts[0]);
    req.n = 8;
    struct cinfer_generate_result choices[8];
    ck_assert_int_eq(cinfer_engine_generate_n(e, &req, choices, 8, &err), CINFER_ERR_OVERLOADED);
    ck_assert_int_eq(err.code, CINFER_ERR_OVERLOADED);
    ck_assert_msg(strstr(err.message, "queue full"), "%s", err.message);
    for (int i = 0; i < 8; i++) /* nothing left to free */
        ck_assert(!choices[i].text && !choices[i].output_ids && !choices[i].logprobs);
    /* Nothing lingers (the choices still running were aborted; on this tiny model they
     * might also just have finished, so this shows the engine is clean, not which): the
     * scheduler empties and answers the next request right. */
    struct cinfer_server_info info;
    for (int tries = 0; tries < 1000; tries++) {
        ck_assert_int_eq(cinfer_engine_server_info(e, &info, &err), 0);
        if (info.running_requests == 0 && info.queued_requests == 0)
            break;
        usleep(10 * 1000);
    }
    ck_assert_int_eq(info.running_requests, 0);
    ck_assert_int_eq(info.queued_requests, 0);
    req.n = 1;
    struct cinfer_generate_result r;
    ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
    assert_matches(0, &r);
    cinfer_generate_result_free(&r);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* A request of these ids (or, with n_ids 0, of nothing) must fail with code from
 * every entry point: the blocking call, the callback stream and the iterator (which
 * takes the refusal at open when the engine refuses it, else as its first chunk). */
static int never_called(const struct cinfer_stream_chunk *c, void *ctx)
{
    (void)c;
    (void)ctx;
    ck_abort_msg("a refused request yielded a chunk");
    return 1;
}

static void expect_refusal(struct cinfer_engine *e, const int32_t *ids, size_t n_ids, int code, const char *words)
{
    struct cinfer_generate_request req = {.input_ids = ids, .n_input_ids = n_ids};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.max_new_tokens = 4;
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &r, &err), code);
    ck_assert_int_eq(err.code, code);
    ck_assert_msg(strstr(err.message, words), "%s: expected '%s' in: %s", cinfer_strerror(code), words, err.message);
    printf("%zu ids -> %d (%s): %s\n", n_ids, code, cinfer_strerror(code), err.message);
    cinfer_error_clear(&err);
    ck_assert_int_eq(cinfer_engine_generate_stream(e, &req, never_called, NULL, &err), code);
    ck_assert_int_eq(err.code, code);
    cinfer_error_clear(&err);
    struct cinfer_stream *s = NULL;
    int rc = cinfer_engine_stream_open(e, &req, &s, &err);
    if (rc == CINFER_OK) {
        struct cinfer_stream_chunk c;
        rc = cinfer_stream_next(s, &c, 10000, &err);
        cinfer_stream_close(&s);
    }
    ck_assert_int_eq(rc, code);
    ck_assert_int_eq(err.code, code);
}

START_TEST(each_refusal_reaches_the_caller_with_its_code)
{
    if (!model)
        return;
    /* One running, one waiting; a KV cache smaller than the context. */
    enum { CONTEXT = 512 };
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.context_length = CONTEXT;
    args.kv_cache_bytes = 256 << 10;
    args.max_running_requests = 1;
    args.max_queued_requests = 1;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "%s", err.message);
    cinfer_server_args_free(&args);
    struct cinfer_server_info info;
    ck_assert_int_eq(cinfer_engine_server_info(e, &info, &err), 0);
    ck_assert_int_eq(info.max_request_len, CONTEXT);
    int kv = (int)info.max_total_tokens;
    ck_assert_msg(kv > 16 && kv + 1 < CONTEXT, "KV cache of %d tokens for a context of %d", kv, CONTEXT);
    static int32_t ids[CONTEXT + 8];
    for (int i = 0; i < CONTEXT + 8; i++)
        ids[i] = 1 + i % 7;

    /* The caller's faults: refused by the engine (nothing to send) or by the scheduler. */
    expect_refusal(e, NULL, 0, CINFER_ERR_INVALID_ARGUMENT, "neither a prompt nor input_ids");
    int32_t outside[] = {1, info.vocab_size, 2};
    expect_refusal(e, outside, 3, CINFER_ERR_RANGE, "outside the vocabulary");
    expect_refusal(e, ids, CONTEXT, CINFER_ERR_CONTEXT_LENGTH, "leaves no room for output in the context length");
    expect_refusal(e, ids, (size_t)kv, CINFER_ERR_CONTEXT_LENGTH, "does not fit the KV cache");

    /* A full queue: six at once against one running and one waiting. */
    enum { N = 6 };
    struct cinfer_stream *s[N];
    struct cinfer_generate_request req = {.input_ids = ids, .n_input_ids = 4};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.ignore_eos = 1;
    req.sampling.max_new_tokens = 64;
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(cinfer_engine_stream_open(e, &req, &s[i], &err), 0);
    int refused = 0, finished = 0;
    for (int i = 0; i < N; i++) {
        for (;;) {
            struct cinfer_stream_chunk c;
            cinfer_error_clear(&err);
            int rc = cinfer_stream_next(s[i], &c, 30000, &err);
            if (rc) {
                ck_assert_msg(rc == CINFER_ERR_OVERLOADED && err.code == rc && strstr(err.message, "queue full"),
                              "stream %d: %d %s", i, rc, err.message);
                refused++;
                break;
            }
            if (c.finish_reason != CINFER_FINISH_NONE) {
                ck_assert_int_eq(c.completion_tokens, 64);
                finished++;
                break;
            }
        }
        cinfer_stream_close(&s[i]);
    }
    printf("queue full: %d of %d refused with %d (%s), %d finished\n", refused, N, CINFER_ERR_OVERLOADED,
           cinfer_strerror(CINFER_ERR_OVERLOADED), finished);
    ck_assert_int_ge(refused, 1); /* at most 2 fit; how many depends on the steps between arrivals */
    ck_assert_int_ge(finished, 1);
    ck_assert_int_eq(refused + finished, N);

    /* None of it harmed the engine. */
    req.sampling.max_new_tokens = 8;
    struct cinfer_generate_result r;
    ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
    ck_assert_int_eq((int)r.n_output_ids, 8);
    cinfer_generate_result_free(&r);
    ck_assert(cinfer_engine_healthy(e));
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* ---- the output after its prompt (issue 15) ------------------------------------------- */

struct streamed {
    char text[8192];
    size_t len;
    int32_t ids[MAX_NEW];
    size_t n_ids;
};

static int gather(const struct cinfer_stream_chunk *c, void *ctx)
{
    struct streamed *b = ctx;
    ck_assert_uint_lt(b->len + c->text_len, sizeof b->text);
    memcpy(b->text + b->len, c->text, c->text_len);
    b->len += c->text_len;
    b->text[b->len] = '\0';
    for (size_t i = 0; i < c->n_ids && b->n_ids < MAX_NEW; i++)
        b->ids[b->n_ids++] = c->ids[i];
    return 0;
}

/* The text a result must have, from its ids by decode() alone. */
static char *expected_text(const struct cinfer_tokenizer_ctx *tok, const struct cinfer_token_ids *prompt,
                           const int32_t *out, size_t n_out, int skip_special)
{
    return cinfer_test_text_after_prompt(tok, prompt->ids, prompt->len, out, n_out, skip_special);
}

/* A stop string taken from text at byte at (3 bytes, ASCII): the greedy text must end
 * right before its first occurrence. */
static void check_stop(struct cinfer_engine *e, const char *prompt, const char *text, size_t at, const char *where)
{
    char stop[4];
    memcpy(stop, text + at, 3);
    stop[3] = '\0';
    for (int i = 0; i < 3; i++)
        if ((unsigned char)stop[i] >= 0x80 || !stop[i])
            return; /* keep to whole ASCII characters */
    size_t cut = (size_t)(strstr(text, stop) - text);
    struct cinfer_generate_request req = greedy(prompt);
    req.sampling.stop[0] = stop;
    req.sampling.n_stop = 1;
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
    ck_assert_msg(r.finish_reason == CINFER_FINISH_STOP_STRING && r.text_len == cut && !strncmp(r.text, text, cut),
                  "%s: stop \"%s\" (%s): text \"%s\", expected \"%.*s\"", prompt, stop, where, r.text, (int)cut, text);
    struct streamed s = {0};
    ck_assert_int_eq(cinfer_engine_generate_stream(e, &req, gather, &s, &err), 0);
    ck_assert_str_eq(s.text, r.text);
    cinfer_generate_result_free(&r);
}

START_TEST(output_text_is_decode_past_the_prompt)
{
    struct cinfer_test_boundary_model models[2];
    int n_models = cinfer_test_boundary_models(models);
    for (int m = 0; m < n_models; m++) {
        const char *saved = model;
        model = models[m].path;
        struct cinfer_engine *e = start_engine(NULL);
        model = saved;
        const struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(e);
        for (int p = 0; p < CINFER_TEST_BOUNDARY_PROMPTS; p++) {
            const char *prompt = models[m].prompts[p];
            struct cinfer_token_ids ids = {0};
            struct cinfer_error err = {0};
            ck_assert_int_eq(tok->ops->encode(tok->tok, prompt, strlen(prompt), 1, &ids, &err), 0);

            /* blocking */
            struct cinfer_generate_request req = greedy(prompt);
            struct cinfer_generate_result r;
            ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
            ck_assert_int_eq(r.prompt_tokens, (int)ids.len);
            char *want = expected_text(tok, &ids, r.output_ids, r.n_output_ids, 1);
            ck_assert_msg(!strcmp(r.text, want), "%s, \"%s\": text \"%s\", decode past the prompt \"%s\"",
                          models[m].name, prompt, r.text, want);
            printf("%s: \"%s\" + \"%s\"\n", models[m].name, prompt, r.text);

            /* callback stream and iterator, their own ids */
            struct streamed s = {0};
            ck_assert_int_eq(cinfer_engine_generate_stream(e, &req, gather, &s, &err), 0);
            char *want_s = expected_text(tok, &ids, s.ids, s.n_ids, 1);
            ck_assert_msg(!strcmp(s.text, want_s), "%s, \"%s\": streamed \"%s\", expected \"%s\"", models[m].name,
                          prompt, s.text, want_s);
            free(want_s);
            struct cinfer_stream *it = NULL;
            ck_assert_int_eq(cinfer_engine_stream_open(e, &req, &it, &err), 0);
            struct streamed iterated = {0};
            for (;;) {
                struct cinfer_stream_chunk c;
                ck_assert_msg(cinfer_stream_next(it, &c, 10000, &err) == 0, "%s", err.message);
                gather(&c, &iterated);
                if (c.finish_reason != CINFER_FINISH_NONE)
                    break;
            }
            cinfer_stream_close(&it);
            char *want_i = expected_text(tok, &ids, iterated.ids, iterated.n_ids, 1);
            ck_assert_msg(!strcmp(iterated.text, want_i), "%s, \"%s\": iterated \"%s\", expected \"%s\"",
                          models[m].name, prompt, iterated.text, want_i);
            free(want_i);

            /* n = 2: each choice is its own request to the detokenizer */
            req.n = 2;
            struct cinfer_generate_result choices[2];
            ck_assert_msg(cinfer_engine_generate_n(e, &req, choices, 2, &err) == 0, "%s", err.message);
            for (int i = 0; i < 2; i++) {
                char *want_c = expected_text(tok, &ids, choices[i].output_ids, choices[i].n_output_ids, 1);
                ck_assert_msg(!strcmp(choices[i].text, want_c), "%s, \"%s\": choice %d \"%s\", expected \"%s\"",
                              models[m].name, prompt, i, choices[i].text, want_c);
                free(want_c);
                cinfer_generate_result_free(&choices[i]);
            }
            req.n = 1;

            /* special tokens kept: the prompt's BOS is in decode(prompt), not in the output */
            req.sampling.skip_special_tokens = 0;
            struct cinfer_generate_result kept;
            ck_assert_msg(cinfer_engine_generate(e, &req, &kept, &err) == 0, "%s", err.message);
            char *want_k = expected_text(tok, &ids, kept.output_ids, kept.n_output_ids, 0);
            ck_assert_msg(!strcmp(kept.text, want_k), "%s, \"%s\": with special tokens \"%s\", expected \"%s\"",
                          models[m].name, prompt, kept.text, want_k);
            free(want_k);
            cinfer_generate_result_free(&kept);

            /* stop strings at the very start of the output (its leading space, if any)
             * and in its middle */
            check_stop(e, prompt, want, 0, "at the start");
            if (strlen(want) > 8)
                check_stop(e, prompt, want, strlen(want) / 2, "in the middle");
            free(want);
            cinfer_generate_result_free(&r);
            cinfer_token_ids_free(&ids);
        }
        cinfer_engine_shutdown(&e, 1000);
    }
}
END_TEST

static Suite *suite_engine(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("end to end");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, greedy_output_equals_the_runtime);
    tcase_add_test(tc, thirty_two_concurrent_callers_each_get_their_answer);
    tcase_add_test(tc, streaming_yields_the_blocking_text);
    tcase_add_test(tc, stop_strings_end_the_text_and_are_trimmed);
    tcase_add_test(tc, overridden_hooks_run);
    tcase_add_test(tc, two_engines_with_their_own_hooks);
    tcase_add_test(tc, workers_are_named_for_ps_and_rpc_reaches_every_rank);
    tcase_add_test(tc, two_engines_in_one_process_keep_to_themselves);
    tcase_add_test(tc, logprobs_are_the_log_softmax_of_the_runtime_logits);
    tcase_add_test(tc, n_choices_each_reproduce_alone_with_their_seed);
    tcase_add_test(tc, a_failed_choice_fails_the_call_and_aborts_the_rest);
    tcase_add_test(tc, each_refusal_reaches_the_caller_with_its_code);
    tcase_add_test(tc, output_text_is_decode_past_the_prompt);
    tcase_add_loop_test(tc, kv_types_64_concurrent_requests_equal_each_alone, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_engine)
