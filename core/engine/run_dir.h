/* The engine's private run folder: created mode 0700 under $TMPDIR (or /tmp), holding
 * the unix sockets of its channels; removed with everything in it. */
#ifndef CINFER_ENGINE_RUN_DIR_H
#define CINFER_ENGINE_RUN_DIR_H

#include <stddef.h>

#include "cinfer/error.h"

int cinfer_run_dir_create(char *path, size_t path_bytes, struct cinfer_error *err);
/* Removes every file in dir, then dir itself. Quiet when it is already gone. */
void cinfer_run_dir_remove(const char *path);

#endif
