/* A backend that says version 8 but whose vtable is cut short before upload. */
#include <stddef.h>

#define FAKE_BACKEND_VERSION 8u
#define FAKE_BACKEND_SIZE offsetof(struct cinfer_backend_ops, upload)
#include "fake_backend_ops.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_BACKEND, "fake-backend-short", "1.0.0", &fake_backend_ops);
