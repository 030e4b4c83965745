/* cinfer/communicator.h — the collectives tensor parallelism needs (all-reduce,
 * all-gather, broadcast, barrier) behind one vtable, so the model code never names a
 * transport.
 *
 * Implementations: shared memory for ranks on one machine (core/comm/comm_shm.c,
 * built in); MPI (a plugin) and NCCL (the CUDA backend) to come. A communicator is an
 * {ops, state} pair plus the caller's rank and the group's size, made by the
 * implementation's own attach function and ended with cinfer_comm_destroy.
 *
 * Contract of every collective:
 *  - every rank of the group makes the same sequence of calls with the same sizes
 *    (root and bytes alike); a rank that skips or reorders one makes the group wait
 *    forever: collectives carry no timeout (a dead peer is the engine's to notice, and
 *    it then kills the whole group);
 *  - a call returns 0 when its result is in place on this rank, or a negative
 *    enum cinfer_status with err filled; after a failure the group is not usable and
 *    should be torn down;
 *  - results are deterministic: all_reduce_sum_f32 adds the ranks' values in rank
 *    order, (((r0 + r1) + r2) + ...), element by element, so every rank gets the same
 *    bits and a run repeats bit for bit;
 *  - data pointers are memory the implementation's ranks compute on: host memory for
 *    shared memory and MPI, device memory for NCCL (the compute backend's buffers).
 *  - abort (optional: may be NULL) marks the group broken from any rank: collectives
 *    waiting on any rank, and every later one, fail with CINFER_ERR_STATE and say
 *    which rank aborted and why. A rank that fails between collectives of a forward
 *    pass calls it so its peers return an error instead of waiting for it.
 *
 * Versioning: CINFER_COMM_OPS_VERSION is bumped on any change; slots are only appended
 * and a caller checks struct_size before using a slot added later. */
#ifndef CINFER_COMMUNICATOR_H
#define CINFER_COMMUNICATOR_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1: all_reduce_sum_f32, all_gather, broadcast, barrier, abort, destroy. */
#define CINFER_COMM_OPS_VERSION 1u

struct cinfer_comm_ops {
    uint32_t version;     /* CINFER_COMM_OPS_VERSION built with */
    uint32_t struct_size; /* sizeof(struct cinfer_comm_ops) built with */
    const char *name;     /* "shm", "mpi", "nccl" */

    /* data (n) = the sum over ranks of every rank's data (n), in rank order. */
    int (*all_reduce_sum_f32)(void *state, float *data, size_t n, struct cinfer_error *err);
    /* recv (size * bytes_per_rank) = every rank's send (bytes_per_rank), rank r's at
     * recv + r * bytes_per_rank. send and recv must not overlap. */
    int (*all_gather)(void *state, const void *send, size_t bytes_per_rank, void *recv, struct cinfer_error *err);
    /* data (bytes) on every rank = data on rank root. */
    int (*broadcast)(void *state, void *data, size_t bytes, int root, struct cinfer_error *err);
    /* Returns once every rank has called it. */
    int (*barrier)(void *state, struct cinfer_error *err);
    /* Marks the group broken (see above); why is a short reason for the other ranks'
     * messages. Returns without waiting for them. NULL when the implementation cannot. */
    int (*abort)(void *state, const char *why, struct cinfer_error *err);
    /* Leaves the group and frees state and the struct cinfer_comm its maker returned
     * with it; does not wait for the other ranks. */
    void (*destroy)(void *state);
};

struct cinfer_comm {
    const struct cinfer_comm_ops *ops;
    void *state;
    int rank; /* this caller's rank, in [0, size) */
    int size; /* ranks in the group */
};

/* Checks what a communicator's maker filled in before the core calls it: ops with a
 * version and struct_size this build knows, every required slot set, 0 <= rank < size.
 * Errors name the communicator and what was found. */
CINFER_API int cinfer_comm_check(const struct cinfer_comm *comm, struct cinfer_error *err);

/* (*comm)->ops->destroy((*comm)->state), which frees both, then *comm = NULL; a NULL
 * *comm is harmless. */
CINFER_API void cinfer_comm_destroy(struct cinfer_comm **comm);

#ifdef __cplusplus
}
#endif
#endif
