/* core/model/runtime_internal.h — what runtime.c sets up and forward.c runs on. */
#ifndef CINFER_MODEL_RUNTIME_INTERNAL_H
#define CINFER_MODEL_RUNTIME_INTERNAL_H

#include "cinfer/backend.h"
#include "model/kv_cache.h"
#include "model/runtime.h"

/* Rows of lm_head output computed per matmul: bounds the logits scratch while still
 * reading lm_head once for a whole decode batch of up to this many sequences. */
#define CINFER_LOGITS_BLOCK_ROWS 64

/* One layer's weights as the backend sees them; 1-D weights widened to f32 once. */
struct runtime_layer {
    struct cinfer_backend_weight wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm; /* (hidden) */
    float *q_norm, *k_norm;      /* (head_dim) or NULL */
    float *bq;                   /* (q_dim) or NULL */
    float *bk, *bv;              /* (kv_dim) or NULL */
};

struct cinfer_runtime {
    const struct cinfer_model *model;
    int hidden, q_dim, kv_dim, head_dim, intermediate, vocab;
    int max_batch_tokens;

    const struct cinfer_backend_ops *ops;
    void *backend;                /* the backend's state */
    void *kv_storage;             /* the backend's KV pages */
    int kv_type;                  /* enum cinfer_kv_type of kv_storage */
    struct cinfer_kv_pages pages; /* which pages are held, by how many */

    /* matrix weights as the backend prepared them (weight_prepare) */
    struct runtime_layer *layers;
    struct cinfer_backend_weight tok_embeddings, lm_head;
    int lm_head_tied;     /* lm_head is tok_embeddings' prepared weight, released once */
    int n_prepared;       /* weights prepared so far, in runtime_weight's order (runtime.c) */
    float *output_norm; /* (hidden) */
    double *inv_freq;   /* (head_dim / 2) RoPE frequencies, scaling folded in */

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
    float *logits_x; /* (CINFER_LOGITS_BLOCK_ROWS, hidden) final-normed rows whose logits are asked */
    float *logits;   /* (CINFER_LOGITS_BLOCK_ROWS, vocab) */

    /* host arrays describing one call, T of each */
    int32_t *tokens;    /* (T) */
    float *rope_cos;    /* (T, head_dim / 2) cos of each token's RoPE angles */
    float *rope_sin;    /* (T, head_dim / 2) */
    int32_t *slots;     /* (T) page * page_tokens + offset where each token's K/V goes */
    struct cinfer_backend_attn_seq *attn_seqs; /* (T) at most one per token */
    float **logits_dst; /* (T) where each asked row of logits goes */
    int32_t *logits_rows; /* (T) batch row of each asked row */
};

/* forward.c */
int cinfer_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                   struct cinfer_error *err);

#endif
