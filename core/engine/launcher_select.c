#include "engine/launcher_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/plugin_choice.h"

static const char *plugin_name_of(const char *launcher)
{
    if (!strcmp(launcher, "fork"))
        return "launch-fork";
    if (!strcmp(launcher, "mpi"))
        return "launch-mpi";
    if (!strcmp(launcher, "ssh"))
        return "launch-ssh";
    return launcher;
}

struct launcher_ask {
    const struct cinfer_launcher_config *config;
    struct cinfer_launcher_answer answer;
};

static int ask_launcher(const struct cinfer_plugin *plugin, void *ctx, int *usable, int *priority, const char **why)
{
    struct launcher_ask *q = ctx;
    int rc = cinfer_launcher_query(plugin, q->config, &q->answer);
    *usable = q->answer.usable, *priority = q->answer.priority, *why = q->answer.why;
    return rc;
}

int cinfer_launcher_select(const struct cinfer_server_args *args, const struct cinfer_launcher_config *config,
                           struct cinfer_plugin **out, struct cinfer_error *err)
{
    *out = NULL;
    const char *launcher = args->launcher ? args->launcher : "auto";
    if (!strcmp(launcher, "auto")) {
        struct launcher_ask q = {.config = config};
        char answers[1024];
        int rc = cinfer_plugin_choose(args->plugin_path, CINFER_PLUGIN_KIND_LAUNCHER, ask_launcher, &q, out, answers,
                                      sizeof answers, err);
        if (rc == CINFER_ERR_NOT_FOUND)
            rc = cinfer_error_set(err, CINFER_ERR_PLUGIN,
                                  "launcher.plugin is \"auto\" but no launcher plugin is usable here (%s)",
                                  answers[0] ? answers : "no launcher plugin found on the search path");
        return rc;
    }
    int rc = cinfer_plugin_open(plugin_name_of(launcher), CINFER_PLUGIN_KIND_LAUNCHER, args->plugin_path, out, err);
    if (rc) {
        cinfer_error_prefix(err, "launcher.plugin \"%s\"", launcher);
        return rc;
    }
    struct cinfer_launcher_answer a;
    rc = cinfer_launcher_query(*out, config, &a);
    if (rc == CINFER_OK && !a.usable)
        rc = cinfer_error_set(err, CINFER_ERR_PLUGIN, "launcher.plugin \"%s\" (%s) is not usable here: %s", launcher,
                              cinfer_plugin_file(*out), a.why);
    if (rc)
        cinfer_plugin_close(out);
    return rc;
}

int cinfer_launcher_start(const struct cinfer_launcher_ops *ops, const struct cinfer_launcher_config *config,
                          struct cinfer_launcher **out, struct cinfer_error *err)
{
    if (ops->version >= 2)
        return ops->init_config(config, out, err);
    struct cinfer_launcher_options v1 = {.worker_path = config->worker_path, .hosts = config->hosts};
    return ops->init(&v1, out, err);
}
