/* The shared-memory communicator (core/comm/comm_shm.c) with 2, 3 and 4 ranks, as
 * threads and as forked processes:
 *  - all_reduce_sum_f32 over sizes from 1 float to several chunks gives every rank the
 *    serial sum in rank order, bit for bit (inputs of mixed magnitudes, so another order
 *    would round differently: the test checks that it would), and the same bits again
 *    on a second run;
 *  - all_gather and broadcast (from every root) over sizes around the chunk size;
 *  - barrier: no rank leaves before every rank arrived, round after round;
 *  - abort: ranks waiting in a collective return an error naming the aborting rank;
 *  - create, attach and unlink refuse what they should, naming the segment. */
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/comm_shm.h"
#include "support/ranks.h"
#include "support/runner.h"

#define SMALL_CHUNK_BYTES ((size_t)4096) /* 1024 floats: several chunks stay cheap */
#define RANK_TIMEOUT_S 120

struct group {
    char name[128];
    size_t chunk_bytes;
    _Atomic int *arrivals; /* shared: barrier rounds counted */
};

/* Rank r's value i in round `round`: mixed magnitudes (2^-20 to 2^20) and signs, so
 * the order of the additions shows in the rounding. */
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

static void serial_sum(int n_ranks, size_t n, int round, int reverse, float *out)
{
    for (size_t i = 0; i < n; i++) {
        float acc = input_value(reverse ? n_ranks - 1 : 0, i, round);
        for (int k = 1; k < n_ranks; k++)
            acc += input_value(reverse ? n_ranks - 1 - k : k, i, round);
        out[i] = acc;
    }
}

static const size_t reduce_sizes[] = {1, 2, 7, 576, 1023, 1024, 1025, 2048, 3 * 1024 + 5, 10 * 1024 + 17};

static int attach(const struct group *g, int rank, struct cinfer_comm **comm, char *why, size_t why_bytes)
{
    struct cinfer_error err = {0};
    if (cinfer_comm_shm_attach(g->name, rank, comm, &err) != 0) {
        snprintf(why, why_bytes, "attach: %s", err.message);
        return 1;
    }
    if (cinfer_comm_check(*comm, &err) != 0 || (*comm)->rank != rank) {
        snprintf(why, why_bytes, "check: %s (rank %d)", err.message, (*comm)->rank);
        return 1;
    }
    return 0;
}

static int reduce_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct cinfer_comm *comm = NULL;
    if (attach(g, rank, &comm, why, why_bytes))
        return 1;
    if (comm->size != n_ranks) {
        snprintf(why, why_bytes, "size %d, expected %d", comm->size, n_ranks);
        return 1;
    }
    size_t most = reduce_sizes[sizeof reduce_sizes / sizeof reduce_sizes[0] - 1];
    float *data = malloc(most * sizeof *data), *first = malloc(most * sizeof *first);
    float *want = malloc(most * sizeof *want);
    int failed = 0;
    struct cinfer_error err = {0};
    for (size_t s = 0; s < sizeof reduce_sizes / sizeof reduce_sizes[0] && !failed; s++) {
        size_t n = reduce_sizes[s];
        serial_sum(n_ranks, n, (int)s, 0, want);
        for (int run = 0; run < 2 && !failed; run++) {
            for (size_t i = 0; i < n; i++)
                data[i] = input_value(rank, i, (int)s);
            if (comm->ops->all_reduce_sum_f32(comm->state, data, n, &err) != 0) {
                snprintf(why, why_bytes, "all_reduce of %zu floats: %s", n, err.message);
                failed = 1;
            } else if (memcmp(data, want, n * sizeof *data) != 0) {
                size_t i = 0;
                while (data[i] == want[i])
                    i++;
                snprintf(why, why_bytes, "all_reduce of %zu floats, run %d: element %zu is %.9g, the serial sum in "
                         "rank order is %.9g", n, run, i, (double)data[i], (double)want[i]);
                failed = 1;
            } else if (run == 1 && memcmp(data, first, n * sizeof *data) != 0) {
                snprintf(why, why_bytes, "all_reduce of %zu floats: a second run gave other bits", n);
                failed = 1;
            }
            memcpy(first, data, n * sizeof *data);
        }
    }
    free(data);
    free(first);
    free(want);
    cinfer_comm_destroy(&comm);
    return failed;
}

static unsigned char gather_byte(int rank, size_t i, int round)
{
    return (unsigned char)((size_t)rank * 131 + i * 7 + (size_t)round * 17 + (i >> 8));
}

static const size_t byte_sizes[] = {1, 3, 64, 4095, 4096, 4097, 3 * 4096 + 11};

static int gather_broadcast_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct cinfer_comm *comm = NULL;
    if (attach(g, rank, &comm, why, why_bytes))
        return 1;
    size_t most = byte_sizes[sizeof byte_sizes / sizeof byte_sizes[0] - 1];
    unsigned char *send = malloc(most), *recv = malloc(most * (size_t)n_ranks), *bcast = malloc(most);
    int failed = 0;
    struct cinfer_error err = {0};
    for (size_t s = 0; s < sizeof byte_sizes / sizeof byte_sizes[0] && !failed; s++) {
        size_t n = byte_sizes[s];
        for (size_t i = 0; i < n; i++)
            send[i] = gather_byte(rank, i, (int)s);
        memset(recv, 0xEE, n * (size_t)n_ranks);
        if (comm->ops->all_gather(comm->state, send, n, recv, &err) != 0) {
            snprintf(why, why_bytes, "all_gather of %zu bytes: %s", n, err.message);
            failed = 1;
            break;
        }
        for (int r = 0; r < n_ranks && !failed; r++)
            for (size_t i = 0; i < n; i++)
                if (recv[(size_t)r * n + i] != gather_byte(r, i, (int)s)) {
                    snprintf(why, why_bytes, "all_gather of %zu bytes: rank %d's byte %zu is %u, sent %u", n, r, i,
                             recv[(size_t)r * n + i], gather_byte(r, i, (int)s));
                    failed = 1;
                    break;
                }
        for (int root = 0; root < n_ranks && !failed; root++) {
            for (size_t i = 0; i < n; i++)
                bcast[i] = rank == root ? gather_byte(root, i, (int)s + 100) : 0;
            if (comm->ops->broadcast(comm->state, bcast, n, root, &err) != 0) {
                snprintf(why, why_bytes, "broadcast of %zu bytes from %d: %s", n, root, err.message);
                failed = 1;
                break;
            }
            for (size_t i = 0; i < n; i++)
                if (bcast[i] != gather_byte(root, i, (int)s + 100)) {
                    snprintf(why, why_bytes, "broadcast of %zu bytes from rank %d: byte %zu is %u, sent %u", n, root,
                             i, bcast[i], gather_byte(root, i, (int)s + 100));
                    failed = 1;
                    break;
                }
        }
    }
    free(send);
    free(recv);
    free(bcast);
    cinfer_comm_destroy(&comm);
    return failed;
}

#define BARRIER_ROUNDS 200

static int barrier_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct cinfer_comm *comm = NULL;
    if (attach(g, rank, &comm, why, why_bytes))
        return 1;
    int failed = 0;
    struct cinfer_error err = {0};
    for (int round = 0; round < BARRIER_ROUNDS && !failed; round++) {
        if (rank == round % n_ranks)
            usleep(200); /* someone is always late */
        atomic_fetch_add(g->arrivals, 1);
        if (comm->ops->barrier(comm->state, &err) != 0) {
            snprintf(why, why_bytes, "barrier %d: %s", round, err.message);
            failed = 1;
        } else {
            int seen = atomic_load(g->arrivals);
            if (seen < (round + 1) * n_ranks) {
                snprintf(why, why_bytes, "left barrier %d having seen %d arrivals, %d ranks had to arrive", round,
                         seen, (round + 1) * n_ranks);
                failed = 1;
            }
        }
        /* nobody arrives at the next round before all left this one */
        if (!failed && comm->ops->barrier(comm->state, &err) != 0) {
            snprintf(why, why_bytes, "second barrier of round %d: %s", round, err.message);
            failed = 1;
        }
    }
    cinfer_comm_destroy(&comm);
    return failed;
}

/* The last rank aborts instead of joining; every other rank's all-reduce must fail
 * with the abort's reason. */
static int abort_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct cinfer_comm *comm = NULL;
    if (attach(g, rank, &comm, why, why_bytes))
        return 1;
    int failed = 0;
    struct cinfer_error err = {0};
    float data[16] = {0};
    if (rank == n_ranks - 1) {
        usleep(20000); /* the others are waiting by now (asleep on the futex, most likely) */
        if (comm->ops->abort(comm->state, "rank test failure", &err) != 0) {
            snprintf(why, why_bytes, "abort: %s", err.message);
            failed = 1;
        }
        if (comm->ops->barrier(comm->state, &err) == 0 || !strstr(err.message, "aborted")) {
            snprintf(why, why_bytes, "a barrier after abort did not fail: %s", err.message);
            failed = 1;
        }
    } else {
        int rc = comm->ops->all_reduce_sum_f32(comm->state, data, 16, &err);
        char expect[64];
        snprintf(expect, sizeof expect, "rank %d aborted the group: rank test failure", n_ranks - 1);
        if (rc != CINFER_ERR_STATE || !strstr(err.message, expect)) {
            snprintf(why, why_bytes, "all_reduce after the abort returned %d: \"%s\", expected \"%s\"", rc,
                     err.message, expect);
            failed = 1;
        }
    }
    cinfer_comm_destroy(&comm);
    return failed;
}

static void run_group(const char *what, cinfer_test_rank_fn fn, size_t chunk_bytes)
{
    static const enum cinfer_test_ranks_mode modes[] = {CINFER_TEST_RANKS_THREADS, CINFER_TEST_RANKS_PROCESSES};
    for (int n_ranks = 2; n_ranks <= 4; n_ranks++)
        for (int m = 0; m < 2; m++) {
            struct group g = {.chunk_bytes = chunk_bytes};
            cinfer_test_shm_name(what, g.name, sizeof g.name);
            g.arrivals = cinfer_test_shared_alloc(sizeof *g.arrivals);
            struct cinfer_error err = {0};
            ck_assert_msg(cinfer_comm_shm_create(g.name, n_ranks, chunk_bytes, &err) == 0, "%s", err.message);
            char why[1024];
            int failed = cinfer_test_run_ranks(n_ranks, modes[m], fn, &g, RANK_TIMEOUT_S, why, sizeof why);
            ck_assert_int_eq(cinfer_comm_shm_unlink(g.name, &err), 0);
            cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
            ck_assert_msg(failed == 0, "%s, %zu-byte chunks: %d rank(s) failed; %s", what, chunk_bytes, failed, why);
            printf("comm_shm: %s, %d ranks as %s, %zu-byte chunks: ok\n", what, n_ranks, m ? "processes" : "threads",
                   chunk_bytes ? chunk_bytes : CINFER_COMM_SHM_DEFAULT_CHUNK_BYTES);
        }
}

START_TEST(all_reduce_is_the_serial_sum_in_rank_order)
{
    /* the inputs make order matter: the reverse order rounds differently somewhere */
    for (int n_ranks = 2; n_ranks <= 4; n_ranks++) {
        size_t n = 10 * 1024 + 17;
        float *fwd = malloc(n * sizeof *fwd), *rev = malloc(n * sizeof *rev);
        serial_sum(n_ranks, n, 9, 0, fwd);
        serial_sum(n_ranks, n, 9, 1, rev);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
            differ += fwd[i] != rev[i];
        ck_assert_msg(n_ranks == 2 || differ > 0, "%d ranks: the reverse order gives the same sums", n_ranks);
        printf("comm_shm: %d ranks, reverse order differs in %zu of %zu sums\n", n_ranks, differ, n);
        free(fwd);
        free(rev);
    }
    run_group("reduce", reduce_rank, SMALL_CHUNK_BYTES);
    run_group("reduce", reduce_rank, 0);
}
END_TEST

START_TEST(all_gather_and_broadcast_deliver_every_byte)
{
    run_group("gather", gather_broadcast_rank, SMALL_CHUNK_BYTES);
}
END_TEST

START_TEST(barrier_holds_every_rank)
{
    run_group("barrier", barrier_rank, SMALL_CHUNK_BYTES);
}
END_TEST

START_TEST(abort_fails_the_waiting_ranks)
{
    run_group("abort", abort_rank, SMALL_CHUNK_BYTES);
}
END_TEST

START_TEST(create_attach_unlink_refuse_with_names)
{
    char name[128];
    cinfer_test_shm_name("errors", name, sizeof name);
    struct cinfer_error err = {0};
    struct cinfer_comm *comm = NULL, *again = NULL;
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 0, &comm, &err), CINFER_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, name));
    ck_assert_int_eq(cinfer_comm_shm_create("no-slash", 2, 0, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "no-slash"));
    ck_assert_int_eq(cinfer_comm_shm_create(name, 0, 0, &err), CINFER_ERR_RANGE);
    ck_assert_int_eq(cinfer_comm_shm_create(name, 2, 1000, &err), CINFER_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "1000"));
    ck_assert_int_eq(cinfer_comm_shm_create(name, 2, 0, &err), 0);
    ck_assert_int_eq(cinfer_comm_shm_create(name, 2, 0, &err), CINFER_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(err.message, "unlink it"));
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 2, &comm, &err), CINFER_ERR_STATE);
    ck_assert_msg(strstr(err.message, "rank 2 is outside [0, 2)") != NULL, "%s", err.message);
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 1, &comm, &err), 0);
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 1, &again, &err), CINFER_ERR_STATE);
    ck_assert_msg(strstr(err.message, "already has a rank 1 attached") != NULL, "%s", err.message);
    cinfer_comm_destroy(&comm);
    ck_assert_ptr_null(comm);
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 1, &again, &err), 0); /* free again after destroy */
    ck_assert_int_eq(cinfer_comm_shm_unlink(name, &err), 0);
    cinfer_comm_destroy(&again); /* the mapping outlived the name */
    ck_assert_int_eq(cinfer_comm_shm_unlink(name, &err), CINFER_ERR_NOT_FOUND);
    /* a segment that is not a communicator's */
    cinfer_test_shm_name("foreign", name, sizeof name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 8192), 0);
    close(fd);
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 0, &comm, &err), CINFER_ERR_STATE);
    ck_assert_msg(strstr(err.message, "not a cinfer communicator segment") != NULL, "%s", err.message);
    ck_assert_int_eq(cinfer_comm_shm_unlink(name, &err), 0);
    /* the size is fixed by ranks and chunk, never by a model */
    ck_assert_uint_eq(cinfer_comm_shm_segment_bytes(4, 0), 4096 + 2 * 4 * CINFER_COMM_SHM_DEFAULT_CHUNK_BYTES);
}
END_TEST

START_TEST(check_refuses_bad_ops)
{
    struct cinfer_error err = {0};
    struct cinfer_comm_ops ops = {.version = CINFER_COMM_OPS_VERSION + 1, .struct_size = sizeof ops, .name = "fake"};
    struct cinfer_comm comm = {&ops, NULL, 0, 1};
    ck_assert_int_eq(cinfer_comm_check(&comm, &err), CINFER_ERR_ABI);
    ck_assert_msg(strstr(err.message, "communicator fake: ops version 2, this build expects 1") != NULL, "%s",
                  err.message);
    ops.version = CINFER_COMM_OPS_VERSION;
    ck_assert_int_eq(cinfer_comm_check(&comm, &err), CINFER_ERR_ABI);
    ck_assert_msg(strstr(err.message, "all_reduce_sum_f32 is NULL") != NULL, "%s", err.message);
    ck_assert_int_eq(cinfer_comm_check(NULL, &err), CINFER_ERR_INVALID_ARGUMENT);
}
END_TEST

static Suite *suite_comm_shm(void)
{
    Suite *s = suite_create("comm_shm");
    TCase *tc = tcase_create("shm");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, all_reduce_is_the_serial_sum_in_rank_order);
    tcase_add_test(tc, all_gather_and_broadcast_deliver_every_byte);
    tcase_add_test(tc, barrier_holds_every_rank);
    tcase_add_test(tc, abort_fails_the_waiting_ranks);
    tcase_add_test(tc, create_attach_unlink_refuse_with_names);
    tcase_add_test(tc, check_refuses_bad_ops);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_comm_shm)
