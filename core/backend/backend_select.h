/* Choosing the compute backend a scheduler process runs on (engine.device, --device). */
#ifndef CINFER_BACKEND_BACKEND_SELECT_H
#define CINFER_BACKEND_BACKEND_SELECT_H

#include "cinfer/backend.h"
#include "cinfer/plugins.h"

/* The plugin name --device cuda stands for. */
#define CINFER_CUDA_BACKEND_NAME "backend-cuda"

/* device: "cpu" (the built-in backend), "cuda" (short for the backend-cuda plugin),
 * "auto" (every backend plugin on the search path is asked, and the usable one of
 * highest priority opened: a usable GPU backend, else the CPU), or any other backend
 * plugin by name or path. The chosen backend must say it is usable here, else err
 * names it and carries its reason (CINFER_ERR_UNSUPPORTED; CINFER_ERR_NOT_FOUND when no
 * such plugin exists). search_path: launcher.plugin_path; may be NULL. */
int cinfer_backend_select(const char *device, const char *search_path, struct cinfer_plugin **out,
                          struct cinfer_error *err);

#endif
