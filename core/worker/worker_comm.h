/* A scheduler rank's communicator, from how its port args name it (cinfer/engine.h:
 * CINFER_COMM_*): a shared-memory segment the engine made, one rank 0 makes on its own
 * host, the tcp communicator through rank 0, or the one the launcher's group_join
 * handed this process. */
#ifndef CINFER_WORKER_WORKER_COMM_H
#define CINFER_WORKER_WORKER_COMM_H

#include "cinfer/communicator.h"
#include "cinfer/engine.h"

/* Joins the replica's communicator as rank tp_rank of tp_size, waiting up to
 * timeout_ms for a segment or peers that come up with the other ranks. zmq_context:
 * the worker's (the tcp communicator's sockets live there). Errors name the
 * communicator and what was wrong. */
int cinfer_worker_comm_attach(const struct cinfer_port_args *ports, int tp_rank, int tp_size, void *zmq_context,
                              int timeout_ms, struct cinfer_comm **out, struct cinfer_error *err);

/* Set by the worker entry point after group_join: the group's communicator, taken (once)
 * by the rank whose comm is CINFER_COMM_GROUP. */
void cinfer_worker_set_group_comm(struct cinfer_comm *comm);

#endif
