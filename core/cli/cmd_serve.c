/* cinfer serve: the engine behind the HTTP server (OpenAI API and SGLang's native API)
 * until SIGINT or SIGTERM; then the server stops (aborting what still streams), the
 * engine drains and shuts down, and the exit status is 0. Start-up failures print
 * the reason and exit 1 with nothing left running. */
#include <stdio.h>

#include "cli/commands.h"

#ifdef CINFER_HTTP

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/http.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cinfer serve [--model PATH] [--host H] [--port P] [--config FILE] [server flags...]\n\n"
            "Runs the engine behind an HTTP server: the OpenAI API (/v1/completions,\n"
            "/v1/chat/completions, /v1/models) and SGLang's native API (/generate, /health,\n"
            "/metrics, ...). Listens on 127.0.0.1:30000 unless told otherwise; --port 0 picks a\n"
            "free port. Prints \"cinfer serve: listening on http://HOST:PORT (model NAME)\" to\n"
            "stderr once it serves, and stops cleanly on SIGINT or SIGTERM.\n\n");
    cinfer_server_args_print_help(out);
}

int cinfer_cmd_serve(int argc, char **argv)
{
    static const struct cinfer_command_flag own_flags[] = {{"--help", 0}, {"-h", 0}, {NULL, 0}};
    if (cinfer_cli_asks_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    char **rest;
    int n_rest;
    struct cinfer_server_args args;
    if (cinfer_cli_parse_server_args("serve", argc, argv, own_flags, &args, &rest, &n_rest))
        return 1;
    struct cinfer_error err = {0};
    if (n_rest > 0) {
        fprintf(stderr, "cinfer serve: unexpected argument '%s' (cinfer serve takes flags only; see --help)\n",
                rest[0]);
        cinfer_server_args_free(&args);
        free(rest);
        return 2;
    }
    free(rest);

    /* The stop signals are blocked before any thread exists, so every thread inherits
     * the mask and this thread alone takes them with sigwait. A client that goes away
     * mid-write must not kill the server. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Each connection holds a descriptor: lift the soft limit toward what
     * server.max_connections needs (the hard limit is the operator's to set). */
    struct rlimit files;
    rlim_t wanted = (rlim_t)args.max_connections + 256;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < wanted) {
        files.rlim_cur = files.rlim_max < wanted ? files.rlim_max : wanted;
        setrlimit(RLIMIT_NOFILE, &files);
    }

    struct cinfer_engine *engine = NULL;
    if (cinfer_engine_create(&args, NULL, &engine, &err) != CINFER_OK) {
        fprintf(stderr, "cinfer serve: %s\n", err.message);
        cinfer_server_args_free(&args);
        return 1;
    }
    struct cinfer_http_server *server = NULL;
    if (cinfer_http_server_start(engine, &args, &server, &err) != CINFER_OK) {
        fprintf(stderr, "cinfer serve: %s\n", err.message);
        cinfer_engine_shutdown(&engine, 0);
        cinfer_server_args_free(&args);
        return 1;
    }
    int bracket = strchr(args.host, ':') != NULL; /* an IPv6 address */
    fprintf(stderr, "cinfer serve: listening on http%s://%s%s%s:%d (model %s)\n", args.ssl_certfile ? "s" : "",
            bracket ? "[" : "", args.host, bracket ? "]" : "", cinfer_http_server_port(server),
            cinfer_http_server_model_name(server));
    fflush(stderr);

    int signo = 0;
    while (sigwait(&stop, &signo) != 0) {
    }
    fprintf(stderr, "cinfer serve: %s received, stopping\n", signo == SIGINT ? "SIGINT" : "SIGTERM");
    cinfer_http_server_stop(&server);
    cinfer_engine_shutdown(&engine, args.drain_timeout_ms);
    cinfer_server_args_free(&args);
    return 0;
}

#else

/* The appliance build (CINFER_MINIMAL) has no HTTP server: say so plainly. */
int cinfer_cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer serve: this cinfer was built without the HTTP server (CINFER_MINIMAL)\n");
    return 2;
}

#endif
