#include "backend/backend_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_backend.h"
#include "plugin/plugin_choice.h"

static const char *plugin_name_of(const char *device)
{
    if (!strcmp(device, "cuda"))
        return CINFER_CUDA_BACKEND_NAME;
    return device;
}

static int ask_backend(const struct cinfer_plugin *plugin, void *ctx, int *usable, int *priority, const char **why)
{
    struct cinfer_backend_answer *a = ctx;
    int rc = cinfer_backend_query(plugin, a);
    *usable = a->usable, *priority = a->priority, *why = a->why;
    return rc;
}

static int select_auto(const char *search_path, struct cinfer_plugin **out, struct cinfer_error *err)
{
    struct cinfer_backend_answer a;
    char answers[1024];
    int rc = cinfer_plugin_choose(search_path, CINFER_PLUGIN_KIND_BACKEND, ask_backend, &a, out, answers,
                                  sizeof answers, err);
    /* the CPU backend is built in and always usable, so this is a broken build */
    if (rc == CINFER_ERR_NOT_FOUND)
        rc = cinfer_error_set(err, CINFER_ERR_INTERNAL,
                              "engine.device (--device) is \"auto\" but no backend is usable here (%s)",
                              answers[0] ? answers : "no backend found, not even the built-in CPU one");
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
