#include "backend/backend_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_backend.h"

static const char *plugin_name_of(const char *device)
{
    if (!strcmp(device, "cuda"))
        return CINFER_CUDA_BACKEND_NAME;
    return device;
}

/* What auto has seen: the best usable backend so far, and every answer for the log. */
struct auto_choice {
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
    if (!e->loads || !e->plugin || strcmp(e->kind, "backend"))
        return;
    for (int i = 0; i < c->n_seen; i++)
        if (!strcmp(c->seen_names[i], e->name))
            return;
    if (c->n_seen < 32)
        snprintf(c->seen_names[c->n_seen++], sizeof c->seen_names[0], "%s", e->name);
    struct cinfer_backend_answer a;
    if (cinfer_backend_query(e->plugin, &a) != CINFER_OK)
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

static int select_auto(const char *search_path, struct cinfer_plugin **out, struct cinfer_error *err)
{
    struct auto_choice *c = calloc(1, sizeof *c);
    if (!c)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory choosing a compute backend");
    int rc = cinfer_plugin_list(search_path, consider, c, err);
    /* the CPU backend is built in and always usable, so this is a broken build */
    if (rc == CINFER_OK && !c->found)
        rc = cinfer_error_set(err, CINFER_ERR_INTERNAL,
                              "engine.device (--device) is \"auto\" but no backend is usable here (%s)",
                              c->answers[0] ? c->answers : "no backend found, not even the built-in CPU one");
    if (rc == CINFER_OK) {
        /* a built-in is opened by name, a file by its path: the one queried is the one run */
        const char *which = strcmp(c->best_file, "built-in") ? c->best_file : c->best_name;
        rc = cinfer_plugin_open(which, CINFER_PLUGIN_KIND_BACKEND, search_path, out, err);
    }
    free(c);
    return rc;
}

int cinfer_backend_select(const char *device, const char *search_path, struct cinfer_plugin **out,
                          struct cinfer_error *err)
{
    *out = NULL;
    if (!device || !device[0])
        device = CINFER_CPU_BACKEND_NAME;
    if (!strcmp(device, "auto"))
        return select_auto(search_path, out, err);
    int rc = cinfer_plugin_open(plugin_name_of(device), CINFER_PLUGIN_KIND_BACKEND, search_path, out, err);
    if (rc) {
        if (rc == CINFER_ERR_NOT_FOUND && !strcmp(device, "cuda"))
            cinfer_error_prefix(err, "engine.device (--device) \"cuda\": no CUDA backend plugin is installed");
        else
            cinfer_error_prefix(err, "engine.device (--device) \"%s\"", device);
        return rc;
    }
    struct cinfer_backend_answer a;
    rc = cinfer_backend_query(*out, &a);
    if (rc < 0)
        cinfer_error_set(err, rc, "engine.device (--device) \"%s\": backend %s (%s) could not be asked: %s", device,
                         cinfer_plugin_descriptor_of(*out)->name, cinfer_plugin_file(*out), cinfer_strerror(rc));
    else if (!a.usable)
        rc = cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                              "engine.device (--device) \"%s\": backend %s (%s) is not usable here: %s", device,
                              cinfer_plugin_descriptor_of(*out)->name, cinfer_plugin_file(*out), a.why);
    if (rc)
        cinfer_plugin_close(out);
    return rc;
}
