/* The group's settings as launch-mpi hands them to rank 0 of an mpirun job on its
 * standard input (mpirun forwards standard input to rank 0 only), for rank 0 to pass
 * each other rank its own:
 *
 *   u32 magic "CGRP" | u32 version (1) | u32 n_ranks | n_ranks x (u32 bytes | bytes)
 *
 * all little-endian; rank r's bytes are its settings exactly as the engine wrote them
 * on its lifeline (the u32 length, then the WORKER_SETTINGS frame). */
#ifndef CINFER_LAUNCH_MPI_GROUP_BLOB_H
#define CINFER_LAUNCH_MPI_GROUP_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

#define GROUP_BLOB_MAGIC 0x50524743u /* "CGRP" */
#define GROUP_BLOB_VERSION 1u
#define GROUP_BLOB_HEAD_BYTES 12
#define GROUP_BLOB_MAX_RANKS 4096
#define GROUP_BLOB_MAX_RANK_BYTES ((size_t)16 << 20)

/* One blob of the n parts (parts[i] of sizes[i] bytes) into a malloc'd *out. */
int cinfer_mpi_group_blob_encode(const void *const *parts, const size_t *sizes, int n, void **out, size_t *out_len,
                                 struct cinfer_error *err);

/* The head of a blob: how many ranks it is for (checks magic, version, the count's
 * range). */
int cinfer_mpi_group_blob_head(const void *head, size_t len, uint32_t *n_ranks, struct cinfer_error *err);

/* Checks a whole blob (head included) against n_ranks and points parts[i]/sizes[i]
 * into it (n_ranks entries each). Every refusal says what was wrong and where. */
int cinfer_mpi_group_blob_parse(const void *blob, size_t len, uint32_t n_ranks, const uint8_t **parts,
                                size_t *sizes, struct cinfer_error *err);

#endif
