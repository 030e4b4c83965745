#include "mpi_comm.h"

#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mpi_comm {
    struct cinfer_comm comm;
    MPI_Comm world;
    int rank, size;
    int *counts, *displs;   /* (size) floats per slice, where each starts: for all_reduce */
    int *recv_counts, *recv_displs;
    float *scratch;         /* (size * slice) every rank's values of this rank's slice */
    size_t scratch_floats;
};

static int mpi_failed(int code, const char *what, struct cinfer_error *err)
{
    char words[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, words, &len) != MPI_SUCCESS)
        snprintf(words, sizeof words, "MPI error %d", code);
    return cinfer_error_set(err, CINFER_ERR_IO, "mpi communicator: %s failed: %s", what, words);
}

static int too_large(size_t n, const char *what, struct cinfer_error *err)
{
    return cinfer_error_set(err, CINFER_ERR_RANGE, "mpi communicator: %s of %zu elements, more than MPI's int counts",
                            what, n);
}

static int mpi_all_reduce_sum_f32(void *state, float *data, size_t n, struct cinfer_error *err)
{
    struct mpi_comm *c = state;
    if (c->size == 1 || n == 0)
        return CINFER_OK;
    if (n > (size_t)INT_MAX)
        return too_large(n, "all_reduce_sum_f32", err);
    /* rank r owns floats [displs[r], displs[r] + counts[r]) */
    size_t base = n / (size_t)c->size, extra = n % (size_t)c->size;
    size_t at = 0;
    for (int r = 0; r < c->size; r++) {
        c->counts[r] = (int)(base + ((size_t)r < extra));
        c->displs[r] = (int)at;
        at += (size_t)c->counts[r];
    }
    size_t mine = (size_t)c->counts[c->rank];
    if (mine * (size_t)c->size > c->scratch_floats) {
        float *grown = realloc(c->scratch, mine * (size_t)c->size * sizeof *grown);
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "mpi communicator: out of memory for %zu floats",
                                    mine * (size_t)c->size);
        c->scratch = grown;
        c->scratch_floats = mine * (size_t)c->size;
    }
    for (int r = 0; r < c->size; r++) {
        c->recv_counts[r] = (int)mine;
        c->recv_displs[r] = (int)(mine * (size_t)r);
    }
    int code = MPI_Alltoallv(data, c->counts, c->displs, MPI_FLOAT, c->scratch, c->recv_counts, c->recv_displs,
                             MPI_FLOAT, c->world);
    if (code != MPI_SUCCESS)
        return mpi_failed(code, "all_reduce_sum_f32 (MPI_Alltoallv)", err);
    float *slice = data + c->displs[c->rank];
    for (size_t i = 0; i < mine; i++) {
        float acc = c->scratch[i];
        for (int r = 1; r < c->size; r++)
            acc += c->scratch[(size_t)r * mine + i];
        slice[i] = acc;
    }
    code = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, c->counts, c->displs, MPI_FLOAT, c->world);
    return code == MPI_SUCCESS ? CINFER_OK : mpi_failed(code, "all_reduce_sum_f32 (MPI_Allgatherv)", err);
}

static int mpi_all_gather(void *state, const void *send, size_t bytes_per_rank, void *recv, struct cinfer_error *err)
{
    struct mpi_comm *c = state;
    if (bytes_per_rank > (size_t)INT_MAX)
        return too_large(bytes_per_rank, "all_gather", err);
    int code = MPI_Allgather(send, (int)bytes_per_rank, MPI_BYTE, recv, (int)bytes_per_rank, MPI_BYTE, c->world);
    return code == MPI_SUCCESS ? CINFER_OK : mpi_failed(code, "all_gather (MPI_Allgather)", err);
}

static int mpi_broadcast(void *state, void *data, size_t bytes, int root, struct cinfer_error *err)
{
    struct mpi_comm *c = state;
    if (root < 0 || root >= c->size)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "mpi communicator: broadcast from rank %d of %d",
                                root, c->size);
    if (bytes > (size_t)INT_MAX)
        return too_large(bytes, "broadcast", err);
    int code = MPI_Bcast(data, (int)bytes, MPI_BYTE, root, c->world);
    return code == MPI_SUCCESS ? CINFER_OK : mpi_failed(code, "broadcast (MPI_Bcast)", err);
}

static int mpi_barrier(void *state, struct cinfer_error *err)
{
    struct mpi_comm *c = state;
    int code = MPI_Barrier(c->world);
    return code == MPI_SUCCESS ? CINFER_OK : mpi_failed(code, "barrier (MPI_Barrier)", err);
}

/* MPI_Finalize waits for every rank, which after a failure may never come (a peer
 * stuck in a collective, or dead). So the ranks first meet at a non-blocking barrier:
 * when all arrive within FINALIZE_WAIT_MS (a clean stop: tp0 stops its followers), MPI
 * is finalized and the job ends cleanly; otherwise this rank just leaves, and mpirun
 * ends the job. */
#define FINALIZE_WAIT_MS 1000

static void mpi_destroy(void *state)
{
    struct mpi_comm *c = state;
    MPI_Request request;
    int all_here = 0;
    if (MPI_Ibarrier(c->world, &request) == MPI_SUCCESS) {
        for (int waited = 0; !all_here && waited < FINALIZE_WAIT_MS; waited++) {
            if (MPI_Test(&request, &all_here, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                break;
            if (!all_here)
                usleep(1000);
        }
    }
    if (all_here) {
        MPI_Comm_free(&c->world);
        MPI_Finalize();
    }
    free(c->counts);
    free(c->scratch);
    free(c);
}

static const struct cinfer_comm_ops mpi_ops = {
    .version = CINFER_COMM_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_comm_ops),
    .name = "mpi",
    .all_reduce_sum_f32 = mpi_all_reduce_sum_f32,
    .all_gather = mpi_all_gather,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .abort = NULL,
    .destroy = mpi_destroy,
};

int cinfer_mpi_comm_create(struct cinfer_comm **out, struct cinfer_error *err)
{
    *out = NULL;
    struct mpi_comm *c = calloc(1, sizeof *c);
    if (!c)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "mpi communicator: out of memory");
    int code = MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
    if (code != MPI_SUCCESS) {
        free(c);
        return mpi_failed(code, "MPI_Comm_dup", err);
    }
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    c->counts = calloc(4 * (size_t)c->size, sizeof *c->counts);
    if (!c->counts) {
        free(c);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "mpi communicator: out of memory");
    }
    c->displs = c->counts + c->size;
    c->recv_counts = c->displs + c->size;
    c->recv_displs = c->recv_counts + c->size;
    c->comm = (struct cinfer_comm){&mpi_ops, c, c->rank, c->size};
    *out = &c->comm;
    return CINFER_OK;
}
