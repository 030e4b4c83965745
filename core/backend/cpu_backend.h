/* core/backend/cpu_backend.h — the built-in CPU compute backend. */
#ifndef CINFER_BACKEND_CPU_BACKEND_H
#define CINFER_BACKEND_CPU_BACKEND_H

#include "cinfer/backend.h"
#include "cinfer/plugin.h"

/* Its plugin name: --device cpu, and the name `cinfer plugins` lists. */
#define CINFER_CPU_BACKEND_NAME "cpu"

const struct cinfer_plugin_descriptor *cinfer_cpu_backend_descriptor(void);
const struct cinfer_backend_ops *cinfer_cpu_backend_ops(void);

#endif
