/* A communicator over MPI for the ranks of one launch-mpi group (the whole job:
 * MPI_COMM_WORLD, duplicated). Collectives keep cinfer's contract (cinfer/communicator.h):
 *  - all_reduce_sum_f32 is reduce-scatter, then all-gather: each rank owns a slice,
 *    receives every rank's values of it (MPI_Alltoallv), adds them in rank order, and
 *    MPI_Allgatherv hands the sums out; so every rank gets the same bits, computed in
 *    rank order, whatever MPI's own reduction algorithms would do;
 *  - all_gather, broadcast and barrier are MPI's own;
 *  - errors come back (MPI_ERRORS_RETURN) with MPI's words for them;
 *  - abort is not offered: a rank that fails exits, and mpirun ends the job. */
#ifndef CINFER_LAUNCH_MPI_MPI_COMM_H
#define CINFER_LAUNCH_MPI_MPI_COMM_H

#include "cinfer/communicator.h"

/* MPI must be initialised. */
int cinfer_mpi_comm_create(struct cinfer_comm **out, struct cinfer_error *err);

#endif
