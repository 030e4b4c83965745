#include "worker/worker_comm.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cinfer/launcher.h"
#include "comm/comm_shm.h"
#include "comm/comm_tcp.h"

static struct cinfer_comm *group_comm;

void cinfer_worker_set_group_comm(struct cinfer_comm *comm)
{
    group_comm = comm;
}

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Attaches to a segment another rank makes: until it exists and is whole (its maker
 * writes the magic last), or the deadline. */
static int attach_when_made(const char *name, int rank, long deadline_ms, struct cinfer_comm **out,
                            struct cinfer_error *err)
{
    for (;;) {
        int rc = cinfer_comm_shm_attach(name, rank, out, err);
        int not_yet = rc == CINFER_ERR_NOT_FOUND || rc == CINFER_ERR_PARSE ||
                      (rc == CINFER_ERR_STATE && strstr(err->message, "(no magic)"));
        if (!not_yet || now_ms() > deadline_ms)
            return rc;
        struct timespec nap = {0, 10 * 1000000};
        nanosleep(&nap, NULL);
    }
}

/* Rank 0 makes the segment on its host; every rank attaches; once all have (a barrier),
 * rank 0 removes the name, so nothing is left on the host whatever happens next. */
static int attach_by_rank0(const char *name, int rank, int size, long deadline_ms, struct cinfer_comm **out,
                           struct cinfer_error *err)
{
    int rc;
    if (rank == 0) {
        struct cinfer_error ignored = {0};
        cinfer_comm_shm_unlink(name, &ignored); /* a rank 0 of this start that died before its peers came */
        if ((rc = cinfer_comm_shm_create(name, size, 0, err)))
            return rc;
        rc = cinfer_comm_shm_attach(name, 0, out, err);
    } else {
        rc = attach_when_made(name, rank, deadline_ms, out, err);
    }
    if (rc == CINFER_OK && (*out)->size != size) {
        rc = cinfer_error_set(err, CINFER_ERR_STATE, "shm communicator %s has %d ranks, launcher.tp_size is %d", name,
                              (*out)->size, size);
        cinfer_comm_destroy(out);
    }
    if (rc == CINFER_OK && (rc = (*out)->ops->barrier((*out)->state, err)))
        cinfer_comm_destroy(out);
    if (rank == 0) {
        struct cinfer_error ignored = {0};
        cinfer_comm_shm_unlink(name, &ignored);
    }
    return rc;
}

int cinfer_worker_comm_attach(const struct cinfer_port_args *ports, int tp_rank, int tp_size, void *zmq_context,
                              int timeout_ms, struct cinfer_comm **out, struct cinfer_error *err)
{
    *out = NULL;
    const char *spec = ports->comm;
    long deadline_ms = now_ms() + (timeout_ms > 0 ? timeout_ms : 60000);
    int rc;
    if (spec[0] == '/') {
        rc = cinfer_comm_shm_attach(spec, tp_rank, out, err);
    } else if (!strncmp(spec, CINFER_COMM_SHM_BY_RANK0, strlen(CINFER_COMM_SHM_BY_RANK0))) {
        rc = attach_by_rank0(spec + strlen(CINFER_COMM_SHM_BY_RANK0), tp_rank, tp_size, deadline_ms, out, err);
    } else if (!strcmp(spec, CINFER_COMM_GROUP)) {
        if (!group_comm)
            return cinfer_error_set(err, CINFER_ERR_STATE,
                                    "communicator \"group\": this worker did not join a launcher's group (started "
                                    "without " CINFER_WORKER_GROUP_FLAG ")");
        *out = group_comm;
        group_comm = NULL;
        rc = CINFER_OK;
    } else if (!strncmp(spec, "tcp://", 6)) {
        /* ranks on several hosts without MPI: the slow path, through rank 0 over the
         * engine's tcp channels and its CURVE keys (this context runs the ZAP handler) */
        rc = cinfer_comm_tcp_attach(zmq_context, spec, tp_rank, tp_size, ports,
                                    (int)(deadline_ms - now_ms()), out, err);
    } else {
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "communicator \"%s\": expected a shared-memory name (/NAME), " CINFER_COMM_SHM_BY_RANK0
                                "/NAME, tcp://ADDRESS:PORT or " CINFER_COMM_GROUP, spec);
    }
    if (rc)
        return rc;
    if ((rc = cinfer_comm_check(*out, err)) == CINFER_OK && ((*out)->rank != tp_rank || (*out)->size != tp_size))
        rc = cinfer_error_set(err, CINFER_ERR_STATE,
                              "communicator %s: this worker is rank %d of %d there, but tp rank %d of launcher.tp_size "
                              "%d", (*out)->ops->name, (*out)->rank, (*out)->size, tp_rank, tp_size);
    if (rc)
        cinfer_comm_destroy(out);
    return rc;
}
