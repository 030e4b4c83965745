#include "engine/launcher_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* What auto has seen: the best usable launcher so far, and every answer for the error. */
struct auto_choice {
    const struct cinfer_launcher_config *config;
    char best_file[4096];
    char best_name[128];
    int best_priority;
    int found;
    char seen_names[32][128]; /* a name found again later in the search order is shadowed */
    int n_seen;
    char answers[1024];
};

static void consider(const struct cinfer_plugin_listing *e, void *ctx)
{
    struct auto_choice *c = ctx;
    if (!e->loads || !e->plugin || strcmp(e->kind, "launcher"))
        return;
    for (int i = 0; i < c->n_seen; i++)
        if (!strcmp(c->seen_names[i], e->name))
            return;
    if (c->n_seen < 32)
        snprintf(c->seen_names[c->n_seen++], sizeof c->seen_names[0], "%s", e->name);
    struct cinfer_launcher_answer a;
    if (cinfer_launcher_query(e->plugin, c->config, &a) != CINFER_OK)
        return;
    size_t used = strlen(c->answers);
    if (a.usable)
        snprintf(c->answers + used, sizeof c->answers - used, "%s%s: usable, priority %d", used ? "; " : "", e->name,
                 a.priority);
    else
        snprintf(c->answers + used, sizeof c->answers - used, "%s%s: not usable: %s", used ? "; " : "", e->name,
                 a.why);
    if (a.usable && (!c->found || a.priority > c->best_priority)) {
        c->found = 1;
        c->best_priority = a.priority;
        snprintf(c->best_file, sizeof c->best_file, "%s", e->file);
        snprintf(c->best_name, sizeof c->best_name, "%s", e->name);
    }
}

int cinfer_launcher_select(const struct cinfer_server_args *args, const struct cinfer_launcher_config *config,
                           struct cinfer_plugin **out, struct cinfer_error *err)
{
    *out = NULL;
    const char *launcher = args->launcher ? args->launcher : "auto";
    if (!strcmp(launcher, "auto")) {
        struct auto_choice *c = calloc(1, sizeof *c);
        if (!c)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory choosing a launcher");
        c->config = config;
        int rc = cinfer_plugin_list(args->plugin_path, consider, c, err);
        if (rc == CINFER_OK && !c->found)
            rc = cinfer_error_set(err, CINFER_ERR_PLUGIN,
                                  "launcher.plugin is \"auto\" but no launcher plugin is usable here (%s)",
                                  c->answers[0] ? c->answers : "no launcher plugin found on the search path");
        if (rc == CINFER_OK) {
            /* A built-in is opened by name; a file by its path, so the one queried is the one run. */
            const char *which = strcmp(c->best_file, "built-in") ? c->best_file : c->best_name;
            rc = cinfer_plugin_open(which, CINFER_PLUGIN_KIND_LAUNCHER, args->plugin_path, out, err);
        }
        free(c);
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
