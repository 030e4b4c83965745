/* Choosing the launcher plugin that starts an engine's workers (launcher.plugin). */
#ifndef CINFER_ENGINE_LAUNCHER_SELECT_H
#define CINFER_ENGINE_LAUNCHER_SELECT_H

#include "cinfer/config.h"
#include "cinfer/launcher.h"
#include "cinfer/plugins.h"

/* "auto" asks every launcher plugin on the search path (cinfer_launcher_query with
 * config) and opens the usable one of highest priority (the first found wins a tie);
 * "fork", "mpi" and "ssh" are short for launch-fork, launch-mpi and launch-ssh; any
 * other name or file is opened as it is. Either way the chosen launcher must say it is
 * usable here, else err carries its reason (for auto, every launcher's). */
int cinfer_launcher_select(const struct cinfer_server_args *args, const struct cinfer_launcher_config *config,
                           struct cinfer_plugin **out, struct cinfer_error *err);

/* Initialises the chosen launcher: init_config for a version-2 vtable, init with the
 * frozen version-1 options otherwise. */
int cinfer_launcher_start(const struct cinfer_launcher_ops *ops, const struct cinfer_launcher_config *config,
                          struct cinfer_launcher **out, struct cinfer_error *err);

#endif
