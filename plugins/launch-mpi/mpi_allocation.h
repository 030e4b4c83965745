/* The allocation launch-mpi runs in, when launcher.hosts is empty: Slurm's nodes
 * (SLURM_JOB_NODELIST, in Slurm's compressed form "node[01-04,07],gpu5"), or a hostfile
 * (OpenMPI's default hostfile OMPI_MCA_orte_default_hostfile, or PBS's PBS_NODEFILE:
 * one host per line, "host slots=N" allowed, # comments). The nodes, in order and each
 * once, become the engine's hosts: one replica per node (tensor parallelism inside a
 * node, where the fastest links are), the first dp_size nodes. */
#ifndef CINFER_LAUNCH_MPI_ALLOCATION_H
#define CINFER_LAUNCH_MPI_ALLOCATION_H

#include <stddef.h>

#include "cinfer/error.h"

#define MPI_ALLOCATION_MAX_NODES 65536

/* 1 when this process runs inside an allocation (Slurm, a hostfile, or an MPI job), with
 * what says so in *source ("SLURM_JOB_NODELIST", ...). */
int cinfer_mpi_in_allocation(const char **source);

/* Expands a Slurm node list into *nodes (malloc'd array of malloc'd names, *n of them,
 * each once). Errors name the part of the list that is malformed. */
int cinfer_mpi_expand_slurm_nodelist(const char *list, char ***nodes, size_t *n, struct cinfer_error *err);

/* The hosts of a hostfile's text (each once, in order). what names the file for errors. */
int cinfer_mpi_parse_hostfile(const char *text, const char *what, char ***nodes, size_t *n, struct cinfer_error *err);

/* The allocation's nodes shaped to dp_size replicas: a NULL-terminated array of the
 * first dp_size node names (malloc'd), or an error saying the allocation's size and the
 * configuration's. *hosts = NULL when there is no allocation. */
int cinfer_mpi_allocation_hosts(int dp_size, char ***hosts, struct cinfer_error *err);

void cinfer_mpi_free_names(char **names, size_t n);

#endif
