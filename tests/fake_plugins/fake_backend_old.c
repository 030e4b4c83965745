/* A backend built against ops version 6, before query, create_on and status. */
#include <stddef.h>

#define FAKE_BACKEND_VERSION 6u
#define FAKE_BACKEND_SIZE (offsetof(struct cinfer_backend_ops, softcap) + sizeof(void (*)(void)))
#include "fake_backend_ops.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_BACKEND, "fake-backend-old", "1.0.0", &fake_backend_ops);
