/* core/model/model.h — a loaded Llama-family model: its configuration and views of
 * its weights (mmapped where the stored type is used as is).
 *
 * Filled by the loaders (model_load.c dispatching to HF safetensors folders and GGUF
 * files) and read by the forward pass. Every weight matrix is row-major
 * (rows, cols) = (out_features, in_features): y = W x reads one row per output. */
#ifndef CINFER_MODEL_MODEL_H
#define CINFER_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/config.h"
#include "cinfer/error.h"

enum cinfer_dtype {
    CINFER_DTYPE_F32 = 0,
    CINFER_DTYPE_F16 = 1,
    CINFER_DTYPE_BF16 = 2,
    CINFER_DTYPE_Q8_0 = 3, /* blocks of 32 along a row: f16 scale + 32 int8 (34 bytes) */
    /* 4..6 are the kernels' panel layouts, which no file stores. ggml's block-quantized
     * types (kernels/quant.c describes each; numbered like enum cinfer_kernel_wtype): */
    CINFER_DTYPE_Q4_0 = 7,
    CINFER_DTYPE_Q4_1 = 8,
    CINFER_DTYPE_Q5_0 = 9,
    CINFER_DTYPE_Q5_1 = 10,
    CINFER_DTYPE_Q2_K = 11,
    CINFER_DTYPE_Q3_K = 12,
    CINFER_DTYPE_Q4_K = 13,
    CINFER_DTYPE_Q5_K = 14,
    CINFER_DTYPE_Q6_K = 15,
    CINFER_DTYPE_IQ4_NL = 16,
    CINFER_DTYPE_IQ4_XS = 17,
    CINFER_DTYPE_MXFP4 = 18,
};
/* 1 for the block-quantized types (Q8_0 and 7..18). */
int cinfer_dtype_is_quantized(enum cinfer_dtype t);
/* Values per block along a row (1 for f32/f16/bf16). */
int cinfer_dtype_block_values(enum cinfer_dtype t);
const char *cinfer_dtype_name(enum cinfer_dtype t);

/* A 1-D or 2-D weight. 1-D weights (norms, biases) have rows == 1. */
struct cinfer_weight {
    enum cinfer_dtype dtype;
    int64_t rows;          /* out features */
    int64_t cols;          /* in features (the contiguous dimension) */
    const void *data;      /* NULL when the model has no such weight (optional biases) */
    size_t row_bytes;      /* bytes from one row to the next */
};

/* The gate's activation in the gated MLP: down(act(gate x) * up x). */
enum cinfer_activation {
    CINFER_ACTIVATION_SILU = 0,      /* Llama, Mistral, Qwen */
    CINFER_ACTIVATION_GELU_TANH = 1, /* Gemma: gelu_pytorch_tanh */
    CINFER_ACTIVATION_SWIGLU_OAI = 2, /* gpt-oss: clamped gate and up, gate * sigmoid(alpha gate) * (up + 1) */
};

enum cinfer_rope_scaling_type {
    CINFER_ROPE_SCALING_NONE = 0,
    CINFER_ROPE_SCALING_LLAMA3 = 1,
    CINFER_ROPE_SCALING_LINEAR = 2, /* every frequency divided by factor (Gemma 3's global layers) */
    CINFER_ROPE_SCALING_YARN = 3,     /* YaRN: a ramp between interpolated and original frequencies */
    CINFER_ROPE_SCALING_DYNAMIC = 4,  /* dynamic NTK: a larger base, fixed by the served context */
    CINFER_ROPE_SCALING_LONGROPE = 5, /* LongRoPE (Phi-3 "su"/"longrope"): a divisor per frequency */
};

#define CINFER_MAX_ROPE_FACTORS 512 /* head_dim / 2 of the widest head served */

#define CINFER_MAX_LAYERS 4096

struct cinfer_model_config {
    char architecture[32];   /* "llama", "mistral", "qwen2", "qwen3" */
    int vocab_size;
    int hidden_size;
    int intermediate_size;
    int num_layers;
    int num_heads;
    int num_kv_heads;
    int head_dim;            /* may differ from hidden_size / num_heads */
    int rotary_dim;          /* leading dims of each head RoPE turns (partial_rotary_factor); 0: all */
    int max_position_embeddings;
    float rms_norm_eps;
    float rope_theta;
    /* RoPE pairing: 0 = Hugging Face "rotate_half" (dims i and i + head_dim/2),
     * 1 = interleaved (dims 2i and 2i+1), which GGUF llama-arch files need because
     * llama.cpp's converter permuted Q and K rows for it. */
    int rope_interleaved;
    struct {
        enum cinfer_rope_scaling_type type;
        float factor;
        float low_freq_factor;
        float high_freq_factor;
        int original_max_position_embeddings;
        float beta_fast, beta_slow; /* YaRN's ramp, in rotations over the original context */
        float attention_factor;     /* cos and sin multiplied by it (YaRN, LongRoPE); 0: 1 */
        int yarn_no_truncate;       /* YaRN's ramp bounds used unrounded (transformers' truncate false:
                                     * gpt-oss); 0: floor and ceil, as the YaRN paper and llama.cpp */
        int n_factors;              /* LongRoPE: head_dim / 2 divisors of each kind */
        float short_factor[CINFER_MAX_ROPE_FACTORS];
        float long_factor[CINFER_MAX_ROPE_FACTORS];
    } rope_scaling;
    int tie_word_embeddings;
    int attention_bias;      /* q/k/v projections have biases (Qwen2) */
    int qk_norm;             /* per-head RMSNorm on q and k before RoPE (Qwen3, Gemma 3) */
    int fused_qkv;           /* stored as one (q + 2 kv rows, hidden) matrix (Phi-3); wq/wk/wv view it */
    int fused_gate_up;       /* stored as one (2 intermediate, hidden) matrix, gate rows first (Phi-3) */
    /* Gemma's additions to the Llama block; each zero for the Llama family. */
    enum cinfer_activation activation;
    int sandwich_norms;      /* RMSNorms on the attention and MLP outputs, before the residual add */
    int norm_unit_offset;    /* every RMSNorm scales by (1 + w): HF Gemma checkpoints */
    float embedding_scale;   /* embeddings multiplied by it; 0: not scaled */
    float attention_scale;   /* scores multiplied by it; 0: 1 / sqrt(head_dim) */
    float attn_logit_softcap;  /* scores become cap * tanh(scores / cap); 0: none */
    float final_logit_softcap; /* logits likewise; 0: none */
    /* Sliding-window attention: a sliding layer's token at position p attends to
     * positions (p - sliding_window, p]. Layer l slides when bit l of sliding_layers is set. */
    int sliding_window;      /* tokens; 0: no layer slides */
    uint64_t sliding_layers[CINFER_MAX_LAYERS / 64];
    float rope_theta_local;  /* sliding layers' RoPE base, unscaled (Gemma 3); 0: as global layers */
    /* Mixture of experts (Mixtral, Qwen3-MoE): on a sparse layer (bit l of moe_layers)
     * the MLP is n_experts gated MLPs of moe_intermediate_size, of which a router picks
     * n_experts_used per token. n_experts 0: every layer dense. */
    int n_experts;
    int n_experts_used;
    int moe_intermediate_size;
    int moe_norm_topk;       /* the chosen experts' softmax weights renormalised to sum 1 */
    uint64_t moe_layers[CINFER_MAX_LAYERS / 64];
    /* Qwen2-MoE: every sparse layer also runs one shared expert of this width on every
     * token, scaled by sigmoid of its own gate (a (1, hidden) linear map); 0: none. */
    int shared_expert_intermediate_size;
    /* gpt-oss's additions (each zero elsewhere) */
    int attn_output_bias;    /* the output projection wo has a bias */
    int attn_sinks;          /* a learned logit per query head joins every attention softmax */
    int moe_biases;          /* the router and every expert's three projections have biases */
    float swiglu_alpha;      /* CINFER_ACTIVATION_SWIGLU_OAI's sigmoid slope (1.702) */
    float swiglu_limit;      /* ... and its clamp (swiglu_limit, 7.0) */
    int bos_token_id;        /* -1 when unknown */
    int eos_token_ids[8];    /* from config/generation_config; n_eos of them */
    int n_eos;
};

/* One expert of a sparse layer: a gated MLP of moe_intermediate_size. */
struct cinfer_expert_weights {
    struct cinfer_weight gate; /* (moe_intermediate, hidden) */
    struct cinfer_weight up;   /* (moe_intermediate, hidden) */
    struct cinfer_weight down; /* (hidden, moe_intermediate) */
    /* (1, ...) when moe_biases (gpt-oss), else data NULL */
    struct cinfer_weight gate_bias; /* (1, moe_intermediate) */
    struct cinfer_weight up_bias;   /* (1, moe_intermediate) */
    struct cinfer_weight down_bias; /* (1, hidden) */
};

struct cinfer_layer_weights {
    struct cinfer_weight attn_norm;   /* (1, hidden) */
    struct cinfer_weight wq;          /* (heads * head_dim, hidden) */
    struct cinfer_weight wk;          /* (kv_heads * head_dim, hidden) */
    struct cinfer_weight wv;          /* (kv_heads * head_dim, hidden) */
    struct cinfer_weight wo;          /* (hidden, heads * head_dim) */
    struct cinfer_weight bq, bk, bv;  /* (1, ...) when attention_bias, else data NULL */
    struct cinfer_weight q_norm;      /* (1, head_dim) when qk_norm, else data NULL */
    struct cinfer_weight k_norm;      /* (1, head_dim) when qk_norm, else data NULL */
    struct cinfer_weight post_attn_norm; /* (1, hidden) when sandwich_norms, else data NULL */
    struct cinfer_weight ffn_norm;    /* (1, hidden) */
    struct cinfer_weight w_gate;      /* (intermediate, hidden) */
    struct cinfer_weight w_up;        /* (intermediate, hidden) */
    struct cinfer_weight w_down;      /* (hidden, intermediate) */
    struct cinfer_weight post_ffn_norm; /* (1, hidden) when sandwich_norms, else data NULL */
    /* a sparse layer's (w_gate, w_up and w_down then have data NULL) */
    struct cinfer_weight router;            /* (n_experts, hidden), else data NULL */
    struct cinfer_expert_weights *experts;  /* n_experts of them (storage-owned), else NULL */
    /* a sparse layer's shared expert when shared_expert_intermediate_size > 0, else data NULL */
    struct cinfer_expert_weights shared_expert; /* (shared_intermediate, hidden) x2, (hidden, shared_intermediate) */
    struct cinfer_weight shared_expert_gate;    /* (1, hidden) */
    /* gpt-oss (data NULL elsewhere) */
    struct cinfer_weight bo;          /* (1, hidden) when attn_output_bias */
    struct cinfer_weight sinks;       /* (1, heads) when attn_sinks */
    struct cinfer_weight router_bias; /* (1, n_experts) when moe_biases */
};

struct cinfer_model {
    struct cinfer_model_config config;
    char *path;                          /* what was opened */
    struct cinfer_weight tok_embeddings; /* (vocab, hidden) */
    struct cinfer_weight output_norm;    /* (1, hidden) */
    struct cinfer_weight lm_head;        /* (vocab, hidden); same data as tok_embeddings when tied */
    struct cinfer_layer_weights *layers; /* num_layers of them */
    size_t weight_bytes;                 /* bytes of all weights as held (for bandwidth math) */
    void *storage;                       /* loader-private: mappings and owned buffers */
    /* 1 when every matrix weight is a view of a read-only file mapping (set by
     * cinfer_model_load; a model built in memory leaves it 0) */
    int matrices_mapped;
};

struct cinfer_model_load_options {
    int show_progress;   /* 1: progress bar on a terminal; 0: one log line */
    enum cinfer_weight_dtype dtype; /* model.dtype: AUTO keeps the stored types; else every
                                     * matrix is converted to f32, f16 or bf16 at load */
    int no_prefault;     /* 1: leave the weights' pages unread at load (a tensor-parallel
                          * rank reads only its shard of them); 0: read them in now */
};

/* path: a Hugging Face model folder or a .gguf file. */
int cinfer_model_load(const char *path, const struct cinfer_model_load_options *opts,
                      struct cinfer_model **out, struct cinfer_error *err);
void cinfer_model_free(struct cinfer_model **m);
/* Whether layer l attends through the sliding window. */
static inline int cinfer_model_layer_slides(const struct cinfer_model_config *c, int l)
{
    return c->sliding_window > 0 && (c->sliding_layers[l / 64] >> (l % 64) & 1u);
}
static inline void cinfer_model_set_layer_slides(struct cinfer_model_config *c, int l)
{
    c->sliding_layers[l / 64] |= (uint64_t)1 << (l % 64);
}

/* Whether layer l's MLP is the mixture of experts. */
static inline int cinfer_model_layer_sparse(const struct cinfer_model_config *c, int l)
{
    return c->n_experts > 0 && (c->moe_layers[l / 64] >> (l % 64) & 1u);
}
static inline void cinfer_model_set_layer_sparse(struct cinfer_model_config *c, int l)
{
    c->moe_layers[l / 64] |= (uint64_t)1 << (l % 64);
}

/* The leading dims of each head that RoPE turns: all of them unless partial rotary. */
static inline int cinfer_model_rotary_dim(const struct cinfer_model_config *c)
{
    return c->rotary_dim > 0 ? c->rotary_dim : c->head_dim;
}

/* The runtime no longer reads the `bytes` of a matrix weight at `data` as stored (its
 * backend made its own copy): their pages leave the process's memory, so the model is
 * not held twice. Only for a model whose matrices are file mappings (matrices_mapped),
 * which a later read faults back in; a model built in memory is left alone (dropping
 * its pages would zero them). */
void cinfer_model_drop_stored(const struct cinfer_model *m, const void *data, size_t bytes);

/* Partial rotary (rotary_dim < head_dim): the rows of wq and wk (and q/k biases and
 * norms) of each head reordered so that the backend's rope, which pairs dims i and
 * i + head_dim / 2, turns the pairs Hugging Face's rotate_half makes within the first
 * rotary_dim dims, and the unrotated dims sit where the angles are zero. q·k is the same
 * under one reordering of both; V and the cache's values are untouched. The reordered
 * matrices are owned copies (matrices_mapped becomes 0). */
int cinfer_model_arrange_partial_rotary(struct cinfer_model *m, struct cinfer_error *err);

#endif
