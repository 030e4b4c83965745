/* tests/support/tp_group.h — a tensor-parallel group for tests: every rank loads the
 * model file itself, attaches to a fresh shared-memory communicator and makes its own
 * runtime; rank 0 runs a scripted scenario of mixed prefill and decode batches and
 * publishes each plan over a pipe per follower; the followers run the plans. What rank
 * 0 computed (every asked logits row, the greedy tokens) and what each rank holds in
 * memory land in shared memory, so ranks may be threads or forked processes. The same
 * scenario with tp_size 1 (no communicator) gives the baseline to compare with. */
#ifndef CINFER_TEST_TP_GROUP_H
#define CINFER_TEST_TP_GROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "model/runtime.h"
#include "support/ranks.h"

#define TP_GROUP_MAX_RANKS 8
#define TP_RECORD_FLOATS ((size_t)1 << 20)
#define TP_MAX_PROMPT 160
#define TP_MAX_GEN 64

/* Sequence A's prompt in two calls (the first asking no logits), the second batched
 * with B's whole prompt; then A and B decode greedily together, the first step also
 * carrying C's prefill, which shares A's first full KV pages. */
struct tp_scenario {
    int32_t prompt_a[TP_MAX_PROMPT];
    int na;
    int32_t prompt_b[TP_MAX_PROMPT];
    int nb;
    int n_gen;
    /* 0: each step feeds the greedy tokens; else the first n_forced tokens fed (A's and
     * B's, step by step, as tp_record.tokens) are these, so a run whose greedy choice
     * flips at a near tie still computes the same rows as the baseline it is held to */
    int n_forced;
    int32_t forced[2 * TP_MAX_GEN + 2];
    /* 1: B's decode steps (and A's after the first) go in calls of their own, one token
     * each (batch-1 decode), asking the same rows in the same order */
    int decode_apart;
};

/* What rank 0 computed, in the order the scenario asked it. */
struct tp_record {
    int vocab;
    int n_rows;                        /* logits rows */
    int n_tokens;                      /* greedy tokens: A's and B's, step by step */
    int32_t tokens[2 * TP_MAX_GEN + 2];
    float logits[TP_RECORD_FLOATS];    /* (n_rows, vocab) */
};

/* A rank's memory, measured after the scenario. */
struct tp_rank_figures {
    int set;
    struct cinfer_runtime_memory memory;
    long file_rss_kb; /* the model file's pages resident in this process (smaps) */
    int kv_pages;
};

struct tp_shared {
    char error[1024]; /* rank 0's forward error, when a scenario expects one */
    struct tp_rank_figures ranks[TP_GROUP_MAX_RANKS];
    struct tp_record record;
};

struct tp_group {
    char model_path[PATH_MAX];
    int tp_size;
    enum cinfer_test_ranks_mode mode;
    size_t chunk_bytes;                   /* of the shm communicator (0: default) */
    struct cinfer_runtime_options options; /* kv, pages, threads, batch: the tp fields are set per rank */
    struct tp_scenario scenario;
    int corrupt_plan; /* rank 0 sends a plan whose first page id is out of range */
    int ep_size;      /* the runtimes' ep_size at tp_size > 1 (0: none) */
    /* with ep_size: each rank's model loses every expert the rank does not own (the
     * weights' data NULL, as vLLM's expert map assigns them: the first E % N ranks one
     * more) before its runtime is made, so a rank that bound or read one would fail */
    int drop_unowned_experts;
    /* rank 0 runs this instead of the scenario where set (threads: ctx is shared memory
     * as is); returns 0 or fails with words in why */
    int (*rank0_body)(struct cinfer_runtime *rt, void *ctx, char *why, size_t why_bytes);
    void *rank0_ctx;
    /* filled by tp_group_run */
    char shm_name[128];
    int plan_pipes[TP_GROUP_MAX_RANKS][2];
    struct tp_shared *shared; /* cinfer_test_shared_alloc'd */
};

/* A deterministic prompt of n ids in [3, vocab). */
void tp_scenario_prompt(int32_t *out, int n, int vocab, uint64_t seed);

/* Runs the group (tp_size 1: no communicator, in this thread, or with mode PROCESSES
 * in a child process). Returns how many ranks
 * failed; the first one's reason in why. g->shared stays for the caller to read. */
int tp_group_run(struct tp_group *g, char *why, size_t why_bytes);
void tp_group_free(struct tp_group *g);

/* Compares a tensor-parallel run's record with the baseline's: the same rows and greedy
 * tokens; the worst |a - b| / |b| over a row and the largest |a - b| anywhere. Returns 0
 * when they agree within rel_tolerance and the tokens are identical, else 1 with why. */
int tp_record_compare(const struct tp_record *base, const struct tp_record *tp, double rel_tolerance,
                      double *worst_rel, double *worst_abs, char *why, size_t why_bytes);

#endif
