/* launch-mpi: the descriptor alone (the code is in launch_mpi_module.c). */
#include "cinfer/plugin.h"
#include "launch_mpi_module.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_LAUNCHER, "launch-mpi", "1.0.0", &cinfer_launch_mpi_ops);
