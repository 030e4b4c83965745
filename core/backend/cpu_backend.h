/* core/backend/cpu_backend.h — the built-in CPU compute backend. */
#ifndef CINFER_BACKEND_CPU_BACKEND_H
#define CINFER_BACKEND_CPU_BACKEND_H

#include "cinfer/backend.h"

const struct cinfer_backend_ops *cinfer_cpu_backend_ops(void);

#endif
