/* The entry point of a worker process: `cinfer-worker scheduler tp0 --run-dir DIR ...`
 * or `cinfer-worker detokenizer --run-dir DIR`. It reads the engine's settings from
 * DIR/server_args.cfg (written by the main process), names itself for `ps`, and calls
 * the hook for its role. An embedder with its own hooks builds its own worker binary
 * around cinfer_worker_main(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/plugins.h"
#include "engine/hooks.h"
#include "engine/port_args.h"
#include "util/log.h"
#include "util/proc_title.h"

static int usage(void)
{
    fprintf(stderr, "usage: cinfer-worker scheduler tpN --run-dir DIR [--tp-rank N] [--dp-rank N] [--gpu-id N]\n"
                    "       cinfer-worker detokenizer --run-dir DIR\n"
                    "cinfer-worker is started by the engine's launcher, not by hand.\n");
    return 2;
}

int cinfer_worker_main(int argc, char **argv, const struct cinfer_engine_hooks *hooks)
{
    if (argc < 2)
        return usage();
    const char *role = argv[1];
    const char *run_dir = NULL;
    int tp_rank = 0, dp_rank = 0, gpu_id = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--run-dir") && i + 1 < argc)
            run_dir = argv[++i];
        else if (!strcmp(argv[i], "--tp-rank") && i + 1 < argc)
            tp_rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dp-rank") && i + 1 < argc)
            dp_rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gpu-id") && i + 1 < argc)
            gpu_id = atoi(argv[++i]);
        else if (!strncmp(argv[i], "tp", 2) && i == 2)
            tp_rank = atoi(argv[i] + 2);
        else
            return usage();
    }
    int is_scheduler = !strcmp(role, "scheduler");
    if ((!is_scheduler && strcmp(role, "detokenizer")) || !run_dir)
        return usage();

    struct cinfer_error err = {0};
    struct cinfer_port_args ports;
    struct cinfer_server_args args;
    char settings[512];
    snprintf(settings, sizeof settings, "%s/server_args.cfg", run_dir);
    if (cinfer_port_args_init(&ports, run_dir, &err) || cinfer_server_args_init(&args, &err) ||
        cinfer_server_args_load_file(&args, settings, &err)) {
        fprintf(stderr, "cinfer-worker %s: %s\n", role, err.message);
        return 1;
    }
    char title[64];
    if (is_scheduler)
        snprintf(title, sizeof title, "cinfer-worker scheduler tp%d", tp_rank);
    else
        snprintf(title, sizeof title, "cinfer-worker detokenizer");
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
