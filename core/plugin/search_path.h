/* Where plugins are looked for: the configured path, $CINFER_PLUGIN_PATH, then the
 * install folder beside libcinfer. */
#ifndef CINFER_PLUGIN_SEARCH_PATH_H
#define CINFER_PLUGIN_SEARCH_PATH_H

#include <stddef.h>

#define CINFER_PLUGIN_MAX_DIRS 32

struct cinfer_plugin_dirs {
    char *dirs[CINFER_PLUGIN_MAX_DIRS];
    size_t count;
};

/* Fills dirs in search order, without duplicates; returns CINFER_OK or CINFER_ERR_NOMEM. */
int cinfer_plugin_dirs_collect(const char *configured, struct cinfer_plugin_dirs *dirs);
void cinfer_plugin_dirs_free(struct cinfer_plugin_dirs *dirs);
/* "a, b, c" for messages; writes into buf. */
const char *cinfer_plugin_dirs_describe(const struct cinfer_plugin_dirs *dirs, char *buf, size_t buf_bytes);

#endif
