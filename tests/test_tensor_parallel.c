/* Tensor parallelism in the model runtime (core/model/runtime_shard.c, forward.c):
 *  - stories260K (a real trained model: 8 heads, 4 KV heads, intermediate 172) at
 *    tp_size 2 (forked processes), 4 (threads) and 8 (processes: two ranks per KV
 *    head, and the intermediate size split 21 / 22): rank 0 runs mixed prefill and
 *    decode batches whose plans the followers decode and run; its logits must equal
 *    tp_size 1's within the f32 bound and its greedy tokens must be the same;
 *  - the weight memory of each rank (its own copies plus the model file's resident
 *    pages, from /proc/self/smaps), measured in processes on a generated F16 and F32
 *    file, is about 1/tp_size of tp_size 1's, and the KV cache of the same byte budget
 *    holds tp_size times the pages;
 *  - a follower refuses a corrupted plan naming the field, and the group's abort turns
 *    rank 0's pending collective into an error instead of a hang;
 *  - shapes that do not split, and options that do not fit, are refused with numbers.
 * The random reference models are in test_tensor_parallel_reference.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_shm.h"
#include "model/model.h"
#include "model/runtime.h"
#include "support/random_model.h"
#include "support/runner.h"
#include "support/tmp_dir.h"
#include "support/tp_group.h"

#define STORIES_PATH CINFER_TEST_DATA_DIR "/models/stories260K.gguf"
#define TOLERANCE_F32 1e-4
#define SMALL_CHUNK_BYTES ((size_t)4096) /* collectives of several chunks even on a small model */

static void stories_group(struct tp_group *g, int tp_size, enum cinfer_test_ranks_mode mode)
{
    memset(g, 0, sizeof *g);
    snprintf(g->model_path, sizeof g->model_path, "%s", STORIES_PATH);
    g->tp_size = tp_size;
    g->mode = mode;
    g->chunk_bytes = SMALL_CHUNK_BYTES;
    g->options = (struct cinfer_runtime_options){
        .kv_cache_bytes = 1u << 20, .kv_page_tokens = 4, .n_threads = 1, .max_batch_tokens = 96,
        .kv_dtype = CINFER_KV_CACHE_DTYPE_F32}; /* held to 1e-4 of tp_size 1: f32 K/V */
    struct tp_scenario *sc = &g->scenario;
    sc->na = 40;
    sc->nb = 13;
    sc->n_gen = 12;
    tp_scenario_prompt(sc->prompt_a, sc->na, 512, 1);
    tp_scenario_prompt(sc->prompt_b, sc->nb, 512, 2);
}

static void print_figures(const char *what, const struct tp_group *g)
{
    for (int r = 0; r < g->tp_size; r++) {
        const struct tp_rank_figures *f = &g->shared->ranks[r];
        printf("  %s rank %d/%d: weight copies %.1f KiB, in place %.1f KiB, model file resident %ld KiB, KV %d pages "
               "(%.1f KiB)\n",
               what, r, g->tp_size, f->memory.weight_copy_bytes / 1024.0, f->memory.weight_in_place_bytes / 1024.0,
               f->file_rss_kb, f->kv_pages, f->memory.kv_cache_bytes / 1024.0);
    }
}

START_TEST(stories260k_matches_tp1_at_2_4_and_8_ranks)
{
    ck_assert_msg(access(STORIES_PATH, R_OK) == 0, "%s is missing", STORIES_PATH);
    char why[1024];
    struct tp_group base;
    stories_group(&base, 1, CINFER_TEST_RANKS_THREADS);
    ck_assert_msg(tp_group_run(&base, why, sizeof why) == 0, "tp_size 1: %s", why);
    print_figures("stories260K tp1", &base);
    const struct {
        int tp;
        enum cinfer_test_ranks_mode mode;
    } runs[] = {{2, CINFER_TEST_RANKS_PROCESSES}, {4, CINFER_TEST_RANKS_THREADS}, {8, CINFER_TEST_RANKS_PROCESSES}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct tp_group g;
        stories_group(&g, runs[i].tp, runs[i].mode);
        int failed = tp_group_run(&g, why, sizeof why);
        ck_assert_msg(failed == 0, "stories260K tp_size %d: %s", runs[i].tp, why);
        double rel, abs_diff;
        int bad = tp_record_compare(&base.shared->record, &g.shared->record, TOLERANCE_F32, &rel, &abs_diff, why,
                                    sizeof why);
        printf("stories260K tp_size %d (%s): %d logits rows, worst relative error %.3g, largest |diff| %.3g, greedy "
               "%d/%d tokens as tp_size 1\n",
               runs[i].tp, runs[i].mode == CINFER_TEST_RANKS_THREADS ? "threads" : "processes",
               g.shared->record.n_rows, rel, abs_diff, bad ? 0 : g.shared->record.n_tokens,
               base.shared->record.n_tokens);
        if (runs[i].mode == CINFER_TEST_RANKS_PROCESSES)
            print_figures("stories260K", &g);
        ck_assert_msg(!bad, "stories260K tp_size %d against tp_size 1: %s", runs[i].tp, why);
        /* the same budget holds more pages: each rank keeps fewer KV heads */
        int kv_heads_per_rank = 4 / runs[i].tp > 0 ? 4 / runs[i].tp : 1;
        ck_assert_int_ge(g.shared->ranks[1].kv_pages, base.shared->ranks[0].kv_pages * 4 / kv_heads_per_rank);
        for (int r = 1; r < runs[i].tp; r++)
            ck_assert_int_eq(g.shared->ranks[r].kv_pages, g.shared->ranks[0].kv_pages);
        tp_group_free(&g);
    }
    tp_group_free(&base);
}
END_TEST

/* ---- memory per rank ------------------------------------------------------------------ */

static void memory_group(struct tp_group *g, const char *path, int tp_size)
{
    memset(g, 0, sizeof *g);
    snprintf(g->model_path, sizeof g->model_path, "%s", path);
    g->tp_size = tp_size;
    g->mode = CINFER_TEST_RANKS_PROCESSES; /* each rank's own resident set */
    g->options = (struct cinfer_runtime_options){
        .kv_cache_bytes = 4u << 20, .kv_page_tokens = 16, .n_threads = 1, .max_batch_tokens = 64,
        .kv_dtype = CINFER_KV_CACHE_DTYPE_F32};
    struct tp_scenario *sc = &g->scenario;
    sc->na = 20;
    sc->nb = 7;
    sc->n_gen = 2;
    tp_scenario_prompt(sc->prompt_a, sc->na, 4096, 3);
    tp_scenario_prompt(sc->prompt_b, sc->nb, 4096, 4);
}

/* A rank's weight bytes: its copies plus the file's pages it has resident. */
static double rank_weight_bytes(const struct tp_rank_figures *f)
{
    return (double)f->memory.weight_copy_bytes + 1024.0 * (double)f->file_rss_kb;
}

START_TEST(each_rank_holds_about_one_nth_of_the_weights)
{
    cinfer_test_make_tmp_dir("test_tensor_parallel");
    static const enum cinfer_dtype types[] = {CINFER_DTYPE_F16, CINFER_DTYPE_F32};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        /* 2 layers of hidden 512, 8 heads, 4 KV heads, intermediate 1536, an untied
         * vocabulary of 4096: 11.5 M values; only the norms are kept whole by every rank */
        struct random_model_spec spec = {.vocab = 4096, .hidden = 512, .intermediate = 1536, .layers = 2,
                                         .heads = 8, .kv_heads = 4, .head_dim = 64, .dtype = types[t], .seed = 7};
        const char *name = types[t] == CINFER_DTYPE_F16 ? "memory-f16.gguf" : "memory-f32.gguf";
        const char *path = cinfer_test_tmp_path(name);
        ck_assert_int_eq(random_model_write_gguf(&spec, path), 0);
        char why[1024];
        struct tp_group base;
        memory_group(&base, path, 1);
        ck_assert_msg(tp_group_run(&base, why, sizeof why) == 0, "%s tp_size 1: %s", name, why);
        double whole = rank_weight_bytes(&base.shared->ranks[0]);
        printf("%s, tp_size 1: weights %.2f MiB (copies %.2f MiB + file pages resident %.2f MiB), KV %d pages\n", name,
               whole / 1048576.0, base.shared->ranks[0].memory.weight_copy_bytes / 1048576.0,
               base.shared->ranks[0].file_rss_kb / 1024.0, base.shared->ranks[0].kv_pages);
        for (int tp = 2; tp <= 4; tp *= 2) {
            struct tp_group g;
            memory_group(&g, path, tp);
            ck_assert_msg(tp_group_run(&g, why, sizeof why) == 0, "%s tp_size %d: %s", name, tp, why);
            double rel, abs_diff;
            int bad = tp_record_compare(&base.shared->record, &g.shared->record, TOLERANCE_F32, &rel, &abs_diff,
                                        why, sizeof why);
            ck_assert_msg(!bad, "%s tp_size %d against tp_size 1: %s", name, tp, why);
            for (int r = 0; r < tp; r++) {
                const struct tp_rank_figures *f = &g.shared->ranks[r];
                ck_assert_msg(f->set && f->file_rss_kb >= 0, "%s tp_size %d rank %d measured nothing", name, tp, r);
                double held = rank_weight_bytes(f);
                printf("%s, tp_size %d rank %d: weights %.2f MiB (copies %.2f MiB + file pages resident %.2f MiB) = "
                       "%.1f%% of tp_size 1's, KV %d pages of the same budget\n",
                       name, tp, r, held / 1048576.0, f->memory.weight_copy_bytes / 1048576.0,
                       f->file_rss_kb / 1024.0, 100.0 * held / whole, f->kv_pages);
                /* 1/tp plus the whole norms and a few pages the loader read (metadata,
                 * vectors): 3% of the model at most */
                ck_assert_msg(held <= whole / tp + 0.03 * whole,
                              "%s tp_size %d rank %d holds %.0f bytes of weights, tp_size 1 %.0f: more than 1/%d + 3%%",
                              name, tp, r, held, whole, tp);
                ck_assert_int_ge(f->kv_pages, base.shared->ranks[0].kv_pages * tp);
            }
            printf("%s, tp_size %d: logits within %.3g (relative) of tp_size 1's, greedy tokens the same\n", name, tp,
                   rel);
            tp_group_free(&g);
        }
        tp_group_free(&base);
        unlink(path);
    }
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* ---- refusals --------------------------------------------------------------------------- */

/* cinfer_runtime_tp_check of an in-memory model with these shapes must refuse tp_size
 * with words containing want. */
static void expect_refused(int heads, int kv_heads, int head_dim, int intermediate, int vocab, enum cinfer_dtype dt,
                           int tp_size, const char *want)
{
    struct random_model_spec spec = {.vocab = vocab, .hidden = 64, .intermediate = intermediate, .layers = 1,
                                     .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .dtype = dt,
                                     .seed = 1};
    struct cinfer_model *m = random_model_create(&spec);
    ck_assert_ptr_nonnull(m);
    struct cinfer_error err = {0};
    int rc = cinfer_runtime_tp_check(m, tp_size, &err);
    printf("  heads %d, kv %d, head_dim %d, intermediate %d, vocab %d, %s over tp_size %d: %s\n", heads, kv_heads,
           head_dim, intermediate, vocab, cinfer_dtype_name(dt), tp_size, rc ? err.message : "splits");
    ck_assert_msg(rc == CINFER_ERR_CONFIG, "tp_size %d was not refused (rc %d)", tp_size, rc);
    ck_assert_msg(strstr(err.message, want) != NULL, "refusal \"%s\" lacks \"%s\"", err.message, want);
    random_model_free(&m);
}

static void expect_splits(int heads, int kv_heads, int head_dim, int intermediate, int vocab, enum cinfer_dtype dt,
                          int tp_size)
{
    struct random_model_spec spec = {.vocab = vocab, .hidden = 64, .intermediate = intermediate, .layers = 1,
                                     .heads = heads, .kv_heads = kv_heads, .head_dim = head_dim, .dtype = dt,
                                     .seed = 1};
    struct cinfer_model *m = random_model_create(&spec);
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_tp_check(m, tp_size, &err) == 0, "%s", err.message);
    random_model_free(&m);
}

START_TEST(shapes_that_do_not_split_are_refused_with_numbers)
{
    expect_refused(32, 8, 2, 64, 64, CINFER_DTYPE_F32, 3, "32 attention heads do not split over tp_size 3");
    expect_refused(12, 4, 4, 64, 64, CINFER_DTYPE_F32, 3, "4 key-value heads do not split over tp_size 3");
    /* SmolLM-135M's heads */
    expect_refused(9, 3, 8, 1536, 64, CINFER_DTYPE_F32, 2, "9 attention heads do not split over tp_size 2");
    expect_refused(4, 2, 16, 128, 64, CINFER_DTYPE_Q8_0, 4,
                   "wo is q8_0 and splits by columns: 4 heads x head_dim 16 over tp_size 4 leave each rank 16 columns");
    expect_refused(4, 2, 32, 64, 64, CINFER_DTYPE_Q8_0, 4,
                   "intermediate size 64 in blocks of 32 does not give each of tp_size 4 ranks a share");
    expect_refused(4, 4, 16, 64, 3, CINFER_DTYPE_F32, 4, "a vocabulary of 3 rows in shares of 1 leaves rank 3");
    expect_splits(8, 4, 8, 172, 512, CINFER_DTYPE_F32, 8);  /* stories260K: uneven MLP, KV heads shared */
    expect_splits(4, 2, 32, 96, 272, CINFER_DTYPE_Q8_0, 2); /* 3 Q8_0 blocks over 2 ranks: 1 and 2 */
    expect_splits(9, 3, 64, 1536, 49152, CINFER_DTYPE_F16, 3); /* SmolLM-135M over 3 */
}
END_TEST

START_TEST(options_that_do_not_fit_are_refused)
{
    struct random_model_spec spec = {.vocab = 64, .hidden = 64, .intermediate = 64, .layers = 1, .heads = 4,
                                     .kv_heads = 2, .head_dim = 16, .dtype = CINFER_DTYPE_F32, .seed = 1};
    struct cinfer_model *m = random_model_create(&spec);
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    struct cinfer_runtime_options o = {.kv_cache_bytes = 1u << 20, .n_threads = 1, .tp_rank = 0, .tp_size = 2};
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "tp_size 2 needs a communicator") != NULL, "%s", err.message);
    o.tp_rank = 2;
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "tp_rank 2 of tp_size 2") != NULL, "%s", err.message);

    char name[128];
    cinfer_test_shm_name("options", name, sizeof name);
    ck_assert_int_eq(cinfer_comm_shm_create(name, 2, 0, &err), 0);
    struct cinfer_comm *comm = NULL;
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 1, &comm, &err), 0);
    o.tp_rank = 0;
    o.comm = comm;
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "tp_rank 0 of tp_size 2, but the communicator is rank 1 of 2") != NULL, "%s",
                  err.message);
    o.tp_rank = 1;
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), 0); /* a follower needs no publish_plan */
    int32_t tok = 5, page = 0;
    struct cinfer_seq_chunk c = {&tok, 1, 0, &page, 1, CINFER_LOGITS_NONE, NULL, 0, 0, NULL, NULL, NULL};
    ck_assert_int_eq(cinfer_runtime_forward(rt, &c, 1, &err), CINFER_ERR_STATE);
    ck_assert_msg(strstr(err.message, "tp rank 1 runs rank 0's plans") != NULL, "%s", err.message);
    cinfer_runtime_destroy(&rt);
    cinfer_comm_destroy(&comm);
    ck_assert_int_eq(cinfer_comm_shm_attach(name, 0, &comm, &err), 0);
    o.tp_rank = 0;
    o.comm = comm;
    ck_assert_int_eq(cinfer_runtime_create(m, &o, &rt, &err), CINFER_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "needs publish_plan") != NULL, "%s", err.message);
    cinfer_comm_destroy(&comm);
    cinfer_comm_shm_unlink(name, &err);

    /* tp_size 1: forward_plan is not for it */
    struct cinfer_runtime_options one = {.kv_cache_bytes = 1u << 20, .n_threads = 1};
    ck_assert_int_eq(cinfer_runtime_create(m, &one, &rt, &err), 0);
    ck_assert_int_eq(cinfer_runtime_forward_plan(rt, "CTPP", 4, &err), CINFER_ERR_STATE);
    cinfer_runtime_destroy(&rt);
    random_model_free(&m);
}
END_TEST

START_TEST(a_corrupted_plan_is_refused_and_the_group_aborted)
{
    static const enum cinfer_test_ranks_mode modes[] = {CINFER_TEST_RANKS_THREADS, CINFER_TEST_RANKS_PROCESSES};
    for (int m = 0; m < 2; m++) {
        struct tp_group g;
        stories_group(&g, 2, modes[m]);
        g.corrupt_plan = 1;
        char why[1024];
        ck_assert_msg(tp_group_run(&g, why, sizeof why) == 0, "%s", why);
        printf("corrupted plan (%s): rank 0's forward: %s\n", m ? "processes" : "threads", g.shared->error);
        ck_assert_msg(strstr(g.shared->error, "rank 1 aborted the group") != NULL &&
                          strstr(g.shared->error, "plan: sequence 0 page 0 is 2147483647, outside the cache's") != NULL,
                      "rank 0 said: %s", g.shared->error);
        tp_group_free(&g);
    }
}
END_TEST

static Suite *suite_tensor_parallel(void)
{
    Suite *s = suite_create("tensor_parallel");
    TCase *tc = tcase_create("tp");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, stories260k_matches_tp1_at_2_4_and_8_ranks);
    tcase_add_test(tc, each_rank_holds_about_one_nth_of_the_weights);
    tcase_add_test(tc, shapes_that_do_not_split_are_refused_with_numbers);
    tcase_add_test(tc, options_that_do_not_fit_are_refused);
    tcase_add_test(tc, a_corrupted_plan_is_refused_and_the_group_aborted);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_tensor_parallel)
