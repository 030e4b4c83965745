/* Load on loopback: `cinfer serve` (what a user runs) on the default model takes two
 * waves of 500 concurrent streaming /generate clients, opened at once from one poll()
 * loop. Every request must either complete with "data: [DONE]" (well framed) or be
 * refused with 503 server_overloaded (the queue is bounded); completions must be the
 * majority; none may hang past the global deadline; and the server's resident memory
 * must come back to its baseline once the load is gone.
 *
 * Memory: glibc keeps memory it has freed in per-thread arenas, and libmicrohttpd runs
 * a thread per connection; without help about 11 MB of a burst of 500 connections
 * stayed (23 MB after the first wave on an 11.8 MB baseline). The server trims its
 * heap when its last open request completes, and then RSS comes back to within 2 MB
 * of the baseline (11.5 -> 13.1 -> 13.1-13.4 MB over two waves; what stays is
 * glibc's cache of thread stacks and the first wave's lazily touched pages). The
 * test therefore (1) runs a small warm-up before taking the baseline, (2) allows
 * MEMORY_TOLERANCE_MB over it after the load, and (3) allows the second wave to add at
 * most LEAK_TOLERANCE_MB to what the first left, which a leak of 9 KiB or more per
 * request would exceed. Smaller leaks are LeakSanitizer's to find: under
 * AddressSanitizer RSS is not checked (its allocator keeps freed memory) and the
 * server's own leak check at exit makes its exit status non-zero, which fails the test. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "support/http_client.h"
#include "support/runner.h"
#include "support/serve_process.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define MODEL CINFER_SOURCE_DIR "/models/default"
#define CLIENTS 500
#define MAX_RUNNING "64"
#define MAX_QUEUED "300"
#define MAX_NEW_TOKENS_TEXT "12"
#define DEADLINE_S 90.0
#define MEMORY_TOLERANCE_MB 6.0
#define LEAK_TOLERANCE_MB 3.0

static pid_t server_pid;
static int port;

static double rss_mb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    double kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb / 1024.0;
}

/* The server's stderr after start-up, passed on so that it never blocks on a full pipe. */
static void *drain_stderr(void *arg)
{
    FILE *f = arg;
    char line[512];
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
    return NULL;
}

/* Starts `cinfer serve --port 0` and reads the port from its "listening on" line. */
static void start_server(void)
{
    char *argv[] = {CINFER_BINARY_DIR "/bin/cinfer", "serve", "--model-path", MODEL, "--port", "0", "--num-threads",
                    "1", "--kv-cache-bytes", "64M", "--max-running-requests", MAX_RUNNING, "--max-queued-requests",
                    MAX_QUEUED, "--log-level", "error", NULL};
    int err_fd;
    server_pid = cinfer_test_spawn_serve(argv, &err_fd);
    char log[16384], name[256];
    port = cinfer_test_read_listening_line(err_fd, log, sizeof log, name, sizeof name);
    ck_assert_msg(port > 0, "cinfer serve did not say where it listens:\n%s", log);
    FILE *err = fdopen(err_fd, "r");
    ck_assert_ptr_nonnull(err);
    pthread_t drain;
    ck_assert_int_eq(pthread_create(&drain, NULL, drain_stderr, err), 0);
    pthread_detach(drain);
}

static void stop_server(void)
{
    kill(server_pid, SIGTERM);
    int code = cinfer_test_wait_exit(server_pid, 30);
    ck_assert_msg(code != -1, "cinfer serve did not stop within 30 s of SIGTERM");
    ck_assert_msg(code == 0, "cinfer serve exited with %d", code);
}

/* Samples the server's RSS while a wave runs. */
struct sampler {
    volatile int stop;
    double peak_mb;
};

static void *sample_rss(void *arg)
{
    struct sampler *s = arg;
    while (!s->stop) {
        double mb = rss_mb(server_pid);
        if (mb > s->peak_mb)
            s->peak_mb = mb;
        usleep(50000);
    }
    return NULL;
}

/* What one stream saw. */
struct stream_seen {
    int events;
    int done;        /* the last event was [DONE] */
    int after_done;  /* events after [DONE] */
    int bad_json;    /* events that are not a JSON object */
};

static int on_event(void *ctx, const char *data, size_t len)
{
    struct stream_seen *s = ctx;
    if (s->done)
        s->after_done++;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        s->done = 1;
        return 0;
    }
    s->events++;
    json_error_t jerr;
    json_t *j = json_loadb(data, len, 0, &jerr);
    if (!json_is_object(j))
        s->bad_json++;
    json_decref(j);
    return 0;
}

struct wave {
    int completed, refused, failed, hung;
    double slowest_s, wall_s, peak_mb;
    char first_failure[600];
};

static struct wave run_wave(int clients)
{
    static const char body[] = "{\"text\": \"And it came to pass\", \"stream\": true,"
                               " \"sampling_params\": {\"max_new_tokens\": " MAX_NEW_TOKENS_TEXT ", \"temperature\": 0,"
                               " \"ignore_eos\": true}}";
    struct http_client_job *jobs = calloc((size_t)clients, sizeof *jobs);
    struct stream_seen *seen = calloc((size_t)clients, sizeof *seen);
    ck_assert(jobs && seen);
    for (int i = 0; i < clients; i++)
        jobs[i] = (struct http_client_job){.method = "POST", .path = "/generate", .body = body,
                                           .on_event = on_event, .event_ctx = &seen[i]};
    struct sampler sampler = {0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, sample_rss, &sampler), 0);
    double start = http_client_now_s();
    http_client_run(jobs, (size_t)clients, "127.0.0.1", port, 0, start + DEADLINE_S);
    struct wave w = {.wall_s = http_client_now_s() - start};
    sampler.stop = 1;
    pthread_join(t, NULL);
    w.peak_mb = sampler.peak_mb;
    for (int i = 0; i < clients; i++) {
        struct http_client_job *j = &jobs[i];
        const char *why = NULL;
        char buf[512];
        if (j->result == 0) {
            w.hung++;
            why = "still open at the deadline";
        } else if (j->result < 0) {
            w.failed++;
            why = j->error;
        } else if (j->parser.status == 503) {
            json_error_t jerr;
            json_t *e = json_loads(j->parser.body ? j->parser.body : "", 0, &jerr);
            const char *type = json_string_value(json_object_get(json_object_get(e, "error"), "type"));
            if (type && strcmp(type, "server_overloaded") == 0) {
                w.refused++;
            } else {
                w.failed++;
                snprintf(buf, sizeof buf, "503 that is not server_overloaded: %.200s", j->parser.body);
                why = buf;
            }
            json_decref(e);
        } else if (j->parser.status == 200 && seen[i].done && !seen[i].after_done && !seen[i].bad_json &&
                   !j->parser.framing_errors && seen[i].events > 0) {
            w.completed++;
            if (j->t_done_s - start > w.slowest_s)
                w.slowest_s = j->t_done_s - start;
        } else {
            w.failed++;
            snprintf(buf, sizeof buf, "status %d, %d events, done %d, framing: %s", j->parser.status, seen[i].events,
                     seen[i].done, j->parser.framing_error);
            why = buf;
        }
        if (why && !w.first_failure[0])
            snprintf(w.first_failure, sizeof w.first_failure, "client %d: %s", i, why);
        http_client_parser_free(&j->parser);
    }
    free(jobs);
    free(seen);
    return w;
}

static void print_wave(const char *name, const struct wave *w)
{
    printf("%s: %d clients in %.1f s: %d completed with [DONE], %d refused with 503, %d failed, %d hung; slowest "
           "completion %.2f s; server RSS peak %.1f MB\n",
           name, CLIENTS, w->wall_s, w->completed, w->refused, w->failed, w->hung, w->slowest_s, w->peak_mb);
    if (w->first_failure[0])
        printf("%s: first failure: %s\n", name, w->first_failure);
    fflush(stdout);
}

static void check_wave(const struct wave *w)
{
    ck_assert_msg(w->hung == 0, "%d clients hung past %.0f s", w->hung, DEADLINE_S);
    ck_assert_msg(w->failed == 0, "%d clients neither completed nor got 503: %s", w->failed, w->first_failure);
    ck_assert_int_eq(w->completed + w->refused, CLIENTS);
    ck_assert_msg(w->completed > CLIENTS / 2, "only %d of %d completed", w->completed, CLIENTS);
}

START_TEST(five_hundred_streaming_clients)
{
    /* 500 sockets here, 500 in the server (which inherits this limit), plus files. */
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    ck_assert_msg(rl.rlim_cur >= 2 * CLIENTS + 64, "RLIMIT_NOFILE %llu is below what %d clients need",
                  (unsigned long long)rl.rlim_cur, CLIENTS);
    start_server();
    struct wave warm = run_wave(8); /* threads, arenas and the model's pages in place */
    ck_assert_msg(warm.completed == 8, "warm-up: %s", warm.first_failure);
    sleep(1);
    double baseline = rss_mb(server_pid);

    struct wave w1 = run_wave(CLIENTS);
    print_wave("wave 1", &w1);
    sleep(2);
    double after1 = rss_mb(server_pid);
    struct wave w2 = run_wave(CLIENTS);
    print_wave("wave 2", &w2);
    sleep(2);
    double after2 = rss_mb(server_pid);
    printf("server RSS: baseline %.1f MB, after wave 1 %.1f MB, after wave 2 %.1f MB (tolerance +%.0f MB over the "
           "baseline, +%.0f MB from wave to wave)\n",
           baseline, after1, after2, MEMORY_TOLERANCE_MB, LEAK_TOLERANCE_MB);
    fflush(stdout);
    check_wave(&w1);
    check_wave(&w2);
    if (UNDER_ASAN) {
        /* ASan's allocator keeps what it frees, so RSS says nothing here; the server's
         * LeakSanitizer report at exit (a non-zero status, checked in stop_server) does. */
        printf("server RSS not checked under AddressSanitizer; its leak check runs when the server exits\n");
    } else {
        ck_assert_msg(after2 <= baseline + MEMORY_TOLERANCE_MB, "RSS %.1f MB after the load, baseline %.1f MB",
                      after2, baseline);
        ck_assert_msg(after2 <= after1 + LEAK_TOLERANCE_MB, "RSS grew from %.1f MB to %.1f MB from wave 1 to wave 2",
                      after1, after2);
    }
    stop_server();
}
END_TEST

static Suite *suite_http_load(void)
{
    Suite *s = suite_create("http_load");
    TCase *t = tcase_create("load");
    tcase_set_timeout(t, 240);
    tcase_add_test(t, five_hundred_streaming_clients);
    suite_add_tcase(s, t);
    return s;
}

CINFER_TEST_MAIN(suite_http_load)
