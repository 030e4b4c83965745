/* Checks a plugin descriptor and its vtable before any plugin code is called. */
#ifndef CINFER_PLUGIN_DESCRIPTOR_CHECK_H
#define CINFER_PLUGIN_DESCRIPTOR_CHECK_H

#include <stdint.h>

#include "cinfer/error.h"
#include "cinfer/plugin.h"

/* origin names the file (or "built-in") in messages; expected_kind 0 accepts any. */
int cinfer_plugin_check_descriptor(const struct cinfer_plugin_descriptor *d, const char *origin,
                                   uint32_t expected_kind, struct cinfer_error *err);

#endif
