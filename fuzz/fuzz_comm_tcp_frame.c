/* fuzz_comm_tcp_frame: the decoder of the tcp communicator's frames (core/comm/comm_tcp.c),
 * which come from the network, on arbitrary bytes, for groups of 1 to 8 ranks and both
 * directions. A frame either decodes (and then its header encodes to the very same
 * bytes, its rank and root lie in the group, and its payload is exactly what its op
 * calls for) or is refused with a message; nothing may crash, leak or read out of
 * bounds. Seeds: fuzz/seeds/fuzz_comm_tcp_frame/, frames of a group of 2 to 4. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_tcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, int group, int to_rank0)
{
    struct cinfer_comm_tcp_frame f;
    struct cinfer_error err = {0};
    if (cinfer_comm_tcp_frame_decode(data, size, group, to_rank0, &f, &err) != CINFER_OK) {
        if (!err.message[0])
            abort(); /* a refusal must say why */
        return;
    }
    uint8_t header[CINFER_COMM_TCP_HEADER_BYTES];
    cinfer_comm_tcp_frame_header(header, f.op, f.size, f.rank, f.root, f.seq, f.bytes);
    if (memcmp(header, data, sizeof header) != 0 || f.payload != data + sizeof header ||
        f.payload_bytes != size - sizeof header)
        abort();
    if (f.size != (uint32_t)group || f.rank < 0 || f.rank >= group || f.root < 0 || f.root >= group)
        abort();
    if (to_rank0 && f.rank == 0)
        abort();
    uint64_t want = f.bytes; /* what each op's payload must be */
    switch (f.op) {
    case CINFER_COMM_TCP_HELLO:
    case CINFER_COMM_TCP_WELCOME:
    case CINFER_COMM_TCP_BARRIER:
        want = 0;
        if (f.bytes != 0 || f.root != 0)
            abort();
        break;
    case CINFER_COMM_TCP_ALL_REDUCE:
        if (f.bytes % 4 != 0)
            abort();
        break;
    case CINFER_COMM_TCP_ALL_GATHER:
        want = to_rank0 ? f.bytes : f.bytes * (uint64_t)group;
        break;
    case CINFER_COMM_TCP_BROADCAST:
        want = to_rank0 && f.rank != f.root ? 0 : f.bytes;
        break;
    case CINFER_COMM_TCP_ABORT:
        if (f.bytes > CINFER_COMM_TCP_WHY_MAX || memchr(f.payload, '\0', f.payload_bytes))
            abort();
        break;
    default:
        abort(); /* an op the protocol does not have */
    }
    if (f.payload_bytes != want)
        abort();
    if ((f.op == CINFER_COMM_TCP_HELLO && !to_rank0) || (f.op == CINFER_COMM_TCP_WELCOME && to_rank0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int group = 1; group <= 8; group++)
        for (int to_rank0 = 0; to_rank0 <= 1; to_rank0++)
            check(data, size, group, to_rank0);
    return 0;
}
