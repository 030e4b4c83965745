/* A tensor-parallel group for tests (see tp_group.h). */
#include "support/tp_group.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_shm.h"
#include "model/tp_plan.h"
#include "support/random_model.h"
#include "support/smaps.h"

#define MAX_SEQ_PAGES 256
#define RANK_TIMEOUT_S 300

void tp_scenario_prompt(int32_t *out, int n, int vocab, uint64_t seed)
{
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++) {
        float u = random_uniform(&state) * 0.5f + 0.5f; /* [0, 1) */
        int id = 3 + (int)(u * (float)(vocab - 3));
        out[i] = id < vocab ? id : vocab - 1;
    }
}

/* ---- plans over pipes ---------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A plan as its length then its bytes; length 0 ends the follower's loop. */
static int send_plan(const struct tp_group *g, int rank, const void *plan, uint32_t bytes)
{
    int fd = g->plan_pipes[rank][1];
    if (write_all(fd, &bytes, sizeof bytes) != 0)
        return -1;
    return bytes ? write_all(fd, plan, bytes) : 0;
}

static int publish(void *ctx, const void *plan, size_t plan_bytes, struct cinfer_error *err)
{
    const struct tp_group *g = ctx;
    uint8_t *copy = NULL;
    if (g->corrupt_plan) { /* the first sequence's first page id: after the header, its fields 16, then tokens */
        copy = malloc(plan_bytes);
        memcpy(copy, plan, plan_bytes);
        uint32_t n_tokens;
        memcpy(&n_tokens, copy + CINFER_TP_PLAN_HEADER_BYTES, 4);
        uint32_t bad = 0x7fffffff;
        memcpy(copy + CINFER_TP_PLAN_HEADER_BYTES + 16 + 4 * (size_t)n_tokens, &bad, 4);
        plan = copy;
    }
    for (int r = 1; r < g->tp_size; r++)
        if (send_plan(g, r, plan, (uint32_t)plan_bytes) != 0) {
            free(copy);
            return cinfer_error_set(err, CINFER_ERR_IO, "test publish: cannot write rank %d's pipe", r);
        }
    free(copy);
    return 0;
}

/* ---- the scenario ---------------------------------------------------------------------- */

struct seq_pages {
    int32_t pages[MAX_SEQ_PAGES];
    int n;
};

static int pages_cover(struct cinfer_runtime *rt, struct seq_pages *sp, int n_positions, char *why, size_t why_bytes)
{
    int pt = cinfer_runtime_kv_page_tokens(rt);
    while (sp->n * pt < n_positions) {
        if (sp->n == MAX_SEQ_PAGES || cinfer_runtime_kv_page_alloc(rt, &sp->pages[sp->n]) != 0) {
            snprintf(why, why_bytes, "no KV page for position %d", sp->n * pt);
            return -1;
        }
        sp->n++;
    }
    return 0;
}

static void pages_release(struct cinfer_runtime *rt, struct seq_pages *sp)
{
    for (int i = 0; i < sp->n; i++)
        cinfer_runtime_kv_page_unref(rt, sp->pages[i]);
    sp->n = 0;
}

static int argmax(const float *row, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* Space for n more rows in the record, or NULL. */
static float *record_rows(struct tp_record *rec, int n)
{
    if ((size_t)(rec->n_rows + n) * (size_t)rec->vocab > TP_RECORD_FLOATS)
        return NULL;
    float *p = rec->logits + (size_t)rec->n_rows * rec->vocab;
    rec->n_rows += n;
    return p;
}

static struct cinfer_seq_chunk chunk_of(const int32_t *tokens, int n, int start, const struct seq_pages *sp,
                                        enum cinfer_logits_mode mode, float *out)
{
    return (struct cinfer_seq_chunk){tokens, n, start, sp->pages, sp->n, mode, out, 0, 0, NULL, NULL, NULL};
}

static int forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *c, int n, char *why, size_t why_bytes)
{
    struct cinfer_error err = {0};
    if (cinfer_runtime_forward(rt, c, n, &err) != 0) {
        snprintf(why, why_bytes, "forward: %s", err.message);
        return -1;
    }
    return 0;
}

/* The tokens to feed next where the scenario forces them (tokens n_done - 2 and - 1). */
static void forced_tokens(const struct tp_scenario *sc, int n_done, int32_t *ta, int32_t *tb)
{
    if (n_done <= sc->n_forced) {
        *ta = sc->forced[n_done - 2];
        *tb = sc->forced[n_done - 1];
    }
}

static int run_scenario(struct cinfer_runtime *rt, const struct tp_scenario *sc, struct tp_record *rec, int vocab,
                        char *why, size_t why_bytes)
{
    memset(rec, 0, offsetof(struct tp_record, logits));
    rec->vocab = vocab;
    int pt = cinfer_runtime_kv_page_tokens(rt);
    int split = sc->na / 2, shared = (sc->na - 1) / pt * pt;
    struct seq_pages pa = {.n = 0}, pb = {.n = 0}, pc = {.n = 0};
    struct cinfer_seq_chunk calls[3];
    int rc = -1;
    float *a_rows, *b_row, *c_rows;
    if (shared <= 0 || split <= 0) {
        snprintf(why, why_bytes, "scenario: prompt A of %d tokens is too short for pages of %d", sc->na, pt);
        return -1;
    }
    /* A's first part, no logits */
    if (pages_cover(rt, &pa, split, why, why_bytes))
        goto out;
    calls[0] = chunk_of(sc->prompt_a, split, 0, &pa, CINFER_LOGITS_NONE, NULL);
    if (forward(rt, calls, 1, why, why_bytes))
        goto out;
    /* A's rest (every row) with B's whole prompt (its last row) */
    if (pages_cover(rt, &pa, sc->na, why, why_bytes) || pages_cover(rt, &pb, sc->nb, why, why_bytes))
        goto out;
    a_rows = record_rows(rec, sc->na - split);
    b_row = record_rows(rec, 1);
    if (!a_rows || !b_row) {
        snprintf(why, why_bytes, "scenario: the record is full");
        goto out;
    }
    calls[0] = chunk_of(sc->prompt_a + split, sc->na - split, split, &pa, CINFER_LOGITS_ALL, a_rows);
    calls[1] = chunk_of(sc->prompt_b, sc->nb, 0, &pb, CINFER_LOGITS_LAST, b_row);
    if (forward(rt, calls, 2, why, why_bytes))
        goto out;
    int32_t ta = argmax(a_rows + (size_t)(sc->na - split - 1) * vocab, vocab), tb = argmax(b_row, vocab);
    rec->tokens[rec->n_tokens++] = ta;
    rec->tokens[rec->n_tokens++] = tb;
    forced_tokens(sc, rec->n_tokens, &ta, &tb);
    /* C: A's first full pages by reference */
    for (int i = 0; i < shared / pt; i++) {
        cinfer_runtime_kv_page_ref(rt, pa.pages[i]);
        pc.pages[pc.n++] = pa.pages[i];
    }
    if (pages_cover(rt, &pc, sc->na, why, why_bytes))
        goto out;
    for (int j = 0; j < sc->n_gen; j++) {
        int pos_a = sc->na + j, pos_b = sc->nb + j, n = 0;
        if (pages_cover(rt, &pa, pos_a + 1, why, why_bytes) || pages_cover(rt, &pb, pos_b + 1, why, why_bytes))
            goto out;
        a_rows = record_rows(rec, 1);
        c_rows = j == 0 ? record_rows(rec, sc->na - shared) : NULL;
        b_row = record_rows(rec, 1);
        if (!a_rows || !b_row || (j == 0 && !c_rows)) {
            snprintf(why, why_bytes, "scenario: the record is full");
            goto out;
        }
        calls[n++] = chunk_of(&ta, 1, pos_a, &pa, CINFER_LOGITS_LAST, a_rows);
        if (j == 0)
            calls[n++] = chunk_of(sc->prompt_a + shared, sc->na - shared, shared, &pc, CINFER_LOGITS_ALL, c_rows);
        calls[n++] = chunk_of(&tb, 1, pos_b, &pb, CINFER_LOGITS_LAST, b_row);
        if (sc->decode_apart && /* A (with C at the first step), then B, each call on its own */
            (forward(rt, calls, n - 1, why, why_bytes) || forward(rt, calls + n - 1, 1, why, why_bytes)))
            goto out;
        if (!sc->decode_apart && forward(rt, calls, n, why, why_bytes))
            goto out;
        if (j == 0)
            pages_release(rt, &pc);
        ta = argmax(a_rows, vocab);
        tb = argmax(b_row, vocab);
        rec->tokens[rec->n_tokens++] = ta;
        rec->tokens[rec->n_tokens++] = tb;
        forced_tokens(sc, rec->n_tokens, &ta, &tb);
    }
    rc = 0;
out:
    pages_release(rt, &pa);
    pages_release(rt, &pb);
    pages_release(rt, &pc);
    return rc;
}

/* ---- one rank ---------------------------------------------------------------------------- */

static int follower_loop(const struct tp_group *g, int rank, struct cinfer_runtime *rt, char *why, size_t why_bytes)
{
    uint8_t *plan = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        uint32_t bytes;
        if (read_all(g->plan_pipes[rank][0], &bytes, sizeof bytes) != 0) {
            snprintf(why, why_bytes, "the plan pipe closed");
            rc = -1;
            break;
        }
        if (bytes == 0) /* rank 0 is done */
            break;
        if (bytes > cap) {
            free(plan);
            plan = malloc(bytes);
            cap = bytes;
        }
        if (!plan || read_all(g->plan_pipes[rank][0], plan, bytes) != 0) {
            snprintf(why, why_bytes, "cannot read a %u-byte plan", bytes);
            rc = -1;
            break;
        }
        struct cinfer_error err = {0};
        if (cinfer_runtime_forward_plan(rt, plan, bytes, &err) != 0) {
            snprintf(why, why_bytes, "forward_plan: %s", err.message);
            rc = -1;
            break;
        }
    }
    free(plan);
    return rc;
}

/* Expert parallelism's proof of locality: rank `rank` of n keeps experts [e0, e0 + count)
 * as vLLM's and SGLang's expert map gives them; every other expert's matrices and biases
 * lose their data, which stays in the file (storage-owned) for cinfer_model_free. */
static void drop_unowned_experts(struct cinfer_model *m, int rank, int n)
{
    const struct cinfer_model_config *c = &m->config;
    int base = c->n_experts / n, extra = c->n_experts % n;
    int e0 = rank * base + (rank < extra ? rank : extra), count = base + (rank < extra);
    for (int l = 0; l < c->num_layers; l++)
        for (int e = 0; m->layers[l].experts && e < c->n_experts; e++) {
            if (e >= e0 && e < e0 + count)
                continue;
            struct cinfer_expert_weights *x = &m->layers[l].experts[e];
            struct cinfer_weight *parts[6] = {&x->gate, &x->up, &x->down, &x->gate_bias, &x->up_bias, &x->down_bias};
            for (int p = 0; p < 6; p++)
                parts[p]->data = NULL;
        }
}

static int rank_main(int rank, int n_ranks, void *arg, char *why, size_t why_bytes)
{
    struct tp_group *g = arg;
    struct cinfer_model *model = NULL;
    struct cinfer_comm *comm = NULL;
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    int rc = -1;
    struct cinfer_model_load_options lo = {.show_progress = 0, .no_prefault = n_ranks > 1};
    if (cinfer_model_load(g->model_path, &lo, &model, &err) != 0) {
        snprintf(why, why_bytes, "load: %s", err.message);
        goto out;
    }
    if (n_ranks > 1 && cinfer_comm_shm_attach(g->shm_name, rank, &comm, &err) != 0) {
        snprintf(why, why_bytes, "attach: %s", err.message);
        goto out;
    }
    if (n_ranks > 1 && g->ep_size > 1 && g->drop_unowned_experts)
        drop_unowned_experts(model, rank, n_ranks);
    struct cinfer_runtime_options o = g->options;
    o.tp_rank = rank;
    o.tp_size = n_ranks;
    o.ep_size = n_ranks > 1 ? g->ep_size : 0;
    o.comm = comm;
    o.publish_plan = rank == 0 && n_ranks > 1 ? publish : NULL;
    o.publish_ctx = g;
    if (cinfer_runtime_create(model, &o, &rt, &err) != 0) {
        snprintf(why, why_bytes, "runtime: %s", err.message);
        goto out;
    }
    if (rank == 0 && g->rank0_body) {
        rc = g->rank0_body(rt, g->rank0_ctx, why, why_bytes);
    } else if (rank == 0) {
        rc = run_scenario(rt, &g->scenario, &g->shared->record, model->config.vocab_size, why, why_bytes);
        if (rc != 0 && g->corrupt_plan) { /* the failure was the point: keep its words */
            snprintf(g->shared->error, sizeof g->shared->error, "%s", why);
            rc = 0;
        }
    } else {
        rc = follower_loop(g, rank, rt, why, why_bytes);
        if (rc != 0 && g->corrupt_plan && strstr(why, "plan: ")) {
            rc = 0;
            follower_loop(g, rank, rt, why, why_bytes); /* wait for rank 0's end */
        }
    }
    struct tp_rank_figures *f = &g->shared->ranks[rank];
    cinfer_runtime_memory(rt, &f->memory);
    f->file_rss_kb = cinfer_test_smaps_rss_kb_of_file(g->model_path);
    f->kv_pages = cinfer_runtime_kv_pages_total(rt);
    f->set = 1;
out:
    if (rc != 0 && comm && comm->ops->abort)
        comm->ops->abort(comm->state, why, NULL); /* no rank waits for this one */
    if (rank == 0)
        for (int r = 1; r < n_ranks; r++)
            send_plan(g, r, NULL, 0); /* the followers' end */
    cinfer_runtime_destroy(&rt);
    cinfer_comm_destroy(&comm);
    cinfer_model_free(&model);
    return rc;
}

int tp_group_run(struct tp_group *g, char *why, size_t why_bytes)
{
    ck_assert_int_le(g->tp_size, TP_GROUP_MAX_RANKS);
    if (!g->shared)
        g->shared = cinfer_test_shared_alloc(sizeof *g->shared);
    memset(g->shared->ranks, 0, sizeof g->shared->ranks);
    g->shared->error[0] = '\0';
    signal(SIGPIPE, SIG_IGN);
    if (g->tp_size == 1 && g->mode == CINFER_TEST_RANKS_THREADS) {
        why[0] = '\0';
        return rank_main(0, 1, g, why, why_bytes) != 0;
    }
    if (g->tp_size == 1) /* a group of one in a process of its own (its own resident set) */
        return cinfer_test_run_ranks(1, g->mode, rank_main, g, RANK_TIMEOUT_S, why, why_bytes);
    cinfer_test_shm_name("tp", g->shm_name, sizeof g->shm_name);
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_comm_shm_create(g->shm_name, g->tp_size, g->chunk_bytes, &err) == 0, "%s", err.message);
    for (int r = 0; r < g->tp_size; r++)
        ck_assert_int_eq(pipe(g->plan_pipes[r]), 0);
    int failed = cinfer_test_run_ranks(g->tp_size, g->mode, rank_main, g, RANK_TIMEOUT_S, why, why_bytes);
    for (int r = 0; r < g->tp_size; r++) {
        close(g->plan_pipes[r][0]);
        close(g->plan_pipes[r][1]);
    }
    cinfer_comm_shm_unlink(g->shm_name, &err);
    return failed;
}

void tp_group_free(struct tp_group *g)
{
    cinfer_test_shared_free(g->shared, sizeof *g->shared);
    g->shared = NULL;
}

int tp_record_compare(const struct tp_record *base, const struct tp_record *tp, double rel_tolerance,
                      double *worst_rel, double *worst_abs, char *why, size_t why_bytes)
{
    *worst_rel = *worst_abs = 0;
    if (base->n_rows != tp->n_rows || base->vocab != tp->vocab || base->n_tokens != tp->n_tokens) {
        snprintf(why, why_bytes, "%d rows of %d logits and %d tokens, the baseline %d of %d and %d", tp->n_rows,
                 tp->vocab, tp->n_tokens, base->n_rows, base->vocab, base->n_tokens);
        return 1;
    }
    int bad_row = -1;
    for (int r = 0; r < base->n_rows; r++) {
        const float *a = tp->logits + (size_t)r * base->vocab, *b = base->logits + (size_t)r * base->vocab;
        double d2 = 0, b2 = 0;
        for (int i = 0; i < base->vocab; i++) {
            double d = (double)a[i] - b[i];
            d2 += d * d;
            b2 += (double)b[i] * b[i];
            if (!(fabs(d) <= *worst_abs))
                *worst_abs = fabs(d);
        }
        double rel = sqrt(d2 / b2);
        if (!(rel <= *worst_rel))
            *worst_rel = rel;
        if (!(rel <= rel_tolerance) && bad_row < 0)
            bad_row = r;
    }
    if (bad_row >= 0) {
        snprintf(why, why_bytes, "logits row %d: relative error past %.0e (worst %.3g)", bad_row, rel_tolerance,
                 *worst_rel);
        return 1;
    }
    for (int i = 0; i < base->n_tokens; i++)
        if (base->tokens[i] != tp->tokens[i]) {
            snprintf(why, why_bytes, "greedy token %d (%s's step %d) is %d, the baseline's %d", i, i % 2 ? "B" : "A",
                     i / 2, tp->tokens[i], base->tokens[i]);
            return 1;
        }
    return 0;
}
