/* launch-ssh against real OpenSSH servers the test starts (tests/support/ssh_hosts.sh):
 * one on loopback and, where this machine can make them, two hosts in network
 * namespaces, each with its own address and sshd (their processes visible here, their
 * network apart). Shown:
 *  - DP=2 over two hosts serves concurrent requests on both, each answer the runtime's
 *    own, every channel tcp:// with CURVE;
 *  - kill -9 of a remote worker fails its requests within 2 s naming its host, while
 *    the other replica keeps serving;
 *  - dropping a worker's SSH connection ends the remote worker (seen inside its host);
 *  - SIGKILL of the main process leaves no cinfer process on any host within 5 s;
 *  - an unreachable host, a refused key and a missing cinfer-worker each give an error
 *    naming the host and the cause, within the connect timeout;
 *  - a client without the engine's keys gets no answer from a worker's channel, and the
 *    engine keeps serving.
 * Exits 77 (skipped) when no sshd can be started here, saying why. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "engine/engine_internal.h"
#include "support/engine_fixture.h"
#include "support/generate_jobs.h"
#include "support/greedy_reference.h"
#include "support/procs.h"
#include "support/run_command.h"
#include "support/runner.h"
#include "support/tp_answers.h"

#define HOSTS_DIR CINFER_BINARY_DIR "/ssh-hosts"
#define SCRIPT CINFER_SOURCE_DIR "/tests/support/ssh_hosts.sh"
#define SKIP_EXIT_CODE 77

struct host {
    char name[32], address[64], ns[64];
};
static struct host hosts[3];
static int n_hosts;
static char ssh_args[600];

/* The two hosts replicas go to: the namespace hosts, else loopback twice. */
static const struct host *replica_host(int r)
{
    return n_hosts >= 3 ? &hosts[1 + r] : &hosts[0];
}

static void apply_flag(struct cinfer_server_args *args, const char *flag, const char *value)
{
    char *argv[] = {"test_launch_ssh", (char *)flag, (char *)value};
    char *rest[3];
    int n_rest = 0;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_server_args_apply_flags(args, 3, argv, NULL, rest, &n_rest, &err) == 0, "%s %s: %s", flag,
                  value, err.message);
}

static struct cinfer_server_args engine_args(int dp_size)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, cinfer_test_engine_model());
    free(args.launcher);
    args.launcher = strdup("ssh");
    args.ssh_args = strdup(ssh_args);
    args.dp_size = dp_size;
    args.context_length = 4096;
    char list[256];
    snprintf(list, sizeof list, "%s%s%s", replica_host(0)->address, dp_size > 1 ? "," : "",
             dp_size > 1 ? replica_host(1)->address : "");
    apply_flag(&args, "--hosts", list);
    return args;
}

static struct cinfer_engine *start_args(struct cinfer_server_args *args)
{
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(args, NULL, &e, &err) == 0, "engine over ssh: %s", err.message);
    cinfer_server_args_free(args);
    return e;
}

static struct cinfer_engine *start(int dp_size)
{
    struct cinfer_server_args args = engine_args(dp_size);
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "engine over ssh: %s", err.message);
    cinfer_server_args_free(&args);
    return e;
}

/* ---- serving across hosts --------------------------------------------------------------- */

START_TEST(dp2_over_two_hosts_serves_both)
{
    struct cinfer_engine *e = start(2);
    struct cinfer_worker_info *workers;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_workers(e, &workers, &n, &err), 0);
    ck_assert_int_eq(n, 3);
    for (int r = 0; r < 2; r++)
        ck_assert_str_eq(workers[1 + r].host, replica_host(r)->address);
    free(workers);
    enum { N = 8 };
    static struct job jobs[N];
    pthread_t threads[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (struct job){.engine = e, .max_new = 12};
        jobs[i].n_ids = cinfer_test_job_prompt(i, jobs[i].ids);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, cinfer_test_job_run_blocking, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_msg(jobs[i].rc == 0, "request %d: %s", i, jobs[i].err.message);
        int32_t want[12];
        int k = cinfer_test_greedy_reference(cinfer_test_engine_model(), jobs[i].ids, jobs[i].n_ids, 12, 1, want);
        ck_assert_int_eq((int)jobs[i].result.n_output_ids, k);
        for (int t = 0; t < k; t++)
            ck_assert_int_eq(jobs[i].result.output_ids[t], want[t]);
        cinfer_generate_result_free(&jobs[i].result);
    }
    struct cinfer_replica_info *replicas;
    ck_assert_int_eq(cinfer_engine_replicas(e, &replicas, &n, &err), 0);
    printf("ssh: dp2 on %s and %s: %d concurrent requests, %d and %d per replica, each the runtime's answer\n",
           replica_host(0)->address, replica_host(1)->address, N, replicas[0].routed_requests,
           replicas[1].routed_requests);
    ck_assert_int_gt(replicas[0].routed_requests, 0);
    ck_assert_int_gt(replicas[1].routed_requests, 0);
    free(replicas);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

static void wait_chunks(struct job *j, int n)
{
    for (int i = 0; i < 2000 && __atomic_load_n(&j->chunks, __ATOMIC_SEQ_CST) < n; i++)
        usleep(5000);
    ck_assert_int_ge(j->chunks, n);
}

/* The remote worker of replica r, as its READY reported it (the namespaces share this
 * machine's process ids). */
static pid_t remote_pid(struct cinfer_engine *e, int r)
{
    return cinfer_test_worker_pids(e).pid[1 + r];
}

START_TEST(kill_9_of_a_remote_worker_names_its_host)
{
    struct cinfer_engine *e = start(2);
    static struct job jobs[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (struct job){.engine = e, .max_new = 3000};
        jobs[i].n_ids = cinfer_test_job_prompt(50 + i, jobs[i].ids);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, cinfer_test_job_run_stream, &jobs[i]), 0);
        wait_chunks(&jobs[i], 2);
    }
    double killed_at = cinfer_test_now_s();
    kill(remote_pid(e, 1), SIGKILL);
    pthread_join(threads[1], NULL);
    double waited = jobs[1].ended_at - killed_at;
    char want[128];
    snprintf(want, sizeof want, "scheduler dp1 tp0 on host %s was killed by signal 9", replica_host(1)->address);
    ck_assert_int_eq(jobs[1].rc, CINFER_ERR_CHILD);
    ck_assert_msg(strstr(jobs[1].err.message, want), "the dp1 caller saw: %s", jobs[1].err.message);
    ck_assert_msg(waited < 2.0, "the dp1 caller waited %.2f s", waited);
    printf("ssh: kill -9 of the remote worker: its caller failed after %.2f s: %s\n", waited, jobs[1].err.message);
    /* dp0 keeps serving: new requests, and its stream to the end */
    for (int i = 0; i < 3; i++) {
        static struct job extra;
        extra = (struct job){.engine = e, .max_new = 4};
        extra.n_ids = cinfer_test_job_prompt(90 + i, extra.ids);
        cinfer_test_job_run_blocking(&extra);
        ck_assert_msg(extra.rc == 0, "a request after the loss: %s", extra.err.message);
        cinfer_generate_result_free(&extra.result);
    }
    pthread_join(threads[0], NULL);
    ck_assert_msg(jobs[0].rc == 0, "the dp0 stream failed: %s", jobs[0].err.message);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* The pids of cinfer-worker processes inside a namespace host ("ip netns pids"; not the
 * remote shell that runs one, whose command line names it too). */
static int workers_inside(const char *ns, pid_t *out, int cap)
{
    char cmd[256], text[4096];
    snprintf(cmd, sizeof cmd,
             "for p in $(ip netns pids %s); do tr '\\0' ' ' </proc/$p/cmdline 2>/dev/null | "
             "grep -qE '^([^ ]*/)?cinfer-worker( |$)' && echo $p; done",
             ns);
    cinfer_test_run(cmd, text, sizeof text);
    int n = 0;
    for (char *p = text; *p && n < cap;) {
        out[n++] = (pid_t)strtol(p, &p, 10);
        while (*p == '\n')
            p++;
    }
    return n;
}

/* The ssh client this process runs for a host (a child of ours). The pattern is anchored
 * at the program's name: unanchored, it also matched the shell that runs pgrep (its
 * command line holds the pattern's text), and once pids wrapped that shell came first. */
static pid_t ssh_client_for(const char *address)
{
    char cmd[256], text[256];
    snprintf(cmd, sizeof cmd, "pgrep -P %d -f '^([^ ]*/)?ssh .* %s -- '", (int)getpid(), address);
    cinfer_test_run(cmd, text, sizeof text);
    char *end;
    long pid = strtol(text, &end, 10);
    ck_assert_msg(pid > 0 && (*end == '\0' || (*end == '\n' && end[1] == '\0')),
                  "the ssh client for %s: pgrep found \"%s\"", address, text);
    return (pid_t)pid;
}

START_TEST(dropping_the_ssh_connection_ends_the_remote_worker)
{
    if (n_hosts < 3) {
        printf("SKIP: dropping the connection is checked inside a namespace host: %s\n", "none here");
        return;
    }
    struct cinfer_engine *e = start(2);
    pid_t worker = remote_pid(e, 1);
    pid_t inside[8];
    int n = workers_inside(replica_host(1)->ns, inside, 8);
    ck_assert_msg(n == 1 && inside[0] == worker, "inside %s: %d cinfer-worker processes", replica_host(1)->name, n);
    pid_t client = ssh_client_for(replica_host(1)->address);
    ck_assert_int_gt(client, 0);
    double dropped_at = cinfer_test_now_s();
    kill(client, SIGKILL);
    double gone_after = -1;
    for (int i = 0; i < 100 && gone_after < 0; i++) {
        usleep(50000);
        if (workers_inside(replica_host(1)->ns, inside, 8) == 0)
            gone_after = cinfer_test_now_s() - dropped_at;
    }
    ck_assert_msg(gone_after >= 0, "the remote worker still runs 5 s after its SSH connection dropped");
    printf("ssh: the connection dropped: the worker inside %s was gone after %.2f s\n", replica_host(1)->name,
           gone_after);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

START_TEST(sigkill_of_the_main_process_leaves_nothing_on_any_host)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t main_pid = fork();
    if (main_pid == 0) {
        close(fds[0]);
        struct cinfer_server_args args = engine_args(2);
        struct cinfer_engine *e = NULL;
        struct cinfer_error err = {0};
        struct test_worker_pids pids = {.n = 0};
        if (cinfer_engine_create(&args, NULL, &e, &err) == 0)
            pids = cinfer_test_worker_pids(e);
        ssize_t ignored = write(fds[1], &pids, sizeof pids);
        (void)ignored;
        for (;;)
            pause();
    }
    close(fds[1]);
    struct test_worker_pids pids;
    ck_assert_int_eq(read(fds[0], &pids, sizeof pids), (ssize_t)sizeof pids);
    ck_assert_int_eq(pids.n, 3);
    double killed_at = cinfer_test_now_s();
    kill(main_pid, SIGKILL);
    waitpid(main_pid, NULL, 0);
    pid_t all[3] = {pids.pid[0], pids.pid[1], pids.pid[2]};
    pid_t alive = cinfer_test_wait_gone(all, 3, 5000);
    ck_assert_msg(alive == 0, "worker %d still runs 5 s after the main process died", (int)alive);
    for (int r = 0; r < 2 && n_hosts >= 3; r++) {
        pid_t inside[8];
        ck_assert_int_eq(workers_inside(replica_host(r)->ns, inside, 8), 0);
    }
    printf("ssh: SIGKILL of the main process: every worker on every host gone after %.2f s\n",
           cinfer_test_now_s() - killed_at);
}
END_TEST

/* ---- tensor parallelism on a host ------------------------------------------------------ */

/* Names in /dev/shm of e's communicator segments ("<its run folder's name>-comm-..."):
 * only e's, since other tests on the machine make segments of their own meanwhile. */
static int comm_segments(struct cinfer_engine *e)
{
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_server_info(e, &info, &err) == 0, "%s", err.message);
    const char *base = strrchr(info.run_dir, '/');
    char command[512], text[4096];
    snprintf(command, sizeof command, "ls /dev/shm 2>/dev/null | grep -c -F -- '%.180s-comm-' || true",
             base ? base + 1 : info.run_dir);
    cinfer_test_run(command, text, sizeof text);
    return atoi(text);
}

START_TEST(tp2_inside_a_host_over_its_shared_memory)
{
    struct cinfer_server_args args = engine_args(1); /* one replica on replica_host(0) */
    args.tp_size = 2;
    struct cinfer_engine *e = start_args(&args);
    struct cinfer_worker_info *workers;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_workers(e, &workers, &n, &err), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(workers[1].host, replica_host(0)->address);
    ck_assert_str_eq(workers[2].host, replica_host(0)->address);
    free(workers);
    /* rank 0 made the segment on the host and removed its name once both joined */
    ck_assert_int_eq(comm_segments(e), 0);
    static struct job j;
    for (int i = 0; i < 3; i++) {
        j = (struct job){.engine = e, .max_new = 12};
        j.n_ids = cinfer_test_job_prompt(40 + i, j.ids);
        cinfer_test_job_run_blocking(&j);
        ck_assert_msg(j.rc == 0, "%s", j.err.message);
        int32_t want[12];
        int k = cinfer_test_greedy_reference(cinfer_test_engine_model(), j.ids, j.n_ids, 12, 1, want);
        ck_assert_int_eq((int)j.result.n_output_ids, k);
        for (int t = 0; t < k; t++)
            ck_assert_int_eq(j.result.output_ids[t], want[t]);
        cinfer_generate_result_free(&j.result);
    }
    printf("ssh: tp2 inside host %s over shared memory its rank 0 made: 3 prompts, the runtime's greedy answers; "
           "no segment name left\n", replica_host(0)->address);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* Ranks of one replica on two hosts: no shared memory between them and no MPI, so the
 * communicator runs over tcp through rank 0 with the engine's CURVE keys. */
START_TEST(tp2_across_two_hosts_over_tcp_equals_tp1)
{
    if (n_hosts < 3) {
        printf("SKIP: no namespace hosts here, so no two hosts for one replica\n");
        return;
    }
    static const char *const prompts[] = {"Once upon a time", "The cat", "And God said", "In the beginning"};
    struct cinfer_generate_result base[4], got[4];
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, cinfer_test_engine_model());
    args.context_length = 4096;
    args.kv_cache_dtype = CINFER_KV_CACHE_DTYPE_F32; /* logprobs held to 1e-4 of TP=1's: f32 K/V on both */
    struct cinfer_engine *e = start_args(&args); /* TP=1, launch-fork */
    for (int p = 0; p < 4; p++)
        cinfer_test_tp_answer(e, prompts[p], &base[p]);
    cinfer_engine_shutdown(&e, 1000);

    args = engine_args(1);
    args.tp_size = 2;
    args.kv_cache_dtype = CINFER_KV_CACHE_DTYPE_F32;
    char list[160];
    snprintf(list, sizeof list, "%s,%s", hosts[1].address, hosts[2].address);
    apply_flag(&args, "--hosts", list);
    double t0 = cinfer_test_now_s();
    e = start_args(&args);
    double started = cinfer_test_now_s() - t0;
    struct cinfer_worker_info *workers;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_workers(e, &workers, &n, &err), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(workers[1].host, hosts[1].address);
    ck_assert_str_eq(workers[2].host, hosts[2].address);
    free(workers);
    double worst = 0;
    for (int p = 0; p < 4; p++) {
        cinfer_test_tp_answer(e, prompts[p], &got[p]);
        char what[256];
        snprintf(what, sizeof what, "tp2 over tcp on %s, prompt %d", list, p);
        double d = cinfer_test_tp_compare(&base[p], &got[p], what);
        worst = d > worst ? d : worst;
        cinfer_generate_result_free(&got[p]);
        cinfer_generate_result_free(&base[p]);
    }
    printf("ssh: tp2 with ranks on %s over the tcp communicator (started in %.1f s): TP=1's greedy text and ids on "
           "4 prompts, logprobs within %.2g\n", list, started, worst);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------------ */

static void expect_start_error(const char *extra_flag, const char *extra_value, const char *host, const char *cause,
                               const char *what)
{
    struct cinfer_server_args args = engine_args(1);
    struct cinfer_error err = {0};
    free(args.hosts.items[0]);
    args.hosts.items[0] = strdup(host);
    if (extra_flag)
        apply_flag(&args, extra_flag, extra_value);
    args.connect_timeout_ms = 2000;
    struct cinfer_engine *e = NULL;
    double t0 = cinfer_test_now_s();
    int rc = cinfer_engine_create(&args, NULL, &e, &err);
    double took = cinfer_test_now_s() - t0;
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_null(e);
    char named[128];
    snprintf(named, sizeof named, "scheduler tp0 on host %s", host);
    ck_assert_msg(strstr(err.message, named) && strstr(err.message, cause), "%s: %s", what, err.message);
    ck_assert_msg(took < 2.0 + 3.0, "%s: the error took %.1f s with a connect timeout of 2 s", what, took);
    printf("ssh: %s: after %.1f s: %s\n", what, took, err.message);
    cinfer_server_args_free(&args);
}

START_TEST(unreachable_host_refused_key_missing_worker)
{
    /* nobody answers at .99 of a namespace host's subnet (or a reserved address) */
    char unreachable[64];
    if (n_hosts >= 3) {
        snprintf(unreachable, sizeof unreachable, "%s", hosts[1].address);
        char *dot = strrchr(unreachable, '.');
        snprintf(dot, sizeof unreachable - (size_t)(dot - unreachable), ".99");
    } else {
        snprintf(unreachable, sizeof unreachable, "192.0.2.1"); /* TEST-NET-1 */
    }
    expect_start_error(NULL, NULL, unreachable, "onnect", "an unreachable host");
    char nokey[600];
    snprintf(nokey, sizeof nokey, "-F %s/ssh_config_nokey", HOSTS_DIR);
    expect_start_error("--ssh-args", nokey, hosts[0].address, "Permission denied (publickey)", "a refused key");
    expect_start_error("--remote-worker", "/nonexistent/cinfer-worker", hosts[0].address,
                       "/nonexistent/cinfer-worker: No such file or directory", "a missing cinfer-worker");
}
END_TEST

/* A DEALER that asks a worker's RPC channel for "ping" and says whether anything came
 * back within a second. */
static int rogue_gets_an_answer(const char *endpoint, const char *server_public, int curve)
{
    void *z = zmq_ctx_new();
    void *s = zmq_socket(z, ZMQ_DEALER);
    int linger = 0, timeout_ms = 1000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    if (curve) { /* it knows the server's public key, but holds a client key of its own */
        char pub[41], sec[41];
        zmq_curve_keypair(pub, sec);
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_public, 40);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    zmq_connect(s, endpoint);
    struct cinfer_msg_rpc_call call = {.call_id = 1, .method = "ping", .payload = "{}"};
    void *frame;
    size_t len;
    cinfer_msg_encode_rpc_call(&call, &frame, &len);
    zmq_send(s, frame, len, ZMQ_DONTWAIT);
    free(frame);
    char buf[256];
    int got = zmq_recv(s, buf, sizeof buf, 0);
    zmq_close(s);
    zmq_ctx_term(z);
    return got >= 0;
}

START_TEST(a_client_without_the_key_is_refused)
{
    struct cinfer_engine *e = start(1);
    const struct cinfer_port_args *ports = &e->workers[1].ports;
    ck_assert_msg(!strncmp(ports->rpc, "tcp://", 6), "the RPC channel is %s", ports->rpc);
    ck_assert(!rogue_gets_an_answer(ports->rpc, ports->curve_server_public, 1));
    ck_assert(!rogue_gets_an_answer(ports->rpc, ports->curve_server_public, 0));
    /* the engine's own calls still get through, and it still serves */
    struct cinfer_rpc_reply *replies;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_collective_rpc(e, "ping", "{}", 2000, &replies, &n, &err), 0);
    ck_assert_int_eq(replies[0].status, 0);
    cinfer_rpc_replies_free(replies, n);
    static struct job j;
    j = (struct job){.engine = e, .max_new = 4};
    j.n_ids = cinfer_test_job_prompt(3, j.ids);
    cinfer_test_job_run_blocking(&j);
    ck_assert_msg(j.rc == 0, "%s", j.err.message);
    cinfer_generate_result_free(&j.result);
    printf("ssh: two clients without the engine's keys got no answer from %s; the engine kept serving\n", ports->rpc);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

static Suite *suite_launch_ssh(void)
{
    Suite *s = suite_create("launch_ssh");
    TCase *tc = tcase_create("hosts");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, dp2_over_two_hosts_serves_both);
    tcase_add_test(tc, kill_9_of_a_remote_worker_names_its_host);
    tcase_add_test(tc, dropping_the_ssh_connection_ends_the_remote_worker);
    tcase_add_test(tc, sigkill_of_the_main_process_leaves_nothing_on_any_host);
    tcase_add_test(tc, tp2_inside_a_host_over_its_shared_memory);
    tcase_add_test(tc, tp2_across_two_hosts_over_tcp_equals_tp1);
    tcase_add_test(tc, unreachable_host_refused_key_missing_worker);
    tcase_add_test(tc, a_client_without_the_key_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
#ifdef CINFER_TEST_NO_LAUNCH_SSH
    printf("SKIP: this build has no launch-ssh plugin (CINFER_MINIMAL leaves it out)\n");
    return SKIP_EXIT_CODE;
#endif
    char out[4096];
    int rc = cinfer_test_run("sh " SCRIPT " up " HOSTS_DIR " 2", out, sizeof out);
    if (rc != 0) {
        printf("SKIP: no ssh hosts here: %s\n", out);
        cinfer_test_run("sh " SCRIPT " down " HOSTS_DIR, out, sizeof out);
        return SKIP_EXIT_CODE;
    }
    printf("%s", out);
    FILE *f = fopen(HOSTS_DIR "/hosts", "r");
    while (f && n_hosts < 3 && fscanf(f, "%31s %63s %63s", hosts[n_hosts].name, hosts[n_hosts].address,
                                      hosts[n_hosts].ns) == 3)
        n_hosts++;
    if (f)
        fclose(f);
    FILE *skip = fopen(HOSTS_DIR "/SKIP", "r");
    if (skip) {
        char why[512] = "";
        if (fgets(why, sizeof why, skip))
            printf("namespace hosts skipped (loopback only): %s", why);
        fclose(skip);
    }
    snprintf(ssh_args, sizeof ssh_args, "-F %s/ssh_config", HOSTS_DIR);
    rc = cinfer_test_run_suite(suite_launch_ssh());
    cinfer_test_run("sh " SCRIPT " down " HOSTS_DIR, out, sizeof out);
    return rc;
}
