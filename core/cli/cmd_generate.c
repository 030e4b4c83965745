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
    uint64_t request_id;
    int fired;
};

static void *watch_signals(void *arg)
{
    struct signal_watch *w = arg;
    int signo;
    if (sigwait(&w->set, &signo) == 0 && signo != SIGUSR1) {
        w->fired = 1;
        cinfer_engine_abort(w->engine, w->request_id);
    }
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cinfer generate [--model PATH] [--config FILE] [--max-new-tokens N] [--temperature T]\n"
            "                       [--seed S] [--top-k K] [--top-p P] [--min-p P] [--stop TEXT]...\n"
            "                       [--ignore-eos] [server flags...] PROMPT\n\n"
            "Streams a completion of PROMPT to stdout through the multi-process engine. With no\n"
            "--model it runs the embedded default model (models/default).\n\n"
            "Generation flags:\n"
            "  --max-new-tokens N   most tokens to generate (default 128)\n"
            "  --temperature T      0 is greedy (default 0)\n"
            "  --seed S             makes sampling reproducible\n"
            "  --top-k K, --top-p P, --min-p P   truncate the distribution before sampling\n"
            "  --stop TEXT          stop before TEXT appears (repeatable, up to %d)\n"
            "  --ignore-eos         keep going past the end-of-sequence token\n\n",
            CINFER_MAX_STOP_STRINGS);
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

int cinfer_cmd_generate(int argc, char **argv)
{
    static const struct cinfer_command_flag own_flags[] = {
        {"--max-new-tokens", 1}, {"--temperature", 1}, {"--seed", 1},       {"--top-k", 1}, {"--top-p", 1},
        {"--min-p", 1},          {"--stop", 1},        {"--ignore-eos", 0}, {"--help", 0},  {"-h", 0},
        {NULL, 0}};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    int n_rest = 0;
    if (!rest || cinfer_server_args_parse_command_line(&args, argc, argv, own_flags, rest, &n_rest, &err)) {
        fprintf(stderr, "cinfer generate: %s\n", rest ? err.message : "out of memory");
        free(rest);
        return 1;
    }
    struct cinfer_generate_request req = {0};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0.0f;
    int status = 0;
    for (int i = 0; i < n_rest && status == 0; i++) {
        const char *a = rest[i];
        const char *v = i + 1 < n_rest ? rest[i + 1] : NULL;
        double x;
        int takes = strcmp(a, "--ignore-eos") != 0 && a[0] == '-' && a[1] == '-';
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
    struct cinfer_stream *stream = NULL;
    if (status == 0 && cinfer_engine_stream_open(engine, &req, &stream, &err) != CINFER_OK) {
        fprintf(stderr, "cinfer generate: %s\n", err.message);
        status = 1;
    }
    if (status == 0) {
        watch.engine = engine;
        watch.request_id = cinfer_stream_request_id(stream);
        pthread_t watcher;
        pthread_create(&watcher, NULL, watch_signals, &watch);
        fputs(req.prompt, stdout);
        for (;;) {
            struct cinfer_stream_chunk chunk;
            if (cinfer_stream_next(stream, &chunk, -1, &err) != CINFER_OK) {
                fprintf(stderr, "\ncinfer generate: %s\n", err.message);
                status = 1;
                break;
            }
            fwrite(chunk.text, 1, chunk.text_len, stdout);
            fflush(stdout);
            if (chunk.finish_reason != CINFER_FINISH_NONE)
                break;
        }
        fputc('\n', stdout);
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
