/* launch-mpi inside a worker: joins the MPI job, hands each rank its settings (rank 0
 * reads the group's from its standard input, group_blob.h) and the group's
 * communicator. */
#ifndef CINFER_LAUNCH_MPI_GROUP_JOIN_H
#define CINFER_LAUNCH_MPI_GROUP_JOIN_H

#include "cinfer/launcher.h"

int cinfer_mpi_group_join(int stdin_fd, struct cinfer_group_member *out, struct cinfer_error *err);

#endif
