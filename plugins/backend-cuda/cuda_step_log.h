/* plugins/backend-cuda/cuda_step_log.h — a forward step's queued ops as plain records,
 * and which steps to capture and replay as CUDA graphs. No CUDA here: the host tests
 * run this file with the CPU backend's ops (tests/test_step_replay.c).
 *
 * Between step_begin and the step's first op that answers the host, the CUDA backend
 * queues its ops as records instead of launching them (cuda_step.c). A record holds an
 * op's arguments as the core passed them (backend buffers, weights, the step's named
 * host arrays by their host address), plus what the op derives from the contents of
 * those arrays and uses on the host (attention's grid and warps per block). Two queues that
 * are equal record for record therefore launch the same kernels with the same
 * arguments: only the contents of device memory differ, which a replayed graph reads
 * afresh. The graph cache decides, per queue, whether to run it as it is, capture it,
 * or replay a graph captured from an equal queue. */
#ifndef CINFER_CUDA_STEP_LOG_H
#define CINFER_CUDA_STEP_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/backend.h"

enum step_op_kind {
    STEP_OP_EMBEDDING = 1,
    STEP_OP_MATMUL,
    STEP_OP_RMSNORM,
    STEP_OP_ROPE,
    STEP_OP_SILU_MUL,
    STEP_OP_GELU_TANH_MUL,
    STEP_OP_SWIGLU_OAI,
    STEP_OP_ADD,
    STEP_OP_SCALE,
    STEP_OP_SOFTCAP,
    STEP_OP_ADD_GATED,
    STEP_OP_ZERO,
    STEP_OP_COPY,
    STEP_OP_KV_WRITE,
    STEP_OP_ATTENTION,
};

#define STEP_OP_MAX_OUTS 4 /* a matmul with more outputs runs at once, unqueued */

/* One queued op. Which fields mean what depends on kind (cuda_step.c's builders);
 * records compare field by field (step_log_equal). */
struct step_op {
    int32_t kind;
    int32_t n_outs;
    const void *p[5]; /* buffers, weights, host arrays */
    int64_t i[7];     /* sizes, counts, layer, derived launch shape */
    float f[3];
    struct cinfer_backend_matmul_out outs[STEP_OP_MAX_OUTS];
    struct cinfer_backend_attn_options attn;
};

void step_op_init(struct step_op *op, enum step_op_kind kind);

/* The record of each op that may be queued, from the arguments backend.h's op gets. A
 * matmul of more than STEP_OP_MAX_OUTS outputs has no record (kind 0). */
struct step_op step_record_embedding(const struct cinfer_backend_weight *w, const int32_t *tokens, int n, float *out);
struct step_op step_record_matmul(const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs);
struct step_op step_record_rmsnorm(float *y, const float *x, int n_rows, int dim, const float *w, float eps);
struct step_op step_record_rope(float *x, int n_tokens, int n_heads, int head_dim,
                                const struct cinfer_backend_rope *rope);
struct step_op step_record_gated(enum step_op_kind kind, float *gate, const float *up, size_t n, float alpha,
                                 float limit); /* SILU_MUL, GELU_TANH_MUL, SWIGLU_OAI */
struct step_op step_record_add(float *y, const float *x, size_t n);
struct step_op step_record_scaled(enum step_op_kind kind, float *x, size_t n, float factor); /* SCALE, SOFTCAP */
struct step_op step_record_add_gated(float *y, const float *x, const float *gate, int n, int dim);
struct step_op step_record_zero(float *x, size_t n);
struct step_op step_record_copy(void *dst, const void *src, size_t bytes);
struct step_op step_record_kv_write(void *kv, int layer, const float *k, const float *v, int n, const int32_t *slots);
struct step_op step_record_attention(void *kv, int layer, const float *q, float *out,
                                     const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads,
                                     int n_kv_heads, int head_dim, const struct cinfer_backend_attn_options *opts);

/* Calls op's op of ops on state with the recorded arguments; an op that returns an
 * error fills err and gives its code (0 otherwise). */
int step_op_run(const struct cinfer_backend_ops *ops, void *state, const struct step_op *op, struct cinfer_error *err);

/* Attention's launch shape from its sequences: the most query tokens of one sequence
 * (the grid), and the class of the longest span a query sees (its window, or the whole
 * context) that picks the warps per block: 0 (< 128), 1 (< 512) or 2. */
void step_attention_shape(const struct cinfer_backend_attn_seq *seqs, int n_seqs, int window, int *max_tokens,
                          int *seen_class);

/* The host arrays and sequence lists a step named (backend.h's struct
 * cinfer_backend_step), kept from step_begin to step_end: the backend finds an op's
 * arguments among them by address. */
#define STEP_MAX_ARRAYS 16
#define STEP_MAX_SEQ_LISTS 4

struct step_names {
    int open; /* between step_begin and step_end */
    struct cinfer_backend_step_array arrays[STEP_MAX_ARRAYS];
    int n_arrays;
    const struct cinfer_backend_attn_seq *lists[STEP_MAX_SEQ_LISTS];
    int n_lists;
    int n_seqs, n_tokens;
};

/* Keeps what step names and opens; -1 (names unchanged, closed) when it names more
 * arrays or lists than fit, or negative counts. */
int step_names_open(struct step_names *names, const struct cinfer_backend_step *step);
/* The index of the named array at host holding at least bytes, or -1 (also when closed). */
int step_names_array(const struct step_names *names, const void *host, size_t bytes);
/* The index of the named sequence list seqs of n_seqs, or -1 (also when closed). */
int step_names_list(const struct step_names *names, const struct cinfer_backend_attn_seq *seqs, int n_seqs);

/* A growing list of records. */
struct step_log {
    struct step_op *ops;
    int n;
    int cap;
};

/* 0, or -1 when out of memory (the log is then unchanged). */
int step_log_append(struct step_log *log, const struct step_op *op);
void step_log_clear(struct step_log *log);
void step_log_free(struct step_log *log);
int step_log_equal(const struct step_log *a, const struct step_log *b);
int step_log_copy(struct step_log *dst, const struct step_log *src);

/* The batch sizes decode steps are padded to (backend.h's decode_bucket), as SGLang's
 * CUDA graph sizes: 1, 2, 4, then multiples of 8 up to max_rows; n itself above that. */
int step_decode_bucket(int n, int max_rows);

/* What to do with a queue. */
enum step_plan { STEP_RUN = 0, STEP_CAPTURE, STEP_REPLAY };

/* Graphs captured so far, one per queue shape; exec is the backend's (a
 * cudaGraphExec_t), released through drop. A queue is captured the second time in a
 * row that its entry sees it equal (shapes have settled), replayed from then on while
 * it stays equal; a different queue of the same key, or a new generation (the backend
 * moved a buffer the graphs point into), starts the entry over. */
#define STEP_GRAPHS_MAX 32
#define STEP_CAPTURE_TRIES 2

struct step_graph_entry {
    int used;
    int64_t key[3];       /* n_tokens, n_seqs, ops queued */
    struct step_log log;  /* the queue last seen, or the captured one */
    int seen;             /* times in a row the queue was equal */
    int failures;         /* captures of this queue that failed: at STEP_CAPTURE_TRIES it runs as it is */
    void *exec;           /* the captured graph, or NULL */
    uint64_t generation;  /* of the backend's buffers when captured */
    uint64_t last_used;
};

struct step_graph_cache {
    struct step_graph_entry entries[STEP_GRAPHS_MAX];
    uint64_t clock;
    void (*drop)(void *ctx, void *exec);
    void *drop_ctx;
    /* counts, for tests and benchmarks */
    uint64_t runs, captures, replays;
};

void step_graphs_init(struct step_graph_cache *c, void (*drop)(void *ctx, void *exec), void *drop_ctx);
void step_graphs_free(struct step_graph_cache *c);
/* The plan for log (a step of n_tokens rows over n_seqs sequences) at generation; *entry
 * is the cache entry to capture into (STEP_CAPTURE) or replay (STEP_REPLAY). */
enum step_plan step_graphs_plan(struct step_graph_cache *c, const struct step_log *log, int n_tokens, int n_seqs,
                                uint64_t generation, struct step_graph_entry **entry);
/* After a capture: the graph (the entry then replays), or NULL when capturing failed
 * (the entry starts over; the queue ran as it was). */
void step_graphs_captured(struct step_graph_cache *c, struct step_graph_entry *entry, void *exec,
                          uint64_t generation);

#endif
