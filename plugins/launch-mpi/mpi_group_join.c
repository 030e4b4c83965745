#include "mpi_group_join.h"

#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group_blob.h"
#include "mpi_comm.h"

#define SETTINGS_TIMEOUT_MS 60000

/* This plugin was loaded without RTLD_GLOBAL; some MPI builds load their own
 * components, which need libmpi's symbols global. Reopening the library that holds
 * MPI_Init with RTLD_GLOBAL (and NOLOAD: it is loaded already) makes them so. */
static void make_mpi_global(void)
{
    Dl_info info;
    if (dladdr((void *)&MPI_Init, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static int read_exact(int fd, void *buf, size_t len, struct cinfer_error *err)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, SETTINGS_TIMEOUT_MS);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0)
            return cinfer_error_set(err, CINFER_ERR_TIMEOUT,
                                    "no group settings on standard input within %d ms (%zu bytes still missing)",
                                    SETTINGS_TIMEOUT_MS, len);
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "standard input ended %zu bytes before the end of the group's settings (not "
                                    "started by launch-mpi?)", len);
        p += n;
        len -= (size_t)n;
    }
    return CINFER_OK;
}

/* Rank 0: the whole blob from standard input, checked against the job's size. */
static int read_blob(int fd, int size, uint8_t **blob, size_t *len, const uint8_t **parts, size_t *sizes,
                     struct cinfer_error *err)
{
    uint8_t head[GROUP_BLOB_HEAD_BYTES];
    uint32_t n;
    int rc = read_exact(fd, head, sizeof head, err);
    if (rc == CINFER_OK)
        rc = cinfer_mpi_group_blob_head(head, sizeof head, &n, err);
    if (rc)
        return rc;
    if (n != (uint32_t)size)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the group's settings are for %u ranks, the MPI job has %d", n,
                                size);
    /* the parts one by one: their lengths say how much follows */
    size_t cap = sizeof head + 4096, used = sizeof head;
    uint8_t *b = malloc(cap);
    if (!b)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reading the group's settings");
    memcpy(b, head, sizeof head);
    for (uint32_t i = 0; rc == CINFER_OK && i < n; i++) {
        uint8_t word[4];
        if ((rc = read_exact(fd, word, 4, err)))
            break;
        size_t bytes = (size_t)word[0] | (size_t)word[1] << 8 | (size_t)word[2] << 16 | (size_t)word[3] << 24;
        if (bytes > GROUP_BLOB_MAX_RANK_BYTES) {
            rc = cinfer_error_set(err, CINFER_ERR_PARSE,
                                  "the group's settings: rank %u's part says %zu bytes, at most %zu",
                                  i, bytes, GROUP_BLOB_MAX_RANK_BYTES);
            break;
        }
        if (used + 4 + bytes > cap) {
            size_t want = (used + 4 + bytes) * 2;
            uint8_t *grown = realloc(b, want);
            if (!grown) {
                rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reading the group's settings");
                break;
            }
            b = grown;
            cap = want;
        }
        memcpy(b + used, word, 4);
        used += 4;
        rc = read_exact(fd, b + used, bytes, err);
        used += bytes;
    }
    if (rc == CINFER_OK)
        rc = cinfer_mpi_group_blob_parse(b, used, (uint32_t)size, parts, sizes, err);
    if (rc) {
        free(b);
        return rc;
    }
    *blob = b;
    *len = used;
    return CINFER_OK;
}

/* A rank alone in its job finalizes MPI on its way out, whatever the way: nobody else
 * is waited for, and mpirun then sees an orderly end (its exit status). Larger groups
 * finalize when their communicator ends (mpi_comm.c). */
static void finalize_alone(void)
{
    int done = 1;
    if (MPI_Finalized(&done) == MPI_SUCCESS && !done)
        MPI_Finalize();
}

int cinfer_mpi_group_join(int stdin_fd, struct cinfer_group_member *out, struct cinfer_error *err)
{
    if (out->struct_size < offsetof(struct cinfer_group_member, stdin_is_lifeline) + sizeof out->stdin_is_lifeline)
        return cinfer_error_set(err, CINFER_ERR_ABI, "launch-mpi: group member struct of %u bytes, expected %zu",
                                out->struct_size, sizeof *out);
    make_mpi_global();
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return cinfer_error_set(err, CINFER_ERR_IO, "launch-mpi: MPI_Init_thread failed (is this worker running under "
                                                    "mpirun?)");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Rank 0 reads every rank's settings; the sizes go out first, a size of 0 meaning
     * rank 0 could not read them (so no rank waits for data that never comes). */
    uint8_t *blob = NULL;
    size_t blob_len = 0;
    const uint8_t **parts = NULL;
    size_t *sizes = NULL;
    int *counts = NULL, *displs = NULL;
    int rc = CINFER_OK;
    struct cinfer_error read_err = {0};
    if (rank == 0) {
        parts = calloc((size_t)size, sizeof *parts);
        sizes = calloc((size_t)size, sizeof *sizes);
        counts = calloc(2 * (size_t)size, sizeof *counts);
        if (!parts || !sizes || !counts)
            rc = cinfer_error_set(&read_err, CINFER_ERR_NOMEM, "out of memory");
        else
            rc = read_blob(stdin_fd, size, &blob, &blob_len, parts, sizes, &read_err);
        if (counts) {
            displs = counts + size;
            for (int r = 0; r < size; r++) {
                counts[r] = rc == CINFER_OK ? (int)sizes[r] : 0;
                displs[r] = rc == CINFER_OK ? (int)(parts[r] - blob) : 0;
            }
        }
    }
    int mine = 0;
    int code = MPI_Scatter(counts, 1, MPI_INT, &mine, 1, MPI_INT, 0, MPI_COMM_WORLD);
    uint8_t *settings = NULL;
    if (code == MPI_SUCCESS && mine > 0 && !(settings = malloc((size_t)mine)))
        mine = -1; /* still take part in the scatter below, then fail */
    if (code == MPI_SUCCESS)
        code = MPI_Scatterv(blob, counts, displs, MPI_BYTE, mine > 0 ? settings : NULL, mine > 0 ? mine : 0, MPI_BYTE,
                            0, MPI_COMM_WORLD);
    free(blob);
    free(parts);
    free(sizes);
    free(counts);
    if (rank == 0 && rc) {
        free(settings);
        return cinfer_error_set(err, rc, "launch-mpi rank 0: %s", read_err.message);
    }
    if (code != MPI_SUCCESS || mine <= 0) {
        free(settings);
        return cinfer_error_set(err,
                                code != MPI_SUCCESS ? CINFER_ERR_IO : mine < 0 ? CINFER_ERR_NOMEM : CINFER_ERR_STATE,
                                "launch-mpi rank %d: %s", rank,
                                code != MPI_SUCCESS ? "handing out the settings failed (MPI_Scatter)"
                                : mine < 0          ? "out of memory for its settings"
                                                    : "rank 0 could not read the group's settings (see its message)");
    }
    struct cinfer_comm *comm = NULL;
    if (size == 1)
        atexit(finalize_alone);
    if (size > 1 && (rc = cinfer_mpi_comm_create(&comm, err))) {
        free(settings);
        return rc;
    }
    out->rank = rank;
    out->size = size;
    out->settings = settings;
    out->settings_bytes = (size_t)mine;
    out->comm = comm;
    out->stdin_is_lifeline = rank == 0;
    return CINFER_OK;
}
