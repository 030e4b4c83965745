/* core/model/runtime_internal.h — what runtime.c sets up and forward.c runs on. */
#ifndef CINFER_MODEL_RUNTIME_INTERNAL_H
#define CINFER_MODEL_RUNTIME_INTERNAL_H

#include "cinfer/backend.h"
#include "cinfer/communicator.h"
#include "model/kv_cache.h"
#include "model/runtime.h"
#include "model/tp_plan.h"

/* Rows of lm_head output computed per matmul: bounds the logits scratch while still
 * reading lm_head once for a whole decode batch of up to this many sequences. */
#define CINFER_LOGITS_BLOCK_ROWS 64

/* A 1-D weight (norm or bias): widened to f32 once on the host, then through the
 * backend's weight_prepare like the matrices (a device backend uploads it). The float
 * pointers the ops get (runtime_layer's, output_norm) are prepared.data. */
struct runtime_vector {
    float *host; /* (n) */
    struct cinfer_backend_weight prepared;
};

/* One layer's weights as the backend sees them; 1-D weights widened to f32 once. */
struct runtime_layer {
    struct cinfer_backend_weight wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm; /* (hidden) */
    float *post_attn_norm, *post_ffn_norm; /* (hidden) when sandwich_norms, else NULL */
    float *q_norm, *k_norm;      /* (head_dim) or NULL */
    float *bq;                   /* (q_dim) or NULL */
    float *bk, *bv;              /* (kv_dim) or NULL */
    /* a sparse layer's (w_gate, w_up, w_down then have data NULL) */
    struct cinfer_backend_weight *router;  /* (n_experts, hidden) in moe_weights, else NULL */
    struct cinfer_backend_weight *experts; /* (n_experts, 3): gate, up, down, this rank's share of each expert's
                                            * width (runtime_shard.c), or under expert parallelism its own
                                            * experts whole and the others' unbound (data NULL); in
                                            * moe_weights; else NULL */
    struct cinfer_backend_weight *shared;  /* (3): the shared expert's gate, up, down (its share); in moe_weights;
                                            * or NULL */
    struct cinfer_backend_weight *shared_gate; /* (1, hidden) its gate's linear map; in moe_weights; or NULL */
    /* gpt-oss (NULL elsewhere) */
    float *bo;                   /* (hidden) wo's bias; rank 0's only under tensor parallelism (NULL elsewhere) */
    float *sinks;                /* (shard heads) one attention-sink logit per query head */
    float *router_bias;          /* (n_experts) */
    float **expert_biases;       /* (n_experts, 3): gate (moe_ffn), up (moe_ffn), down (hidden; rank 0's only,
                                  * else NULL; under expert parallelism all three on the expert's owner
                                  * only); in moe_biases */
};

/* This rank's share of the model in a tensor-parallel group (tp_size 1: all of it). */
struct runtime_shard {
    int rank, size;
    int heads, first_head;       /* query heads [first_head, first_head + heads) */
    int kv_heads, first_kv_head; /* KV heads, several ranks sharing one where size > KV heads */
    int ffn, first_ffn;          /* intermediate columns of the MLP */
    int moe_ffn, first_moe_ffn;  /* intermediate columns of every expert (0 without experts) */
    int shared_ffn, first_shared_ffn; /* of the shared expert (Qwen2-MoE; else 0) */
    /* expert parallelism (ep_size == size > 1): this rank holds whole experts
     * [first_expert, first_expert + experts) and runs only those (moe_ffn is then the
     * whole width); ep 0: every expert, on its share of the width */
    int ep, first_expert, experts;
    int vocab_rows, first_vocab; /* rows of tok_embeddings and lm_head */
    int vocab_stride;            /* rows per rank in the logits gather: ceil(vocab / size) */
};

/* The sliding layers' own KV pages (kv_window.c). Inactive (one storage for every
 * layer) when no layer slides, under tensor parallelism, or when the caller keeps
 * window pages. */
struct runtime_kv_window {
    int active;
    int tokens;                   /* the sliding window */
    int n_layers;                 /* sliding layers, stored in their own storage */
    int *layer_at;                /* (num_layers) each layer's index in its storage */
    struct cinfer_kv_pages pages; /* the window storage's pages (refcount 1: one owner) */
    int32_t *of;                  /* (main pages) window page of each page id, -1: none */
    void *storage;                /* the backend's KV pages of the sliding layers */
    /* one call's sliding-layer K/V slots, attention sequences and page tables */
    int32_t *slots;               /* (T) */
    struct cinfer_backend_attn_seq *seqs; /* (T) */
    int32_t *tables;              /* (tables_cap) every sequence's window page table */
    size_t tables_cap;
};

struct cinfer_runtime {
    const struct cinfer_model *model;
    struct runtime_shard shard;
    /* sizes as this rank computes them: q_dim = shard.heads * head_dim, kv_dim =
     * shard.kv_heads * head_dim, intermediate = shard.ffn; hidden and vocab whole */
    int hidden, q_dim, kv_dim, head_dim, intermediate, vocab;
    int moe_ffn, shared_ffn; /* shard.moe_ffn, shard.shared_ffn: an expert's, the shared expert's width here */
    int max_batch_tokens;

    /* tensor parallelism (NULL / unused when shard.size is 1) */
    struct cinfer_comm *comm;
    cinfer_runtime_publish_plan_fn publish_plan; /* rank 0 */
    void *publish_ctx;
    uint64_t plan_step;         /* plans published (rank 0) or run (followers) so far */
    uint8_t *plan_out;          /* rank 0's encoded plan (plan_out_bytes of room) */
    size_t plan_out_bytes;
    struct cinfer_tp_plan plan; /* a follower's decoded plan */

    const struct cinfer_backend_ops *ops;
    void *backend;                /* the backend's state */
    void *kv_storage;             /* the backend's KV pages */
    int kv_type;                  /* enum cinfer_kv_type of kv_storage */
    struct cinfer_kv_pages pages; /* which pages are held, by how many */
    struct runtime_kv_window window;

    /* matrix weights as the backend prepared them (weight_prepare) */
    struct runtime_layer *layers;
    struct cinfer_backend_weight tok_embeddings, lm_head;
    int lm_head_tied;     /* lm_head is tok_embeddings' prepared weight, released once */
    int n_prepared;       /* weights prepared so far, in runtime_weight's order (runtime.c) */
    void **slice_copies;  /* (weights) this rank's slice copied compact where the backend made
                           * no copy of its own (tensor parallelism), freed rather than released */
    /* every sparse layer's router and experts' matrices, after the dense ones in
     * runtime_weight's order (runtime.c) */
    struct cinfer_backend_weight *moe_weights;
    const struct cinfer_weight **moe_sources; /* the model's matrix each one is */
    float **moe_biases;         /* (sparse layers, n_experts, 3) every expert's biases (gpt-oss), or NULL */
    int n_moe_weights;
    struct cinfer_runtime_memory memory;
    struct runtime_vector *vectors; /* (n_vectors) every 1-D weight, once bound */
    int n_vectors, n_vectors_prepared;
    float *output_norm; /* (hidden) */
    double *inv_freq;   /* (head_dim / 2) RoPE frequencies, scaling folded in */
    double *inv_freq_local; /* (head_dim / 2) sliding layers' own (rope_theta_local), or NULL */
    float rope_attention_factor; /* global layers' cos and sin multiplied by it (YaRN, LongRoPE); else 1 */
    int rope_turned_pairs;       /* rotary_dim / 2: the pairs the factor applies to (the rest pass unturned) */

    /* backend scratch, T = max_batch_tokens */
    float *x;        /* (T, hidden) residual stream */
    float *xn;       /* (T, hidden) normed input of a block */
    float *q;        /* (T, q_dim) */
    float *k;        /* (T, kv_dim) */
    float *v;        /* (T, kv_dim) */
    float *attn;     /* (T, q_dim) attention output, before wo */
    float *proj;     /* (T, hidden) output of wo / w_down */
    float *gate;     /* (T, intermediate) */
    float *up;       /* (T, intermediate) */
    /* mixture of experts (NULL for a dense model); E = n_experts, K = n_experts_used */
    float *moe_logits;  /* (T, E) router logits */
    float *moe_x;       /* (T, hidden) one expert's gathered rows */
    float *moe_gate;    /* (T, moe_intermediate) */
    float *moe_up;      /* (T, moe_intermediate) */
    float *moe_y;       /* (T, hidden) one expert's output rows, before the scatter-add */
    float *moe_shared_gate;  /* (T, shared_intermediate) the shared expert's (Qwen2-MoE), else NULL */
    float *moe_shared_up;    /* (T, shared_intermediate) */
    float *moe_shared_logit; /* (T) its gate's logit per row */
    float *logits_x; /* (CINFER_LOGITS_BLOCK_ROWS, hidden) final-normed rows whose logits are asked */
    float *logits;   /* (CINFER_LOGITS_BLOCK_ROWS, shard.vocab_stride) this rank's vocabulary rows */
    float *logits_gather; /* (shard.size, CINFER_LOGITS_BLOCK_ROWS, shard.vocab_stride) every rank's
                           * rows; NULL when shard.size is 1 */
    /* 1: the backend all-reduces its own buffers (ops->all_reduce_sum: NCCL on device
     * memory), which the communicator cannot read; the logits then go through the host */
    int backend_reduces;
    /* 1: the backend runs products with inputs of their own as one call (ops->matmul_grouped) */
    int backend_groups;
    /* 1: the backend ranks rows of logits where they are (ops->logits_top) */
    int backend_ranks;
    /* 1: the backend draws tokens from rows of logits where they are (ops->sample) */
    int backend_samples;
    /* 1: the backend takes each step's host arrays up front (ops->step_begin, step_end) */
    int backend_steps;
    /* the KV page the rows padding a decode step up to the backend's bucket write and read
     * (ops->decode_bucket), held for the runtime's life; -1: steps are not padded */
    int32_t pad_page;
    float *logits_host;        /* (CINFER_LOGITS_BLOCK_ROWS, shard.vocab_stride) host; backend_reduces only */
    /* (CINFER_LOGITS_BLOCK_ROWS, vocab) host: whole rows of the asked top-k rows, ranked on
     * the host where the backend cannot (tensor parallelism, no logits_top); made when
     * first needed */
    float *logits_rank_host;
    /* one logits_top call's rows and answers (a block of asked rows at most) */
    int32_t top_rows[CINFER_LOGITS_BLOCK_ROWS];
    int32_t top_ids[CINFER_LOGITS_BLOCK_ROWS * CINFER_LOGITS_TOP_MAX];
    float top_logits[CINFER_LOGITS_BLOCK_ROWS * CINFER_LOGITS_TOP_MAX];
    int top_n[CINFER_LOGITS_BLOCK_ROWS];
    double top_log_sum_exp[CINFER_LOGITS_BLOCK_ROWS];
    /* one sample call's rows, how each is drawn, and the answers */
    int32_t sample_rows[CINFER_LOGITS_BLOCK_ROWS];
    struct cinfer_backend_sample_params sample_params[CINFER_LOGITS_BLOCK_ROWS];
    int32_t sample_ids[CINFER_LOGITS_BLOCK_ROWS];
    float sample_logits[CINFER_LOGITS_BLOCK_ROWS];
    float *logits_gather_host; /* (shard.size, CINFER_LOGITS_BLOCK_ROWS, shard.vocab_stride) host, likewise */

    /* host arrays describing one call, T of each */
    int32_t *tokens;    /* (T) rows of this rank's tok_embeddings; -1: another rank's */
    float *rope_cos;    /* (T, head_dim / 2) cos of each token's RoPE angles */
    float *rope_sin;    /* (T, head_dim / 2) */
    float *rope_cos_local; /* (T, head_dim / 2) with inv_freq_local, or NULL */
    float *rope_sin_local; /* (T, head_dim / 2) */
    int32_t *slots;     /* (T) page * page_tokens + offset where each token's K/V goes */
    struct cinfer_backend_attn_seq *attn_seqs; /* (T) at most one per token */
    float **logits_dst; /* (T) where each asked row of logits goes (NULL on a follower) */
    int32_t *logits_rows; /* (T) batch row of each asked row */
    const struct cinfer_seq_chunk **logits_chunk; /* (T) the chunk each asked row is of (NULL on a follower) */
    int32_t *moe_ids;     /* (T, K) each token's chosen experts */
    float *moe_weights_tk; /* (T, K) their router weights */
    int32_t *moe_rows;    /* (T * K) the batch rows routed to each expert, expert by expert */
    float *moe_row_weights; /* (T * K) the router weight of each of moe_rows */
    int32_t *moe_first;   /* (E + 1) where each expert's rows start in moe_rows */
};

/* Experts a token may run: the config check's bound (model_load.c cinfer_moe_config_check). */
#define CINFER_MOE_MAX_USED 64

/* moe_forward.c: the sparse MLP of layer l on the T rows of rt->xn, into rt->proj. */
int cinfer_moe_forward(struct cinfer_runtime *rt, int l, int T, struct cinfer_error *err);

/* kv_window.c */
/* Splits the KV budget between the main pages and the window pages (n_window_pages 0
 * and window inactive: one pool). Needs rt->kv_dim, kv_type, max_batch_tokens, shard. */
int cinfer_kv_window_plan(struct cinfer_runtime *rt, size_t budget, int page_tokens, int keep_window_pages,
                          int *n_pages, int *n_window_pages);
size_t cinfer_kv_window_bytes(const struct cinfer_runtime *rt, int n_pages, int n_window_pages, int page_tokens);
/* The layer map, and with a window pool its pages and the call scratch (after rt->pages). */
int cinfer_kv_window_init(struct cinfer_runtime *rt, int n_pages, int n_window_pages, struct cinfer_error *err);
void cinfer_kv_window_fini(struct cinfer_runtime *rt);
/* Sequence s's window page table, slots and attention sequence for a call (its rows
 * from row); refuses a page whose window part is gone but still attended to. */
int cinfer_kv_window_plan_seq(struct cinfer_runtime *rt, int s, const struct cinfer_seq_chunk *c, int row,
                              int pages_used, size_t *tables_used, struct cinfer_error *err);
/* After every sequence's plan_seq: points the attention sequences at their tables. */
void cinfer_kv_window_plan_done(struct cinfer_runtime *rt, int n_seqs);

/* forward.c: gate (n) = act(gate) * up by the model's activation (SiLU, GELU-tanh, or
 * gpt-oss's clamped SwiGLU). */
void cinfer_activate(struct cinfer_runtime *rt, float *gate, const float *up, size_t n);
/* forward.c: rank 0's (or the only rank's) call, and a follower's on a decoded plan */
int cinfer_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                   struct cinfer_error *err);
int cinfer_forward_plan(struct cinfer_runtime *rt, const void *plan, size_t plan_bytes, struct cinfer_error *err);

/* runtime_shard.c */
/* The share of rank `rank` of `size` (ep_size 1: every expert's width split; ep_size ==
 * size: whole experts per rank), or a refusal with the numbers. */
int cinfer_runtime_shard_plan(const struct cinfer_model *m, int rank, int size, int ep_size,
                              struct runtime_shard *out, struct cinfer_error *err);
/* Whether this rank holds expert e (always, without expert parallelism). */
static inline int cinfer_shard_owns_expert(const struct runtime_shard *sh, int e)
{
    return !sh->ep || (e >= sh->first_expert && e < sh->first_expert + sh->experts);
}
/* Rows [first, first + count) of w (by_cols 0) or its columns (by_cols 1: a view with
 * w's row stride; Q8_0 columns start on a block), viewing the same bytes. */
void cinfer_weight_slice(const struct cinfer_backend_weight *w, int by_cols, int64_t first, int64_t count,
                         struct cinfer_backend_weight *out);

#endif
