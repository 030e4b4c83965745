/* The entry point of a worker process: `cinfer-worker scheduler --dp-rank R --tp-rank N`
 * or `cinfer-worker detokenizer`. Its identity comes from its launch (argv, or the rank
 * an MPI launcher's environment gives); its settings and the engine's endpoints come
 * on standard input, which then stays open as its lifeline. It names itself for `ps`
 * and calls the hook for its role. An embedder with its own hooks builds its own worker
 * binary around cinfer_worker_main(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/plugins.h"
#include "ipc/worker_settings.h"
#include "util/log.h"
#include "util/proc_title.h"
#include "worker/hooks.h"
#include "worker/worker_link.h"

/* How long the settings may take to arrive: the engine writes them right after the
 * start, so this only bounds a worker started by hand or behind a stalled launcher. */
#define SETTINGS_TIMEOUT_MS 60000
/* After the lifeline closes, the worker's loop has this long to exit by itself. */
#define LIFELINE_GRACE_MS 3000

static int usage(void)
{
    fprintf(stderr, "usage: cinfer-worker scheduler [--dp-rank R] [--tp-rank N] [--gpu-id G]\n"
                    "       cinfer-worker detokenizer\n"
                    "cinfer-worker is started by the engine's launcher, which writes its settings on its\n"
                    "standard input; it is not run by hand.\n");
    return 2;
}

/* A rank: a non-negative decimal number. */
static int parse_rank(const char *text, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!text[0] || *end || v < -1 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

int cinfer_worker_main(int argc, char **argv, const struct cinfer_engine_hooks *hooks)
{
    if (argc < 2)
        return usage();
    const char *role = argv[1];
    int tp_rank = 0, dp_rank = 0, gpu_id = -1;
    for (int i = 2; i < argc; i++) {
        int *target = !strcmp(argv[i], "--tp-rank") ? &tp_rank
                      : !strcmp(argv[i], "--dp-rank") ? &dp_rank
                      : !strcmp(argv[i], "--gpu-id")  ? &gpu_id
                                                      : NULL;
        if (!target || i + 1 >= argc || parse_rank(argv[i + 1], target))
            return usage();
        i++;
    }
    int is_scheduler = !strcmp(role, "scheduler");
    if (!is_scheduler && strcmp(role, "detokenizer"))
        return usage();
    char title[64];
    if (is_scheduler)
        snprintf(title, sizeof title, "cinfer-worker scheduler dp%d tp%d", dp_rank, tp_rank);
    else
        snprintf(title, sizeof title, "cinfer-worker detokenizer");

    struct cinfer_error err = {0};
    struct cinfer_port_args ports;
    struct cinfer_server_args args;
    if (cinfer_hooks_check(hooks, &err) ||
        cinfer_worker_settings_receive(0, SETTINGS_TIMEOUT_MS, &args, &ports, &err)) {
        fprintf(stderr, "%s: %s\n", title, err.message);
        return 1;
    }
    cinfer_lifeline_watch(LIFELINE_GRACE_MS);
    cinfer_plugin_install_dir(); /* found (and kept) before the title rewrites argv[0] */
    cinfer_set_process_title(argc, argv, title);
    cinfer_log_set_level((int)args.log_level);

    cinfer_worker_set_hooks(hooks);
    const struct cinfer_engine_hooks *h = cinfer_worker_hooks();
    int status = is_scheduler ? h->run_scheduler_process(&args, &ports, gpu_id, tp_rank, dp_rank)
                              : h->run_detokenizer_process(&args, &ports);
    cinfer_server_args_free(&args);
    return status;
}
