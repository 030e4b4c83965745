/* What mpirun says when its job ends early, read back into which rank ended it and
 * how. OpenMPI 4 prints (between lines of dashes) one of:
 *   "mpirun noticed that process rank 1 with PID 0 on node b exited on signal 9 (Killed)."
 *   "... The first process to do so was:\n\n  Process name: [[25470,1],2]\n  Exit code:    3"
 *   "mpirun has exited due to process rank 0 with PID 0 on\nnode b exiting improperly."
 * The text is the tail of mpirun's standard error, worker lines mixed in. */
#ifndef CINFER_LAUNCH_MPI_JOB_OUTPUT_H
#define CINFER_LAUNCH_MPI_JOB_OUTPUT_H

#include <stddef.h>

struct mpi_job_end {
    int known;       /* 1 when the text names the rank that ended the job */
    int rank;        /* its rank in the job */
    int signaled;    /* 1: killed by signal `code`; 0: exited with status `code` */
    int code;
    int improper;    /* exited without finalizing (status 0 or not) */
    char node[64];   /* where it ran, when said; "" otherwise */
};

/* Scans text (NUL-terminated) for the first of the messages above. */
void cinfer_mpi_job_output_scan(const char *text, struct mpi_job_end *out);

#endif
