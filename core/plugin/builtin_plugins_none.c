/* A build with loadable plugins has no built-in table; a CINFER_STATIC_PLUGINS build
 * gets a generated one (cmake/CinferPlugin.cmake) instead of this file's. */
#include <stddef.h>

#include "plugin/builtin_plugins.h"

#ifndef CINFER_STATIC_PLUGINS
const struct cinfer_plugin_descriptor *const *cinfer_builtin_plugin_table(void)
{
    return NULL;
}
#endif
