/* A backend plugin whose device is missing here, as a GPU backend's is on a machine
 * without a GPU. */
#include "fake_backend_ops.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_BACKEND, "fake-backend-nodevice", "1.0.0", &fake_backend_ops);
