/* core/model/arch_traits.h — the one table of architecture traits that both loaders
 * read: how each family is named in a Hugging Face config.json and in a GGUF file, and
 * what its forward pass needs that the plain Llama block lacks. */
#ifndef CINFER_MODEL_ARCH_TRAITS_H
#define CINFER_MODEL_ARCH_TRAITS_H

#include "model/model.h"

/* Which layers attend through a sliding window, and which config keys say so. */
enum cinfer_sliding_rule {
    CINFER_SLIDING_NONE = 0,    /* every layer global (a window key is refused) */
    CINFER_SLIDING_UNIFORM,     /* Mistral: sliding_window, on every layer when set */
    CINFER_SLIDING_FROM_LAYER,  /* Qwen2/3: use_sliding_window; layers >= max_window_layers */
    CINFER_SLIDING_ALTERNATE,   /* Gemma 2: even layers local, odd layers global */
    CINFER_SLIDING_PATTERN,     /* Gemma 3: every sliding_window_pattern-th layer global */
};

/* How a family's Hugging Face config and checkpoint describe a mixture of experts. */
enum cinfer_moe_style {
    CINFER_MOE_NONE = 0,
    CINFER_MOE_QWEN,    /* num_experts, moe_intermediate_size, norm_topk_prob, decoder_sparse_step,
                         * mlp_only_layers; mlp.gate and mlp.experts.E.{gate,up,down}_proj */
    CINFER_MOE_MIXTRAL, /* num_local_experts, intermediate_size per expert, always renormalised;
                         * block_sparse_moe.gate and block_sparse_moe.experts.E.{w1,w3,w2} */
    CINFER_MOE_QWEN_SHARED, /* Qwen2-MoE: as CINFER_MOE_QWEN (with Qwen2MoeConfig's defaults) plus
                             * shared_expert_intermediate_size; mlp.shared_expert.{gate,up,down}_proj
                             * and mlp.shared_expert_gate; GGUF never renormalises */
    CINFER_MOE_GPT_OSS, /* num_local_experts, intermediate_size per expert, top-k then softmax;
                         * mlp.router (with bias) and every expert in one mlp.experts.gate_up_proj
                         * (E, hidden, 2 inter: gate and up interleaved) and down_proj (E, inter, hidden),
                         * each with its bias */
};

struct cinfer_arch_traits {
    const char *name;           /* cinfer_model_config.architecture */
    const char *hf_model_type;  /* config.json "model_type" */
    const char *hf_class;       /* config.json "architectures"[0] */
    const char *gguf_arch;      /* GGUF general.architecture; NULL: no GGUF arch of its own
                                 * (llama.cpp converts Mistral as "llama") */
    int gguf_permuted_qk;       /* llama.cpp permuted Q/K rows: RoPE pairs are interleaved */
    int attention_bias;         /* q/k/v biases (Qwen2) */
    int qk_norm;                /* per-head RMSNorm of q and k before RoPE */
    int fused_qkv;              /* one qkv_proj / attn_qkv matrix (Phi-3) */
    int fused_gate_up;          /* one gate_up_proj / ffn_up matrix, gate rows first (Phi-3) */
    int sandwich_norms;         /* extra RMSNorms on the attention and MLP outputs (Gemma 2/3) */
    int norm_unit_offset_hf;    /* RMSNorm scales by (1 + w) in HF checkpoints; llama.cpp's
                                 * converter adds the 1 into GGUF norm weights */
    enum cinfer_activation activation;
    int embedding_scale_sqrt_hidden; /* embeddings multiplied by sqrt(hidden_size) */
    enum cinfer_sliding_rule sliding;
    enum cinfer_moe_style moe;  /* in Hugging Face folders (GGUF: <arch>.expert_count) */
    int attn_output_bias;       /* wo has a bias (gpt-oss) */
    int attn_sinks;             /* a learned logit per query head in every softmax (gpt-oss) */
    const char *gguf_ffn_norm;  /* the MLP's norm under another GGUF name (gpt-oss: post_attention_norm);
                                 * NULL: ffn_norm */
    /* transformers' defaults for config.json keys a file leaves out (0: none) */
    int default_sliding_window;
    float default_query_pre_attn_scalar; /* the attention scale is its inverse square root */
    float default_attn_logit_softcap;
    float default_final_logit_softcap;
    float default_rope_theta;
    float default_rope_theta_local;      /* sliding layers' own base (rope_local_base_freq) */
};

/* NULL when no family has that name. */
const struct cinfer_arch_traits *cinfer_arch_by_hf_model_type(const char *model_type);
const struct cinfer_arch_traits *cinfer_arch_by_hf_class(const char *class_name);
const struct cinfer_arch_traits *cinfer_arch_by_gguf(const char *arch, size_t len);
const struct cinfer_arch_traits *cinfer_arch_by_name(const char *name);
/* "a, b or c" of every family's HF model_type, HF class or GGUF arch, for refusals. */
enum cinfer_arch_key { CINFER_ARCH_KEY_HF_MODEL_TYPE, CINFER_ARCH_KEY_HF_CLASS, CINFER_ARCH_KEY_GGUF };
void cinfer_arch_list(enum cinfer_arch_key key, char *out, size_t out_bytes);

#endif
