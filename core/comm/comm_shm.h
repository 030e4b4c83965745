/* core/comm/comm_shm.h — a communicator for ranks on one machine: one POSIX
 * shared-memory segment of fixed size, whatever the model.
 *
 * Lifecycle, as the engine runs it:
 *   1. before starting the ranks: cinfer_comm_shm_create(name, tp_size, 0, &err)
 *      (name like "/cinfer-<pid>-tp": a leading '/', no other '/'; a segment already
 *      there under that name is refused, so two engines cannot share one);
 *   2. in each rank (its own process, or a thread): cinfer_comm_shm_attach(name, rank,
 *      &comm, &err); hand comm to the runtime; cinfer_comm_destroy(&comm) at the end;
 *   3. at shutdown (and after killing a group whose rank died): cinfer_comm_shm_unlink
 *      (name). A mapping already made stays valid after the unlink.
 * A restarted group gets a fresh segment: the old one's counters may be mid-collective.
 *
 * Layout: a 4 KiB control block (the barrier's counters, the abort record, which ranks
 * are attached), then two sets of one buffer per rank of chunk_bytes each. A
 * collective moves its data through the buffers a chunk at a time: each rank copies
 * its chunk in, all meet at a barrier, each reads what it needs out. The sets
 * alternate from step to step, so one barrier per chunk suffices: a rank can only
 * start writing set s again after every rank has passed the barrier of the step in
 * between, by which time all have finished reading s.
 *
 * All-reduce: every rank adds the chunks of all ranks itself, in rank order, so every
 * rank computes the same bits (no rank's result is copied to the others) and a run
 * repeats exactly. Waiting: a rank spins briefly on the barrier's counter, then sleeps
 * on a futex (shared, so it works across processes), which the last rank to arrive
 * wakes only when someone sleeps.
 *
 * No collective has a timeout: if a peer dies mid-collective the others wait until the
 * engine kills them. A rank that fails by itself calls ops->abort, after which every
 * waiting and later collective on every rank fails naming it. Normal use cannot
 * deadlock as long as the ranks make the same calls in the same order. */
#ifndef CINFER_COMM_COMM_SHM_H
#define CINFER_COMM_COMM_SHM_H

#include <stddef.h>

#include "cinfer/communicator.h"

#define CINFER_COMM_SHM_MAX_RANKS 64
#define CINFER_COMM_SHM_DEFAULT_CHUNK_BYTES ((size_t)256 << 10)
#define CINFER_COMM_SHM_MIN_CHUNK_BYTES ((size_t)4 << 10)
#define CINFER_COMM_SHM_MAX_CHUNK_BYTES ((size_t)64 << 20)

/* Bytes of the segment for n_ranks and chunk_bytes (0: the default). */
size_t cinfer_comm_shm_segment_bytes(int n_ranks, size_t chunk_bytes);

/* Creates the segment `name` for n_ranks ranks (2 <= n <= CINFER_COMM_SHM_MAX_RANKS; 1
 * is allowed too) with buffers of chunk_bytes per rank (0: the default; a multiple of
 * 64 in [MIN, MAX]). Mode 0600. Fails if name exists. */
int cinfer_comm_shm_create(const char *name, int n_ranks, size_t chunk_bytes, struct cinfer_error *err);

/* Joins segment `name` as rank `rank`; *out is a communicator of the segment's size.
 * Refuses a rank outside the segment's size, a rank already attached, and a segment
 * that is not one of these (or of another layout version), naming what it found. */
int cinfer_comm_shm_attach(const char *name, int rank, struct cinfer_comm **out, struct cinfer_error *err);

/* Removes the name (mappings stay until their ranks destroy them). CINFER_ERR_NOT_FOUND
 * when there is no such segment. */
int cinfer_comm_shm_unlink(const char *name, struct cinfer_error *err);

#endif
