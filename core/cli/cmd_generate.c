/* cinfer generate: streams a completion of PROMPT to stdout through the full engine
 * (main process, scheduler and detokenizer workers). SIGINT/SIGTERM stop it cleanly:
 * the request is aborted, the engine drains and stops, and the exit status is 0. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cli/commands.h"

/* SIGINT and SIGTERM are blocked in every thread and taken by this one, which aborts
 * the request: the stream then ends at once, even if the engine is stuck. */
struct signal_watch {
    sigset_t set;
    struct cinfer_engine *engine;
    uint64_t request_ids[CINFER_MAX_CHOICES]; /* one per choice */
    int n_request_ids;
    int fired;
};

static void *watch_signals(void *arg)
{
    struct signal_watch *w = arg;
    int signo;
    if (sigwait(&w->set, &signo) == 0 && signo != SIGUSR1) {
        w->fired = 1;
        for (int i = 0; i < w->n_request_ids; i++)
            cinfer_engine_abort(w->engine, w->request_ids[i]);
    }
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cinfer generate [--model PATH] [--config FILE] [--max-new-tokens N] [--temperature T]\n"
            "                       [--seed S] [--top-k K] [--top-p P] [--min-p P] [--stop TEXT]...\n"
            "                       [--ignore-eos] [--n N] [--logprobs] [--top-logprobs K]\n"
            "                       [server flags...] PROMPT\n\n"
            "Streams a completion of PROMPT to stdout through the multi-process engine. With no\n"
            "--model it runs the embedded default model (models/default).\n\n"
            "Generation flags:\n"
            "  --max-new-tokens N   most tokens to generate (default 128)\n"
            "  --min-new-tokens N   do not stop (EOS, stop token) before N tokens\n"
            "  --temperature T      0 is greedy (default 0)\n"
            "  --seed S             makes sampling reproducible\n"
            "  --top-k K, --top-p P, --min-p P   truncate the distribution before sampling\n"
            "  --repetition-penalty R, --frequency-penalty F, --presence-penalty P\n"
            "  --stop TEXT          stop before TEXT appears (repeatable, up to %d)\n"
            "  --ignore-eos         keep going past the end-of-sequence token\n"
            "  --n N                N choices of the same prompt, batched together; choice i samples\n"
            "                       with seed S+i, and each is printed after a '--- choice i ---' line\n"
            "  --logprobs           after the text, print each generated token's log-probability:\n"
            "                       one line 'logprob<TAB>ID<TAB>LOGPROB[<TAB>ID:LOGPROB]...' per token\n"
            "  --top-logprobs K     with each token, its K most likely alternatives (0..%d)\n\n",
            CINFER_MAX_STOP_STRINGS, CINFER_MAX_TOP_LOGPROBS);
    cinfer_server_args_print_help(out);
}

static int parse_number(const char *flag, const char *value, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || end == value || *end || v < lo || v > hi) {
        fprintf(stderr, "cinfer generate: %s: expected a number in [%g, %g], found '%s'\n", flag, lo, hi, value);
        return -1;
    }
    *out = v;
    return 0;
}

/* Log-probabilities of a streamed choice, kept until its text is out. */
struct logprob_list {
    struct cinfer_token_logprob *items;
    size_t n, cap;
};

static int logprob_list_append(struct logprob_list *l, const struct cinfer_token_logprob *lp, size_t n)
{
    if (l->n + n > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        while (cap < l->n + n)
            cap *= 2;
        struct cinfer_token_logprob *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown)
            return -1;
        l->items = grown;
        l->cap = cap;
    }
    memcpy(l->items + l->n, lp, n * sizeof *lp);
    l->n += n;
    return 0;
}

static void print_logprobs(const struct cinfer_token_logprob *lp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("logprob\t%d\t%.6f", (int)lp[i].token, (double)lp[i].logprob);
        for (int k = 0; k < lp[i].n_top; k++)
            printf("\t%d:%.6f", (int)lp[i].top_ids[k], (double)lp[i].top_logprobs[k]);
        putchar('\n');
    }
}

/* --n > 1: the choices are opened together (they batch and share the prompt's KV pages,
 * as cinfer_engine_generate_n does, choice i sampling with seed + i), then printed in
 * order as each completes. The watcher aborts every one of them on SIGINT/SIGTERM. */
static int generate_choices(struct cinfer_engine *engine, const struct cinfer_generate_request *req,
                            struct signal_watch *watch, struct cinfer_error *err)
{
    struct cinfer_stream **streams = calloc((size_t)req->n, sizeof *streams);
    struct logprob_list kept = {0};
    int status = streams ? 0 : 1;
    for (int i = 0; i < req->n && status == 0; i++) {
        struct cinfer_generate_request one = *req;
        one.n = 1;
        one.sampling.seed = req->sampling.seed + (uint64_t)i;
        if (cinfer_engine_stream_open(engine, &one, &streams[i], err) != CINFER_OK) {
            fprintf(stderr, "cinfer generate: choice %d: %s\n", i, err->message);
            status = 1;
        } else {
            watch->request_ids[watch->n_request_ids++] = cinfer_stream_request_id(streams[i]);
        }
    }
    pthread_t watcher;
    if (status == 0)
        pthread_create(&watcher, NULL, watch_signals, watch);
    for (int i = 0; i < req->n && status == 0; i++) {
        printf("--- choice %d ---\n%s", i, req->prompt);
        kept.n = 0;
        for (;;) {
            struct cinfer_stream_chunk chunk;
            if (cinfer_stream_next(streams[i], &chunk, -1, err) != CINFER_OK) {
                fprintf(stderr, "\ncinfer generate: choice %d: %s\n", i, err->message);
                status = 1;
                break;
            }
            fwrite(chunk.text, 1, chunk.text_len, stdout);
            if (chunk.n_logprobs && logprob_list_append(&kept, chunk.logprobs, chunk.n_logprobs)) {
                fprintf(stderr, "\ncinfer generate: out of memory\n");
                status = 1;
                break;
            }
            if (chunk.finish_reason != CINFER_FINISH_NONE)
                break;
        }
        putchar('\n');
        print_logprobs(kept.items, kept.n);
        fflush(stdout);
        if (watch->fired)
            break;
    }
    if (status == 0) {
        if (!watch->fired)
            pthread_kill(watcher, SIGUSR1);
        pthread_join(watcher, NULL);
    }
    for (int i = 0; streams && i < req->n; i++)
        cinfer_stream_close(&streams[i]); /* aborts any choice still running */
    free(streams);
    free(kept.items);
    return status;
}

int cinfer_cmd_generate(int argc, char **argv)
{
    static const struct cinfer_command_flag own_flags[] = {
        {"--max-new-tokens", 1}, {"--temperature", 1}, {"--seed", 1},       {"--top-k", 1}, {"--top-p", 1},
        {"--min-p", 1},          {"--stop", 1},        {"--ignore-eos", 0}, {"--help", 0},  {"-h", 0},
        {"--min-new-tokens", 1}, {"--repetition-penalty", 1}, {"--frequency-penalty", 1},
        {"--presence-penalty", 1}, {"--n", 1}, {"--logprobs", 0}, {"--top-logprobs", 1}, {NULL, 0}};
    if (cinfer_cli_asks_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    char **rest;
    int n_rest;
    struct cinfer_server_args args;
    if (cinfer_cli_parse_server_args("generate", argc, argv, own_flags, &args, &rest, &n_rest))
        return 1;
    struct cinfer_error err = {0};
    struct cinfer_generate_request req = {0};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0.0f;
    int status = 0;
    for (int i = 0; i < n_rest && status == 0; i++) {
        const char *a = rest[i];
        const char *v = i + 1 < n_rest ? rest[i + 1] : NULL;
        double x = 0;
        int takes = strcmp(a, "--ignore-eos") != 0 && strcmp(a, "--logprobs") != 0 && a[0] == '-' && a[1] == '-';
        if (takes && !v) {
            fprintf(stderr, "cinfer generate: %s needs a value\n", a);
            status = 2;
            break;
        }
        if (!strcmp(a, "--max-new-tokens")) {
            status = parse_number(a, v, 0, 1 << 24, &x) ? 2 : 0;
            req.sampling.max_new_tokens = (int)x;
        } else if (!strcmp(a, "--temperature")) {
            status = parse_number(a, v, 0, 100, &x) ? 2 : 0;
            req.sampling.temperature = (float)x;
        } else if (!strcmp(a, "--seed")) {
            status = parse_number(a, v, 0, 18446744073709551615.0, &x) ? 2 : 0;
            req.sampling.seed = (uint64_t)x;
            req.sampling.has_seed = 1;
        } else if (!strcmp(a, "--top-k")) {
            status = parse_number(a, v, -1, 1 << 30, &x) ? 2 : 0;
            req.sampling.top_k = (int)x;
        } else if (!strcmp(a, "--top-p")) {
            status = parse_number(a, v, 1e-9, 1, &x) ? 2 : 0;
            req.sampling.top_p = (float)x;
        } else if (!strcmp(a, "--min-p")) {
            status = parse_number(a, v, 0, 1, &x) ? 2 : 0;
            req.sampling.min_p = (float)x;
        } else if (!strcmp(a, "--stop")) {
            if (req.sampling.n_stop == CINFER_MAX_STOP_STRINGS) {
                fprintf(stderr, "cinfer generate: at most %d --stop strings\n", CINFER_MAX_STOP_STRINGS);
                status = 2;
            } else {
                req.sampling.stop[req.sampling.n_stop++] = v;
            }
        } else if (!strcmp(a, "--min-new-tokens")) {
            status = parse_number(a, v, 0, 1 << 24, &x) ? 2 : 0;
            req.sampling.min_new_tokens = (int)x;
        } else if (!strcmp(a, "--repetition-penalty")) {
            status = parse_number(a, v, 1e-6, 100, &x) ? 2 : 0;
            req.sampling.repetition_penalty = (float)x;
        } else if (!strcmp(a, "--frequency-penalty")) {
            status = parse_number(a, v, -2, 2, &x) ? 2 : 0;
            req.sampling.frequency_penalty = (float)x;
        } else if (!strcmp(a, "--presence-penalty")) {
            status = parse_number(a, v, -2, 2, &x) ? 2 : 0;
            req.sampling.presence_penalty = (float)x;
        } else if (!strcmp(a, "--n")) {
            status = parse_number(a, v, 1, CINFER_MAX_CHOICES, &x) ? 2 : 0;
            req.n = (int)x;
        } else if (!strcmp(a, "--top-logprobs")) {
            status = parse_number(a, v, 0, CINFER_MAX_TOP_LOGPROBS, &x) ? 2 : 0;
            req.sampling.top_logprobs = (int)x;
            req.sampling.logprobs = 1;
        } else if (!strcmp(a, "--logprobs")) {
            req.sampling.logprobs = 1;
            continue;
        } else if (!strcmp(a, "--ignore-eos")) {
            req.sampling.ignore_eos = 1;
            continue;
        } else if (!req.prompt) {
            req.prompt = a;
            continue;
        } else {
            fprintf(stderr, "cinfer generate: one PROMPT expected, found a second: '%s'\n", a);
            status = 2;
            break;
        }
        i++; /* the flag's value */
    }
    if (status == 0 && !req.prompt) {
        fprintf(stderr, "cinfer generate: no PROMPT given (see --help)\n");
        status = 2;
    }
    /* Block the stop signals before any thread exists, so every thread inherits it. */
    struct signal_watch watch = {0};
    sigemptyset(&watch.set);
    sigaddset(&watch.set, SIGINT);
    sigaddset(&watch.set, SIGTERM);
    sigaddset(&watch.set, SIGUSR1); /* our own wake-up at the end */
    pthread_sigmask(SIG_BLOCK, &watch.set, NULL);

    struct cinfer_engine *engine = NULL;
    if (status == 0 && cinfer_engine_create(&args, NULL, &engine, &err) != CINFER_OK) {
        fprintf(stderr, "cinfer generate: %s\n", err.message);
        status = 1;
    }
    if (status == 0 && req.n > 1) {
        watch.engine = engine;
        status = generate_choices(engine, &req, &watch, &err);
        cinfer_engine_shutdown(&engine, args.drain_timeout_ms);
        cinfer_server_args_free(&args);
        free(rest);
        return status;
    }
    struct cinfer_stream *stream = NULL;
    if (status == 0 && cinfer_engine_stream_open(engine, &req, &stream, &err) != CINFER_OK) {
        fprintf(stderr, "cinfer generate: %s\n", err.message);
        status = 1;
    }
    if (status == 0) {
        watch.engine = engine;
        watch.request_ids[watch.n_request_ids++] = cinfer_stream_request_id(stream);
        pthread_t watcher;
        pthread_create(&watcher, NULL, watch_signals, &watch);
        fputs(req.prompt, stdout);
        struct logprob_list kept = {0}; /* printed after the text, which streams */
        for (;;) {
            struct cinfer_stream_chunk chunk;
            if (cinfer_stream_next(stream, &chunk, -1, &err) != CINFER_OK) {
                fprintf(stderr, "\ncinfer generate: %s\n", err.message);
                status = 1;
                break;
            }
            fwrite(chunk.text, 1, chunk.text_len, stdout);
            fflush(stdout);
            if (chunk.n_logprobs && logprob_list_append(&kept, chunk.logprobs, chunk.n_logprobs)) {
                fprintf(stderr, "\ncinfer generate: out of memory\n");
                status = 1;
                break;
            }
            if (chunk.finish_reason != CINFER_FINISH_NONE)
                break;
        }
        fputc('\n', stdout);
        print_logprobs(kept.items, kept.n);
        free(kept.items);
        fflush(stdout);
        cinfer_stream_close(&stream);
        if (!watch.fired)
            pthread_kill(watcher, SIGUSR1);
        pthread_join(watcher, NULL);
    }
    if (engine)
        cinfer_engine_shutdown(&engine, args.drain_timeout_ms);
    cinfer_server_args_free(&args);
    free(rest);
    return status;
}
