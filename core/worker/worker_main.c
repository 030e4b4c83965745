/* The entry point of a worker process: `cinfer-worker scheduler --dp-rank R --tp-rank N`
 * or `cinfer-worker detokenizer`. Its identity comes from its launch: argv, or, with
 * `--group PLUGIN` (a launcher that starts a replica's ranks as one job, launch-mpi),
 * the rank that launcher's group_join gives. Its settings and the engine's endpoints
 * come on standard input, which then stays open as its lifeline (or through the group,
 * whose launcher then makes the starting process the lifeline). It names itself for `ps`
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
#include "cinfer/launcher.h"
#include "worker/hooks.h"
#include "worker/worker_comm.h"
#include "worker/worker_link.h"

/* How long the settings may take to arrive: the engine writes them right after the
 * start, so this only bounds a worker started by hand or behind a stalled launcher. */
#define SETTINGS_TIMEOUT_MS 60000
/* After the lifeline closes, the worker's loop has this long to exit by itself. */
#define LIFELINE_GRACE_MS 3000

static int usage(void)
{
    fprintf(stderr, "usage: cinfer-worker scheduler [--dp-rank R] [--tp-rank N | --group PLUGIN] [--gpu-id G]\n"
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

/* Joins the group of the launcher plugin at path: this rank's number, its settings
 * frame and the group's communicator. */
static int join_group(const char *path, int *tp_rank, struct cinfer_server_args *args, struct cinfer_port_args *ports,
                      struct cinfer_error *err)
{
    struct cinfer_plugin *plugin = NULL;
    int rc = cinfer_plugin_open(path, CINFER_PLUGIN_KIND_LAUNCHER, NULL, &plugin, err);
    if (rc)
        return rc;
    const struct cinfer_launcher_ops *ops = cinfer_plugin_vtable(plugin);
    if (ops->version < 3 || !ops->group_join)
        return cinfer_error_set(err, CINFER_ERR_PLUGIN,
                                "%s: launcher plugin '%s' has no group_join (vtable version %u)",
                                path, cinfer_plugin_descriptor_of(plugin)->name, ops->version);
    struct cinfer_group_member member = {.struct_size = sizeof member};
    if ((rc = ops->group_join(0, &member, err)))
        return rc;
    *tp_rank = member.rank;
    /* The frame as the engine wrote it: its length (u32), then the frame. */
    rc = member.settings_bytes >= 4 ? cinfer_worker_settings_parse((const char *)member.settings + 4,
                                                                    member.settings_bytes - 4, args, ports, err)
                                    : cinfer_error_set(err, CINFER_ERR_PARSE,
                                                       "the group's settings for rank %d hold %zu bytes, fewer than "
                                                       "their length word", member.rank, member.settings_bytes);
    free(member.settings);
    if (rc == CINFER_OK && member.size != (args->tp_size > 0 ? args->tp_size : 1))
        rc = cinfer_error_set(err, CINFER_ERR_STATE, "the launcher's group has %d ranks but launcher.tp_size is %d",
                              member.size, args->tp_size);
    if (rc == CINFER_OK && !member.stdin_is_lifeline)
        rc = cinfer_lifeline_use_parent(err);
    if (rc) {
        cinfer_comm_destroy(&member.comm);
        return rc;
    }
    cinfer_worker_set_group_comm(member.comm);
    return CINFER_OK; /* the plugin stays loaded: its communicator's code lives there */
}

int cinfer_worker_main(int argc, char **argv, const struct cinfer_engine_hooks *hooks)
{
    if (argc < 2)
        return usage();
    const char *role = argv[1];
    const char *group = NULL;
    int tp_rank = 0, dp_rank = 0, gpu_id = -1;
    /* Every flag takes one value: flags sit at argv[i], values at argv[i + 1]. */
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], CINFER_WORKER_GROUP_FLAG)) {
            group = argv[i + 1];
            continue;
        }
        int *target = !strcmp(argv[i], "--tp-rank") ? &tp_rank
                      : !strcmp(argv[i], "--dp-rank") ? &dp_rank
                      : !strcmp(argv[i], "--gpu-id")  ? &gpu_id
                                                      : NULL;
        if (!target || parse_rank(argv[i + 1], target))
            return usage();
    }
    int is_scheduler = !strcmp(role, "scheduler");
    if (!is_scheduler && strcmp(role, "detokenizer"))
        return usage();
    struct cinfer_error err = {0};
    struct cinfer_port_args ports;
    struct cinfer_server_args args;
    if (cinfer_hooks_check(hooks, &err) ||
        (group ? join_group(group, &tp_rank, &args, &ports, &err)
               : cinfer_worker_settings_receive(0, SETTINGS_TIMEOUT_MS, &args, &ports, &err))) {
        fprintf(stderr, "cinfer-worker %s dp%d: %s\n", role, dp_rank, err.message);
        return 1;
    }
    char title[64];
    if (is_scheduler)
        snprintf(title, sizeof title, "cinfer-worker scheduler dp%d tp%d", dp_rank, tp_rank);
    else
        snprintf(title, sizeof title, "cinfer-worker detokenizer");
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
