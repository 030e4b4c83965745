/* The tcp communicator (core/comm/comm_tcp.c): the conformance of test_comm_shm over
 * tcp://127.0.0.1 with CURVE keys, 2, 3 and 4 ranks as forked processes (each with its
 * own zmq context and ZAP handler), plus what only a network transport has:
 *  - all_reduce_sum_f32 gives every rank the serial sum in rank order bit for bit (inputs
 *    of mixed magnitudes, so another order would round differently: checked), twice;
 *  - all_gather and broadcast from every root, 1 byte to 2 MiB;
 *  - barrier: no rank leaves before every rank arrived, round after round;
 *  - abort (by the last rank, by rank 0, by a middle rank): the waiting ranks fail
 *    naming the aborter and its reason;
 *  - a rank without the keys, or with another engine's, cannot join, and the others
 *    name it; attach times out naming the missing ranks;
 *  - a mismatched collective fails every rank, naming what differed, never hangs;
 *  - malformed frames from a peer (either direction) fail naming the sender, and the
 *    frame decoder refuses each kind of damage with words;
 *  - attach refuses bad arguments and CURVE without a ZAP handler. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/engine.h"
#include "comm/comm_tcp.h"
#include "ipc/channel.h"
#include "ipc/curve.h"
#include "support/ranks.h"
#include "support/runner.h"

#define RANK_TIMEOUT_S 60
#define JOIN_TIMEOUT_MS 10000
#define SHORT_JOIN_MS 1500
#define ATTEMPTS 3 /* a port taken between choosing it and binding it: choose again */

/* How a rank of a group joins: with the engine's keys; with no keys; with another engine's keys (both
 * pairs); with this engine's server key but another client pair (the server's public
 * key leaked, the client secret did not): only the ZAP handler can tell. */
enum keying { KEYS_ENGINE = 0, KEYS_NONE = 1, KEYS_FOREIGN = 2, KEYS_WRONG_CLIENT = 3 };

struct group {
    char endpoint[64];
    int size;       /* the group's size; fewer ranks may be started */
    int timeout_ms; /* attach's */
    struct cinfer_port_args keys, foreign; /* the engine's CURVE keys; another engine's */
    struct cinfer_port_args wrong_client;  /* the engine's server public key, another client pair */
    enum keying keying[8];                 /* each rank's keys (KEYS_ENGINE: 0) */
    int aborter;    /* abort_rank: who aborts */
    int mismatch;   /* mismatch_rank: 0 rank 1 broadcasts, 1 rank 1 reduces 17 floats */
    _Atomic int *arrivals;
};

/* ---- a rank's process: its own context, its own ZAP handler ------------------------- */

struct rank_env {
    void *ctx;
    struct cinfer_zap *zap;
};

static int env_open(const struct group *g, struct rank_env *e, char *why, size_t why_bytes)
{
    struct cinfer_error err = {0};
    e->zap = NULL;
    e->ctx = zmq_ctx_new();
    if (!e->ctx) {
        snprintf(why, why_bytes, "zmq_ctx_new failed");
        return 1;
    }
    if (cinfer_zap_start(e->ctx, &g->keys, &e->zap, &err) != 0) {
        snprintf(why, why_bytes, "zap: %s", err.message);
        zmq_ctx_term(e->ctx);
        return 1;
    }
    return 0;
}

static void env_close(struct rank_env *e)
{
    cinfer_zap_stop(&e->zap);
    zmq_ctx_term(e->ctx);
}

static const struct cinfer_port_args *keys_of(const struct group *g, int rank)
{
    switch (g->keying[rank]) {
    case KEYS_NONE:
        return NULL;
    case KEYS_FOREIGN:
        return &g->foreign;
    case KEYS_WRONG_CLIENT:
        return &g->wrong_client;
    default:
        return &g->keys;
    }
}

static int attach(const struct group *g, struct rank_env *e, int rank, struct cinfer_comm **comm, char *why,
                  size_t why_bytes)
{
    struct cinfer_error err = {0};
    if (env_open(g, e, why, why_bytes))
        return 1;
    if (cinfer_comm_tcp_attach(e->ctx, g->endpoint, rank, g->size, keys_of(g, rank), g->timeout_ms, comm, &err) != 0) {
        snprintf(why, why_bytes, "attach: %s", err.message);
        env_close(e);
        return 1;
    }
    if (cinfer_comm_check(*comm, &err) != 0 || (*comm)->rank != rank || (*comm)->size != g->size) {
        snprintf(why, why_bytes, "check: %s (rank %d of %d)", err.message, (*comm)->rank, (*comm)->size);
        cinfer_comm_destroy(comm);
        env_close(e);
        return 1;
    }
    return 0;
}

static void leave(struct cinfer_comm **comm, struct rank_env *e)
{
    cinfer_comm_destroy(comm);
    env_close(e);
}

/* ---- all_reduce --------------------------------------------------------------------- */

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

/* 1 float to 2 MiB + 4 bytes (a decode row of hidden 576 up to batch 32 at hidden 16384) */
static const size_t reduce_sizes[] = {1, 2, 7, 576, 1023, 1024, 1025, 10 * 1024 + 17, 65536, 512 * 1024 + 1};

static int reduce_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct rank_env e;
    struct cinfer_comm *comm = NULL;
    if (attach(g, &e, rank, &comm, why, why_bytes))
        return 1;
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
    leave(&comm, &e);
    return failed;
}

/* ---- all_gather and broadcast ------------------------------------------------------- */

static unsigned char gather_byte(int rank, size_t i, int round)
{
    return (unsigned char)((size_t)rank * 131 + i * 7 + (size_t)round * 17 + (i >> 8));
}

static const size_t byte_sizes[] = {1, 3, 64, 4095, 4097, 65536 + 11, (1u << 20) + 5, (2u << 20) + 3};

static int gather_broadcast_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct rank_env e;
    struct cinfer_comm *comm = NULL;
    if (attach(g, &e, rank, &comm, why, why_bytes))
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
    leave(&comm, &e);
    return failed;
}

/* ---- barrier ------------------------------------------------------------------------ */

#define BARRIER_ROUNDS 100

static int barrier_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct rank_env e;
    struct cinfer_comm *comm = NULL;
    if (attach(g, &e, rank, &comm, why, why_bytes))
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
    leave(&comm, &e);
    return failed;
}

/* ---- abort -------------------------------------------------------------------------- */

/* g->aborter aborts instead of joining the all-reduce; every other rank's all-reduce
 * must fail with the abort's reason, and so must everyone's later barrier. */
static int abort_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct rank_env e;
    struct cinfer_comm *comm = NULL;
    if (attach(g, &e, rank, &comm, why, why_bytes))
        return 1;
    int failed = 0;
    struct cinfer_error err = {0};
    float data[16] = {0};
    char expect[96];
    snprintf(expect, sizeof expect, "rank %d aborted the group: rank test failure", g->aborter);
    if (rank == g->aborter) {
        usleep(50000); /* the others are waiting by now */
        if (comm->ops->abort(comm->state, "rank test failure", &err) != 0) {
            snprintf(why, why_bytes, "abort: %s", err.message);
            failed = 1;
        }
    } else {
        int rc = comm->ops->all_reduce_sum_f32(comm->state, data, 16, &err);
        if (rc != CINFER_ERR_STATE || !strstr(err.message, expect) || !strstr(err.message, g->endpoint)) {
            snprintf(why, why_bytes, "all_reduce after the abort returned %d: \"%s\", expected \"%s\"", rc,
                     err.message, expect);
            failed = 1;
        }
    }
    int rc = comm->ops->barrier(comm->state, &err);
    if (!failed && (rc != CINFER_ERR_STATE || !strstr(err.message, expect))) {
        snprintf(why, why_bytes, "a barrier after the abort returned %d: \"%s\", expected \"%s\"", rc, err.message,
                 expect);
        failed = 1;
    }
    leave(&comm, &e);
    return failed;
}

/* ---- joining refused ---------------------------------------------------------------- */

/* A group of g->size ranks some of which have no keys or others' (g->keying) or are not
 * started at all (ranks from n_ranks on): every rank's attach fails, the ranks with
 * the wrong keys saying why, the others naming the ranks missing. */
static int refused_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    const struct group *g = arg;
    struct rank_env e;
    if (env_open(g, &e, why, why_bytes))
        return 1;
    struct cinfer_comm *comm = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_comm_tcp_attach(e.ctx, g->endpoint, rank, g->size, keys_of(g, rank), g->timeout_ms, &comm, &err);
    int refusals = cinfer_zap_refusals(e.zap);
    int failed = 1;
    /* "ranks 2, 3 and 4 of 5 did not join within 1500 ms" */
    char missing[160] = "", own[64];
    int n_missing = 0, total = 0, wrong_client = 0;
    for (int r = 1; r < g->size; r++) {
        total += r >= n_ranks || g->keying[r] != KEYS_ENGINE;
        wrong_client |= r < n_ranks && g->keying[r] == KEYS_WRONG_CLIENT;
    }
    for (int r = 1; r < g->size; r++)
        if (r >= n_ranks || g->keying[r] != KEYS_ENGINE) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s%s%d", n_missing ? "" : total > 1 ? "ranks " : "rank ",
                     n_missing == 0 ? "" : n_missing == total - 1 ? " and " : ", ", r);
            n_missing++;
        }
    size_t used = strlen(missing);
    snprintf(missing + used, sizeof missing - used, " of %d did not join within %d ms", g->size, g->timeout_ms);
    snprintf(own, sizeof own, "rank 0 refused rank %d's CURVE keys", rank);
    if (rc == 0) {
        snprintf(why, why_bytes, "attach succeeded");
        cinfer_comm_destroy(&comm);
    } else if (g->keying[rank] == KEYS_WRONG_CLIENT) {
        failed = !strstr(err.message, own);
    } else if (g->keying[rank] == KEYS_FOREIGN) {
        failed = rc != CINFER_ERR_TIMEOUT || !strstr(err.message, "the CURVE handshake never completed");
    } else if (g->keying[rank] == KEYS_NONE) {
        failed = !strstr(err.message, "handshake with rank 0 failed");
    } else if (rank == 0) {
        failed = rc != CINFER_ERR_TIMEOUT || !strstr(err.message, missing) || (wrong_client && refusals == 0);
    } else {
        failed = !strstr(err.message, "rank 0 gave up") || !strstr(err.message, missing);
    }
    if (failed && rc != 0)
        snprintf(why, why_bytes, "attach returned %d: \"%s\" (%d handshakes refused here), expected \"%s\" on the "
                 "others", rc, err.message, refusals, missing);
    else if (!failed)
        printf("comm_tcp:   rank %d: %s\n", rank, err.message);
    env_close(&e);
    return failed;
}

/* ---- mismatched collectives --------------------------------------------------------- */

static int mismatch_rank(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    (void)n_ranks;
    const struct group *g = arg;
    struct rank_env e;
    struct cinfer_comm *comm = NULL;
    if (attach(g, &e, rank, &comm, why, why_bytes))
        return 1;
    struct cinfer_error err = {0};
    float data[17] = {0};
    int rc;
    const char *expect;
    if (rank == 1 && g->mismatch == 0) {
        rc = comm->ops->broadcast(comm->state, data, 64, 0, &err);
        expect = "rank 0 aborted the group: collectives do not match: rank 1 called broadcast of 64 bytes from rank 0 "
                 "as collective 1, rank 0 all_reduce_sum_f32 of 16 floats as collective 1";
    } else if (rank == 1) {
        rc = comm->ops->all_reduce_sum_f32(comm->state, data, 17, &err);
        expect = "rank 0 aborted the group: collectives do not match: rank 1 called all_reduce_sum_f32 of 17 floats";
    } else {
        rc = comm->ops->all_reduce_sum_f32(comm->state, data, 16, &err);
        expect = rank == 0 ? "collectives do not match: rank 1 called" : "rank 0 aborted the group: collectives do "
                                                                         "not match: rank 1 called";
    }
    int failed = 0;
    printf("comm_tcp:   rank %d: %s\n", rank, err.message);
    if (rc != CINFER_ERR_STATE || !strstr(err.message, expect)) {
        snprintf(why, why_bytes, "the mismatched collective returned %d: \"%s\", expected \"%s\"", rc, err.message,
                 expect);
        failed = 1;
    } else if (comm->ops->barrier(comm->state, &err) != CINFER_ERR_STATE || !strstr(err.message, "aborted")) {
        snprintf(why, why_bytes, "a barrier after the mismatch: \"%s\"", err.message);
        failed = 1;
    }
    leave(&comm, &e);
    return failed;
}

/* ---- running groups ----------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A port nobody listens on now: the kernel's choice for a socket bound to port 0. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void group_init(struct group *g, int size)
{
    memset(g, 0, sizeof *g);
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_curve_keys_generate(&g->keys, &err) == 0, "%s", err.message);
    ck_assert_msg(cinfer_curve_keys_generate(&g->foreign, &err) == 0, "%s", err.message);
    g->wrong_client = g->foreign;
    memcpy(g->wrong_client.curve_server_public, g->keys.curve_server_public, sizeof g->keys.curve_server_public);
    g->size = size;
    g->timeout_ms = JOIN_TIMEOUT_MS;
    g->aborter = size - 1;
    g->arrivals = cinfer_test_shared_alloc(sizeof *g->arrivals);
}

/* Runs fn as n_ranks processes on a fresh port (again on another when rank 0 found it
 * taken); returns how many ranks failed, the first one's reason in why. */
static int run_ranks(struct group *g, int n_ranks, enum cinfer_test_ranks_mode mode, cinfer_test_rank_fn fn,
                     char *why, size_t why_bytes)
{
    int failed = 0;
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        snprintf(g->endpoint, sizeof g->endpoint, "tcp://127.0.0.1:%d", free_port());
        atomic_store(g->arrivals, 0);
        failed = cinfer_test_run_ranks(n_ranks, mode, fn, g, RANK_TIMEOUT_S, why, why_bytes);
        if (!failed || !strstr(why, "Address already in use"))
            break;
    }
    return failed;
}

static void run_group(const char *what, cinfer_test_rank_fn fn, int n_ranks, struct group *g)
{
    char why[1024];
    double t0 = now_s();
    int failed = run_ranks(g, n_ranks, CINFER_TEST_RANKS_PROCESSES, fn, why, sizeof why);
    ck_assert_msg(failed == 0, "%s, %d ranks: %d rank(s) failed; %s", what, n_ranks, failed, why);
    printf("comm_tcp: %s, %d ranks as processes over %s with CURVE: ok (%.2f s)\n", what, n_ranks, g->endpoint,
           now_s() - t0);
}

static void run_sizes(const char *what, cinfer_test_rank_fn fn)
{
    for (int n_ranks = 2; n_ranks <= 4; n_ranks++) {
        struct group g;
        group_init(&g, n_ranks);
        run_group(what, fn, n_ranks, &g);
        cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
    }
}

START_TEST(all_reduce_is_the_serial_sum_in_rank_order)
{
    /* the inputs make order matter: the reverse order rounds differently somewhere */
    for (int n_ranks = 3; n_ranks <= 4; n_ranks++) {
        size_t n = 10 * 1024 + 17;
        float *fwd = malloc(n * sizeof *fwd), *rev = malloc(n * sizeof *rev);
        serial_sum(n_ranks, n, 7, 0, fwd);
        serial_sum(n_ranks, n, 7, 1, rev);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
            differ += fwd[i] != rev[i];
        ck_assert_msg(differ > 0, "%d ranks: the reverse order gives the same sums", n_ranks);
        free(fwd);
        free(rev);
    }
    run_sizes("reduce", reduce_rank);
    /* threads of one process, each rank with its own context */
    struct group g;
    group_init(&g, 2);
    char why[1024];
    int failed = run_ranks(&g, 2, CINFER_TEST_RANKS_THREADS, reduce_rank, why, sizeof why);
    ck_assert_msg(failed == 0, "reduce, 2 ranks as threads: %s", why);
    cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
}
END_TEST

START_TEST(all_gather_and_broadcast_deliver_every_byte)
{
    run_sizes("gather and broadcast", gather_broadcast_rank);
}
END_TEST

START_TEST(barrier_holds_every_rank)
{
    run_sizes("barrier", barrier_rank);
}
END_TEST

START_TEST(abort_fails_the_waiting_ranks)
{
    run_sizes("abort by the last rank", abort_rank);
    struct group g;
    for (int aborter = 0; aborter <= 1; aborter++) {
        group_init(&g, 3);
        g.aborter = aborter;
        run_group(aborter ? "abort by a middle rank" : "abort by rank 0", abort_rank, 3, &g);
        cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
    }
}
END_TEST

START_TEST(a_rank_without_the_keys_cannot_join)
{
    /* all at once, to spend the deadline once */
    struct group g;
    group_init(&g, 5);
    g.timeout_ms = SHORT_JOIN_MS;
    g.keying[2] = KEYS_NONE;
    g.keying[3] = KEYS_FOREIGN;
    g.keying[4] = KEYS_WRONG_CLIENT;
    run_group("rank 2 without keys, 3 with another engine's, 4 with the server key but another client pair: all "
              "refused", refused_rank, 5, &g);
    cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
}
END_TEST

START_TEST(attach_times_out_naming_missing_ranks)
{
    struct group g;
    group_init(&g, 4); /* ranks 2 and 3 never start */
    g.timeout_ms = SHORT_JOIN_MS;
    run_group("ranks 2 and 3 of 4 missing", refused_rank, 2, &g);
    cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);

    /* a rank > 0 alone: rank 0 never answers */
    void *ctx = zmq_ctx_new();
    struct cinfer_comm *comm = NULL;
    struct cinfer_error err = {0};
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", free_port());
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, endpoint, 1, 2, NULL, 200, &comm, &err), CINFER_ERR_TIMEOUT);
    ck_assert_msg(strstr(err.message, "rank 0 did not welcome rank 1 within") && strstr(err.message, endpoint), "%s",
                  err.message);
    ck_assert_ptr_null(comm);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(a_mismatched_collective_fails_every_rank)
{
    struct group g;
    group_init(&g, 3);
    g.mismatch = 0;
    run_group("rank 1 broadcasts while ranks 0 and 2 all-reduce", mismatch_rank, 3, &g);
    cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
    group_init(&g, 2);
    g.mismatch = 1;
    run_group("rank 1 all-reduces 17 floats, rank 0 16", mismatch_rank, 2, &g);
    cinfer_test_shared_free((void *)g.arrivals, sizeof *g.arrivals);
}
END_TEST

/* ---- a peer sending damaged frames -------------------------------------------------- */

struct real_rank {
    void *ctx;
    char endpoint[64];
    int rank, size;
    pthread_t thread;
    int rc;
    struct cinfer_error err;
};

/* The real rank: attaches, then one all_reduce of 16 floats. */
static void *real_rank_main(void *p)
{
    struct real_rank *r = p;
    struct cinfer_comm *comm = NULL;
    r->rc = cinfer_comm_tcp_attach(r->ctx, r->endpoint, r->rank, r->size, NULL, 5000, &comm, &r->err);
    if (r->rc == 0) {
        float data[16] = {0};
        r->rc = comm->ops->all_reduce_sum_f32(comm->state, data, 16, &r->err);
        cinfer_comm_destroy(&comm);
    }
    return NULL;
}

static void send_frame(void *s, const char *to, uint32_t op, uint32_t size, int32_t rank, int32_t root, uint64_t seq,
                       uint64_t bytes, size_t payload_bytes)
{
    uint8_t *frame = calloc(1, CINFER_COMM_TCP_HEADER_BYTES + payload_bytes);
    cinfer_comm_tcp_frame_header(frame, op, size, rank, root, seq, bytes);
    struct cinfer_error err = {0};
    int rc = to ? cinfer_channel_send_to(s, to, frame, CINFER_COMM_TCP_HEADER_BYTES + payload_bytes, &err)
                : cinfer_channel_send(s, frame, CINFER_COMM_TCP_HEADER_BYTES + payload_bytes, 0, &err);
    ck_assert_msg(rc == 0, "%s", err.message);
    free(frame);
}

/* Receives one frame (from a ROUTER: after the routing id) and decodes it. */
static void recv_decoded(void *s, int size, int to_rank0, uint32_t want_op, struct cinfer_comm_tcp_frame *f,
                         void **buf)
{
    size_t len;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_channel_recv(s, 5000, buf, &len, NULL, &err) == 0, "%s", err.message);
    ck_assert_msg(cinfer_comm_tcp_frame_decode(*buf, len, size, to_rank0, f, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(f->op, want_op);
}

START_TEST(malformed_frames_name_the_sender)
{
    struct bad {
        const char *what;
        size_t len; /* the frame's bytes: 10 is short, the rest are header + payload */
        uint32_t size;
        int32_t rank;
        uint64_t bytes;
        int magic_off;
        const char *expect;
    } bad[] = {
        {"a short frame", 10, 2, 1, 64, 0, "frame of 10 bytes, shorter than the 40-byte header"},
        {"a bad magic", 40 + 64, 2, 1, 64, 1, "not the magic \"CTCP\""},
        {"a short payload", 40 + 60, 2, 1, 64, 0, "carries 60 payload bytes; expected 64"},
        {"a frame for another group size", 40 + 64, 3, 1, 64, 0, "for a group of 3 ranks; this group has 2"},
        {"a frame claiming rank 0", 40 + 64, 2, 0, 64, 0, "says it comes from rank 0"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        /* a real rank 0, a fake rank 1 */
        struct real_rank r0 = {.ctx = zmq_ctx_new(), .rank = 0, .size = 2};
        snprintf(r0.endpoint, sizeof r0.endpoint, "tcp://127.0.0.1:%d", free_port());
        ck_assert_int_eq(pthread_create(&r0.thread, NULL, real_rank_main, &r0), 0);
        void *ctx = zmq_ctx_new();
        struct cinfer_error err = {0};
        void *fake = cinfer_channel_open(ctx, ZMQ_DEALER, r0.endpoint, 0, "rank1", &err);
        ck_assert_msg(fake != NULL, "%s", err.message);
        send_frame(fake, NULL, CINFER_COMM_TCP_HELLO, 2, 1, 0, 0, 0, 0);
        struct cinfer_comm_tcp_frame f;
        void *buf = NULL;
        recv_decoded(fake, 2, 0, CINFER_COMM_TCP_WELCOME, &f, &buf);
        free(buf);
        uint8_t frame[40 + 64] = {0};
        cinfer_comm_tcp_frame_header(frame, CINFER_COMM_TCP_ALL_REDUCE, bad[b].size, bad[b].rank, 0, 1, bad[b].bytes);
        frame[0] ^= (uint8_t)bad[b].magic_off;
        ck_assert_int_eq(cinfer_channel_send(fake, frame, bad[b].len, 0, &err), 0);
        recv_decoded(fake, 2, 0, CINFER_COMM_TCP_ABORT, &f, &buf); /* rank 0 tells the group */
        ck_assert_msg(memmem(f.payload, f.payload_bytes, bad[b].expect, strlen(bad[b].expect)) != NULL,
                      "%s: the abort says \"%.*s\"", bad[b].what, (int)f.payload_bytes, (const char *)f.payload);
        free(buf);
        pthread_join(r0.thread, NULL);
        ck_assert_int_eq(r0.rc, CINFER_ERR_PARSE);
        ck_assert_msg(strstr(r0.err.message, "rank 1 sent a malformed frame") && strstr(r0.err.message, bad[b].expect),
                      "%s: %s", bad[b].what, r0.err.message);
        printf("comm_tcp: %s from rank 1: %s\n", bad[b].what, r0.err.message);
        cinfer_channel_close(&fake);
        zmq_ctx_term(ctx);
        zmq_ctx_term(r0.ctx);
    }

    /* a fake rank 0 answering a real rank 1's all_reduce with the wrong payload size */
    struct real_rank r1 = {.ctx = zmq_ctx_new(), .rank = 1, .size = 2};
    snprintf(r1.endpoint, sizeof r1.endpoint, "tcp://127.0.0.1:%d", free_port());
    void *ctx = zmq_ctx_new();
    struct cinfer_error err = {0};
    void *fake = cinfer_channel_open(ctx, ZMQ_ROUTER, r1.endpoint, 1, NULL, &err);
    ck_assert_msg(fake != NULL, "%s", err.message);
    ck_assert_int_eq(pthread_create(&r1.thread, NULL, real_rank_main, &r1), 0);
    struct cinfer_comm_tcp_frame f;
    void *buf = NULL;
    recv_decoded(fake, 2, 1, CINFER_COMM_TCP_HELLO, &f, &buf);
    free(buf);
    send_frame(fake, "rank1", CINFER_COMM_TCP_WELCOME, 2, 0, 0, 0, 0, 0);
    recv_decoded(fake, 2, 1, CINFER_COMM_TCP_ALL_REDUCE, &f, &buf);
    ck_assert_uint_eq(f.bytes, 64);
    free(buf);
    send_frame(fake, "rank1", CINFER_COMM_TCP_ALL_REDUCE, 2, 0, 0, 1, 64, 32);
    recv_decoded(fake, 2, 1, CINFER_COMM_TCP_ABORT, &f, &buf); /* rank 1 tells rank 0 */
    ck_assert_int_eq(f.rank, 1);
    free(buf);
    pthread_join(r1.thread, NULL);
    ck_assert_int_eq(r1.rc, CINFER_ERR_PARSE);
    ck_assert_msg(strstr(r1.err.message, "rank 0 sent rank 1 a malformed frame") &&
                      strstr(r1.err.message, "carries 32 payload bytes; expected 64"),
                  "%s", r1.err.message);
    printf("comm_tcp: a short reply from rank 0: %s\n", r1.err.message);
    cinfer_channel_close(&fake);
    zmq_ctx_term(ctx);
    zmq_ctx_term(r1.ctx);
}
END_TEST

/* ---- the decoder alone -------------------------------------------------------------- */

static int decode(const uint8_t *frame, size_t len, int size, int to_rank0, struct cinfer_comm_tcp_frame *f,
                  struct cinfer_error *err)
{
    return cinfer_comm_tcp_frame_decode(frame, len, size, to_rank0, f, err);
}

START_TEST(decoder_refuses_every_kind_of_damage)
{
    uint8_t frame[40 + 64 * 4];
    struct cinfer_comm_tcp_frame f;
    struct cinfer_error err = {0};
    struct {
        uint32_t op;
        int32_t rank, root;
        uint64_t seq, bytes;
        size_t payload;
        int to_rank0;
        const char *expect; /* NULL: decodes */
    } cases[] = {
        {CINFER_COMM_TCP_HELLO, 2, 0, 0, 0, 0, 1, NULL},
        {CINFER_COMM_TCP_WELCOME, 0, 0, 0, 0, 0, 0, NULL},
        {CINFER_COMM_TCP_ALL_REDUCE, 3, 0, 5, 64, 64, 1, NULL},
        {CINFER_COMM_TCP_ALL_GATHER, 1, 0, 5, 64, 64, 1, NULL},
        {CINFER_COMM_TCP_ALL_GATHER, 0, 0, 5, 64, 256, 0, NULL},
        {CINFER_COMM_TCP_BROADCAST, 2, 2, 5, 64, 64, 1, NULL},
        {CINFER_COMM_TCP_BROADCAST, 1, 2, 5, 64, 0, 1, NULL},
        {CINFER_COMM_TCP_BROADCAST, 0, 2, 5, 64, 64, 0, NULL},
        {CINFER_COMM_TCP_BARRIER, 0, 0, 5, 0, 0, 0, NULL},
        {CINFER_COMM_TCP_ABORT, 3, 0, 5, 4, 4, 0, NULL},
        {CINFER_COMM_TCP_WELCOME, 1, 0, 0, 0, 0, 1, "welcome frame sent to rank 0, which the protocol has no place"},
        {CINFER_COMM_TCP_HELLO, 0, 0, 0, 0, 0, 0, "hello frame sent by rank 0"},
        {99, 1, 0, 1, 0, 0, 1, "op 99 frame sent to rank 0"},
        {CINFER_COMM_TCP_BARRIER, 4, 0, 1, 0, 0, 1, "barrier frame for rank 4, outside [0, 4)"},
        {CINFER_COMM_TCP_BARRIER, -1, 0, 1, 0, 0, 1, "for rank -1, outside [0, 4)"},
        {CINFER_COMM_TCP_BARRIER, 0, 0, 1, 0, 0, 1, "barrier frame sent to rank 0 says it comes from rank 0"},
        {CINFER_COMM_TCP_BARRIER, 1, 0, 1, 0, 0, 0, "barrier frame sent by rank 0 says it comes from rank 1"},
        {CINFER_COMM_TCP_BARRIER, 1, 2, 1, 0, 0, 1, "barrier frame with root 2; only a broadcast has one"},
        {CINFER_COMM_TCP_BROADCAST, 1, 4, 1, 8, 0, 1, "broadcast frame from root 4, outside [0, 4)"},
        {CINFER_COMM_TCP_HELLO, 1, 0, 3, 0, 0, 1, "hello frame numbered 3; expected 0"},
        {CINFER_COMM_TCP_ALL_REDUCE, 1, 0, 0, 4, 4, 1, "numbered 0; collectives count from 1"},
        {CINFER_COMM_TCP_BARRIER, 1, 0, 1, 8, 0, 1, "barrier frame of 8 bytes; expected 0"},
        {CINFER_COMM_TCP_ALL_REDUCE, 1, 0, 1, 6, 6, 1, "of 6 bytes, not a whole number of floats"},
        {CINFER_COMM_TCP_ALL_REDUCE, 1, 0, 1, 64, 60, 1, "carries 60 payload bytes; expected 64"},
        {CINFER_COMM_TCP_ALL_GATHER, 0, 0, 1, 64, 64, 0, "carries 64 payload bytes; expected 256"},
        {CINFER_COMM_TCP_ALL_GATHER, 0, 0, 1, UINT64_MAX / 2, 0, 0, "too many for 4 ranks"},
        {CINFER_COMM_TCP_BROADCAST, 1, 2, 1, 8, 8, 1, "carries 8 payload bytes; expected 0"},
        {CINFER_COMM_TCP_ABORT, 1, 0, 1, 500, 0, 1, "a reason of 500 bytes; at most 400"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(frame, 'x', sizeof frame);
        cinfer_comm_tcp_frame_header(frame, cases[i].op, 4, cases[i].rank, cases[i].root, cases[i].seq,
                                     cases[i].bytes);
        int rc = decode(frame, 40 + cases[i].payload, 4, cases[i].to_rank0, &f, &err);
        if (!cases[i].expect) {
            ck_assert_msg(rc == 0, "case %zu: %s", i, err.message);
            ck_assert_uint_eq(f.op, cases[i].op);
            ck_assert_int_eq(f.rank, cases[i].rank);
            ck_assert_int_eq(f.root, cases[i].root);
            ck_assert_uint_eq(f.seq, cases[i].seq);
            ck_assert_uint_eq(f.bytes, cases[i].bytes);
            ck_assert_ptr_eq(f.payload, frame + 40);
            ck_assert_uint_eq(f.payload_bytes, cases[i].payload);
        } else {
            ck_assert_msg(rc == CINFER_ERR_PARSE && strstr(err.message, cases[i].expect), "case %zu: %d \"%s\"", i,
                          rc, err.message);
        }
    }
    cinfer_comm_tcp_frame_header(frame, CINFER_COMM_TCP_BARRIER, 4, 1, 0, 1, 0);
    ck_assert_int_eq(decode(frame, 39, 4, 1, &f, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "frame of 39 bytes, shorter than the 40-byte header"), "%s", err.message);
    frame[4] = 2; /* version 2 */
    ck_assert_int_eq(decode(frame, 40, 4, 1, &f, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "frame of version 2, this build speaks version 1"), "%s", err.message);
    memcpy(frame, "HTTP", 4);
    ck_assert_int_eq(decode(frame, 40, 4, 1, &f, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "frame starting 48 54 54 50, not the magic \"CTCP\""), "%s", err.message);
    cinfer_comm_tcp_frame_header(frame, CINFER_COMM_TCP_BARRIER, 3, 1, 0, 1, 0);
    ck_assert_int_eq(decode(frame, 40, 4, 1, &f, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "barrier frame for a group of 3 ranks; this group has 4"), "%s", err.message);
    cinfer_comm_tcp_frame_header(frame, CINFER_COMM_TCP_ABORT, 4, 1, 0, 1, 3);
    memcpy(frame + 40, "a\0b", 3);
    ck_assert_int_eq(decode(frame, 43, 4, 1, &f, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "reason holds a NUL byte"), "%s", err.message);
}
END_TEST

/* ---- attach's refusals, and a group of one ------------------------------------------ */

START_TEST(attach_refuses_with_names)
{
    void *ctx = zmq_ctx_new();
    struct cinfer_comm *comm = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, "ipc:///tmp/x", 0, 2, NULL, 100, &comm, &err),
                     CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "endpoint \"ipc:///tmp/x\" must be tcp://"), "%s", err.message);
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, "tcp://127.0.0.1:1", 2, 2, NULL, 100, &comm, &err),
                     CINFER_ERR_RANGE);
    ck_assert_msg(strstr(err.message, "rank 2 of 2 ranks"), "%s", err.message);
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, "tcp://127.0.0.1:1", 0, 0, NULL, 100, &comm, &err),
                     CINFER_ERR_RANGE);
    /* CURVE keys but no ZAP handler: libzmq would let anyone in */
    struct cinfer_port_args keys = {0};
    ck_assert_int_eq(cinfer_curve_keys_generate(&keys, &err), 0);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", free_port());
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, endpoint, 0, 2, &keys, 100, &comm, &err), CINFER_ERR_STATE);
    ck_assert_msg(strstr(err.message, "runs no ZAP handler"), "%s", err.message);
    /* a port already bound */
    void *holder = cinfer_channel_open(ctx, ZMQ_PULL, endpoint, 1, NULL, &err);
    ck_assert_msg(holder != NULL, "%s", err.message);
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, endpoint, 0, 2, NULL, 100, &comm, &err), CINFER_ERR_IO);
    ck_assert_msg(strstr(err.message, endpoint) && strstr(err.message, "Address already in use"), "%s", err.message);
    cinfer_channel_close(&holder);
    ck_assert_ptr_null(comm);
    /* a group of one: every collective is local */
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", free_port());
    ck_assert_int_eq(cinfer_comm_tcp_attach(ctx, endpoint, 0, 1, NULL, 100, &comm, &err), 0);
    float v[3] = {1.5f, -2.0f, 3.25f};
    ck_assert_int_eq(comm->ops->all_reduce_sum_f32(comm->state, v, 3, &err), 0);
    ck_assert(v[0] == 1.5f && v[1] == -2.0f && v[2] == 3.25f);
    char out[3];
    ck_assert_int_eq(comm->ops->all_gather(comm->state, "abc", 3, out, &err), 0);
    ck_assert(memcmp(out, "abc", 3) == 0);
    ck_assert_int_eq(comm->ops->broadcast(comm->state, out, 3, 0, &err), 0);
    ck_assert_int_eq(comm->ops->broadcast(comm->state, out, 3, 1, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(comm->ops->barrier(comm->state, &err), 0);
    ck_assert_int_eq(comm->ops->abort(comm->state, "done", &err), 0);
    ck_assert_int_eq(comm->ops->barrier(comm->state, &err), CINFER_ERR_STATE);
    ck_assert_msg(strstr(err.message, "rank 0 aborted the group: done"), "%s", err.message);
    cinfer_comm_destroy(&comm);
    ck_assert_ptr_null(comm);
    zmq_ctx_term(ctx);
}
END_TEST

static Suite *suite_comm_tcp(void)
{
    Suite *s = suite_create("comm_tcp");
    TCase *tc = tcase_create("tcp");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, all_reduce_is_the_serial_sum_in_rank_order);
    tcase_add_test(tc, all_gather_and_broadcast_deliver_every_byte);
    tcase_add_test(tc, barrier_holds_every_rank);
    tcase_add_test(tc, abort_fails_the_waiting_ranks);
    tcase_add_test(tc, a_rank_without_the_keys_cannot_join);
    tcase_add_test(tc, attach_times_out_naming_missing_ranks);
    tcase_add_test(tc, a_mismatched_collective_fails_every_rank);
    tcase_add_test(tc, malformed_frames_name_the_sender);
    tcase_add_test(tc, decoder_refuses_every_kind_of_damage);
    tcase_add_test(tc, attach_refuses_with_names);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_comm_tcp)
