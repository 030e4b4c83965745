/* backend-cuda: tensor parallelism's all-reduce on NCCL. Rank 0 makes the NCCL id and
 * it travels over the group's own communicator (its broadcast, host memory); each rank
 * then joins with ncclCommInitRank on its device. Built without NCCL, a group of more
 * than one rank is refused. */
#include <stdio.h>

#include "cuda_backend.h"

#ifdef CINFER_CUDA_NCCL
/* nccl.h declares a few functions as f() */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

static int nccl_failed(struct cuda_backend *be, ncclResult_t rc, const char *call, struct cinfer_error *err)
{
    return cinfer_error_set(err, CINFER_ERR_INTERNAL, "cuda device %d: %s failed: %s (%s)", be->device, call,
                            ncclGetErrorString(rc), ncclGetLastError(be->nccl));
}

int cuda_nccl_init(struct cuda_backend *be, struct cinfer_comm *comm, struct cinfer_error *err)
{
    if (!comm || comm->size <= 1)
        return 0;
    ncclUniqueId id;
    if (comm->rank == 0) {
        ncclResult_t rc = ncclGetUniqueId(&id);
        if (rc != ncclSuccess)
            return nccl_failed(be, rc, "ncclGetUniqueId", err);
    }
    int rc = comm->ops->broadcast(comm->state, &id, sizeof id, 0, err);
    if (rc < 0)
        return cinfer_error_prefix(err, "cuda device %d: sending the NCCL id over the %s communicator", be->device,
                                   comm->ops->name);
    ncclComm_t nccl = NULL;
    ncclResult_t nrc = ncclCommInitRank(&nccl, comm->size, id, comm->rank);
    if (nrc != ncclSuccess)
        return nccl_failed(be, nrc, "ncclCommInitRank", err);
    be->nccl = nccl;
    be->tp_size = comm->size;
    return 0;
}

void cuda_nccl_free(struct cuda_backend *be)
{
    if (be->nccl)
        ncclCommDestroy(be->nccl);
    be->nccl = NULL;
}

int cuda_all_reduce_sum(void *state, float *x, size_t n, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    if (!be->nccl || n == 0)
        return 0; /* one rank: the sum is x */
    if (cuda_enter(be))
        return cuda_status(be, err);
    ncclResult_t rc = ncclAllReduce(x, x, n, ncclFloat, ncclSum, be->nccl, be->stream);
    if (rc != ncclSuccess)
        return nccl_failed(be, rc, "ncclAllReduce", err);
    return 0;
}

#else

int cuda_nccl_init(struct cuda_backend *be, struct cinfer_comm *comm, struct cinfer_error *err)
{
    if (!comm || comm->size <= 1)
        return 0;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                            "cuda device %d: tensor parallelism over %d ranks needs NCCL, and this backend-cuda "
                            "plugin was built without it (nccl.h / libnccl not found at configure time)",
                            be->device, comm->size);
}

void cuda_nccl_free(struct cuda_backend *be)
{
    (void)be;
}

int cuda_all_reduce_sum(void *state, float *x, size_t n, struct cinfer_error *err)
{
    (void)state, (void)x, (void)n;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "cuda backend: built without NCCL");
}

#endif
