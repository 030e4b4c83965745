/* Faults, each asserting what the caller sees (the status code as well as the words)
 * and that no process or run folder is left behind: kill -9 of the scheduler
 * mid-stream and of the detokenizer (CINFER_ERR_CHILD, then and for later requests),
 * a scheduler that fails while loading, a worker that never reports READY, SIGKILL of
 * the main process, SIGINT to `cinfer generate`, a garbage frame injected into every
 * channel, a shutdown whose drain deadline cuts a request (CINFER_ERR_UNAVAILABLE for
 * it and for a request made while draining), the restart policy (refusals while the
 * workers come back are CHILD or UNAVAILABLE, nothing else), and a detokenizer whose
 * tokenizer cannot decode (CINFER_ERR_INTERNAL: the worker's failure, never passed
 * off as the request's). */
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/tokenizer.h"
#include "support/engine_fixture.h"
#include "support/generate_sigint.h"
#include "support/procs.h"
#include "support/runner.h"
#include "worker/hooks.h"
#include "worker/worker_link.h"

static const char *model;

/* Each test gets its own TMPDIR, so counting run folders is not disturbed by engines
 * that other programs run at the same time. */
static char private_tmp[64];

static void setup(void)
{
    model = cinfer_test_engine_model();
    snprintf(private_tmp, sizeof private_tmp, "/tmp/cinfer-faults-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(private_tmp));
    setenv("TMPDIR", private_tmp, 1);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", private_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", private_tmp);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The workers of the engine start() made last, as they were then. */
static struct test_worker_pids started;

static struct cinfer_engine *start(struct cinfer_server_args *args, const struct cinfer_engine_hooks *hooks,
                                   struct cinfer_server_info *info)
{
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(args, hooks, &e, &err) == 0, "%s", err.message);
    ck_assert_int_eq(cinfer_engine_server_info(e, info, &err), 0);
    started = cinfer_test_worker_pids(e);
    return e;
}

static struct cinfer_generate_request long_request(void)
{
    struct cinfer_generate_request req = {.prompt = "Once upon a time"};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.ignore_eos = 1;
    req.sampling.max_new_tokens = 100000; /* ends at the context length */
    return req;
}

struct killer {
    pid_t victim;
    double killed_at;
    int chunks;
};

static int kill_after_first_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    (void)c;
    struct killer *k = ctx;
    if (k->chunks++ == 1) {
        kill(k->victim, SIGKILL);
        k->killed_at = now_s();
    }
    return 0;
}

static void kill_worker_mid_stream(int worker_index, const char *name)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.context_length = 60000; /* long enough that the stream is still going at the kill */
    struct cinfer_server_info info;
    struct cinfer_engine *e = start(&args, NULL, &info);
    struct killer k = {.victim = started.pid[worker_index]};
    struct cinfer_generate_request req = long_request();
    struct cinfer_error err = {0};
    int rc = cinfer_engine_generate_stream(e, &req, kill_after_first_chunk, &k, &err);
    double waited = now_s() - k.killed_at;
    ck_assert_int_eq(rc, CINFER_ERR_CHILD);
    ck_assert_int_eq(err.code, CINFER_ERR_CHILD);
    ck_assert_msg(strstr(err.message, name) && strstr(err.message, "killed by signal 9"), "caller saw: %s", err.message);
    printf("%s killed mid-stream: %d (%s): %s\n", name, rc, cinfer_strerror(rc), err.message);
    ck_assert_msg(waited < 2.0, "the caller waited %.2f s after the kill", waited);
    ck_assert(!cinfer_engine_healthy(e));
    /* A new request is refused at once with the reason. */
    ck_assert_int_eq(cinfer_engine_generate_stream(e, &req, kill_after_first_chunk, &k, &err), CINFER_ERR_CHILD);
    ck_assert_int_eq(err.code, CINFER_ERR_CHILD);
    ck_assert_msg(strstr(err.message, "not healthy"), "%s", err.message);
    struct cinfer_server_info after;
    ck_assert_int_eq(cinfer_engine_server_info(e, &after, &err), CINFER_ERR_CHILD); /* control calls too */
    ck_assert_int_eq(cinfer_engine_flush_cache(e, &err), CINFER_ERR_CHILD);
    pid_t pids[2] = {started.pid[0], started.pid[1]};
    ck_assert_int_eq(cinfer_test_wait_gone(pids, 2, 2000), 0);
    for (int i = 0; i < 200 && dir_exists(info.run_dir); i++)
        usleep(10000);
    ck_assert_msg(!dir_exists(info.run_dir), "run folder %s remains", info.run_dir);
    cinfer_engine_shutdown(&e, 100);
    cinfer_server_args_free(&args);
}

START_TEST(kill_9_of_the_scheduler_mid_stream)
{
    if (model)
        kill_worker_mid_stream(1, "scheduler tp0");
}
END_TEST

START_TEST(kill_9_of_the_detokenizer_mid_stream)
{
    if (model)
        kill_worker_mid_stream(0, "detokenizer");
}
END_TEST

/* SIGSTOP at the first chunk: the scheduler's loop stops turning but the process lives,
 * which only the heartbeat watchdog can tell. */
static int stop_after_first_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    (void)c;
    struct killer *k = ctx;
    if (k->chunks++ == 1) {
        kill(k->victim, SIGSTOP);
        k->killed_at = now_s();
    }
    return 0;
}

START_TEST(a_hung_scheduler_is_killed_by_the_watchdog)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.context_length = 60000;
    args.watchdog_timeout_ms = 1000;
    struct cinfer_server_info info;
    struct cinfer_engine *e = start(&args, NULL, &info);
    /* Idle for three timeouts: heartbeats keep a live engine healthy. */
    usleep(3000 * 1000);
    ck_assert_msg(cinfer_engine_healthy(e), "an idle engine was declared hung");
    struct killer k = {.victim = started.pid[1]};
    struct cinfer_generate_request req = long_request();
    struct cinfer_error err = {0};
    int rc = cinfer_engine_generate_stream(e, &req, stop_after_first_chunk, &k, &err);
    double waited = now_s() - k.killed_at;
    ck_assert_int_ne(rc, CINFER_OK);
    ck_assert_msg(strstr(err.message, "scheduler tp0 stopped responding: no heartbeat for") &&
                      strstr(err.message, "engine.watchdog_timeout is 1000 ms"),
                  "caller saw: %s", err.message);
    /* The watchdog counts from the last heartbeat, sent every timeout / 4 (250 ms) while
     * busy, so the hang is seen between 0.75 s and a little over 1 s after the stop. */
    ck_assert_msg(waited >= 0.7 && waited < 2.5, "the caller waited %.2f s after the scheduler hung", waited);
    ck_assert(!cinfer_engine_healthy(e));
    pid_t pids[2] = {started.pid[0], started.pid[1]};
    ck_assert_int_eq(cinfer_test_wait_gone(pids, 2, 2000), 0);
    for (int i = 0; i < 200 && dir_exists(info.run_dir); i++)
        usleep(10000);
    ck_assert_msg(!dir_exists(info.run_dir), "run folder %s remains", info.run_dir);
    cinfer_engine_shutdown(&e, 100);
    cinfer_server_args_free(&args);
}
END_TEST

static int count_run_dirs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -d %s/cinfer-* 2>/dev/null | wc -l", private_tmp);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

START_TEST(a_scheduler_that_fails_while_loading)
{
    if (!model)
        return;
    /* The tokenizer reads the real model; the scheduler gets a truncated copy. */
    char broken[512];
    snprintf(broken, sizeof broken, "%s/broken-%d.gguf", CINFER_BINARY_DIR, (int)getpid());
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "head -c 20000 %s > %s", CINFER_TEST_DATA_DIR "/models/stories260K.gguf", broken);
    if (strstr(model, ".gguf") == NULL || system(cmd) != 0)
        return; /* needs the GGUF model */
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.tokenizer_path = strdup(model);
    free(args.model_path);
    args.model_path = strdup(broken);
    int dirs_before = count_run_dirs();
    pid_t before[64];
    int n_before = cinfer_test_children_of(getpid(), before, 64);
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_create(&args, NULL, &e, &err), CINFER_ERR_CHILD);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(err.message, "scheduler tp0 failed to start: ") && strstr(err.message, broken),
                  "caller saw: %s", err.message);
    pid_t after[64];
    ck_assert_int_eq(cinfer_test_children_of(getpid(), after, 64), n_before);
    ck_assert_int_eq(count_run_dirs(), dirs_before);
    unlink(broken);
    cinfer_server_args_free(&args);
}
END_TEST

static int never_ready(const struct cinfer_server_args *a, const struct cinfer_port_args *p, int gpu, int tp, int dp)
{
    (void)a; (void)p; (void)gpu; (void)tp; (void)dp;
    while (!cinfer_lifeline_gone())
        usleep(20000);
    return 0;
}

START_TEST(a_worker_that_never_reports_ready)
{
    if (!model)
        return;
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.start_timeout_ms = 1500;
    struct cinfer_engine_hooks hooks;
    cinfer_engine_default_hooks(&hooks);
    hooks.run_scheduler_process = never_ready;
    int dirs_before = count_run_dirs();
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    double t0 = now_s();
    ck_assert_int_eq(cinfer_engine_create(&args, &hooks, &e, &err), CINFER_ERR_TIMEOUT);
    ck_assert_msg(now_s() - t0 < 6.0, "create took %.1f s", now_s() - t0);
    ck_assert_str_eq(err.message, "scheduler tp0 did not report READY within the start deadline of 1500 ms "
                                    "(READY came from: detokenizer)");
    pid_t left[64];
    ck_assert_int_eq(cinfer_test_children_of(getpid(), left, 64), 0);
    ck_assert_int_eq(count_run_dirs(), dirs_before);
    cinfer_server_args_free(&args);
}
END_TEST

/* What the forked main process tells the test before it is killed. */
struct main_report {
    struct test_worker_pids pids;
    char run_dir[192];
};

START_TEST(sigkill_of_the_main_process_takes_the_workers_down)
{
    if (!model)
        return;
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t main_pid = fork();
    if (main_pid == 0) { /* the main process: start an engine, report its workers, wait */
        close(fds[0]);
        struct cinfer_server_args args;
        cinfer_test_engine_args(&args, model);
        struct cinfer_engine *e = NULL;
        struct cinfer_error err = {0};
        struct main_report report = {.pids.n = 0};
        struct cinfer_server_info info;
        if (cinfer_engine_create(&args, NULL, &e, &err) == 0 && cinfer_engine_server_info(e, &info, &err) == 0) {
            report.pids = cinfer_test_worker_pids(e);
            snprintf(report.run_dir, sizeof report.run_dir, "%s", info.run_dir);
        }
        ssize_t ignored = write(fds[1], &report, sizeof report);
        (void)ignored;
        for (;;)
            pause();
    }
    close(fds[1]);
    struct main_report report;
    ck_assert_int_eq(read(fds[0], &report, sizeof report), (ssize_t)sizeof report);
    ck_assert_int_eq(report.pids.n, 2);
    ck_assert(cinfer_test_pid_running(report.pids.pid[0]) && cinfer_test_pid_running(report.pids.pid[1]));
    kill(main_pid, SIGKILL);
    waitpid(main_pid, NULL, 0);
    pid_t pids[2] = {report.pids.pid[0], report.pids.pid[1]};
    pid_t alive = cinfer_test_wait_gone(pids, 2, 2000);
    ck_assert_msg(alive == 0, "worker %d still runs 2 s after the main process died", (int)alive);
    /* Nobody removed the run folder (the main process died); remove it here. */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", report.run_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(sigint_to_cinfer_generate_drains_and_exits_0)
{
    if (!model)
        return;
    cinfer_test_generate_sigint(model, (const char *const[]){NULL}, "Once upon a time");
}
END_TEST

START_TEST(garbage_frames_on_every_channel_are_dropped)
{
    if (!model)
        return;
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    struct cinfer_server_info info;
    struct cinfer_engine *e = start(&args, NULL, &info);
    struct cinfer_generate_request req = long_request();
    req.sampling.max_new_tokens = 16;
    struct cinfer_generate_result before, after;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &before, &err), 0);

    void *z = zmq_ctx_new();
    const char *channels[] = {"scheduler-in", "detokenizer-in", "tokenizer-in", "status"};
    const char garbage[] = "CINF\x01\x00\x00\x00\x05\x00\x00\x00\xff\xff\xff\xff garbage";
    for (size_t i = 0; i < 4; i++) {
        char endpoint[300];
        snprintf(endpoint, sizeof endpoint, "ipc://%s/%s", info.run_dir, channels[i]);
        void *s = zmq_socket(z, ZMQ_PUSH);
        int linger = 1000;
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
        ck_assert_int_eq(zmq_connect(s, endpoint), 0);
        ck_assert_int_ge(zmq_send(s, garbage, sizeof garbage, 0), 0);
        ck_assert_int_ge(zmq_send(s, "x", 1, 0), 0); /* too short for a header */
        zmq_close(s);
    }
    char rpc[300];
    snprintf(rpc, sizeof rpc, "ipc://%s/rpc-tp0", info.run_dir);
    void *d = zmq_socket(z, ZMQ_DEALER);
    int linger = 1000;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_connect(d, rpc), 0);
    ck_assert_int_ge(zmq_send(d, garbage, sizeof garbage, 0), 0);
    zmq_close(d);
    zmq_ctx_term(z);
    usleep(300000);

    /* Every process is still there and the answers are unchanged. */
    ck_assert(cinfer_engine_healthy(e));
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &after, &err), 0);
    ck_assert_str_eq(after.text, before.text);
    ck_assert(cinfer_test_pid_running(started.pid[0]) && cinfer_test_pid_running(started.pid[1]));
    cinfer_generate_result_free(&before);
    cinfer_generate_result_free(&after);
    cinfer_engine_shutdown(&e, 1000);
    cinfer_server_args_free(&args);
}
END_TEST

START_TEST(restart_policy_brings_the_workers_back)
{
    if (!model)
        return;
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.restart_policy = CINFER_RESTART_ON_FAILURE;
    struct cinfer_server_info info;
    struct cinfer_engine *e = start(&args, NULL, &info);
    struct cinfer_generate_request req = long_request();
    req.sampling.max_new_tokens = 16;
    struct cinfer_generate_result before, after;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &before, &err), 0);
    kill(started.pid[1], SIGKILL);
    /* Healthy again once the new workers report READY. Meanwhile a request is refused
     * as the engine's state says: a lost worker (CHILD) or workers restarting
     * (UNAVAILABLE); never a status that blames the request. */
    int healthy_again = 0, refusals = 0;
    struct cinfer_generate_request probe = long_request();
    probe.sampling.max_new_tokens = 1;
    for (int i = 0; i < 300 && !healthy_again; i++) {
        usleep(20000);
        struct cinfer_generate_result r;
        cinfer_error_clear(&err);
        int rc = cinfer_engine_generate(e, &probe, &r, &err);
        if (rc == CINFER_OK)
            cinfer_generate_result_free(&r);
        else {
            ck_assert_msg(rc == CINFER_ERR_CHILD || rc == CINFER_ERR_UNAVAILABLE, "while restarting: %d %s", rc,
                          err.message);
            ck_assert_int_eq(err.code, rc);
            refusals++;
        }
        struct cinfer_server_info now;
        healthy_again = cinfer_engine_healthy(e) && cinfer_engine_server_info(e, &now, &err) == 0 &&
                        cinfer_test_worker_pids(e).pid[1] != started.pid[1];
    }
    ck_assert_msg(healthy_again, "the workers did not come back");
    printf("restart: %d requests refused while the workers came back, each CHILD or UNAVAILABLE\n", refusals);
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &after, &err), 0);
    ck_assert_str_eq(after.text, before.text);
    cinfer_generate_result_free(&before);
    cinfer_generate_result_free(&after);
    cinfer_engine_shutdown(&e, 1000);
    cinfer_server_args_free(&args);
}
END_TEST

struct long_caller {
    struct cinfer_engine *engine;
    volatile int chunks;
    int rc;
    struct cinfer_error err;
};

static int count_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    (void)c;
    ((struct long_caller *)ctx)->chunks++;
    return 0;
}

static void *generate_long(void *arg)
{
    struct long_caller *c = arg;
    struct cinfer_generate_request req = long_request();
    c->rc = cinfer_engine_generate_stream(c->engine, &req, count_chunk, c, &c->err);
    return NULL;
}

struct shutter {
    struct cinfer_engine *engine;
    volatile int started;
};

static void *shut_down(void *arg)
{
    struct shutter *s = arg;
    s->started = 1;
    cinfer_engine_shutdown(&s->engine, 1500);
    return NULL;
}

START_TEST(a_shutdown_fails_what_it_cuts_as_unavailable)
{
    if (!model)
        return;
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.context_length = 60000; /* the request outlives the drain deadline */
    struct cinfer_server_info info;
    struct cinfer_engine *e = start(&args, NULL, &info);
    struct long_caller caller = {.engine = e};
    pthread_t gen, shut;
    ck_assert_int_eq(pthread_create(&gen, NULL, generate_long, &caller), 0);
    while (caller.chunks < 2)
        usleep(1000);
    struct shutter shutter = {.engine = e};
    ck_assert_int_eq(pthread_create(&shut, NULL, shut_down, &shutter), 0);
    while (!shutter.started)
        usleep(1000);
    usleep(200000); /* well inside the 1.5 s drain: the engine still exists */
    struct cinfer_generate_request req = long_request();
    req.sampling.max_new_tokens = 4;
    struct cinfer_generate_result r;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_generate(e, &req, &r, &err), CINFER_ERR_UNAVAILABLE);
    ck_assert_int_eq(err.code, CINFER_ERR_UNAVAILABLE);
    ck_assert_str_eq(err.message, "the engine is shutting down");
    printf("a request while draining: %d (%s): %s\n", err.code, cinfer_strerror(err.code), err.message);
    pthread_join(gen, NULL);
    pthread_join(shut, NULL);
    ck_assert_ptr_null(shutter.engine);
    ck_assert_int_eq(caller.rc, CINFER_ERR_UNAVAILABLE);
    ck_assert_int_eq(caller.err.code, CINFER_ERR_UNAVAILABLE);
    ck_assert_str_eq(caller.err.message, "the engine is shutting down");
    printf("a request cut by the drain deadline after %d chunks: %d (%s): %s\n", caller.chunks, caller.rc,
           cinfer_strerror(caller.rc), caller.err.message);
    pid_t pids[2] = {started.pid[0], started.pid[1]};
    ck_assert_int_eq(cinfer_test_wait_gone(pids, 2, 2000), 0);
    ck_assert_msg(!dir_exists(info.run_dir), "run folder %s remains", info.run_dir);
    cinfer_server_args_free(&args);
}
END_TEST

/* A tokenizer that encodes as the real one but cannot decode: its decoder fails at
 * start (mode 1) or, blaming the ids with CINFER_ERR_RANGE, at the first step (mode 2).
 * Set before the engine starts; the forked detokenizer inherits it. */
static int broken_mode;
static struct cinfer_tokenizer_ops broken_ops;

static int decoder_new_fails(const struct cinfer_tokenizer *tok, int skip_special, struct cinfer_token_decoder **out,
                             struct cinfer_error *err)
{
    (void)tok; (void)skip_special; (void)out;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "this tokenizer cannot decode incrementally");
}

static int decoder_step_fails(struct cinfer_token_decoder *dec, const int32_t *ids, size_t n, char **delta,
                              size_t *delta_len, struct cinfer_error *err)
{
    (void)dec; (void)n; (void)delta; (void)delta_len;
    return cinfer_error_set(err, CINFER_ERR_RANGE, "token id %d has no text", ids[0]);
}

static int init_broken_tokenizer(const struct cinfer_server_args *args, struct cinfer_tokenizer_ctx **out,
                                 struct cinfer_error *err)
{
    int rc = cinfer_default_init_tokenizer(args, out, err);
    if (rc)
        return rc;
    broken_ops = *(*out)->ops;
    if (broken_mode == 1)
        broken_ops.decoder_new = decoder_new_fails;
    else
        broken_ops.decoder_step = decoder_step_fails;
    (*out)->ops = &broken_ops;
    return CINFER_OK;
}

START_TEST(a_detokenizer_that_cannot_decode_fails_requests_as_internal)
{
    if (!model)
        return;
    static const char *const words[] = {"", "cannot start decoding request", "has no text"};
    for (broken_mode = 1; broken_mode <= 2; broken_mode++) {
        struct cinfer_server_args args;
        cinfer_test_engine_args(&args, model);
        struct cinfer_engine_hooks hooks;
        cinfer_engine_default_hooks(&hooks);
        hooks.init_tokenizer = init_broken_tokenizer;
        struct cinfer_server_info info;
        struct cinfer_engine *e = start(&args, &hooks, &info);
        struct cinfer_generate_request req = long_request();
        req.sampling.max_new_tokens = 8;
        struct cinfer_generate_result r;
        struct cinfer_error err = {0};
        ck_assert_int_eq(cinfer_engine_generate(e, &req, &r, &err), CINFER_ERR_INTERNAL);
        ck_assert_int_eq(err.code, CINFER_ERR_INTERNAL);
        ck_assert_msg(strstr(err.message, words[broken_mode]), "%s", err.message);
        printf("detokenizer failing (mode %d): %d (%s): %s\n", broken_mode, err.code, cinfer_strerror(err.code),
               err.message);
        ck_assert(cinfer_engine_healthy(e)); /* a request failed, not the engine */
        cinfer_engine_shutdown(&e, 1000);
        cinfer_server_args_free(&args);
    }
}
END_TEST

static Suite *suite_engine_faults(void)
{
    Suite *s = suite_create("engine_faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, kill_9_of_the_scheduler_mid_stream);
    tcase_add_test(tc, kill_9_of_the_detokenizer_mid_stream);
    tcase_add_test(tc, a_hung_scheduler_is_killed_by_the_watchdog);
    tcase_add_test(tc, a_scheduler_that_fails_while_loading);
    tcase_add_test(tc, a_worker_that_never_reports_ready);
    tcase_add_test(tc, sigkill_of_the_main_process_takes_the_workers_down);
    tcase_add_test(tc, sigint_to_cinfer_generate_drains_and_exits_0);
    tcase_add_test(tc, garbage_frames_on_every_channel_are_dropped);
    tcase_add_test(tc, restart_policy_brings_the_workers_back);
    tcase_add_test(tc, a_shutdown_fails_what_it_cuts_as_unavailable);
    tcase_add_test(tc, a_detokenizer_that_cannot_decode_fails_requests_as_internal);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_engine_faults)
