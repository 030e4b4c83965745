#ifndef CINFER_LAUNCH_MPI_MODULE_H
#define CINFER_LAUNCH_MPI_MODULE_H

#include "cinfer/launcher.h"

extern const struct cinfer_launcher_ops cinfer_launch_mpi_ops;

#endif
