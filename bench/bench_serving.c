/* bench_serving: an online serving benchmark in the spirit of SGLang's bench_serving.
 *
 * Sends streaming requests to a running server (--url) or to a `cinfer serve` it starts
 * itself (--model), with Poisson arrivals at --request-rate (inf: all at once) and at
 * most --max-concurrency in flight, prompts of random token ids (lengths uniform in
 * [len * range_ratio, len]) or the lines of a text file, through SGLang's /generate or
 * OpenAI's /v1/completions. Prints completed/failed, duration, request and token
 * throughput, and the mean, median, p90 and p99 of time to first token (TTFT),
 * inter-token latency (ITL: the gaps between streamed events that carry tokens) and
 * end-to-end latency (E2E).
 *
 *   bench_serving --model models/default --num-prompts 200 --request-rate 20
 *   bench_serving --url http://127.0.0.1:30000 --backend completions --max-concurrency 16
 *
 * Every request asks for ignore_eos (and, through /v1/completions, min_tokens = max_tokens),
 * so the output lengths are the ones drawn. Prompt ids are drawn below the vocabulary
 * size the server reports: GET /get_server_info (cinfer, SGLang), or GET /v1/models
 * (llama-server) where that answers 404. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/http_client.h"

extern char **environ;

struct options {
    const char *url;
    const char *model;          /* start `cinfer serve` on this model */
    const char *serve_args[32]; /* extra flags for it */
    int n_serve_args;
    const char *backend;        /* "generate" or "completions" */
    int num_prompts;
    double request_rate;        /* requests per second; INFINITY: all at once */
    int max_concurrency;        /* 0: no cap */
    int input_len, output_len;
    double range_ratio;
    const char *dataset;        /* a text file: one prompt per line */
    unsigned long long seed;
    double timeout_s;
};

/* What one request saw, from its stream. */
struct request_stats {
    double t_start;             /* when its request was sent */
    double t_first;             /* the first event that carried tokens (0: none) */
    double t_last;
    double *itl;                /* (n_itl) gaps between token-carrying events, seconds */
    int n_itl, cap_itl;
    int prev_ids;               /* /generate: output_ids seen so far (cumulative) */
    int prompt_tokens, completion_tokens;
    int done;                   /* saw [DONE] */
    int error;                  /* an error event */
    const char *backend;
    struct http_client_job *job;
};

static unsigned long long rng_state;

static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int draw_len(int len, double ratio)
{
    int lo = (int)(len * ratio);
    if (lo < 1)
        lo = 1;
    return lo + (int)(uniform01() * (len - lo + 1));
}

static void add_itl(struct request_stats *s, double gap)
{
    if (s->n_itl == s->cap_itl) {
        s->cap_itl = s->cap_itl ? 2 * s->cap_itl : 64;
        s->itl = realloc(s->itl, (size_t)s->cap_itl * sizeof *s->itl);
        if (!s->itl) {
            fprintf(stderr, "bench_serving: out of memory\n");
            exit(1);
        }
    }
    s->itl[s->n_itl++] = gap;
}

/* Tokens an event adds: /generate carries the output so far, completions a delta. */
static int event_tokens(struct request_stats *s, json_t *ev)
{
    if (json_object_get(ev, "error")) {
        s->error = 1;
        return 0;
    }
    if (strcmp(s->backend, "generate") == 0) {
        const json_t *meta = json_object_get(ev, "meta_info");
        int ids = (int)json_array_size(json_object_get(ev, "output_ids"));
        int added = ids - s->prev_ids;
        s->prev_ids = ids;
        s->prompt_tokens = (int)json_integer_value(json_object_get(meta, "prompt_tokens"));
        s->completion_tokens = (int)json_integer_value(json_object_get(meta, "completion_tokens"));
        return added;
    }
    const json_t *usage = json_object_get(ev, "usage");
    if (json_is_object(usage)) {
        s->prompt_tokens = (int)json_integer_value(json_object_get(usage, "prompt_tokens"));
        s->completion_tokens = (int)json_integer_value(json_object_get(usage, "completion_tokens"));
    }
    const json_t *choice = json_array_get(json_object_get(ev, "choices"), 0);
    const char *text = json_string_value(json_object_get(choice, "text"));
    return text && text[0] ? 1 : 0;
}

static int on_event(void *ctx, const char *data, size_t len)
{
    struct request_stats *s = ctx;
    double now = http_client_now_s();
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        s->done = 1;
        return 0;
    }
    json_error_t jerr;
    json_t *ev = json_loadb(data, len, 0, &jerr);
    if (!ev) {
        s->error = 1;
        return 0;
    }
    int added = event_tokens(s, ev);
    json_decref(ev);
    if (added <= 0)
        return 0;
    if (s->t_first == 0)
        s->t_first = now;
    else
        add_itl(s, now - s->t_last);
    s->t_last = now;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double *v, int n, double p)
{
    if (n == 0)
        return NAN;
    int rank = (int)ceil(p / 100.0 * n);
    if (rank < 1)
        rank = 1;
    return v[rank - 1];
}

static void print_stat(const char *what, const char *abbrev, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    char label[64];
    int width = 50 - (int)strlen(what) - 2;
    printf("%.*s %s %.*s\n", width / 2, "--------------------------------------------------", what,
           width - width / 2, "--------------------------------------------------");
    snprintf(label, sizeof label, "Mean %s (ms):", abbrev);
    printf("%-40s %10.2f\n", label, n ? 1000 * sum / n : NAN);
    snprintf(label, sizeof label, "Median %s (ms):", abbrev);
    printf("%-40s %10.2f\n", label, 1000 * percentile(v, n, 50));
    snprintf(label, sizeof label, "P90 %s (ms):", abbrev);
    printf("%-40s %10.2f\n", label, 1000 * percentile(v, n, 90));
    snprintf(label, sizeof label, "P99 %s (ms):", abbrev);
    printf("%-40s %10.2f\n", label, 1000 * percentile(v, n, 99));
}

/* ---- the server ------------------------------------------------------------------- */
static pid_t serve_pid;

static int start_serve(const struct options *o, char *url, size_t url_bytes)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = CINFER_BINARY_DIR "/bin/cinfer";
    argv[n++] = "serve";
    argv[n++] = "--model-path";
    argv[n++] = o->model;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--log-level";
    argv[n++] = "error";
    for (int i = 0; i < o->n_serve_args; i++)
        argv[n++] = o->serve_args[i];
    argv[n] = NULL;
    int pipefd[2];
    if (pipe(pipefd))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    int rc = posix_spawn(&serve_pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc) {
        fprintf(stderr, "bench_serving: cannot start %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    FILE *err = fdopen(pipefd[0], "r");
    char line[512];
    while (fgets(line, sizeof line, err)) {
        const char *at = strstr(line, "listening on ");
        if (at) {
            snprintf(url, url_bytes, "%.*s", (int)strcspn(at + 13, " \n"), at + 13);
            fclose(err); /* the server keeps writing to a closed pipe: it ignores SIGPIPE, and logs only errors */
            return 0;
        }
        fputs(line, stderr);
    }
    fclose(err);
    fprintf(stderr, "bench_serving: cinfer serve exited before listening\n");
    return -1;
}

static void stop_serve(void)
{
    if (serve_pid <= 0)
        return;
    kill(serve_pid, SIGTERM);
    int status;
    waitpid(serve_pid, &status, 0);
    serve_pid = 0;
}

/* quiet_status: an answer with this status fails without a message (the caller has
 * another way); *status_out gets the status (0: no answer). */
static int fetch_json_quiet(const char *host, int port, const char *method, const char *path, const char *body,
                            int quiet_status, int *status_out, json_t **out)
{
    struct http_client_parser p;
    http_client_parser_init(&p, NULL, NULL);
    int rc = http_client_fetch(&p, host, port, method, path, body, 30000);
    json_error_t jerr;
    *out = rc == 0 && p.status == 200 && p.body ? json_loads(p.body, 0, &jerr) : NULL;
    *status_out = rc == 0 ? p.status : 0;
    if (!*out && !(rc == 0 && p.status == quiet_status))
        fprintf(stderr, "bench_serving: %s %s: %s (status %d) %.200s\n", method, path, rc ? p.error : "bad answer",
                p.status, p.body ? p.body : "");
    http_client_parser_free(&p);
    return *out ? 0 : -1;
}

static int fetch_json(const char *host, int port, const char *method, const char *path, const char *body, json_t **out)
{
    int status;
    return fetch_json_quiet(host, port, method, path, body, -1, &status, out);
}

/* The vocabulary size and the model's name: cinfer (and SGLang) answer
 * /get_server_info; llama-server has none and tells both in /v1/models
 * (data[0].meta.n_vocab, data[0].id). */
static int server_model_info(const char *host, int port, int *vocab, char *model_name, size_t name_bytes)
{
    json_t *info;
    int status;
    const char *name = NULL;
    if (fetch_json_quiet(host, port, "GET", "/get_server_info", NULL, 404, &status, &info) == 0) {
        *vocab = (int)json_integer_value(json_object_get(info, "vocab_size"));
        /* /v1/completions names the model; cinfer serves the model folder's name unless told */
        name = json_string_value(json_object_get(info, "served_model_name"));
    } else if (status == 404 && fetch_json(host, port, "GET", "/v1/models", NULL, &info) == 0) {
        json_t *model = json_array_get(json_object_get(info, "data"), 0);
        *vocab = (int)json_integer_value(json_object_get(json_object_get(model, "meta"), "n_vocab"));
        name = json_string_value(json_object_get(model, "id"));
    } else {
        return -1;
    }
    snprintf(model_name, name_bytes, "%s", name && name[0] ? name : "default");
    json_decref(info);
    return 0;
}

/* ---- requests ------------------------------------------------------------------------ */
static char **read_lines(const char *path, int *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_serving: --dataset %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char **lines = NULL;
    int n = 0, cap = 0;
    char *line = NULL;
    size_t len = 0;
    ssize_t got;
    while ((got = getline(&line, &len, f)) > 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (got == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            lines = realloc(lines, (size_t)cap * sizeof *lines);
        }
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n_out = n;
    if (n == 0)
        fprintf(stderr, "bench_serving: --dataset %s has no non-empty line\n", path);
    return n ? lines : NULL;
}

/* The body of request i: its prompt (random ids or a line of the file) and output length. */
static char *make_body(const struct options *o, const char *model_name, int vocab, char **lines, int n_lines,
                       int *input_len)
{
    json_t *prompt;
    if (lines) {
        prompt = json_string(lines[(int)(uniform01() * n_lines) % n_lines]);
        *input_len = 0; /* known from the answer */
    } else {
        int len = draw_len(o->input_len, o->range_ratio);
        prompt = json_array();
        for (int k = 0; k < len; k++) /* ids from the middle of the vocabulary: plain pieces, no specials */
            json_array_append_new(prompt, json_integer(vocab / 8 + (int)(uniform01() * (vocab * 3 / 4))));
        *input_len = len;
    }
    int out_len = draw_len(o->output_len, o->range_ratio);
    json_t *body;
    if (strcmp(o->backend, "generate") == 0) {
        body = json_pack("{s:o, s:b, s:{s:i, s:b, s:f}}", lines ? "text" : "input_ids", prompt, "stream", 1,
                         "sampling_params", "max_new_tokens", out_len, "ignore_eos", 1, "temperature", 0.0);
    } else {
        /* min_tokens beside ignore_eos: servers that know only one of them (vLLM-style
         * min_tokens, SGLang-style ignore_eos) still produce the drawn length */
        body = json_pack("{s:s, s:o, s:i, s:i, s:b, s:b, s:{s:b}, s:f}", "model", model_name, "prompt", prompt,
                         "max_tokens", out_len, "min_tokens", out_len, "ignore_eos", 1, "stream", 1, "stream_options",
                         "include_usage", 1, "temperature", 0.0);
    }
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return text;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_serving (--url http://HOST:PORT | --model PATH [--serve-arg FLAG]...)\n"
            "         [--backend generate|completions] [--num-prompts N] [--request-rate R|inf]\n"
            "         [--max-concurrency C] [--random-input-len L] [--random-output-len L]\n"
            "         [--random-range-ratio X] [--dataset FILE] [--seed S] [--timeout SECONDS]\n");
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.backend = "generate", .num_prompts = 200, .request_rate = INFINITY, .input_len = 64,
                          .output_len = 32, .range_ratio = 1.0, .seed = 1, .timeout_s = 600};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_serving: %s needs a value\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--url"))
            o->url = v;
        else if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--serve-arg") && o->n_serve_args < 32)
            o->serve_args[o->n_serve_args++] = v;
        else if (!strcmp(a, "--backend"))
            o->backend = v;
        else if (!strcmp(a, "--num-prompts"))
            o->num_prompts = atoi(v);
        else if (!strcmp(a, "--request-rate"))
            o->request_rate = !strcmp(v, "inf") ? INFINITY : atof(v);
        else if (!strcmp(a, "--max-concurrency"))
            o->max_concurrency = atoi(v);
        else if (!strcmp(a, "--random-input-len"))
            o->input_len = atoi(v);
        else if (!strcmp(a, "--random-output-len"))
            o->output_len = atoi(v);
        else if (!strcmp(a, "--random-range-ratio"))
            o->range_ratio = atof(v);
        else if (!strcmp(a, "--dataset"))
            o->dataset = v;
        else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--timeout"))
            o->timeout_s = atof(v);
        else {
            fprintf(stderr, "bench_serving: unknown option %s\n", a);
            return -1;
        }
    }
    if (!o->url == !o->model) {
        fprintf(stderr, "bench_serving: give --url of a running server or --model to start one (one of them)\n");
        return -1;
    }
    if (strcmp(o->backend, "generate") && strcmp(o->backend, "completions")) {
        fprintf(stderr, "bench_serving: --backend %s: expected generate or completions\n", o->backend);
        return -1;
    }
    if (o->num_prompts < 1 || o->input_len < 1 || o->output_len < 1 || !(o->range_ratio > 0 && o->range_ratio <= 1) ||
        !(o->request_rate > 0)) {
        fprintf(stderr, "bench_serving: --num-prompts, lengths and --request-rate must be positive, "
                        "--random-range-ratio in (0, 1]\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o)) {
        usage();
        return 2;
    }
    rng_state = o.seed * 0x9E3779B97F4A7C15ull + 1;
    struct rlimit rl; /* one socket per request in flight */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char url[256];
    if (o.model) {
        if (start_serve(&o, url, sizeof url))
            return 1;
    } else {
        snprintf(url, sizeof url, "%s", o.url);
    }
    char host[128];
    int port;
    if (http_client_parse_url(url, host, sizeof host, &port)) {
        fprintf(stderr, "bench_serving: cannot read the URL %s (expected http://HOST:PORT)\n", url);
        stop_serve();
        return 1;
    }
    int vocab = 0;
    char model_name[256];
    if (server_model_info(host, port, &vocab, model_name, sizeof model_name)) {
        stop_serve();
        return 1;
    }
    if (vocab < 16) {
        fprintf(stderr, "bench_serving: the server reports a vocabulary of %d ids\n", vocab);
        stop_serve();
        return 1;
    }

    int n_lines = 0;
    char **lines = o.dataset ? read_lines(o.dataset, &n_lines) : NULL;
    if (o.dataset && !lines) {
        stop_serve();
        return 1;
    }
    int n = o.num_prompts;
    struct http_client_job *jobs = calloc((size_t)n, sizeof *jobs);
    struct request_stats *stats = calloc((size_t)n, sizeof *stats);
    char **bodies = calloc((size_t)n, sizeof *bodies);
    int *input_lens = calloc((size_t)n, sizeof *input_lens);
    if (!jobs || !stats || !bodies || !input_lens) {
        fprintf(stderr, "bench_serving: out of memory\n");
        return 1;
    }
    const char *path = strcmp(o.backend, "generate") == 0 ? "/generate" : "/v1/completions";
    double t0 = http_client_now_s() + 0.05, at = t0;
    for (int i = 0; i < n; i++) {
        bodies[i] = make_body(&o, model_name, vocab, lines, n_lines, &input_lens[i]);
        if (isfinite(o.request_rate))
            at += -log(1.0 - uniform01()) / o.request_rate; /* Poisson arrivals */
        stats[i].backend = o.backend;
        jobs[i] = (struct http_client_job){.method = "POST", .path = path, .body = bodies[i], .start_at_s = at,
                                           .on_event = on_event, .event_ctx = &stats[i]};
    }
    printf("bench_serving: %d requests to %s%s, request rate %g/s, max concurrency %d%s\n", n, url, path,
           o.request_rate, o.max_concurrency, o.max_concurrency ? "" : " (no cap)");
    fflush(stdout);
    http_client_run(jobs, (size_t)n, host, port, o.max_concurrency, t0 + o.timeout_s);
    double t_end = t0;

    int ok = 0, failed = 0;
    long long in_tokens = 0, out_tokens = 0;
    double *ttft = calloc((size_t)n, sizeof *ttft), *e2e = calloc((size_t)n, sizeof *e2e);
    int n_itl = 0;
    for (int i = 0; i < n; i++)
        n_itl += stats[i].n_itl;
    double *itl = calloc((size_t)n_itl + 1, sizeof *itl);
    n_itl = 0;
    const char *first_failure = NULL;
    char why[600];
    for (int i = 0; i < n; i++) {
        struct http_client_job *j = &jobs[i];
        struct request_stats *s = &stats[i];
        if (j->result == 1 && j->parser.status == 200 && s->done && !s->error && s->t_first > 0) {
            ttft[ok] = s->t_first - j->t_sent_s;
            e2e[ok] = j->t_done_s - j->t_sent_s;
            ok++;
            in_tokens += s->prompt_tokens ? s->prompt_tokens : input_lens[i];
            out_tokens += s->completion_tokens;
            for (int k = 0; k < s->n_itl; k++)
                itl[n_itl++] = s->itl[k];
            if (j->t_done_s > t_end)
                t_end = j->t_done_s;
        } else {
            failed++;
            if (!first_failure) {
                snprintf(why, sizeof why, "request %d: %s (status %d) %.200s", i,
                         j->result == 0 ? "no answer before --timeout" : j->result < 0 ? j->error : "bad stream",
                         j->parser.status, j->parser.body ? j->parser.body : "");
                first_failure = why;
            }
        }
        free(s->itl);
        http_client_parser_free(&j->parser);
        free(bodies[i]);
    }
    double duration = t_end - t0;
    char rate[32], conc[32];
    snprintf(rate, sizeof rate, isfinite(o.request_rate) ? "%g" : "inf", o.request_rate);
    snprintf(conc, sizeof conc, o.max_concurrency ? "%d" : "not set", o.max_concurrency);
    printf("\n============ Serving Benchmark Result ============\n");
    printf("%-40s %10s\n", "Backend:", o.backend);
    printf("%-40s %10s\n", "Traffic request rate:", rate);
    printf("%-40s %10s\n", "Max request concurrency:", conc);
    printf("%-40s %10d\n", "Successful requests:", ok);
    printf("%-40s %10d\n", "Failed requests:", failed);
    printf("%-40s %10.2f\n", "Benchmark duration (s):", duration);
    printf("%-40s %10lld\n", "Total input tokens:", in_tokens);
    printf("%-40s %10lld\n", "Total generated tokens:", out_tokens);
    printf("%-40s %10.2f\n", "Request throughput (req/s):", ok / duration);
    printf("%-40s %10.2f\n", "Input token throughput (tok/s):", in_tokens / duration);
    printf("%-40s %10.2f\n", "Output token throughput (tok/s):", out_tokens / duration);
    printf("%-40s %10.2f\n", "Total token throughput (tok/s):", (in_tokens + out_tokens) / duration);
    print_stat("End-to-End Latency", "E2E Latency", e2e, ok);
    print_stat("Time to First Token", "TTFT", ttft, ok);
    print_stat("Inter-Token Latency", "ITL", itl, n_itl);
    printf("==================================================\n");
    if (first_failure)
        printf("first failure: %s\n", first_failure);
    free(ttft);
    free(e2e);
    free(itl);
    free(jobs);
    free(stats);
    free(bodies);
    free(input_lens);
    for (int i = 0; i < n_lines; i++)
        free(lines[i]);
    free(lines);
    stop_serve();
    return failed ? 1 : 0;
}
