/* The engine over several scheduler processes, through the real processes and the
 * launch-fork plugin:
 *  - data parallelism: 32 concurrent requests on two replicas are spread over both
 *    (per-replica counts) and each gets the model runtime's own single-process greedy
 *    answer; a shared-prefix workload goes to the replica that holds the prefix (hit
 *    rate printed against what spreading would give);
 *  - faults: kill -9 of one replica's scheduler fails only the requests on it, within
 *    2 s and naming "scheduler dp1 tp0", while a stream on the other replica runs to its
 *    end; the other replica keeps answering; the restart policy brings the dead replica
 *    back; nothing is left running after shutdown. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/tokenizer.h"
#include "support/engine_fixture.h"
#include "support/greedy_reference.h"
#include "support/procs.h"
#include "support/runner.h"
#include "worker/hooks.h"

#define MAX_NEW 16
#define N_CONCURRENT 32

static const char *model;

static void setup(void)
{
    model = cinfer_test_engine_model();
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct cinfer_engine *start_engine(int dp_size, int restart)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.dp_size = dp_size;
    args.restart_policy = restart ? CINFER_RESTART_ON_FAILURE : CINFER_RESTART_OFF;
    args.context_length = 4096;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "engine create: %s", err.message);
    cinfer_server_args_free(&args);
    return e;
}

static struct cinfer_generate_request greedy(const int32_t *ids, size_t n, int max_new)
{
    struct cinfer_generate_request req = {.input_ids = ids, .n_input_ids = n};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.max_new_tokens = max_new;
    return req;
}

/* Prompt i: BOS then a few ids of the vocabulary, different per request. */
static int make_prompt(int i, int32_t *ids)
{
    int n = 0;
    ids[n++] = 1;
    for (int k = 0; k < 6 + i % 5; k++)
        ids[n++] = 10 + (i * 37 + k * 11) % 480;
    return n;
}

struct concurrent_job {
    struct cinfer_engine *engine;
    int32_t ids[32];
    int n_ids;
    struct cinfer_generate_result result;
    int rc;
    char error[CINFER_ERROR_MESSAGE_BYTES];
};

static void *run_job(void *arg)
{
    struct concurrent_job *j = arg;
    struct cinfer_generate_request req = greedy(j->ids, (size_t)j->n_ids, MAX_NEW);
    req.sampling.ignore_eos = 1;
    struct cinfer_error err = {0};
    j->rc = cinfer_engine_generate(j->engine, &req, &j->result, &err);
    snprintf(j->error, sizeof j->error, "%s", err.message);
    return NULL;
}

START_TEST(dp2_spreads_requests_and_each_answer_is_the_runtime_s)
{
    struct cinfer_engine *e = start_engine(2, 0);
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_server_info(e, &info, &err), 0);
    ck_assert_int_eq(info.dp_size, 2);
    ck_assert_int_eq(info.n_workers, 3);
    ck_assert_int_eq(info.n_replicas, 2);
    struct cinfer_worker_info *workers;
    int n_workers;
    ck_assert_int_eq(cinfer_engine_workers(e, &workers, &n_workers, &err), 0);
    ck_assert_int_eq(n_workers, 3);
    ck_assert_str_eq(workers[0].role, "detokenizer");
    for (int i = 1; i < 3; i++) {
        ck_assert_str_eq(workers[i].role, "scheduler");
        ck_assert_int_eq(workers[i].dp_rank, i - 1);
        ck_assert_int_eq(workers[i].tp_rank, 0);
        ck_assert_str_eq(workers[i].host, "localhost");
        ck_assert_int_eq(workers[i].phase, CINFER_WORKER_UP);
        char cmdline[256];
        cinfer_test_cmdline(workers[i].pid, cmdline, sizeof cmdline);
        char want[64];
        snprintf(want, sizeof want, "cinfer-worker scheduler dp%d tp0", i - 1);
        ck_assert_str_eq(cmdline, want);
    }
    free(workers);

    static struct concurrent_job jobs[N_CONCURRENT];
    pthread_t threads[N_CONCURRENT];
    for (int i = 0; i < N_CONCURRENT; i++) {
        jobs[i] = (struct concurrent_job){.engine = e};
        jobs[i].n_ids = make_prompt(i, jobs[i].ids);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < N_CONCURRENT; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < N_CONCURRENT; i++) {
        ck_assert_msg(jobs[i].rc == 0, "request %d: %s", i, jobs[i].error);
        int32_t want[MAX_NEW];
        int n = cinfer_test_greedy_reference(model, jobs[i].ids, jobs[i].n_ids, MAX_NEW, 1, want);
        ck_assert_int_eq((int)jobs[i].result.n_output_ids, n);
        for (int t = 0; t < n; t++)
            ck_assert_msg(jobs[i].result.output_ids[t] == want[t], "request %d token %d: %d from the engine, %d alone",
                          i, t, jobs[i].result.output_ids[t], want[t]);
        cinfer_generate_result_free(&jobs[i].result);
    }
    struct cinfer_replica_info *replicas;
    int n_replicas;
    ck_assert_int_eq(cinfer_engine_replicas(e, &replicas, &n_replicas, &err), 0);
    ck_assert_int_eq(n_replicas, 2);
    printf("dp2: %d concurrent requests, %d to replica dp0 and %d to dp1, each the runtime's own answer\n",
           N_CONCURRENT, replicas[0].routed_requests, replicas[1].routed_requests);
    ck_assert_int_eq(replicas[0].routed_requests + replicas[1].routed_requests, N_CONCURRENT);
    ck_assert_int_ge(replicas[0].routed_requests, N_CONCURRENT / 4);
    ck_assert_int_ge(replicas[1].routed_requests, N_CONCURRENT / 4);
    ck_assert_int_eq(replicas[0].in_flight + replicas[1].in_flight, 0);
    free(replicas);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* Two families of requests, each sharing a long system prompt, interleaved one at a
 * time: each family's prefix lives on one replica, so each request after a family's
 * first finds it there. */
START_TEST(a_shared_prefix_goes_to_the_replica_that_holds_it)
{
    enum { FAMILIES = 2, PER_FAMILY = 12, SHARED = 192, OWN = 8 };
    struct cinfer_engine *e = start_engine(2, 0);
    struct cinfer_error err = {0};
    int32_t ids[SHARED + OWN];
    for (int q = 0; q < FAMILIES * PER_FAMILY; q++) {
        int family = q % FAMILIES;
        ids[0] = 1;
        for (int i = 1; i < SHARED; i++)
            ids[i] = 20 + (family * 131 + i * 7) % 450;
        for (int i = 0; i < OWN; i++)
            ids[SHARED + i] = 20 + (q * 17 + i * 3) % 450;
        struct cinfer_generate_request req = greedy(ids, SHARED + OWN, 2);
        struct cinfer_generate_result r;
        ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
        cinfer_generate_result_free(&r);
    }
    struct cinfer_replica_info *replicas;
    int n;
    ck_assert_int_eq(cinfer_engine_replicas(e, &replicas, &n, &err), 0);
    int64_t hit = 0, query = 0;
    for (int r = 0; r < n; r++) {
        hit += replicas[r].prefix_cache_hit_tokens;
        query += replicas[r].prefix_cache_query_tokens;
        printf("shared prefix: replica dp%d got %d requests, prefix cache hit %lld of %lld prompt tokens\n", r,
               replicas[r].routed_requests, (long long)replicas[r].prefix_cache_hit_tokens,
               (long long)replicas[r].prefix_cache_query_tokens);
        ck_assert_int_eq(replicas[r].routed_requests, PER_FAMILY); /* one family each */
    }
    /* The best any placement gets: every request but each family's first finds its
     * whole shared prefix, in whole KV pages. */
    double ideal = (double)(FAMILIES * (PER_FAMILY - 1)) * SHARED / (double)query;
    /* Alternating replicas regardless of prefix would put each family on both, missing
     * one more first request per family. */
    double alternating = (double)(FAMILIES * (PER_FAMILY - 2)) * SHARED / (double)query;
    double rate = (double)hit / (double)query;
    printf("shared prefix: hit rate %.1f%% (the most possible %.1f%%, alternating replicas %.1f%%)\n", 100 * rate,
           100 * ideal, 100 * alternating);
    ck_assert_msg(rate > alternating, "hit rate %.3f no better than alternating replicas (%.3f)", rate, alternating);
    ck_assert_msg(rate > 0.85 * ideal, "hit rate %.3f, the most possible %.3f", rate, ideal);
    free(replicas);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* A stream that records how it ended. */
struct stream_job {
    struct cinfer_engine *engine;
    int32_t ids[16];
    int n_ids;
    int chunks;
    int rc;
    double ended_at; /* written by its thread, read by the test: atomically */
    struct cinfer_error err;
};

static int count_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    (void)c;
    struct stream_job *j = ctx;
    j->chunks++;
    return 0;
}

static void *run_stream(void *arg)
{
    struct stream_job *j = arg;
    struct cinfer_generate_request req = greedy(j->ids, (size_t)j->n_ids, 3000);
    req.sampling.ignore_eos = 1;
    j->rc = cinfer_engine_generate_stream(j->engine, &req, count_chunk, j, &j->err);
    double t = now_s();
    __atomic_store(&j->ended_at, &t, __ATOMIC_SEQ_CST);
    return NULL;
}

static void wait_for_chunks(struct stream_job *j, int n)
{
    for (int i = 0; i < 1000 && j->chunks < n; i++)
        usleep(5000);
    ck_assert_int_ge(j->chunks, n);
}

static void kill_one_replica(int restart)
{
    struct cinfer_engine *e = start_engine(2, restart);
    struct test_worker_pids before = cinfer_test_worker_pids(e);
    ck_assert_int_eq(before.n, 3);
    /* Two long streams: with equal loads they go to dp0, then dp1. */
    static struct stream_job jobs[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (struct stream_job){.engine = e};
        jobs[i].n_ids = make_prompt(100 + i, jobs[i].ids);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, run_stream, &jobs[i]), 0);
        wait_for_chunks(&jobs[i], 2);
    }
    struct cinfer_replica_info *replicas;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_replicas(e, &replicas, &n, &err), 0);
    ck_assert_int_eq(replicas[0].in_flight, 1);
    ck_assert_int_eq(replicas[1].in_flight, 1);
    free(replicas);

    double killed_at = now_s();
    kill(before.pid[2], SIGKILL); /* scheduler dp1 tp0 */
    pthread_join(threads[1], NULL);
    double waited = jobs[1].ended_at - killed_at;
    /* Once the loss is seen, new requests go to the replica that is up, and all succeed
     * while the dp0 stream still runs. */
    int answered = 0;
    for (int i = 0; i < 4; i++) {
        int32_t ids[16];
        int k = make_prompt(200 + i, ids);
        struct cinfer_generate_request req = greedy(ids, (size_t)k, 4);
        struct cinfer_generate_result r;
        int rc = cinfer_engine_generate(e, &req, &r, &err);
        ck_assert_msg(rc == CINFER_OK, "new request %d after the loss: %s", i, err.message);
        answered++;
        cinfer_generate_result_free(&r);
    }
    double dp0_ended;
    __atomic_load(&jobs[0].ended_at, &dp0_ended, __ATOMIC_SEQ_CST);
    ck_assert_msg(dp0_ended == 0, "the dp0 stream ended before the new requests did");
    ck_assert_int_eq(jobs[1].rc, CINFER_ERR_CHILD);
    ck_assert_msg(strstr(jobs[1].err.message, "scheduler dp1 tp0 was killed by signal 9"), "the dp1 caller saw: %s",
                  jobs[1].err.message);
    ck_assert_msg(waited < 2.0, "the dp1 caller waited %.2f s after the kill", waited);
    printf("dp2 kill -9 of dp1 (restart %s): its caller failed after %.2f s (%s); dp0 answered %d of 4 new "
           "requests meanwhile\n", restart ? "on-failure" : "off", waited, jobs[1].err.message, answered);

    /* The stream on dp0 runs to its end (the context limit), untouched. */
    pthread_join(threads[0], NULL);
    ck_assert_msg(jobs[0].rc == CINFER_OK, "the dp0 stream failed: %s", jobs[0].err.message);
    ck_assert_int_gt(jobs[0].chunks, 100);

    if (restart) {
        int back = 0;
        for (int i = 0; i < 500 && !back; i++) {
            usleep(20000);
            struct test_worker_pids now = cinfer_test_worker_pids(e);
            back = cinfer_engine_healthy(e) && now.pid[2] != before.pid[2] && now.pid[2] > 0;
        }
        ck_assert_msg(back, "replica dp1 did not come back");
        ck_assert(cinfer_test_pid_running(before.pid[1])); /* dp0 was never restarted */
        ck_assert_int_eq(cinfer_test_worker_pids(e).pid[1], before.pid[1]);
    } else {
        ck_assert(!cinfer_engine_healthy(e)); /* a replica is down... */
        struct cinfer_worker_info *workers;
        ck_assert_int_eq(cinfer_engine_workers(e, &workers, &n, &err), 0);
        ck_assert_int_eq(workers[2].phase, CINFER_WORKER_DOWN);
        ck_assert_int_eq(workers[1].phase, CINFER_WORKER_UP);
        free(workers);
    }
    /* ...and every replica that is up serves. */
    int32_t ids[16];
    int k = make_prompt(300, ids);
    struct cinfer_generate_request req = greedy(ids, (size_t)k, 4);
    struct cinfer_generate_result r;
    ck_assert_msg(cinfer_engine_generate(e, &req, &r, &err) == 0, "%s", err.message);
    cinfer_generate_result_free(&r);
    struct test_worker_pids last = cinfer_test_worker_pids(e);
    cinfer_engine_shutdown(&e, 1000);
    pid_t all[6] = {before.pid[0], before.pid[1], before.pid[2], last.pid[0], last.pid[1], last.pid[2]};
    ck_assert_int_eq(cinfer_test_wait_gone(all, 6, 2000), 0);
}

START_TEST(killing_one_replica_fails_only_its_requests)
{
    kill_one_replica(0);
}
END_TEST

START_TEST(the_restart_policy_brings_a_dead_replica_back)
{
    kill_one_replica(1);
}
END_TEST

static Suite *suite_engine_parallel(void)
{
    Suite *s = suite_create("engine_parallel");
    TCase *dp = tcase_create("data_parallel");
    tcase_set_timeout(dp, 300);
    tcase_add_checked_fixture(dp, setup, NULL);
    tcase_add_test(dp, dp2_spreads_requests_and_each_answer_is_the_runtime_s);
    tcase_add_test(dp, a_shared_prefix_goes_to_the_replica_that_holds_it);
    tcase_add_test(dp, killing_one_replica_fails_only_its_requests);
    tcase_add_test(dp, the_restart_policy_brings_a_dead_replica_back);
    suite_add_tcase(s, dp);
    return s;
}

CINFER_TEST_MAIN(suite_engine_parallel)
