/* core/comm/comm_tcp.c — the tcp communicator: a star through rank 0 over ZeroMQ
 * (design and frame layout in comm_tcp.h). */
#include "comm/comm_tcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "ipc/channel.h"
#include "ipc/curve.h"

/* The payload's floats travel in the hosts' own order; the header is little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the tcp communicator sends floats as little-endian hosts hold them");

#define MAGIC "CTCP"
#define ENDPOINT_BYTES 256
#define ROUTING_ID_BYTES 32
/* Ranks > 0 wait this much past timeout_ms for rank 0's word on a group that did not
 * form, so that rank 0 (which knows which ranks are missing) speaks first. */
#define ATTACH_GRACE_MS 500
/* Frames handed to zmq before destroy (the last collective's replies, an ABORT) get
 * this long to leave while the process's context lives on; LINGER is 0 until then. */
#define CLOSE_LINGER_MS 1000
#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

struct tcp_comm {
    struct cinfer_comm comm; /* what attach hands out */
    void *socket;            /* rank 0: ROUTER bound at endpoint; ranks > 0: DEALER "rank<k>" */
    int rank, size;
    uint64_t seq;            /* collectives begun on this rank */
    int aborted_by;          /* -1 while the group works, else the rank that aborted it */
    char why[CINFER_COMM_TCP_WHY_MAX + 1];
    zmq_msg_t *held;         /* rank 0: (size) the current collective's frame from each rank */
    uint8_t *have;           /* rank 0: (size) 1 where held[r] holds one */
    char endpoint[ENDPOINT_BYTES];
};

/* ---- frames -------------------------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

const char *cinfer_comm_tcp_op_name(uint32_t op, char *buf, size_t buf_bytes)
{
    switch (op) {
    case CINFER_COMM_TCP_HELLO:
        return "hello";
    case CINFER_COMM_TCP_WELCOME:
        return "welcome";
    case CINFER_COMM_TCP_ALL_REDUCE:
        return "all_reduce_sum_f32";
    case CINFER_COMM_TCP_ALL_GATHER:
        return "all_gather";
    case CINFER_COMM_TCP_BROADCAST:
        return "broadcast";
    case CINFER_COMM_TCP_BARRIER:
        return "barrier";
    case CINFER_COMM_TCP_ABORT:
        return "abort";
    }
    snprintf(buf, buf_bytes, "op %" PRIu32, op);
    return buf;
}

void cinfer_comm_tcp_frame_header(uint8_t *out, uint32_t op, uint32_t size, int32_t rank, int32_t root, uint64_t seq,
                                  uint64_t bytes)
{
    memcpy(out, MAGIC, 4);
    put_u32(out + 4, CINFER_COMM_TCP_VERSION);
    put_u32(out + 8, op);
    put_u32(out + 12, size);
    put_u32(out + 16, (uint32_t)rank);
    put_u32(out + 20, (uint32_t)root);
    put_u64(out + 24, seq);
    put_u64(out + 32, bytes);
}

int cinfer_comm_tcp_frame_decode(const void *data, size_t len, int group_size, int to_rank0,
                                 struct cinfer_comm_tcp_frame *out, struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    const uint8_t *p = data;
    if (len < CINFER_COMM_TCP_HEADER_BYTES)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "frame of %zu bytes, shorter than the %u-byte header", len,
                                CINFER_COMM_TCP_HEADER_BYTES);
    if (memcmp(p, MAGIC, 4) != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "frame starting %02x %02x %02x %02x, not the magic \"" MAGIC "\"", p[0], p[1], p[2],
                                p[3]);
    uint32_t version = get_u32(p + 4);
    if (version != CINFER_COMM_TCP_VERSION)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "frame of version %" PRIu32 ", this build speaks version %u",
                                version, CINFER_COMM_TCP_VERSION);
    out->op = get_u32(p + 8);
    out->size = get_u32(p + 12);
    out->rank = (int32_t)get_u32(p + 16);
    out->root = (int32_t)get_u32(p + 20);
    out->seq = get_u64(p + 24);
    out->bytes = get_u64(p + 32);
    out->payload = p + CINFER_COMM_TCP_HEADER_BYTES;
    out->payload_bytes = len - CINFER_COMM_TCP_HEADER_BYTES;

    char buf[32];
    const char *op = cinfer_comm_tcp_op_name(out->op, buf, sizeof buf);
    uint32_t o = out->op;
    int collective = o == CINFER_COMM_TCP_ALL_REDUCE || o == CINFER_COMM_TCP_ALL_GATHER ||
                     o == CINFER_COMM_TCP_BROADCAST || o == CINFER_COMM_TCP_BARRIER;
    int known = collective || o == CINFER_COMM_TCP_ABORT ||
                o == (to_rank0 ? CINFER_COMM_TCP_HELLO : CINFER_COMM_TCP_WELCOME);
    if (!known)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame %s rank 0, which the protocol has no place for", op,
                                to_rank0 ? "sent to" : "sent by");
    if (out->size != (uint32_t)group_size)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame for a group of %" PRIu32 " ranks; this group has %d",
                                op, out->size, group_size);
    if (out->rank < 0 || out->rank >= group_size)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame for rank %" PRId32 ", outside [0, %d)", op,
                                out->rank, group_size);
    if (to_rank0 && out->rank == 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame sent to rank 0 says it comes from rank 0", op);
    if (!to_rank0 && o != CINFER_COMM_TCP_ABORT && out->rank != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame sent by rank 0 says it comes from rank %" PRId32,
                                op, out->rank);
    if (o == CINFER_COMM_TCP_BROADCAST && (out->root < 0 || out->root >= group_size))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "broadcast frame from root %" PRId32 ", outside [0, %d)",
                                out->root, group_size);
    if (o != CINFER_COMM_TCP_BROADCAST && out->root != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame with root %" PRId32 "; only a broadcast has one", op,
                                out->root);
    if ((o == CINFER_COMM_TCP_HELLO || o == CINFER_COMM_TCP_WELCOME) && out->seq != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame numbered %" PRIu64 "; expected 0", op, out->seq);
    if (collective && out->seq == 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame numbered 0; collectives count from 1", op);

    uint64_t want = 0; /* payload bytes the op and fields call for */
    switch (o) {
    case CINFER_COMM_TCP_HELLO:
    case CINFER_COMM_TCP_WELCOME:
    case CINFER_COMM_TCP_BARRIER:
        if (out->bytes != 0)
            return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame of %" PRIu64 " bytes; expected 0", op,
                                    out->bytes);
        break;
    case CINFER_COMM_TCP_ALL_REDUCE:
        if (out->bytes % sizeof(float) != 0)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "all_reduce_sum_f32 frame of %" PRIu64 " bytes, not a whole number of floats",
                                    out->bytes);
        want = out->bytes;
        break;
    case CINFER_COMM_TCP_ALL_GATHER:
        if (!to_rank0 && out->bytes > UINT64_MAX / (uint64_t)group_size)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "all_gather frame of %" PRIu64 " bytes per rank, too many for %d ranks",
                                    out->bytes, group_size);
        want = to_rank0 ? out->bytes : out->bytes * (uint64_t)group_size;
        break;
    case CINFER_COMM_TCP_BROADCAST:
        want = !to_rank0 || out->rank == out->root ? out->bytes : 0;
        break;
    case CINFER_COMM_TCP_ABORT:
        if (out->bytes > CINFER_COMM_TCP_WHY_MAX)
            return cinfer_error_set(err, CINFER_ERR_PARSE, "abort frame with a reason of %" PRIu64
                                    " bytes; at most %u", out->bytes, CINFER_COMM_TCP_WHY_MAX);
        want = out->bytes;
        break;
    }
    if (out->payload_bytes != want)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s frame %s rank %" PRId32 " of %" PRIu64 " bytes (root %" PRId32
                                ") carries %zu payload bytes; expected %" PRIu64,
                                op, to_rank0 ? "from" : "for", out->rank, out->bytes, out->root, out->payload_bytes,
                                want);
    if (o == CINFER_COMM_TCP_ABORT && memchr(out->payload, '\0', out->payload_bytes))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "abort frame whose reason holds a NUL byte");
    return CINFER_OK;
}

/* ---- sockets ------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void routing_id_of(int rank, char *out, size_t out_bytes)
{
    snprintf(out, out_bytes, "rank%d", rank);
}

/* The rank of a routing id "rank<k>" with 1 <= k < size, else -1. */
static int rank_of_routing_id(const uint8_t *id, size_t n, int size)
{
    if (n < 5 || n > 12 || memcmp(id, "rank", 4) != 0 || (id[4] == '0' && n > 5))
        return -1;
    long k = 0;
    for (size_t i = 4; i < n; i++) {
        if (id[i] < '0' || id[i] > '9')
            return -1;
        k = k * 10 + (id[i] - '0');
    }
    return k >= 1 && k < size ? (int)k : -1;
}

/* Builds a frame: header, then payload_bytes from payload (NULL: left for the caller to
 * fill at zmq_msg_data + HEADER_BYTES). */
static int frame_msg(zmq_msg_t *msg, const struct tcp_comm *c, uint32_t op, int32_t rank, int32_t root,
                     uint64_t seq, uint64_t bytes, const void *payload, size_t payload_bytes, struct cinfer_error *err)
{
    if (zmq_msg_init_size(msg, CINFER_COMM_TCP_HEADER_BYTES + payload_bytes) != 0)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "tcp communicator %s: out of memory for a frame of %zu bytes",
                                c->endpoint, payload_bytes);
    uint8_t *p = zmq_msg_data(msg);
    cinfer_comm_tcp_frame_header(p, op, (uint32_t)c->size, rank, root, seq, bytes);
    if (payload && payload_bytes)
        memcpy(p + CINFER_COMM_TCP_HEADER_BYTES, payload, payload_bytes);
    return CINFER_OK;
}

/* Sends msg (always consumed) to rank `to`: rank 0 names the peer, ranks > 0 have
 * only rank 0. */
static int send_msg(struct tcp_comm *c, int to, zmq_msg_t *msg, int flags, struct cinfer_error *err)
{
    int rc = 0;
    if (c->rank == 0) {
        char id[ROUTING_ID_BYTES];
        routing_id_of(to, id, sizeof id);
        do
            rc = zmq_send(c->socket, id, strlen(id), ZMQ_SNDMORE | flags);
        while (rc < 0 && zmq_errno() == EINTR);
    }
    if (rc >= 0)
        do
            rc = zmq_msg_send(msg, c->socket, flags);
        while (rc < 0 && zmq_errno() == EINTR);
    if (rc >= 0)
        return CINFER_OK;
    int e = zmq_errno();
    zmq_msg_close(msg);
    if (e == EHOSTUNREACH)
        return cinfer_error_set(err, CINFER_ERR_IO, "tcp communicator %s: rank %d is not connected to rank 0",
                                c->endpoint, to);
    return cinfer_error_set(err, CINFER_ERR_IO, "tcp communicator %s: rank %d cannot send to rank %d: %s",
                            c->endpoint, c->rank, to, zmq_strerror(e));
}

/* Receives one frame into body (initialised here; the caller closes it on CINFER_OK).
 * Waits up to timeout_ms (-1: forever); CINFER_ERR_TIMEOUT, with err untouched, when
 * none came. On rank 0, *from is the sender's rank, -1 for a routing id that is not
 * one of this group's "rank<k>" (the frame is then dropped: the caller goes on). A
 * message of more parts than expected is a CINFER_ERR_PARSE naming the sender. */
static int recv_frame(struct tcp_comm *c, int timeout_ms, int *from, zmq_msg_t *body, struct cinfer_error *err)
{
    *from = 0;
    zmq_msg_init(body);
    if (timeout_ms >= 0) {
        zmq_pollitem_t item = {.socket = c->socket, .events = ZMQ_POLLIN};
        int ready;
        do
            ready = zmq_poll(&item, 1, timeout_ms);
        while (ready < 0 && zmq_errno() == EINTR);
        if (ready < 0)
            return cinfer_error_set(err, CINFER_ERR_IO, "tcp communicator %s: zmq_poll: %s", c->endpoint,
                                    zmq_strerror(zmq_errno()));
        if (ready == 0)
            return CINFER_ERR_TIMEOUT;
    }
    int parts = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        int rc;
        do
            rc = zmq_msg_recv(&part, c->socket, 0);
        while (rc < 0 && zmq_errno() == EINTR);
        if (rc < 0) {
            int e = zmq_errno();
            zmq_msg_close(&part);
            zmq_msg_close(body);
            zmq_msg_init(body);
            return cinfer_error_set(err, CINFER_ERR_IO, "tcp communicator %s: rank %d cannot receive: %s",
                                    c->endpoint, c->rank, zmq_strerror(e));
        }
        more = zmq_msg_more(&part);
        if (c->rank == 0 && parts == 0) { /* the ROUTER's routing id part */
            *from = rank_of_routing_id(zmq_msg_data(&part), zmq_msg_size(&part), c->size);
            zmq_msg_close(&part);
        } else if (parts == (c->rank == 0)) {
            zmq_msg_move(body, &part);
            zmq_msg_close(&part);
        } else {
            zmq_msg_close(&part);
        }
        parts++;
    }
    int want = c->rank == 0 ? 2 : 1;
    if (parts != want && *from >= 0) {
        zmq_msg_close(body);
        zmq_msg_init(body);
        return cinfer_error_set(err, CINFER_ERR_PARSE, "tcp communicator %s: rank %d sent a message of %d parts, "
                                "expected one frame", c->endpoint, c->rank == 0 ? *from : 0, parts - (c->rank == 0));
    }
    return CINFER_OK;
}

/* ---- breaking the group -------------------------------------------------------------- */

static void record_abort(struct tcp_comm *c, int who, const char *why, size_t why_len)
{
    if (c->aborted_by >= 0)
        return;
    c->aborted_by = who;
    if (why_len > CINFER_COMM_TCP_WHY_MAX)
        why_len = CINFER_COMM_TCP_WHY_MAX;
    memcpy(c->why, why, why_len);
    c->why[why_len] = '\0';
}

static int aborted_error(const struct tcp_comm *c, struct cinfer_error *err)
{
    return cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank %d aborted the group: %s", c->endpoint,
                            c->aborted_by, c->why[0] ? c->why : "(no reason given)");
}

/* Sends the group's ABORT record: rank 0 to every rank but `except`, a rank > 0 to rank
 * 0. Without waiting: a peer that is gone or slow is the engine's to notice. */
static void send_abort(struct tcp_comm *c, int except)
{
    size_t n = strlen(c->why);
    for (int to = c->rank == 0 ? 1 : 0; to < (c->rank == 0 ? c->size : 1); to++) {
        if (to == except)
            continue;
        zmq_msg_t msg;
        if (frame_msg(&msg, c, CINFER_COMM_TCP_ABORT, c->aborted_by, 0, c->seq, n, c->why, n, NULL) == CINFER_OK)
            send_msg(c, to, &msg, ZMQ_DONTWAIT, NULL);
    }
}

static void drop_held(struct tcp_comm *c)
{
    for (int r = 0; c->have && r < c->size; r++)
        if (c->have[r]) {
            zmq_msg_close(&c->held[r]);
            c->have[r] = 0;
        }
}

/* This rank found the group unusable (a malformed frame, a mismatch, a failed send):
 * it aborts the group with err's message as the reason, so no rank is left waiting,
 * and returns rc with err as it was. */
static int fail_group(struct tcp_comm *c, int rc, struct cinfer_error *err)
{
    drop_held(c);
    if (c->aborted_by < 0) {
        const char *msg = err && err->message[0] ? err->message : "a collective failed";
        size_t skip = strlen("tcp communicator ") + strlen(c->endpoint) + 2; /* the prefix the peers add again */
        if (strncmp(msg, "tcp communicator ", 17) == 0 && strlen(msg) > skip)
            msg += skip;
        record_abort(c, c->rank, msg, strlen(msg));
        send_abort(c, -1);
    }
    return rc;
}

/* ---- collectives --------------------------------------------------------------------- */

/* "all_reduce_sum_f32 of 16 floats", "broadcast of 8 bytes from rank 1", ... */
static void describe(uint32_t op, uint64_t bytes, int root, char *out, size_t out_bytes)
{
    char buf[32];
    const char *name = cinfer_comm_tcp_op_name(op, buf, sizeof buf);
    if (op == CINFER_COMM_TCP_ALL_REDUCE)
        snprintf(out, out_bytes, "%s of %" PRIu64 " floats", name, bytes / sizeof(float));
    else if (op == CINFER_COMM_TCP_ALL_GATHER)
        snprintf(out, out_bytes, "%s of %" PRIu64 " bytes per rank", name, bytes);
    else if (op == CINFER_COMM_TCP_BROADCAST)
        snprintf(out, out_bytes, "%s of %" PRIu64 " bytes from rank %d", name, bytes, root);
    else
        snprintf(out, out_bytes, "%s", name);
}

/* Rank 0: one frame from every other rank for collective seq, each checked against
 * rank 0's own call, into c->held. An ABORT ends the collective (relayed to all). */
static int root_collect(struct tcp_comm *c, uint32_t op, uint64_t seq, uint64_t bytes, int root,
                        struct cinfer_error *err)
{
    for (int missing = c->size - 1; missing > 0;) {
        zmq_msg_t body;
        int from, rc = recv_frame(c, -1, &from, &body, err);
        if (rc < 0)
            return fail_group(c, rc, err);
        if (from < 0) { /* not one of ours: CURVE admitted it, so a stray of this engine */
            zmq_msg_close(&body);
            continue;
        }
        struct cinfer_comm_tcp_frame f;
        rc = cinfer_comm_tcp_frame_decode(zmq_msg_data(&body), zmq_msg_size(&body), c->size, 1, &f, err);
        if (rc < 0) {
            zmq_msg_close(&body);
            cinfer_error_prefix(err, "tcp communicator %s: rank %d sent a malformed frame", c->endpoint, from);
            return fail_group(c, rc, err);
        }
        char mine[96], theirs[96];
        if (f.rank != from) {
            zmq_msg_close(&body);
            rc = cinfer_error_set(err, CINFER_ERR_PARSE,
                                  "tcp communicator %s: rank %d sent a frame that says it comes from rank %" PRId32,
                                  c->endpoint, from, f.rank);
            return fail_group(c, rc, err);
        }
        if (f.op == CINFER_COMM_TCP_ABORT) {
            record_abort(c, from, (const char *)f.payload, f.payload_bytes);
            zmq_msg_close(&body);
            drop_held(c);
            send_abort(c, from);
            return aborted_error(c, err);
        }
        if (f.op == CINFER_COMM_TCP_HELLO || c->have[from]) {
            zmq_msg_close(&body);
            rc = cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank %d sent %s in collective %" PRIu64
                                  "%s", c->endpoint, from, f.op == CINFER_COMM_TCP_HELLO ? "a second hello" :
                                  "two frames", seq, f.op == CINFER_COMM_TCP_HELLO ? " (did it restart?)" : "");
            return fail_group(c, rc, err);
        }
        if (f.op != op || f.seq != seq || f.bytes != bytes || f.root != root) {
            describe(op, bytes, root, mine, sizeof mine);
            describe(f.op, f.bytes, f.root, theirs, sizeof theirs);
            zmq_msg_close(&body);
            rc = cinfer_error_set(err, CINFER_ERR_STATE,
                                  "tcp communicator %s: collectives do not match: rank %d called %s as collective "
                                  "%" PRIu64 ", rank 0 %s as collective %" PRIu64,
                                  c->endpoint, from, theirs, f.seq, mine, seq);
            return fail_group(c, rc, err);
        }
        zmq_msg_init(&c->held[from]);
        zmq_msg_move(&c->held[from], &body);
        zmq_msg_close(&body);
        c->have[from] = 1;
        missing--;
    }
    return CINFER_OK;
}

/* Rank 0: sends reply (consumed) to every other rank, sharing its bytes. */
static int root_reply(struct tcp_comm *c, zmq_msg_t *reply, struct cinfer_error *err)
{
    int rc = CINFER_OK;
    for (int to = 1; to < c->size && rc == CINFER_OK; to++) {
        zmq_msg_t copy;
        zmq_msg_init(&copy);
        zmq_msg_copy(&copy, reply);
        rc = send_msg(c, to, &copy, 0, err);
    }
    zmq_msg_close(reply);
    return rc < 0 ? fail_group(c, rc, err) : CINFER_OK;
}

static const uint8_t *held_payload(struct tcp_comm *c, int r)
{
    return (const uint8_t *)zmq_msg_data(&c->held[r]) + CINFER_COMM_TCP_HEADER_BYTES;
}

/* acc[i] += in's i-th float; in may sit anywhere in a received message (unaligned). */
static void add_floats(float *acc, const uint8_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, in + i * sizeof v, sizeof v);
        acc[i] += v;
    }
}

/* Rank 0's side of every collective: collect, check, compute, reply. send is rank 0's
 * input, recv where its result goes (the same buffer for all_reduce; NULL for a
 * broadcast from rank 0). */
static int root_collective(struct tcp_comm *c, uint32_t op, uint64_t bytes, int root, const void *send, void *recv,
                           struct cinfer_error *err)
{
    uint64_t seq = ++c->seq;
    int rc = root_collect(c, op, seq, bytes, root, err);
    if (rc < 0)
        return rc;
    size_t n = (size_t)bytes, payload = 0;
    const uint8_t *from = NULL; /* the reply's payload, where it is one buffer */
    if (op == CINFER_COMM_TCP_ALL_REDUCE) {
        for (int r = 1; r < c->size; r++) /* (((r0 + r1) + r2) + ...) */
            add_floats(recv, held_payload(c, r), n / sizeof(float));
        from = recv;
        payload = n;
    } else if (op == CINFER_COMM_TCP_BROADCAST) {
        from = root == 0 ? send : held_payload(c, root);
        if (recv && n)
            memcpy(recv, from, n);
        payload = n;
    } else if (op == CINFER_COMM_TCP_ALL_GATHER) {
        payload = n * (size_t)c->size;
    }
    zmq_msg_t reply;
    if (c->size > 1 || op == CINFER_COMM_TCP_ALL_GATHER) {
        rc = frame_msg(&reply, c, op, 0, root, seq, bytes, from, payload, err);
        if (rc < 0)
            return fail_group(c, rc, err);
    }
    if (op == CINFER_COMM_TCP_ALL_GATHER) {
        uint8_t *all = (uint8_t *)zmq_msg_data(&reply) + CINFER_COMM_TCP_HEADER_BYTES;
        if (n) {
            memcpy(all, send, n);
            for (int r = 1; r < c->size; r++)
                memcpy(all + (size_t)r * n, held_payload(c, r), n);
            memcpy(recv, all, payload);
        }
    }
    drop_held(c);
    if (c->size == 1) {
        if (op == CINFER_COMM_TCP_ALL_GATHER)
            zmq_msg_close(&reply);
        return CINFER_OK;
    }
    return root_reply(c, &reply, err);
}

/* A rank > 0's side: its frame to rank 0, then rank 0's reply into recv (recv_bytes). */
static int member_collective(struct tcp_comm *c, uint32_t op, uint64_t bytes, int root, const void *send,
                             size_t send_bytes, void *recv, size_t recv_bytes, struct cinfer_error *err)
{
    uint64_t seq = ++c->seq;
    zmq_msg_t msg, reply;
    int from, rc = frame_msg(&msg, c, op, c->rank, root, seq, bytes, send, send_bytes, err);
    if (rc == CINFER_OK)
        rc = send_msg(c, 0, &msg, 0, err);
    if (rc == CINFER_OK)
        rc = recv_frame(c, -1, &from, &reply, err);
    if (rc < 0)
        return fail_group(c, rc, err);
    struct cinfer_comm_tcp_frame f;
    rc = cinfer_comm_tcp_frame_decode(zmq_msg_data(&reply), zmq_msg_size(&reply), c->size, 0, &f, err);
    if (rc < 0) {
        zmq_msg_close(&reply);
        cinfer_error_prefix(err, "tcp communicator %s: rank 0 sent rank %d a malformed frame", c->endpoint, c->rank);
        return fail_group(c, rc, err);
    }
    if (f.op == CINFER_COMM_TCP_ABORT) {
        record_abort(c, f.rank, (const char *)f.payload, f.payload_bytes);
        zmq_msg_close(&reply);
        return aborted_error(c, err);
    }
    if (f.op != op || f.seq != seq || f.bytes != bytes || f.root != root || f.payload_bytes < recv_bytes) {
        char mine[96], theirs[96];
        describe(op, bytes, root, mine, sizeof mine);
        describe(f.op, f.bytes, f.root, theirs, sizeof theirs);
        zmq_msg_close(&reply);
        rc = cinfer_error_set(err, CINFER_ERR_STATE,
                              "tcp communicator %s: rank 0 answered rank %d's %s (collective %" PRIu64 ") with %s "
                              "(collective %" PRIu64 ")", c->endpoint, c->rank, mine, seq, theirs, f.seq);
        return fail_group(c, rc, err);
    }
    if (recv && recv_bytes)
        memcpy(recv, f.payload, recv_bytes);
    zmq_msg_close(&reply);
    return CINFER_OK;
}

static int collective(struct tcp_comm *c, uint32_t op, uint64_t bytes, int root, const void *send, size_t send_bytes,
                      void *recv, size_t recv_bytes, struct cinfer_error *err)
{
    if (c->aborted_by >= 0)
        return aborted_error(c, err);
    if (c->rank == 0)
        return root_collective(c, op, bytes, root, send, recv, err);
    return member_collective(c, op, bytes, root, send, send_bytes, recv, recv_bytes, err);
}

static int tcp_all_reduce_sum_f32(void *state, float *data, size_t n, struct cinfer_error *err)
{
    struct tcp_comm *c = state;
    if (n > SIZE_MAX / sizeof(float) - CINFER_COMM_TCP_HEADER_BYTES)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "tcp communicator %s: all_reduce of %zu floats", c->endpoint,
                                n);
    size_t bytes = n * sizeof(float);
    return collective(c, CINFER_COMM_TCP_ALL_REDUCE, bytes, 0, data, bytes, data, bytes, err);
}

static int tcp_all_gather(void *state, const void *send, size_t bytes_per_rank, void *recv, struct cinfer_error *err)
{
    struct tcp_comm *c = state;
    if (bytes_per_rank > (SIZE_MAX - CINFER_COMM_TCP_HEADER_BYTES) / (size_t)c->size)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "tcp communicator %s: all_gather of %zu bytes per rank over "
                                "%d ranks", c->endpoint, bytes_per_rank, c->size);
    return collective(c, CINFER_COMM_TCP_ALL_GATHER, bytes_per_rank, 0, send, bytes_per_rank, recv,
                      bytes_per_rank * (size_t)c->size, err);
}

static int tcp_broadcast(void *state, void *data, size_t bytes, int root, struct cinfer_error *err)
{
    struct tcp_comm *c = state;
    if (root < 0 || root >= c->size)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "tcp communicator %s: broadcast from rank %d of %d",
                                c->endpoint, root, c->size);
    if (bytes > SIZE_MAX - CINFER_COMM_TCP_HEADER_BYTES)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "tcp communicator %s: broadcast of %zu bytes", c->endpoint,
                                bytes);
    int mine = c->rank == root;
    return collective(c, CINFER_COMM_TCP_BROADCAST, bytes, root, data, mine ? bytes : 0, mine ? NULL : data,
                      mine ? 0 : bytes, err);
}

static int tcp_barrier(void *state, struct cinfer_error *err)
{
    return collective(state, CINFER_COMM_TCP_BARRIER, 0, 0, NULL, 0, NULL, 0, err);
}

static int tcp_abort(void *state, const char *why, struct cinfer_error *err)
{
    (void)err;
    struct tcp_comm *c = state;
    if (c->aborted_by >= 0)
        return CINFER_OK; /* broken already: the first reason stands */
    why = why ? why : "";
    record_abort(c, c->rank, why, strlen(why));
    send_abort(c, -1);
    return CINFER_OK;
}

/* Closes the socket (frames already sent get linger_ms to leave) and frees c. */
static void close_comm(struct tcp_comm *c, int linger_ms)
{
    if (!c)
        return;
    drop_held(c);
    if (c->socket) {
        zmq_setsockopt(c->socket, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(c->socket);
    }
    free(c->held);
    free(c->have);
    free(c);
}

static void tcp_destroy(void *state)
{
    close_comm(state, CLOSE_LINGER_MS);
}

static const struct cinfer_comm_ops tcp_ops = {
    .version = CINFER_COMM_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_comm_ops),
    .name = "tcp",
    .all_reduce_sum_f32 = tcp_all_reduce_sum_f32,
    .all_gather = tcp_all_gather,
    .broadcast = tcp_broadcast,
    .barrier = tcp_barrier,
    .abort = tcp_abort,
    .destroy = tcp_destroy,
};

/* ---- joining ------------------------------------------------------------------------- */

/* 1 when a ZAP handler is bound in this context: then binding its endpoint fails. */
static int zap_running(void *zmq_context)
{
    void *probe = zmq_socket(zmq_context, ZMQ_REP);
    if (!probe)
        return 0;
    int linger_ms = 0;
    zmq_setsockopt(probe, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    int bound = zmq_bind(probe, ZAP_ENDPOINT) == 0;
    zmq_close(probe);
    return !bound;
}

/* "2, 3 and 5" into out: the ranks in [1, size) that joined[] lacks. */
static int list_missing(const uint8_t *joined, int size, char *out, size_t out_bytes)
{
    int n = 0, total = 0;
    for (int r = 1; r < size; r++)
        total += !joined[r];
    out[0] = '\0';
    for (int r = 1; r < size; r++) {
        if (joined[r])
            continue;
        size_t used = strlen(out);
        if (used + 24 >= out_bytes) {
            snprintf(out + used, out_bytes - used, " and more");
            break;
        }
        snprintf(out + used, out_bytes - used, "%s%d", n == 0 ? "" : n == total - 1 ? " and " : ", ", r);
        n++;
    }
    return total;
}

/* Rank 0: a hello from every other rank within timeout_ms, then a welcome to each. */
static int root_join(struct tcp_comm *c, int timeout_ms, struct cinfer_error *err)
{
    uint8_t *joined = c->have; /* free until the first collective */
    int64_t deadline = now_ms() + timeout_ms;
    int missing = c->size - 1, rc = CINFER_OK;
    while (missing > 0) {
        int64_t left = deadline - now_ms();
        zmq_msg_t body;
        int from;
        rc = recv_frame(c, left > 0 ? (int)left : 0, &from, &body, err);
        if (rc == CINFER_ERR_TIMEOUT)
            break;
        if (rc < 0)
            goto fail;
        if (from < 0) {
            zmq_msg_close(&body);
            continue;
        }
        struct cinfer_comm_tcp_frame f;
        rc = cinfer_comm_tcp_frame_decode(zmq_msg_data(&body), zmq_msg_size(&body), c->size, 1, &f, err);
        if (rc < 0) {
            cinfer_error_prefix(err, "tcp communicator %s: rank %d sent a malformed hello", c->endpoint, from);
        } else if (f.op != CINFER_COMM_TCP_HELLO || f.rank != from || joined[from]) {
            char buf[32];
            rc = cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank %d sent %s%s while the group "
                                  "formed%s", c->endpoint, from, joined[from] ? "another " : "",
                                  cinfer_comm_tcp_op_name(f.op, buf, sizeof buf),
                                  joined[from] ? " (two processes with one rank?)" : "");
        }
        zmq_msg_close(&body);
        if (rc < 0)
            goto fail;
        joined[from] = 1;
        missing--;
    }
    if (missing > 0) {
        char list[256];
        int n = list_missing(joined, c->size, list, sizeof list);
        rc = cinfer_error_set(err, CINFER_ERR_TIMEOUT, "tcp communicator %s: rank%s %s of %d did not join within %d "
                              "ms (not started, cannot reach the endpoint, or refused for want of the engine's CURVE "
                              "keys)", c->endpoint, n > 1 ? "s" : "", list, c->size, timeout_ms);
        goto fail;
    }
    for (int to = 1; to < c->size && rc == CINFER_OK; to++) {
        zmq_msg_t msg;
        rc = frame_msg(&msg, c, CINFER_COMM_TCP_WELCOME, 0, 0, 0, 0, NULL, 0, err);
        if (rc == CINFER_OK)
            rc = send_msg(c, to, &msg, 0, err);
    }
    if (rc < 0)
        goto fail;
    memset(joined, 0, (size_t)c->size);
    return CINFER_OK;
fail:
    memset(joined, 0, (size_t)c->size);
    return fail_group(c, rc, err);
}

/* Events of the client's connection, to tell "refused" and "no such server" from "no
 * answer": a CURVE client holding another server key never completes its handshake
 * (the server cannot read its hello and hangs up); one holding the server key but
 * another client pair is refused by the ZAP handler; one without keys, or with keys
 * where rank 0 has none, fails on the mechanism. */
#define JOIN_EVENTS                                                                                                \
    (ZMQ_EVENT_CONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |                      \
     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)

/* Reads one monitor event; 0 when none could be read. */
static int read_event(void *monitor, uint16_t *event, uint32_t *value)
{
    zmq_msg_t part;
    zmq_msg_init(&part);
    int ok = zmq_msg_recv(&part, monitor, 0) >= 0 && zmq_msg_size(&part) >= 6;
    if (ok) {
        const uint8_t *p = zmq_msg_data(&part);
        memcpy(event, p, 2);
        memcpy(value, p + 2, 4);
    }
    int more = ok && zmq_msg_more(&part);
    zmq_msg_close(&part);
    while (more) { /* the endpoint's address */
        zmq_msg_init(&part);
        more = zmq_msg_recv(&part, monitor, 0) >= 0 && zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
    return ok;
}

/* A rank > 0: connects to rank 0 (its socket is not connected yet, so that the monitor
 * sees the first connection and handshake: libzmq does not retry a handshake that failed
 * on the protocol, so events missed before the monitor would never come again), then a
 * hello to rank 0 and its welcome, within timeout_ms (+ the grace). */
static int member_join(struct tcp_comm *c, void *zmq_context, int timeout_ms, struct cinfer_error *err)
{
    char monitor_endpoint[96];
    snprintf(monitor_endpoint, sizeof monitor_endpoint, "inproc://cinfer-comm-tcp-monitor-%p", (void *)c);
    void *monitor = NULL;
    if (zmq_socket_monitor(c->socket, monitor_endpoint, JOIN_EVENTS) == 0) {
        monitor = zmq_socket(zmq_context, ZMQ_PAIR);
        if (monitor && zmq_connect(monitor, monitor_endpoint) != 0) {
            zmq_close(monitor);
            monitor = NULL;
        }
    }
    if (zmq_connect(c->socket, c->endpoint) != 0) {
        int rc = cinfer_error_set(err, CINFER_ERR_IO, "tcp communicator, rank %d: cannot connect to %s: %s", c->rank,
                                  c->endpoint, zmq_strerror(zmq_errno()));
        if (monitor) {
            zmq_socket_monitor(c->socket, NULL, 0);
            zmq_close(monitor);
        }
        return rc;
    }
    zmq_msg_t msg;
    int rc = frame_msg(&msg, c, CINFER_COMM_TCP_HELLO, c->rank, 0, 0, 0, NULL, 0, err);
    if (rc == CINFER_OK)
        rc = send_msg(c, 0, &msg, 0, err);
    int64_t deadline = now_ms() + timeout_ms + ATTACH_GRACE_MS;
    int connected = 0, handshaken = 0; /* what the monitor saw */
    while (rc == CINFER_OK) {
        int64_t left = deadline - now_ms();
        zmq_pollitem_t items[2] = {{.socket = c->socket, .events = ZMQ_POLLIN},
                                   {.socket = monitor, .events = ZMQ_POLLIN}};
        int ready = zmq_poll(items, monitor ? 2 : 1, left > 0 ? (long)left : 0);
        if (ready < 0 && zmq_errno() == EINTR)
            continue;
        if (ready < 0) {
            rc = cinfer_error_set(err, CINFER_ERR_IO, "tcp communicator %s: zmq_poll: %s", c->endpoint,
                                  zmq_strerror(zmq_errno()));
            break;
        }
        if (ready == 0) {
            const char *seen = !monitor ? "rank 0 not started or unreachable, or other ranks missing"
                               : !connected ? "no connection was made: rank 0 not started, or the address unreachable"
                               : !handshaken ? "connected, but the CURVE handshake never completed: this rank holds "
                                               "another server key than rank 0's"
                                             : "connected, but rank 0 said nothing";
            rc = cinfer_error_set(err, CINFER_ERR_TIMEOUT, "tcp communicator %s: rank 0 did not welcome rank %d within "
                                  "%d ms (%s)", c->endpoint, c->rank, timeout_ms + ATTACH_GRACE_MS, seen);
            break;
        }
        uint16_t event = 0;
        uint32_t value = 0;
        if (monitor && (items[1].revents & ZMQ_POLLIN) && read_event(monitor, &event, &value)) {
            connected |= event == ZMQ_EVENT_CONNECTED;
            handshaken |= event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
            if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
                rc = cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank 0 refused rank %d's CURVE "
                                      "keys (ZAP status %" PRIu32 "): its client key is not this engine's",
                                      c->endpoint, c->rank, value);
                break;
            }
            if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
                rc = cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank %d's handshake with rank 0 "
                                      "failed (ZMTP protocol error 0x%" PRIx32 "): one side uses CURVE keys and the "
                                      "other none", c->endpoint, c->rank, value);
                break;
            }
        }
        if (!(items[0].revents & ZMQ_POLLIN))
            continue;
        int from;
        rc = recv_frame(c, 0, &from, &msg, err);
        if (rc == CINFER_ERR_TIMEOUT) {
            rc = CINFER_OK;
            continue;
        }
        if (rc < 0)
            break;
        struct cinfer_comm_tcp_frame f;
        rc = cinfer_comm_tcp_frame_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), c->size, 0, &f, err);
        if (rc < 0) {
            cinfer_error_prefix(err, "tcp communicator %s: rank 0 answered rank %d's hello with a malformed frame",
                                c->endpoint, c->rank);
        } else if (f.op == CINFER_COMM_TCP_ABORT) {
            rc = cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank %d cannot join: rank 0 gave up: "
                                  "%.*s", c->endpoint, c->rank, (int)f.payload_bytes, (const char *)f.payload);
        } else if (f.op != CINFER_COMM_TCP_WELCOME) {
            char buf[32];
            rc = cinfer_error_set(err, CINFER_ERR_STATE, "tcp communicator %s: rank 0 answered rank %d's hello with %s",
                                  c->endpoint, c->rank, cinfer_comm_tcp_op_name(f.op, buf, sizeof buf));
        }
        zmq_msg_close(&msg);
        if (rc == CINFER_OK)
            break; /* welcomed */
    }
    if (monitor) {
        zmq_socket_monitor(c->socket, NULL, 0);
        zmq_close(monitor);
    }
    return rc;
}

int cinfer_comm_tcp_attach(void *zmq_context, const char *endpoint, int rank, int size,
                           const struct cinfer_port_args *keys, int timeout_ms, struct cinfer_comm **out,
                           struct cinfer_error *err)
{
    *out = NULL;
    if (!zmq_context || !endpoint || strncmp(endpoint, "tcp://", 6) != 0 || strlen(endpoint) >= ENDPOINT_BYTES)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "tcp communicator: endpoint \"%.300s\" must be tcp://ADDRESS:PORT (under %d "
                                "characters) and a zmq context given", endpoint ? endpoint : "(null)", ENDPOINT_BYTES);
    if (size < 1 || size > CINFER_COMM_TCP_MAX_RANKS || rank < 0 || rank >= size || timeout_ms < 0)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "tcp communicator %s: rank %d of %d ranks, timeout %d ms; expected 1 to %d ranks, 0 <= "
                                "rank < size and a timeout >= 0", endpoint, rank, size, timeout_ms,
                                CINFER_COMM_TCP_MAX_RANKS);
    if (rank == 0 && cinfer_curve_enabled(keys) && !zap_running(zmq_context))
        return cinfer_error_set(err, CINFER_ERR_STATE,
                                "tcp communicator %s: rank 0 serves CURVE but its zmq context runs no ZAP handler "
                                "(cinfer_zap_start): libzmq would admit clients without the engine's keys", endpoint);
    struct tcp_comm *c = calloc(1, sizeof *c);
    if (c) {
        c->held = calloc((size_t)size, sizeof *c->held);
        c->have = calloc((size_t)size, 1);
    }
    if (!c || !c->held || !c->have) {
        close_comm(c, 0);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "tcp communicator %s: out of memory", endpoint);
    }
    c->rank = rank;
    c->size = size;
    c->aborted_by = -1;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    char id[ROUTING_ID_BYTES];
    routing_id_of(rank, id, sizeof id);
    /* rank 0 binds here; a member connects in member_join, under its monitor */
    c->socket = rank == 0 ? cinfer_channel_open_keyed(zmq_context, ZMQ_ROUTER, endpoint, 1, NULL, keys, err)
                          : cinfer_channel_prepare_keyed(zmq_context, ZMQ_DEALER, endpoint, 0, id, keys, err);
    if (!c->socket) {
        close_comm(c, 0);
        return cinfer_error_prefix(err, "tcp communicator, rank %d", rank);
    }
    int rc = rank == 0 ? root_join(c, timeout_ms, err) : member_join(c, zmq_context, timeout_ms, err);
    if (rc < 0) { /* rank 0's word to the ranks that joined must still leave; a hello need not */
        close_comm(c, rank == 0 ? CLOSE_LINGER_MS : 0);
        return rc;
    }
    c->comm = (struct cinfer_comm){&tcp_ops, c, rank, size};
    *out = &c->comm;
    return CINFER_OK;
}
