/* bench_scheduler — continuous batching throughput of the full engine against
 * llama.cpp, in one run (issue 5).
 *
 * For each concurrency C of --concurrency (default 1, 8, 32, 64):
 *   - cinfer: C caller threads each start one request at once through the full engine
 *     (main process -> scheduler -> detokenizer -> main, cinfer_engine_create with the
 *     server args), a prompt of --prompt-tokens random ids (a different prompt per
 *     request, so the prefix cache does not share them), greedy, ignore_eos,
 *     max_new_tokens = --tokens. Two figures of aggregate decode tokens/s:
 *       - steady (the table's figure and the goal's): once every request has its first
 *         token, so all C are decoding together, the tokens that arrive after that
 *         moment / the time from it to the last request's last token. This is what the
 *         peer measures (C sequences in lockstep), and what concurrency 1 measures
 *         anyway: no prefill falls inside the window at any concurrency.
 *       - with the ramp: the tokens after each request's first (after its first stream
 *         chunk, if chunks carry several ids) / the wall time from the first request's
 *         first token to the last request's last token. At C > 1 the requests arrive
 *         over the first step, so the prefills of all but the first few run inside this
 *         window (about 0.3 s of a 2.2 s window at C = 32, 8-id prompts, f32).
 *   - llama.cpp: the --peer program on the same GGUF file, one context with C sequences
 *     decoding --tokens steps (greedy) in lockstep; its decode tokens/s (C × steps /
 *     time, after two warm-up steps). The peer is llama_cpp_peer (bench/peers/
 *     llama_cpp_peer.c on llama.cpp built from source, what scripts/bench-scheduler.sh
 *     passes) or, for a peer ending in .mjs or .js, `node PEER`
 *     (bench/peers/llama_cpp_bench.mjs on node-llama-cpp's prebuilt build).
 * With --rounds R the two sides take turns R times and each keeps its best figure per
 * concurrency: other load on a shared machine only ever slows a run down.
 * Prints the table, the ratios, and the scaling cinfer(32) / cinfer(1) against issue 5's
 * goal of 8× (best figures), then the same scaling within each round.
 *
 *   bench_scheduler --model F.gguf [--tokens 32] [--concurrency 1,8,32,64]
 *                   [--prompt-tokens 8] [--threads 2] [--rounds 3]
 *                   [--peer build-bench/bin/llama_cpp_peer] [--node node] [--json out.json]
 * The node peer's node_modules folder comes from CINFER_BENCH_NODE_MODULES. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/error.h"
#include "model/model.h"

extern char **environ;

#define MAX_LEVELS 8
#define FIRST_REGULAR_TOKEN 259 /* past <unk> <s> </s> and the 256 byte tokens */
#define GOAL_LEVEL 32
#define GOAL_SCALING 8.0
#define MAX_ROUNDS 32

struct options {
    const char *model;
    int tokens;
    int levels[MAX_LEVELS]; /* concurrencies */
    int n_levels;
    int prompt_tokens;
    int n_threads;
    int rounds;
    const char *peer_script; /* NULL: cinfer only */
    const char *node;
    const char *json_path;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* xorshift32 ids past the special and byte tokens; one seed per request. */
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

/* ---- cinfer: C caller threads through the engine ------------------------------ */

struct caller {
    struct cinfer_engine *engine;
    const int32_t *prompt;
    int n_prompt;
    int max_new_tokens;
    double first_token_s, last_token_s;
    int received;
    int first_chunk_ids; /* ids that came with the first token (more than 1 if chunks merged) */
    double *token_s;     /* (max_new_tokens) arrival time of each id */
    enum cinfer_finish_reason finish;
    char error[256];
};

static int on_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    struct caller *k = ctx;
    double t = now_s();
    if (c->n_ids > 0) {
        if (k->received == 0) {
            k->first_token_s = t;
            k->first_chunk_ids = (int)c->n_ids;
        }
        for (size_t i = 0; i < c->n_ids && k->received + (int)i < k->max_new_tokens; i++)
            k->token_s[k->received + (int)i] = t;
        k->received += (int)c->n_ids;
        k->last_token_s = t;
    }
    if (c->finish_reason != CINFER_FINISH_NONE)
        k->finish = c->finish_reason;
    return 0;
}

static void *run_caller(void *arg)
{
    struct caller *k = arg;
    struct cinfer_generate_request req = {.input_ids = k->prompt, .n_input_ids = (size_t)k->n_prompt};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.ignore_eos = 1;
    req.sampling.max_new_tokens = k->max_new_tokens;
    struct cinfer_error err = {0};
    if (cinfer_engine_generate_stream(k->engine, &req, on_chunk, k, &err))
        snprintf(k->error, sizeof k->error, "%.200s", err.message);
    return NULL;
}

struct decode_rates {
    double steady;    /* tok/s once all requests decode together */
    double with_ramp; /* tok/s from the first request's first token */
};

/* Tokens that arrived after `since` / the time from it to the last token. */
static double rate_since(const struct caller *k, int concurrency, double since, double last)
{
    long after = 0;
    for (int c = 0; c < concurrency; c++)
        for (int i = 0; i < k[c].received && i < k[c].max_new_tokens; i++)
            after += k[c].token_s[i] > since;
    return last > since ? (double)after / (last - since) : 0;
}

/* Returns 0 with *rates filled, or -1 with *error filled. */
static int engine_decode(struct cinfer_engine *e, const int32_t *prompts, int n_prompt, int concurrency,
                         int tokens, struct decode_rates *rates, char *error, size_t error_cap)
{
    struct caller *k = calloc((size_t)concurrency, sizeof *k);
    pthread_t *t = calloc((size_t)concurrency, sizeof *t);
    double *token_s = calloc((size_t)concurrency * (size_t)tokens, sizeof *token_s);
    if (!k || !t || !token_s) {
        snprintf(error, error_cap, "out of memory for %d callers", concurrency);
        free(k), free(t), free(token_s);
        return -1;
    }
    for (int c = 0; c < concurrency; c++) {
        k[c] = (struct caller){.engine = e, .prompt = prompts + (size_t)c * (size_t)n_prompt, .n_prompt = n_prompt,
                               .max_new_tokens = tokens, .token_s = token_s + (size_t)c * (size_t)tokens};
        pthread_create(&t[c], NULL, run_caller, &k[c]);
    }
    double first = 1e300, all_first = 0, last = 0;
    long decoded = 0;
    int merged_first_chunks = 0;
    error[0] = 0;
    for (int c = 0; c < concurrency; c++)
        pthread_join(t[c], NULL);
    for (int c = 0; c < concurrency && !error[0]; c++) {
        if (k[c].error[0])
            snprintf(error, error_cap, "request %d of %d: %s", c, concurrency, k[c].error);
        else if (k[c].received != tokens)
            snprintf(error, error_cap, "request %d of %d got %d tokens, expected %d (finish reason %d)", c,
                     concurrency, k[c].received, tokens, (int)k[c].finish);
        if (k[c].first_token_s < first)
            first = k[c].first_token_s;
        if (k[c].first_token_s > all_first)
            all_first = k[c].first_token_s;
        if (k[c].last_token_s > last)
            last = k[c].last_token_s;
        /* The first token is the prefill's. Should a chunk carry several ids, those
         * that arrive with the first are not counted either: their time is unknown. */
        decoded += k[c].received - k[c].first_chunk_ids;
        merged_first_chunks += k[c].first_chunk_ids > 1;
    }
    if (merged_first_chunks)
        fprintf(stderr, "note: %d of %d requests got more than one id in their first chunk (not counted)\n",
                merged_first_chunks, concurrency);
    if (!error[0]) {
        rates->with_ramp = (double)decoded / (last - first);
        rates->steady = rate_since(k, concurrency, all_first, last);
    }
    free(k);
    free(t);
    free(token_s);
    return error[0] ? -1 : 0;
}

/* ---- llama.cpp: the peer script in a child process ----------------------------- */

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

/* Fills tok_s[level] from one run of the peer; returns 0, or -1 with *error filled. */
static int peer_decode(const struct options *o, double *tok_s, char *error, size_t error_cap)
{
    char threads[16], steps[16], levels[128];
    snprintf(threads, sizeof threads, "%d", o->n_threads);
    snprintf(steps, sizeof steps, "%d", o->tokens);
    join_ints(levels, sizeof levels, o->levels, o->n_levels);
    /* The peer also measures a prefill; keep it to one short run. */
    char *argv[] = {(char *)o->node, (char *)o->peer_script, "--model", (char *)o->model, "--threads", threads,
                    "--prompt-tokens", "16", "--prefill-reps", "1", "--decode-steps", steps,
                    "--batches", levels, NULL};
    char **args = peer_is_script(o->peer_script) ? argv : argv + 1; /* (node) peer options... */
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(error, error_cap, "pipe: %s", strerror(errno));
        return -1;
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
        snprintf(error, error_cap, "could not start '%s': %s", args[0], strerror(rc));
        close(fds[0]);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    ssize_t n;
    while (text && len < cap - 1 && (n = read(fds[0], text + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!text) {
        snprintf(error, error_cap, "out of memory reading the peer's answer");
        return -1;
    }
    text[len] = 0;
    int result = -1;
    json_error_t jerr;
    json_t *root = NULL, *decode = NULL;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(error, error_cap, "%s%s%s failed (status 0x%x); see its messages above", args == argv ? o->node : "",
                 args == argv ? " " : "", o->peer_script, status);
    else if (!(root = json_loads(text, 0, &jerr)))
        snprintf(error, error_cap, "peer answer is not JSON (line %d: %s): %.200s", jerr.line, jerr.text, text);
    else if (!json_is_array(decode = json_object_get(root, "decode")) ||
             (int)json_array_size(decode) != o->n_levels)
        snprintf(error, error_cap, "peer answer lacks 'decode' with %d entries: %.200s", o->n_levels, text);
    else {
        result = 0;
        for (int i = 0; i < o->n_levels; i++) {
            json_t *entry = json_array_get(decode, (size_t)i);
            tok_s[i] = json_number_value(json_object_get(entry, "tok_s"));
            if (json_integer_value(json_object_get(entry, "batch")) != o->levels[i] || !(tok_s[i] > 0)) {
                snprintf(error, error_cap, "peer decode entry %d is not {batch: %d, tok_s > 0}: %.200s", i,
                         o->levels[i], text);
                result = -1;
                break;
            }
        }
    }
    json_decref(root);
    free(text);
    return result;
}

/* ---- options ------------------------------------------------------------------ */

static int parse_levels(const char *text, struct options *o)
{
    o->n_levels = 0;
    for (const char *p = text; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 4096 || o->n_levels == MAX_LEVELS || (*end && *end != ','))
            return -1;
        o->levels[o->n_levels++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return o->n_levels ? 0 : -1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.tokens = 32, .levels = {1, 8, 32, 64}, .n_levels = 4, .prompt_tokens = 8,
                          .n_threads = 2, .rounds = 3, .node = "node"};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value)
            return -1;
        i++;
        if (!strcmp(flag, "--model"))
            o->model = value;
        else if (!strcmp(flag, "--tokens"))
            o->tokens = atoi(value);
        else if (!strcmp(flag, "--concurrency")) {
            if (parse_levels(value, o))
                return -1;
        } else if (!strcmp(flag, "--prompt-tokens"))
            o->prompt_tokens = atoi(value);
        else if (!strcmp(flag, "--threads"))
            o->n_threads = atoi(value);
        else if (!strcmp(flag, "--rounds"))
            o->rounds = atoi(value);
        else if (!strcmp(flag, "--peer"))
            o->peer_script = value;
        else if (!strcmp(flag, "--node"))
            o->node = value;
        else if (!strcmp(flag, "--json"))
            o->json_path = value;
        else
            return -1;
    }
    if (!o->model || o->tokens < 2 || o->prompt_tokens < 1 || o->n_threads < 1 || o->rounds < 1 ||
        o->rounds > MAX_ROUNDS)
        return -1;
    return 0;
}

static int max_level(const struct options *o)
{
    int m = 0;
    for (int i = 0; i < o->n_levels; i++)
        m = o->levels[i] > m ? o->levels[i] : m;
    return m;
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_scheduler --model F.gguf [--tokens 32] [--concurrency 1,8,32,64]\n"
                        "       [--prompt-tokens 8] [--threads 2] [--rounds 3 (at most 32)]\n"
                        "       [--peer build-bench/bin/llama_cpp_peer | bench/peers/llama_cpp_bench.mjs]\n"
                        "       [--node node] [--json out.json]\n");
        return 2;
    }
    struct cinfer_error err = {0};

    /* The model's shape sizes the KV cache: every request's whole context at once. */
    struct cinfer_model *m = NULL;
    struct cinfer_model_load_options lo = {0};
    if (cinfer_model_load(o.model, &lo, &m, &err)) {
        fprintf(stderr, "bench_scheduler: %s\n", err.message);
        return 1;
    }
    const struct cinfer_model_config mc = m->config;
    cinfer_model_free(&m);
    int most = max_level(&o);
    int context_tokens = o.prompt_tokens + o.tokens + 16;
    int64_t kv_bytes_per_token = 2ll * mc.num_layers * mc.num_kv_heads * mc.head_dim * (int64_t)sizeof(float);
    /* pages are 16 tokens; one spare page per request, and room for a warm-up */
    int64_t kv_cache_bytes = kv_bytes_per_token * (int64_t)(context_tokens + 32) * (most + 1);

    /* One prompt per request: (most, prompt_tokens) */
    int32_t *prompts = malloc(sizeof(int32_t) * (size_t)most * (size_t)o.prompt_tokens);
    for (int c = 0; c < most; c++)
        prompt_tokens(prompts + (size_t)c * (size_t)o.prompt_tokens, o.prompt_tokens, 1000u + (uint32_t)c,
                      mc.vocab_size);

    struct cinfer_server_args args;
    cinfer_server_args_init(&args, &err);
    free(args.model_path);
    args.model_path = strdup(o.model);
    args.log_level = CINFER_LOG_ERROR;
    args.num_threads = o.n_threads;
    args.context_length = context_tokens;
    args.max_running_requests = most > 64 ? most : 64;
    args.kv_cache_bytes = kv_cache_bytes;
    args.start_timeout_ms = 120000;
    struct cinfer_engine *engine = NULL;
    if (cinfer_engine_create(&args, NULL, &engine, &err)) {
        fprintf(stderr, "bench_scheduler: %s\n", err.message);
        return 1;
    }

    char error[512];
    struct decode_rates rates;
    if (engine_decode(engine, prompts, o.prompt_tokens, 1, 4, &rates, error, sizeof error) < 0) { /* warm-up */
        fprintf(stderr, "bench_scheduler: warm-up: %s\n", error);
        return 1;
    }
    double ours[MAX_LEVELS] = {0}, ours_ramp[MAX_LEVELS] = {0}, peer[MAX_LEVELS] = {0};
    double per_round[MAX_ROUNDS][MAX_LEVELS] = {{0}}; /* cinfer's steady figure in each round, 0 if it failed */
    char peer_error[512] = "not run (no --peer)";
    int ours_failed = 0;
    for (int round = 0; round < o.rounds; round++) {
        for (int i = 0; i < o.n_levels; i++) {
            if (engine_decode(engine, prompts, o.prompt_tokens, o.levels[i], o.tokens, &rates, error,
                              sizeof error) < 0) {
                fprintf(stderr, "bench_scheduler: cinfer at concurrency %d: %s\n", o.levels[i], error);
                ours_failed = 1;
                continue;
            }
            fprintf(stderr, "round %d: cinfer concurrency %d: %.1f tok/s steady, %.1f with the ramp\n", round + 1,
                    o.levels[i], rates.steady, rates.with_ramp);
            ours[i] = rates.steady > ours[i] ? rates.steady : ours[i];
            ours_ramp[i] = rates.with_ramp > ours_ramp[i] ? rates.with_ramp : ours_ramp[i];
            per_round[round][i] = rates.steady;
        }
        if (o.peer_script) {
            double y[MAX_LEVELS];
            if (peer_decode(&o, y, peer_error, sizeof peer_error)) {
                fprintf(stderr, "bench_scheduler: llama.cpp: %s\n", peer_error);
                continue;
            }
            peer_error[0] = 0;
            for (int i = 0; i < o.n_levels; i++) {
                fprintf(stderr, "round %d: llama.cpp concurrency %d: %.1f tok/s\n", round + 1, o.levels[i], y[i]);
                peer[i] = y[i] > peer[i] ? y[i] : peer[i];
            }
        }
    }
    cinfer_engine_shutdown(&engine, 5000);

    printf("model %s, prompt %d ids, %d new tokens per request, %d threads, best of %d rounds\n", o.model,
           o.prompt_tokens, o.tokens, o.n_threads, o.rounds);
    printf("| concurrency | cinfer tok/s, steady | cinfer tok/s with the ramp | llama.cpp tok/s | cinfer / llama.cpp "
           "| cinfer scaling vs 1 |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    int at1 = -1, at_goal = -1; /* the columns of concurrency 1 and GOAL_LEVEL, -1 if not run */
    for (int i = 0; i < o.n_levels; i++) {
        at1 = o.levels[i] == 1 ? i : at1;
        at_goal = o.levels[i] == GOAL_LEVEL ? i : at_goal;
    }
    double base = at1 >= 0 ? ours[at1] : 0, base_ramp = at1 >= 0 ? ours_ramp[at1] : 0;
    json_t *rows = json_array();
    for (int i = 0; i < o.n_levels; i++) {
        char peer_text[32] = "-", ratio_text[32] = "-", scaling_text[32] = "-";
        if (peer[i] > 0)
            snprintf(peer_text, sizeof peer_text, "%.1f", peer[i]);
        if (peer[i] > 0 && ours[i] > 0)
            snprintf(ratio_text, sizeof ratio_text, "%.2f×", ours[i] / peer[i]);
        if (base > 0 && ours[i] > 0)
            snprintf(scaling_text, sizeof scaling_text, "%.2f×", ours[i] / base);
        printf("| %d | %.1f | %.1f | %s | %s | %s |\n", o.levels[i], ours[i], ours_ramp[i], peer_text, ratio_text,
               scaling_text);
        json_array_append_new(rows, json_pack("{s:i,s:f,s:f,s:f}", "concurrency", o.levels[i], "cinfer_tok_s",
                                              ours[i], "cinfer_with_ramp_tok_s", ours_ramp[i], "llama_cpp_tok_s",
                                              peer[i]));
    }
    if (o.peer_script && peer_error[0])
        printf("llama.cpp: %s\n", peer_error);
    double goal_scaling = 0, ramp_scaling = 0;
    if (at_goal >= 0 && base > 0) {
        goal_scaling = ours[at_goal] / base;
        ramp_scaling = base_ramp > 0 ? ours_ramp[at_goal] / base_ramp : 0;
    }
    if (goal_scaling > 0) {
        printf("goal: cinfer(%d) / cinfer(1) = %.2f× against %.0f×: %s\n", GOAL_LEVEL, goal_scaling, GOAL_SCALING,
               goal_scaling >= GOAL_SCALING ? "met" : "NOT met");
        printf("with the ramp (prefills inside the window at %d): %.2f×\n", GOAL_LEVEL, ramp_scaling);
    }
    /* The same ratio within each round, seconds apart: concurrency 1 is bound by memory
     * and concurrency 32 by arithmetic, and the host's memory speed moves between
     * rounds, so the best-of figures above can pair moments that never met. */
    json_t *by_round = json_array(); /* the ratio of each round, null where a side failed */
    for (int r = 0; r < o.rounds && at1 >= 0 && at_goal >= 0; r++)
        json_array_append_new(by_round, per_round[r][at1] > 0 && per_round[r][at_goal] > 0
                                            ? json_real(per_round[r][at_goal] / per_round[r][at1])
                                            : json_null());
    if (at1 >= 0 && at_goal >= 0 && o.rounds > 1) {
        int met = 0, counted = 0;
        printf("cinfer(%d) / cinfer(1) round by round:", GOAL_LEVEL);
        for (int r = 0; r < o.rounds; r++) {
            if (per_round[r][at1] <= 0 || per_round[r][at_goal] <= 0) {
                printf(" -");
                continue;
            }
            double ratio = per_round[r][at_goal] / per_round[r][at1];
            printf(" %.2f× (%.1f / %.1f)", ratio, per_round[r][at_goal], per_round[r][at1]);
            met += ratio >= GOAL_SCALING;
            counted++;
        }
        printf("; at least %.0f× in %d of %d rounds\n", GOAL_SCALING, met, counted);
    }
    if (o.json_path) {
        json_t *root = json_pack("{s:s,s:i,s:i,s:i,s:i,s:o,s:f,s:o,s:f}", "model", o.model, "threads", o.n_threads,
                                 "prompt_tokens", o.prompt_tokens, "new_tokens", o.tokens, "rounds", o.rounds,
                                 "levels", rows, "scaling_32_over_1", goal_scaling, "scaling_32_over_1_by_round",
                                 by_round, "scaling_32_over_1_with_ramp", ramp_scaling);
        if (json_dump_file(root, o.json_path, JSON_INDENT(2)) != 0)
            fprintf(stderr, "bench_scheduler: could not write %s\n", o.json_path);
        json_decref(root);
    } else {
        json_decref(rows);
        json_decref(by_round);
    }
    free(prompts);
    cinfer_server_args_free(&args);
    return ours_failed ? 1 : 0;
}
