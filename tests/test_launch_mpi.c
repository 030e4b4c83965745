/* launch-mpi with OpenMPI's mpirun on this machine and, where the test can make them,
 * across hosts in network namespaces (mpirun starting its daemons there over ssh).
 * Shown:
 *  - the MPI communicator with 2 and 3 ranks under mpirun (mpi_comm_ranks.c): each rank
 *    gets its own settings through rank 0, all_reduce is the rank-order sum bit for
 *    bit, all_gather, broadcast from every root and barrier hold;
 *  - TP=2 over MPI gives TP=1's greedy text and ids, logprobs within the f32 bound, on
 *    stories260K and the default model; its ranks are mpirun's children;
 *  - DP=2 (one mpirun job per replica) serves concurrent requests on both;
 *  - kill -9 of one rank fails its replica's requests within 2 s naming that rank, and
 *    the other replica keeps serving;
 *  - SIGKILL of the main process leaves no rank and no mpirun within 5 s;
 *  - inside a Slurm allocation (SLURM_JOB_NODELIST) with no hosts listed, launcher
 *    "auto" chooses launch-mpi and places the replica on the allocation's node;
 *  - refusals: no hosts and no allocation, a user@host, a missing cinfer-worker;
 *  - the allocation's node list and hostfiles read as Slurm and OpenMPI write them;
 *  - TP=2 with its ranks on two namespace hosts equals TP=1 (MPI between hosts).
 * Exits 77 (skipped) when there is no mpirun or the plugin was not built. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/launcher.h"
#include "cinfer/plugins.h"
#include "support/engine_fixture.h"
#include "support/generate_jobs.h"
#include "support/greedy_reference.h"
#include "support/procs.h"
#include "support/run_command.h"
#include "support/runner.h"
#include "support/tp_answers.h"
#include "launch-mpi/group_blob.h"
#include "launch-mpi/mpi_allocation.h"

#define PLUGIN CINFER_BINARY_DIR "/lib/cinfer/plugins/launch-mpi.so"
#define RANKS_PROGRAM CINFER_BINARY_DIR "/bin/mpi_comm_ranks"
#define HOSTS_DIR CINFER_BINARY_DIR "/mpi-hosts"
#define SCRIPT CINFER_SOURCE_DIR "/tests/support/ssh_hosts.sh"
#define SKIP_EXIT_CODE 77

struct host {
    char name[32], address[64], ns[64];
};
static struct host hosts[3];
static int n_hosts; /* loopback first, then namespace hosts */
static char ssh_args[600];

static void apply_flag(struct cinfer_server_args *args, const char *flag, const char *value)
{
    char *argv[] = {"test_launch_mpi", (char *)flag, (char *)value};
    char *rest[3];
    int n_rest = 0;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_server_args_apply_flags(args, 3, argv, NULL, rest, &n_rest, &err) == 0, "%s %s: %s", flag,
                  value, err.message);
}

/* launch-mpi, dp_size replicas of tp_size ranks; hosts as listed (NULL: none). */
static struct cinfer_server_args mpi_args(const char *model, int dp_size, int tp_size, const char *host_list)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    free(args.launcher);
    args.launcher = strdup("mpi");
    args.dp_size = dp_size;
    args.tp_size = tp_size;
    args.context_length = 4096;
    if (ssh_args[0])
        args.ssh_args = strdup(ssh_args);
    if (host_list)
        apply_flag(&args, "--hosts", host_list);
    return args;
}

static struct cinfer_engine *start(struct cinfer_server_args *args)
{
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(args, NULL, &e, &err) == 0, "engine over mpirun: %s", err.message);
    cinfer_server_args_free(args);
    return e;
}

/* ---- the communicator under mpirun ---------------------------------------------------- */

static void run_ranks(int n)
{
    const void *parts[8];
    size_t sizes[8];
    char texts[8][64];
    for (int r = 0; r < n; r++) {
        sizes[r] = (size_t)snprintf(texts[r], sizeof texts[r], "settings of rank %d", r);
        parts[r] = texts[r];
    }
    void *blob;
    size_t len;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_mpi_group_blob_encode(parts, sizes, n, &blob, &len, &err), 0);
    char blob_path[256], counter[256];
    snprintf(blob_path, sizeof blob_path, "%s/mpi-blob-%d", CINFER_BINARY_DIR, (int)getpid());
    snprintf(counter, sizeof counter, "%s/mpi-counter-%d", CINFER_BINARY_DIR, (int)getpid());
    unlink(counter);
    FILE *f = fopen(blob_path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(blob, 1, len, f), len);
    fclose(f);
    free(blob);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mpirun %s --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none -np %d %s %s %s "
             "< %s",
             geteuid() == 0 ? "--allow-run-as-root" : "", n, RANKS_PROGRAM, PLUGIN, counter, blob_path);
    static char out[65536];
    double t0 = cinfer_test_now_s();
    cinfer_test_run(cmd, out, sizeof out);
    double took = cinfer_test_now_s() - t0;
    unlink(blob_path);
    unlink(counter);
    for (int r = 0; r < n; r++) {
        char ok[64];
        snprintf(ok, sizeof ok, "rank %d of %d: ok", r, n);
        ck_assert_msg(strstr(out, ok), "mpirun -np %d: no '%s' in:\n%s", n, ok, out);
    }
    const char *line = strstr(out, "rank 0 of");
    printf("mpi: mpirun -np %d in %.1f s: %.*s\n", n, took, (int)strcspn(line, "\n"), line);
}

START_TEST(the_mpi_communicator_with_2_and_3_ranks)
{
    run_ranks(2);
    run_ranks(3);
}
END_TEST

/* ---- tensor parallelism over MPI ------------------------------------------------------- */

/* Every scheduler rank of e runs under mpirun (its parent's command line). */
static void ranks_are_mpirun_children(struct cinfer_engine *e, int n_ranks)
{
    struct test_worker_pids pids = cinfer_test_worker_pids(e);
    ck_assert_int_eq(pids.n, 1 + n_ranks);
    for (int i = 1; i < pids.n; i++) {
        char path[64], stat[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pids.pid[i]);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(stat, sizeof stat, f));
        fclose(f);
        int ppid = 0;
        const char *close_paren = strrchr(stat, ')');
        ck_assert(close_paren && sscanf(close_paren + 2, "%*c %d", &ppid) == 1);
        char parent[512];
        cinfer_test_cmdline(ppid, parent, sizeof parent);
        ck_assert_msg(strstr(parent, "mpirun") || strstr(parent, "orted"), "rank %d's parent runs '%s'", i - 1,
                      parent);
    }
}

static void tp_equals_tp1(const char *model, const char *label, int tp, const char *host_list, int check_parents)
{
    static const char *const prompts[] = {"Once upon a time", "The cat", "And God said", "In the beginning"};
    struct cinfer_generate_result base[4], got[4];
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.context_length = 4096;
    args.kv_cache_dtype = CINFER_KV_CACHE_DTYPE_F32; /* logprobs held to 1e-4 of TP=1's: f32 K/V on both */
    struct cinfer_engine *e = start(&args); /* TP=1, launch-fork */
    for (int p = 0; p < 4; p++)
        cinfer_test_tp_answer(e, prompts[p], &base[p]);
    cinfer_engine_shutdown(&e, 1000);
    args = mpi_args(model, 1, tp, host_list);
    args.kv_cache_dtype = CINFER_KV_CACHE_DTYPE_F32;
    double t0 = cinfer_test_now_s();
    e = start(&args);
    double started = cinfer_test_now_s() - t0;
    if (check_parents)
        ranks_are_mpirun_children(e, tp);
    double worst = 0;
    for (int p = 0; p < 4; p++) {
        cinfer_test_tp_answer(e, prompts[p], &got[p]);
        char what[160];
        snprintf(what, sizeof what, "%s tp%d over mpirun on %s, prompt %d", label, tp, host_list, p);
        double d = cinfer_test_tp_compare(&base[p], &got[p], what);
        worst = d > worst ? d : worst;
        cinfer_generate_result_free(&got[p]);
        cinfer_generate_result_free(&base[p]);
    }
    printf("mpi: %s tp%d over mpirun on %s (started in %.1f s): TP=1's greedy text and ids on 4 prompts, logprobs "
           "within %.2g\n", label, tp, host_list, started, worst);
    cinfer_engine_shutdown(&e, 1000);
}

START_TEST(tp2_over_mpi_equals_tp1)
{
    tp_equals_tp1(cinfer_test_engine_model(), "stories260K", 2, "localhost", 1);
    tp_equals_tp1(CINFER_SOURCE_DIR "/models/default", "default model", 2, "localhost", 1);
}
END_TEST

/* ---- replicas ------------------------------------------------------------------------ */

static void serve_concurrently(struct cinfer_engine *e, int n, int max_new)
{
    static struct job jobs[16];
    pthread_t threads[16];
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct job){.engine = e, .max_new = max_new};
        jobs[i].n_ids = cinfer_test_job_prompt(i, jobs[i].ids);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, cinfer_test_job_run_blocking, &jobs[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_msg(jobs[i].rc == 0, "request %d: %s", i, jobs[i].err.message);
        int32_t want[32];
        int k = cinfer_test_greedy_reference(cinfer_test_engine_model(), jobs[i].ids, jobs[i].n_ids, max_new, 1,
                                             want);
        ck_assert_int_eq((int)jobs[i].result.n_output_ids, k);
        for (int t = 0; t < k; t++)
            ck_assert_int_eq(jobs[i].result.output_ids[t], want[t]);
        cinfer_generate_result_free(&jobs[i].result);
    }
}

START_TEST(dp2_over_mpi_serves_both)
{
    struct cinfer_server_args args = mpi_args(cinfer_test_engine_model(), 2, 1, "localhost,localhost");
    struct cinfer_engine *e = start(&args);
    ranks_are_mpirun_children(e, 2);
    serve_concurrently(e, 8, 12);
    struct cinfer_replica_info *replicas;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_replicas(e, &replicas, &n, &err), 0);
    printf("mpi: dp2, a job each: 8 concurrent requests, %d and %d per replica, each the runtime's answer\n",
           replicas[0].routed_requests, replicas[1].routed_requests);
    ck_assert_int_gt(replicas[0].routed_requests, 0);
    ck_assert_int_gt(replicas[1].routed_requests, 0);
    free(replicas);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

START_TEST(kill_9_of_a_rank_fails_its_replica_naming_it)
{
    struct cinfer_server_args args = mpi_args(cinfer_test_engine_model(), 2, 2, "localhost,localhost");
    struct cinfer_engine *e = start(&args);
    struct test_worker_pids pids = cinfer_test_worker_pids(e); /* detokenizer, dp0 tp0, dp0 tp1, dp1 tp0, dp1 tp1 */
    ck_assert_int_eq(pids.n, 5);
    /* two long streams: with equal loads they go to dp0, then dp1 */
    static struct job jobs[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (struct job){.engine = e, .max_new = 100000}; /* to the context's end */
        jobs[i].n_ids = cinfer_test_job_prompt(100 + i, jobs[i].ids);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, cinfer_test_job_run_stream, &jobs[i]), 0);
        for (int w = 0; w < 2000 && __atomic_load_n(&jobs[i].chunks, __ATOMIC_SEQ_CST) < 2; w++)
            usleep(5000);
    }
    struct cinfer_replica_info *replicas;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_replicas(e, &replicas, &n, &err), 0);
    ck_assert_int_eq(replicas[0].in_flight, 1);
    ck_assert_int_eq(replicas[1].in_flight, 1);
    free(replicas);
    double killed_at = cinfer_test_now_s();
    kill(pids.pid[4], SIGKILL); /* scheduler dp1 tp1 */
    pthread_join(threads[1], NULL);
    double waited = jobs[1].ended_at - killed_at;
    ck_assert_int_eq(jobs[1].rc, CINFER_ERR_CHILD);
    ck_assert_msg(strstr(jobs[1].err.message, "scheduler dp1 tp1 on host localhost was killed by signal 9"),
                  "the dp1 caller saw: %s", jobs[1].err.message);
    ck_assert_msg(waited < 2.0, "the dp1 caller waited %.2f s after the kill", waited);
    /* the other replica keeps serving, its stream untouched */
    static struct job more;
    more = (struct job){.engine = e, .max_new = 4};
    more.n_ids = cinfer_test_job_prompt(3, more.ids);
    cinfer_test_job_run_blocking(&more);
    ck_assert_msg(more.rc == 0, "a new request after the kill: %s", more.err.message);
    cinfer_generate_result_free(&more.result);
    double dp0_ended;
    __atomic_load(&jobs[0].ended_at, &dp0_ended, __ATOMIC_SEQ_CST);
    ck_assert_msg(dp0_ended == 0, "the dp0 stream ended before the new request did");
    pthread_join(threads[0], NULL);
    ck_assert_msg(jobs[0].rc == 0, "the dp0 stream failed: %s", jobs[0].err.message);
    pid_t dp1[2] = {pids.pid[3], pids.pid[4]};
    ck_assert_int_eq(cinfer_test_wait_gone(dp1, 2, 5000), 0);
    printf("mpi: kill -9 of dp1 tp1: its caller failed after %.2f s (%s); dp0 served on, its stream to the end "
           "(%d chunks); dp1's other rank gone\n", waited, jobs[1].err.message, jobs[0].chunks);
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

/* mpirun processes whose parent is parent. */
static int mpiruns_of(pid_t parent, pid_t *out, int max)
{
    pid_t kids[64];
    int n = cinfer_test_children_of(parent, kids, 64), found = 0;
    for (int i = 0; i < n && found < max; i++) {
        char cmd[512];
        cinfer_test_cmdline(kids[i], cmd, sizeof cmd);
        if (strstr(cmd, "mpirun"))
            out[found++] = kids[i];
    }
    return found;
}

START_TEST(sigkill_of_the_main_process_leaves_nothing)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t main_pid = fork();
    if (main_pid == 0) {
        close(fds[0]);
        struct cinfer_server_args args = mpi_args(cinfer_test_engine_model(), 1, 2, "localhost");
        struct cinfer_engine *e = NULL;
        struct cinfer_error err = {0};
        struct test_worker_pids pids = {.n = 0};
        if (cinfer_engine_create(&args, NULL, &e, &err) == 0)
            pids = cinfer_test_worker_pids(e);
        else
            fprintf(stderr, "%s\n", err.message);
        ssize_t ignored = write(fds[1], &pids, sizeof pids);
        (void)ignored;
        for (;;)
            pause();
    }
    close(fds[1]);
    struct test_worker_pids pids;
    ck_assert_int_eq(read(fds[0], &pids, sizeof pids), (ssize_t)sizeof pids);
    ck_assert_int_eq(pids.n, 3);
    pid_t all[4] = {pids.pid[0], pids.pid[1], pids.pid[2], 0};
    ck_assert_int_eq(mpiruns_of(main_pid, &all[3], 1), 1);
    double killed_at = cinfer_test_now_s();
    kill(main_pid, SIGKILL);
    waitpid(main_pid, NULL, 0);
    pid_t alive = cinfer_test_wait_gone(all, 4, 5000);
    ck_assert_msg(alive == 0, "process %d still runs 5 s after the main process died", (int)alive);
    printf("mpi: SIGKILL of the main process: both ranks, mpirun and the detokenizer gone after %.2f s\n",
           cinfer_test_now_s() - killed_at);
}
END_TEST

/* ---- allocations and refusals ---------------------------------------------------------- */

START_TEST(inside_a_slurm_allocation_auto_chooses_mpi)
{
    setenv("SLURM_JOB_NODELIST", "localhost", 1);
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, cinfer_test_engine_model());
    free(args.launcher);
    args.launcher = strdup("auto");
    args.tp_size = 2;
    args.context_length = 4096;
    struct cinfer_engine *e = start(&args);
    unsetenv("SLURM_JOB_NODELIST");
    struct cinfer_worker_info *workers;
    int n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_workers(e, &workers, &n, &err), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(workers[1].host, "localhost");
    free(workers);
    ranks_are_mpirun_children(e, 2);
    serve_concurrently(e, 2, 8);
    printf("mpi: SLURM_JOB_NODELIST=localhost, no hosts, launcher auto: launch-mpi chosen, tp2 placed on localhost\n");
    cinfer_engine_shutdown(&e, 1000);
}
END_TEST

static void expect_error(struct cinfer_server_args *args, const char *want1, const char *want2, const char *what)
{
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    double t0 = cinfer_test_now_s();
    int rc = cinfer_engine_create(args, NULL, &e, &err);
    double took = cinfer_test_now_s() - t0;
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_null(e);
    ck_assert_msg(strstr(err.message, want1) && (!want2 || strstr(err.message, want2)), "%s: %s", what, err.message);
    ck_assert_msg(took < 20, "%s took %.1f s", what, took);
    printf("mpi: %s: after %.1f s: %s\n", what, took, err.message);
    cinfer_server_args_free(args);
}

START_TEST(refusals_name_the_cause)
{
    struct cinfer_server_args args = mpi_args(cinfer_test_engine_model(), 1, 2, NULL);
    expect_error(&args, "not usable here", "no launcher.hosts and no allocation", "no hosts");
    args = mpi_args(cinfer_test_engine_model(), 1, 2, "someone@localhost");
    expect_error(&args, "'someone@localhost'", "host names only", "a user@host");
    args = mpi_args(cinfer_test_engine_model(), 1, 2, "localhost");
    apply_flag(&args, "--remote-worker", "/nonexistent/cinfer-worker");
    args.start_timeout_ms = 15000;
    expect_error(&args, "scheduler tp0 on host localhost", "/nonexistent/cinfer-worker", "a missing cinfer-worker");
}
END_TEST

START_TEST(allocation_lists_read_as_slurm_and_openmpi_write_them)
{
    char **nodes;
    size_t n;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_mpi_expand_slurm_nodelist("node[01-03,07],gpu5,rack1-[8-9]x", &nodes, &n, &err), 0);
    static const char *const want[] = {"node01", "node02", "node03", "node07", "gpu5", "rack1-8x", "rack1-9x"};
    ck_assert_int_eq(n, 7);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(nodes[i], want[i]);
    cinfer_mpi_free_names(nodes, n);
    static const char *const bad[] = {"node[1-", "node[3-1]", "node[a]", "", "n[1]x[2]", "node[1-99999999]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        ck_assert_int_ne(cinfer_mpi_expand_slurm_nodelist(bad[i], &nodes, &n, &err), 0);
        ck_assert_msg(strstr(err.message, "SLURM_JOB_NODELIST"), "'%s': %s", bad[i], err.message);
    }
    ck_assert_int_eq(cinfer_mpi_parse_hostfile("# cluster\nnodeA slots=8\nnodeB\n\n  nodeA slots=8\nnodeC # spare\n",
                                               "hf", &nodes, &n, &err),
                     0);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(nodes[0], "nodeA");
    ck_assert_str_eq(nodes[1], "nodeB");
    ck_assert_str_eq(nodes[2], "nodeC");
    cinfer_mpi_free_names(nodes, n);
    ck_assert_int_ne(cinfer_mpi_parse_hostfile("# nothing\n", "hf", &nodes, &n, &err), 0);
    ck_assert_msg(strstr(err.message, "hostfile hf") && strstr(err.message, "no host"), "%s", err.message);

    /* shaped to the configuration, and what query says there */
    setenv("SLURM_JOB_NODELIST", "n[1-3]", 1);
    char **shaped;
    ck_assert_int_eq(cinfer_mpi_allocation_hosts(2, &shaped, &err), 0);
    ck_assert_str_eq(shaped[0], "n1");
    ck_assert_str_eq(shaped[1], "n2");
    ck_assert_ptr_null(shaped[2]);
    cinfer_mpi_free_names(shaped, 3);
    ck_assert_int_ne(cinfer_mpi_allocation_hosts(4, &shaped, &err), 0);
    ck_assert_msg(strstr(err.message, "3 nodes") && strstr(err.message, "dp_size 4"), "%s", err.message);
    struct cinfer_plugin *p = NULL;
    ck_assert_int_eq(cinfer_plugin_open(PLUGIN, CINFER_PLUGIN_KIND_LAUNCHER, NULL, &p, &err), 0);
    struct cinfer_launcher_config config = {.struct_size = sizeof config, .tp_size = 1, .dp_size = 1};
    struct cinfer_launcher_answer a;
    ck_assert_int_eq(cinfer_launcher_query(p, &config, &a), 0);
    ck_assert_int_eq(a.usable, 1);
    ck_assert_int_eq(a.priority, 30);
    unsetenv("SLURM_JOB_NODELIST");
    ck_assert_int_eq(cinfer_launcher_query(p, &config, &a), 0);
    ck_assert_int_eq(a.usable, 0);
    ck_assert_msg(strstr(a.why, "no launcher.hosts"), "%s", a.why);
    cinfer_plugin_close(&p);
}
END_TEST

/* ---- across hosts ------------------------------------------------------------------------ */

START_TEST(tp2_with_ranks_on_two_namespace_hosts)
{
    if (n_hosts < 3) {
        printf("SKIP: no namespace hosts here, so no MPI between hosts\n");
        return;
    }
    char list[160];
    snprintf(list, sizeof list, "%s,%s", hosts[1].address, hosts[2].address);
    tp_equals_tp1(cinfer_test_engine_model(), "stories260K", 2, list, 0);
}
END_TEST

static Suite *suite_launch_mpi(void)
{
    Suite *s = suite_create("launch_mpi");
    TCase *tc = tcase_create("mpirun");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, the_mpi_communicator_with_2_and_3_ranks);
    tcase_add_test(tc, tp2_over_mpi_equals_tp1);
    tcase_add_test(tc, dp2_over_mpi_serves_both);
    tcase_add_test(tc, kill_9_of_a_rank_fails_its_replica_naming_it);
    tcase_add_test(tc, sigkill_of_the_main_process_leaves_nothing);
    tcase_add_test(tc, inside_a_slurm_allocation_auto_chooses_mpi);
    tcase_add_test(tc, refusals_name_the_cause);
    tcase_add_test(tc, allocation_lists_read_as_slurm_and_openmpi_write_them);
    tcase_add_test(tc, tp2_with_ranks_on_two_namespace_hosts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    char out[4096];
    if (cinfer_test_run("command -v mpirun", out, sizeof out) != 0 || access(PLUGIN, R_OK) != 0) {
        printf("SKIP: no mpirun on PATH or no launch-mpi plugin built\n");
        return SKIP_EXIT_CODE;
    }
    /* namespace hosts for MPI between hosts, where this machine can make them */
    if (cinfer_test_run("sh " SCRIPT " up " HOSTS_DIR " 2", out, sizeof out) == 0) {
        printf("%s", out);
        FILE *f = fopen(HOSTS_DIR "/hosts", "r");
        while (f && n_hosts < 3 && fscanf(f, "%31s %63s %63s", hosts[n_hosts].name, hosts[n_hosts].address,
                                          hosts[n_hosts].ns) == 3)
            n_hosts++;
        if (f)
            fclose(f);
        snprintf(ssh_args, sizeof ssh_args, "-F %s/ssh_config", HOSTS_DIR);
    } else {
        printf("no ssh hosts here (MPI between hosts not shown): %s\n", out);
    }
    int rc = cinfer_test_run_suite(suite_launch_mpi());
    cinfer_test_run("sh " SCRIPT " down " HOSTS_DIR, out, sizeof out);
    return rc;
}
