/* bench_comm_tcp — the tcp communicator's all-reduce beside the shared-memory one's.
 *
 * 2 ranks as forked processes on this machine: the shared-memory communicator
 * (core/comm/comm_shm.c, default chunks), then the tcp communicator
 * (core/comm/comm_tcp.c) over tcp://127.0.0.1 without CURVE and with it (each rank's own
 * zmq context; rank 0's with a ZAP handler). Rank 0 times each all_reduce_sum_f32 call of
 * n floats, back to back, for the sizes bench_comm uses: n = hidden sizes 576 to 8192 (a
 * decode step's wo / w_down output at batch 1) and 32 x each (batch 32); --iters calls
 * after 100 warm-up ones (an eighth as many, at least 100, for the batch-32 sizes).
 * Prints the median and 90th percentile in microseconds and the ratios of the medians,
 * tcp / shm.
 *
 *   bench_comm_tcp [--iters 1000] [--rounds 1]
 *
 * With --rounds N every measurement is taken N times, the transports in turns, and each
 * keeps its best median: on a shared machine other load only ever slows a run. Loopback
 * measures the protocol's own cost (framing, copies, zmq's I/O threads, CURVE's
 * encryption), not a network's: between hosts add the link's latency and bandwidth.
 * Speed is measured here, never asserted. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/engine.h"
#include "comm/comm_shm.h"
#include "comm/comm_tcp.h"
#include "ipc/curve.h"

#define WARM_CALLS 100
#define N_SIZES 5
#define N_TRANSPORTS 3
#define JOIN_TIMEOUT_MS 10000

static const int hidden_sizes[N_SIZES] = {576, 1024, 2048, 4096, 8192};
static const char *transport_names[N_TRANSPORTS] = {"shm", "tcp", "tcp+CURVE"};

struct result {
    double median_us, p90_us;
};

struct job {
    int transport; /* 0 shm, 1 tcp, 2 tcp with CURVE */
    int iters;
    char shm[128];
    char endpoint[64];
    struct cinfer_port_args keys;
    int failed;
    struct result reduce[2][N_SIZES]; /* [batch 1, batch 32][size]: rank 0's */
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(q * (n - 1) + 0.5)];
}

/* A port nobody listens on now: the kernel's choice for a socket bound to port 0. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("bench_comm_tcp: a free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int iters_for(const struct job *job, int batch32)
{
    int n = batch32 ? job->iters / 8 : job->iters;
    return n < 100 ? 100 : n;
}

static int time_sizes(struct job *job, struct cinfer_comm *comm, int rank)
{
    double *times = malloc(sizeof(double) * (size_t)job->iters);
    int most = 0;
    for (int s = 0; s < N_SIZES; s++)
        most = hidden_sizes[s] > most ? hidden_sizes[s] : most;
    float *data = calloc((size_t)most * 32, sizeof *data);
    struct cinfer_error err = {0};
    int rc = 0;
    for (int b = 0; b < 2 && rc == 0; b++)
        for (int s = 0; s < N_SIZES && rc == 0; s++) {
            size_t n = (size_t)hidden_sizes[s] * (b ? 32 : 1);
            int iters = iters_for(job, b);
            for (int i = 0; i < WARM_CALLS + iters && rc == 0; i++) {
                double t0 = now_us();
                rc = comm->ops->all_reduce_sum_f32(comm->state, data, n, &err);
                if (i >= WARM_CALLS)
                    times[i - WARM_CALLS] = now_us() - t0;
            }
            if (rc == 0 && rank == 0)
                job->reduce[b][s] = (struct result){quantile(times, iters, 0.5), quantile(times, iters, 0.9)};
        }
    if (rc != 0)
        fprintf(stderr, "bench_comm_tcp: rank %d: %s\n", rank, err.message);
    free(times);
    free(data);
    return rc;
}

static int rank_main(struct job *job, int rank)
{
    struct cinfer_comm *comm = NULL;
    struct cinfer_error err = {0};
    if (job->transport == 0) {
        if (cinfer_comm_shm_attach(job->shm, rank, &comm, &err) != 0) {
            fprintf(stderr, "bench_comm_tcp: %s\n", err.message);
            return 1;
        }
        int rc = time_sizes(job, comm, rank);
        cinfer_comm_destroy(&comm);
        return rc;
    }
    void *ctx = zmq_ctx_new();
    struct cinfer_zap *zap = NULL;
    const struct cinfer_port_args *keys = job->transport == 2 ? &job->keys : NULL;
    int rc = 1;
    if (cinfer_zap_start(ctx, keys, &zap, &err) == 0 &&
        cinfer_comm_tcp_attach(ctx, job->endpoint, rank, 2, keys, JOIN_TIMEOUT_MS, &comm, &err) == 0)
        rc = time_sizes(job, comm, rank);
    else
        fprintf(stderr, "bench_comm_tcp: rank %d: %s\n", rank, err.message);
    cinfer_comm_destroy(&comm);
    cinfer_zap_stop(&zap);
    zmq_ctx_term(ctx);
    return rc;
}

/* One measurement of every size over one transport, 2 ranks as processes. */
static void run(struct job *job)
{
    struct cinfer_error err = {0};
    static int counter;
    job->failed = 0;
    if (job->transport == 0) {
        snprintf(job->shm, sizeof job->shm, "/cinfer-bench-tcp-%d-%d", (int)getpid(), counter++);
        if (cinfer_comm_shm_create(job->shm, 2, 0, &err) != 0) {
            fprintf(stderr, "bench_comm_tcp: %s\n", err.message);
            exit(1);
        }
    } else {
        snprintf(job->endpoint, sizeof job->endpoint, "tcp://127.0.0.1:%d", free_port());
    }
    fflush(stdout);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("bench_comm_tcp: fork");
            exit(1);
        }
        if (pids[r] == 0)
            _exit(rank_main(job, r) == 0 ? 0 : 1);
    }
    for (int r = 0; r < 2; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        job->failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    if (job->transport == 0)
        cinfer_comm_shm_unlink(job->shm, &err);
}

static int positive(const char *flag, const char *value)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || v < 1 || v > 1000000) {
        fprintf(stderr, "bench_comm_tcp: %s %s: expected 1 to 1000000\n", flag, value);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    int iters = 1000, rounds = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--iters"))
            iters = positive(argv[i], argv[i + 1]), i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds"))
            rounds = positive(argv[i], argv[i + 1]), i++;
        else {
            fprintf(stderr, "bench_comm_tcp: unknown option %s (see the top of bench/bench_comm_tcp.c)\n", argv[i]);
            return 2;
        }
    }
    /* the ranks are processes: what rank 0 measures lands in shared memory */
    struct job *job = mmap(NULL, sizeof *job, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (job == MAP_FAILED) {
        perror("bench_comm_tcp: mmap");
        return 1;
    }
    memset(job, 0, sizeof *job);
    struct cinfer_error err = {0};
    if (cinfer_curve_keys_generate(&job->keys, &err) != 0) {
        fprintf(stderr, "bench_comm_tcp: %s\n", err.message);
        return 1;
    }
    struct result best[N_TRANSPORTS][2][N_SIZES];
    for (int round = 0; round < rounds; round++)
        for (int t = 0; t < N_TRANSPORTS; t++) { /* in turns, each keeping its best */
            job->transport = t;
            job->iters = iters;
            run(job);
            if (job->failed) {
                fprintf(stderr, "bench_comm_tcp: a %s rank failed\n", transport_names[t]);
                return 1;
            }
            for (int b = 0; b < 2; b++)
                for (int s = 0; s < N_SIZES; s++)
                    if (round == 0 || job->reduce[b][s].median_us < best[t][b][s].median_us)
                        best[t][b][s] = job->reduce[b][s];
        }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_comm_tcp: %ld online cores; all_reduce_sum_f32, 2 ranks as processes, rank 0's time per call; "
           "%d calls per size (%d at batch 32), best of %d round%s\n",
           cores, iters_for(job, 0), iters_for(job, 1), rounds, rounds > 1 ? "s" : "");
    printf("  %-7s %-6s %8s | %-21s | %-21s | %-21s | %7s %9s\n", "hidden", "batch", "floats", "shm median (p90) us",
           "tcp median (p90) us", "tcp+CURVE median (p90)", "tcp/shm", "CURVE/shm");
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < N_SIZES; s++) {
            printf("  %-7d %-6d %8d", hidden_sizes[s], b ? 32 : 1, hidden_sizes[s] * (b ? 32 : 1));
            for (int t = 0; t < N_TRANSPORTS; t++)
                printf(" | %9.1f (%9.1f)", best[t][b][s].median_us, best[t][b][s].p90_us);
            printf(" | %7.1f %9.1f\n", best[1][b][s].median_us / best[0][b][s].median_us,
                   best[2][b][s].median_us / best[0][b][s].median_us);
        }
    munmap(job, sizeof *job);
    return 0;
}
