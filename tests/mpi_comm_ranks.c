/* One rank of test_launch_mpi's communicator check, run under mpirun:
 *
 *   (group blob on stdin) | mpirun -np N mpi_comm_ranks PLUGIN
 *
 * Loads the launch-mpi plugin as a worker does, calls its group_join (rank 0 reads the
 * blob test_launch_mpi made: rank r's part is "settings of rank r"), then checks the
 * communicator it returned against the contract of cinfer/communicator.h:
 *  - each rank got its own part of the settings;
 *  - all_reduce_sum_f32 over sizes from 1 to 100k floats gives every rank the serial sum
 *    in rank order, bit for bit (inputs of mixed magnitudes, so another order rounds
 *    differently: checked too), twice;
 *  - all_gather and broadcast from every root deliver every byte;
 *  - barrier holds every rank (a shared file counts arrivals).
 * Prints "rank R of N: ok (...)" and exits 0, or says what differed and exits 1. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cinfer/communicator.h"
#include "cinfer/launcher.h"
#include "cinfer/plugins.h"

static int rank_, size_;

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        fprintf(stderr, "rank %d of %d: ", rank_, size_);                                                              \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fprintf(stderr, "\n");                                                                                         \
        exit(1);                                                                                                       \
    } while (0)

static float input_value(int rank, size_t i, int round)
{
    uint64_t h = (uint64_t)(rank + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1) * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)(round + 7) * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    float mantissa = (float)(h & 0xFFFFFF) / (float)0x1000000 + 0.5f;
    int exponent = (int)((h >> 24) % 41) - 20;
    float v = ldexpf(mantissa, exponent);
    return (h >> 40) & 1 ? -v : v;
}

static float serial_sum(int n_ranks, size_t i, int round, int reverse)
{
    float acc = input_value(reverse ? n_ranks - 1 : 0, i, round);
    for (int k = 1; k < n_ranks; k++)
        acc += input_value(reverse ? n_ranks - 1 - k : k, i, round);
    return acc;
}

static unsigned char byte_of(int rank, size_t i, int round)
{
    return (unsigned char)((rank * 131 + (int)i * 7 + round * 17) & 0xff);
}

static void check_all_reduce(struct cinfer_comm *c, int *order_matters)
{
    static const size_t sizes[] = {1, 2, 3, 7, 576, 1023, 1024, 1025, 4099, 100003};
    for (int round = 0; round < 2; round++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t n = sizes[s];
            float *data = malloc(n * sizeof *data);
            for (size_t i = 0; i < n; i++)
                data[i] = input_value(c->rank, i, round);
            struct cinfer_error err = {0};
            if (c->ops->all_reduce_sum_f32(c->state, data, n, &err))
                FAIL("all_reduce_sum_f32 of %zu floats: %s", n, err.message);
            for (size_t i = 0; i < n; i++) {
                float want = serial_sum(c->size, i, round, 0);
                if (memcmp(&data[i], &want, sizeof want))
                    FAIL("all_reduce_sum_f32 of %zu floats: element %zu is %.9g, the rank-order sum is %.9g", n, i,
                         (double)data[i], (double)want);
                float reversed = serial_sum(c->size, i, round, 1);
                *order_matters += memcmp(&want, &reversed, sizeof want) != 0;
            }
            free(data);
        }
}

static void check_gather_broadcast(struct cinfer_comm *c)
{
    static const size_t sizes[] = {1, 3, 64, 4095, 4097, 1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        unsigned char *send = malloc(n), *recv = malloc(n * (size_t)c->size);
        for (size_t i = 0; i < n; i++)
            send[i] = byte_of(c->rank, i, (int)s);
        struct cinfer_error err = {0};
        if (c->ops->all_gather(c->state, send, n, recv, &err))
            FAIL("all_gather of %zu bytes: %s", n, err.message);
        for (int r = 0; r < c->size; r++)
            for (size_t i = 0; i < n; i++)
                if (recv[(size_t)r * n + i] != byte_of(r, i, (int)s))
                    FAIL("all_gather of %zu bytes: rank %d's byte %zu is wrong", n, r, i);
        for (int root = 0; root < c->size; root++) {
            for (size_t i = 0; i < n; i++)
                send[i] = c->rank == root ? byte_of(root, i, 100 + (int)s) : 0;
            if (c->ops->broadcast(c->state, send, n, root, &err))
                FAIL("broadcast of %zu bytes from %d: %s", n, root, err.message);
            for (size_t i = 0; i < n; i++)
                if (send[i] != byte_of(root, i, 100 + (int)s))
                    FAIL("broadcast of %zu bytes from rank %d: byte %zu is wrong", n, root, i);
        }
        free(send);
        free(recv);
    }
}

/* Each round every rank adds one to a shared counter file, waits at the barrier, then
 * reads it: no rank may leave before all arrived. */
static void check_barrier(struct cinfer_comm *c, const char *counter_path)
{
    for (int round = 1; round <= 5; round++) {
        int fd = open(counter_path, O_RDWR | O_CREAT, 0600);
        flock(fd, LOCK_EX);
        long v = 0;
        char buf[32] = "";
        if (pread(fd, buf, sizeof buf - 1, 0) > 0)
            v = atol(buf);
        int len = snprintf(buf, sizeof buf, "%ld\n", v + 1);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len)
            FAIL("cannot write %s", counter_path);
        flock(fd, LOCK_UN);
        struct cinfer_error err = {0};
        if (c->ops->barrier(c->state, &err))
            FAIL("barrier: %s", err.message);
        memset(buf, 0, sizeof buf);
        if (pread(fd, buf, sizeof buf - 1, 0) <= 0)
            FAIL("cannot read %s", counter_path);
        close(fd);
        if (atol(buf) < (long)round * c->size)
            FAIL("barrier round %d: left after %ld arrivals, %d expected", round, atol(buf), round * c->size);
        if (c->ops->barrier(c->state, &err)) /* nobody starts the next round before all have read */
            FAIL("barrier: %s", err.message);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mpi_comm_ranks PLUGIN COUNTER_FILE (under mpirun, the group blob on stdin)\n");
        return 2;
    }
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_error err = {0};
    if (cinfer_plugin_open(argv[1], CINFER_PLUGIN_KIND_LAUNCHER, NULL, &plugin, &err))
        FAIL("%s", err.message);
    const struct cinfer_launcher_ops *ops = cinfer_plugin_vtable(plugin);
    if (ops->version < 3 || !ops->group_join)
        FAIL("%s has no group_join", argv[1]);
    struct cinfer_group_member m = {.struct_size = sizeof m};
    if (ops->group_join(0, &m, &err))
        FAIL("group_join: %s", err.message);
    rank_ = m.rank;
    size_ = m.size;
    char want[64];
    snprintf(want, sizeof want, "settings of rank %d", m.rank);
    if (m.settings_bytes != strlen(want) || memcmp(m.settings, want, m.settings_bytes))
        FAIL("got settings '%.*s', expected '%s'", (int)m.settings_bytes, (const char *)m.settings, want);
    if (m.stdin_is_lifeline != (m.rank == 0))
        FAIL("stdin_is_lifeline is %d", m.stdin_is_lifeline);
    if (!m.comm)
        FAIL("no communicator for a group of %d", m.size);
    if (cinfer_comm_check(m.comm, &err))
        FAIL("%s", err.message);
    if (m.comm->rank != m.rank || m.comm->size != m.size || strcmp(m.comm->ops->name, "mpi"))
        FAIL("communicator '%s' is rank %d of %d", m.comm->ops->name, m.comm->rank, m.comm->size);
    int order_matters = 0;
    check_all_reduce(m.comm, &order_matters);
    /* two addends commute exactly; from three on, the order shows in the rounding */
    if (!order_matters && m.size > 2)
        FAIL("no input where the order of the additions changes the bits: the check proves nothing");
    check_gather_broadcast(m.comm);
    check_barrier(m.comm, argv[2]);
    printf("rank %d of %d: ok (own settings; all_reduce bit-exact in rank order, %d elements where another order "
           "rounds differently; all_gather and broadcast from every root; barrier)\n",
           m.rank, m.size, order_matters);
    fflush(stdout);
    free(m.settings);
    cinfer_comm_destroy(&m.comm);
    return 0;
}
