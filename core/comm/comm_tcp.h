/* core/comm/comm_tcp.h — a communicator over ZeroMQ tcp:// for ranks on different hosts
 * when there is no MPI: the slow path, where clarity beats speed.
 *
 * A star through rank 0: rank 0 binds a ROUTER at the endpoint, every other rank
 * connects a DEALER with routing id "rank<k>". With keys carrying CURVE keys
 * (cinfer_curve_enabled) every socket uses them: rank 0 is the CURVE server and its
 * process's zmq context must run a ZAP handler (cinfer_zap_start), which admits only
 * clients holding the engine's client key; attach refuses to serve CURVE without one,
 * since libzmq would then admit every client.
 *
 * Joining: each rank > 0 sends rank 0 a HELLO; rank 0 answers every rank with a WELCOME
 * once all have said hello. Attach waits up to timeout_ms for that; rank 0 past its
 * deadline tells the ranks that joined which ones are missing, and fails naming them.
 * Ranks > 0 wait ATTACH_GRACE_MS longer than timeout_ms for rank 0's word, so when the
 * ranks start together the message names the missing ranks rather than only saying
 * that rank 0 did not answer.
 *
 * Every collective: each rank > 0 sends rank 0 one frame (header, then its payload:
 * its floats, its share, the root's data, or nothing) and waits for rank 0's reply.
 * Rank 0 collects one frame from every rank, checks that they agree with its own call
 * (op, sequence number, bytes, root: a mismatch fails the group naming the rank and
 * what differed), computes, and sends every rank the same reply:
 *   all_reduce_sum_f32: the sum in rank order (((r0 + r1) + r2) + ...), computed once
 *     by rank 0, so every rank gets the same bits;
 *   all_gather: the ranks' shares assembled in rank order;
 *   broadcast: the root's data (the root gets it back too: one rule, any root);
 *   barrier: nothing.
 * Collectives have no timeout (the contract in cinfer/communicator.h: the engine kills a
 * group whose rank died). A rank's calls are made from one thread, abort included.
 *
 * abort: a rank > 0 sends rank 0 an ABORT (its rank, why); rank 0 relays it to every
 * rank when it next collects (at once if it is waiting in a collective); rank 0's own
 * abort goes to every rank at once. Rank 0 also aborts the group when a frame is
 * malformed or a collective does not match, so that no rank is left waiting. Waiting
 * and later collectives fail with CINFER_ERR_STATE "rank K aborted the group: why".
 * destroy closes the socket without waiting (LINGER 0).
 *
 * Frame, every field little-endian (40-byte header, then the payload):
 *   magic "CTCP" | u32 version | u32 op | u32 size (the sender's group size) |
 *   i32 rank (the rank the frame speaks for: the sender, or for ABORT the rank that
 *   aborted) | i32 root (broadcast's; else 0) | u64 seq (the collective's number, from
 *   1; 0 for HELLO and WELCOME) | u64 bytes (the call's byte count: n floats x 4,
 *   bytes per rank, bytes broadcast; 0 for the barrier; ABORT: the reason's length)
 * Payload bytes by op, towards rank 0 / from rank 0:
 *   HELLO, WELCOME, BARRIER: 0 / 0
 *   ALL_REDUCE: bytes / bytes (bytes a multiple of 4)
 *   ALL_GATHER: bytes / size x bytes
 *   BROADCAST: bytes from the root, else 0 / bytes
 *   ABORT: bytes (the reason, no NUL, at most CINFER_COMM_TCP_WHY_MAX) / the same */
#ifndef CINFER_COMM_COMM_TCP_H
#define CINFER_COMM_COMM_TCP_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/communicator.h"

struct cinfer_port_args;

#define CINFER_COMM_TCP_MAX_RANKS 256
#define CINFER_COMM_TCP_HEADER_BYTES 40u
#define CINFER_COMM_TCP_VERSION 1u
#define CINFER_COMM_TCP_WHY_MAX 400u

enum cinfer_comm_tcp_op {
    CINFER_COMM_TCP_HELLO = 1,
    CINFER_COMM_TCP_WELCOME = 2,
    CINFER_COMM_TCP_ALL_REDUCE = 3,
    CINFER_COMM_TCP_ALL_GATHER = 4,
    CINFER_COMM_TCP_BROADCAST = 5,
    CINFER_COMM_TCP_BARRIER = 6,
    CINFER_COMM_TCP_ABORT = 7,
};

/* rank 0 binds endpoint (tcp://ADDR:PORT), ranks 1..size-1 connect to it; with keys
 * carrying CURVE keys (cinfer_curve_enabled) every socket uses them (rank 0 is the
 * CURVE server and needs a ZAP handler running in its process's zmq context: the
 * caller's context already has one in the engine's workers; the attach function takes
 * the context from the caller). Waits up to timeout_ms for every rank to join (a hello
 * from each rank to rank 0 and an answer), else fails naming the ranks missing
 * (CINFER_ERR_TIMEOUT), or, on a rank whose CURVE keys rank 0 refused, saying so.
 * keys may be NULL (no CURVE: only for a trusted network). */
int cinfer_comm_tcp_attach(void *zmq_context, const char *endpoint, int rank, int size,
                           const struct cinfer_port_args *keys, int timeout_ms, struct cinfer_comm **out,
                           struct cinfer_error *err);

/* A decoded frame; payload points into the bytes decoded. */
struct cinfer_comm_tcp_frame {
    uint32_t op;
    uint32_t size;
    int32_t rank;
    int32_t root;
    uint64_t seq;
    uint64_t bytes;
    const uint8_t *payload;
    size_t payload_bytes;
};

/* Writes a frame's header (CINFER_COMM_TCP_HEADER_BYTES) to out. */
void cinfer_comm_tcp_frame_header(uint8_t *out, uint32_t op, uint32_t size, int32_t rank, int32_t root, uint64_t seq,
                                  uint64_t bytes);

/* Decodes a frame that came from the network and checks every field: the magic, the
 * version, an op known for the direction (to_rank0: 1 for a frame a rank > 0 sent rank
 * 0, 0 for one rank 0 sent), the group size (must be group_size), rank and root within
 * it, and the payload's length against the op. Errors say what was expected and
 * found; the caller prefixes who sent it. */
int cinfer_comm_tcp_frame_decode(const void *data, size_t len, int group_size, int to_rank0,
                                 struct cinfer_comm_tcp_frame *out, struct cinfer_error *err);

/* "all_reduce_sum_f32", "barrier", ...; "op 9" style for an unknown op (buf). */
const char *cinfer_comm_tcp_op_name(uint32_t op, char *buf, size_t buf_bytes);

#endif
