/* The channel endpoints of one engine, all inside its private run folder; the
 * per-replica and per-rank ones are spelled out by cinfer_port_args_* (cinfer/engine.h). */
#ifndef CINFER_ENGINE_PORT_ARGS_H
#define CINFER_ENGINE_PORT_ARGS_H

#include <stddef.h>

#include "cinfer/engine.h"

/* Fills ports for run_dir; CINFER_ERR_RANGE when the folder's path is too long for a
 * unix socket address. */
int cinfer_port_args_init(struct cinfer_port_args *ports, const char *run_dir, struct cinfer_error *err);

#endif
