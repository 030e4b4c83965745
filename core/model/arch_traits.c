/* The families cinfer runs, one row each; the HF and GGUF loaders both look them up
 * here rather than keeping their own lists. */
#include "model/arch_traits.h"

#include <stdio.h>
#include <string.h>

/* Defaults are those of transformers' LlamaConfig, MistralConfig, Qwen2Config,
 * Qwen3Config, Gemma2Config, Gemma3TextConfig, Phi3Config, Qwen3MoeConfig, MixtralConfig
 * and GptOssConfig. llama.cpp runs Phi-3
 * GGUF files without their sliding window (it disabled Phi SWA), so only HF folders
 * apply Phi-3's sliding_window. */
static const struct cinfer_arch_traits families[] = {
    {.name = "llama", .hf_model_type = "llama", .hf_class = "LlamaForCausalLM", .gguf_arch = "llama",
     .gguf_permuted_qk = 1, .default_rope_theta = 10000.0f},
    {.name = "mistral", .hf_model_type = "mistral", .hf_class = "MistralForCausalLM", .gguf_arch = NULL,
     .gguf_permuted_qk = 1, .sliding = CINFER_SLIDING_UNIFORM, .default_sliding_window = 4096,
     .default_rope_theta = 10000.0f},
    {.name = "qwen2", .hf_model_type = "qwen2", .hf_class = "Qwen2ForCausalLM", .gguf_arch = "qwen2",
     .attention_bias = 1, .sliding = CINFER_SLIDING_FROM_LAYER, .default_sliding_window = 4096,
     .default_rope_theta = 10000.0f},
    {.name = "qwen3", .hf_model_type = "qwen3", .hf_class = "Qwen3ForCausalLM", .gguf_arch = "qwen3", .qk_norm = 1,
     .sliding = CINFER_SLIDING_FROM_LAYER, .default_sliding_window = 4096, .default_rope_theta = 10000.0f},
    {.name = "gemma2", .hf_model_type = "gemma2", .hf_class = "Gemma2ForCausalLM", .gguf_arch = "gemma2",
     .sandwich_norms = 1, .norm_unit_offset_hf = 1, .activation = CINFER_ACTIVATION_GELU_TANH,
     .embedding_scale_sqrt_hidden = 1, .sliding = CINFER_SLIDING_ALTERNATE, .default_sliding_window = 4096,
     .default_query_pre_attn_scalar = 256.0f, .default_attn_logit_softcap = 50.0f,
     .default_final_logit_softcap = 30.0f, .default_rope_theta = 10000.0f},
    {.name = "gemma3", .hf_model_type = "gemma3_text", .hf_class = "Gemma3ForCausalLM", .gguf_arch = "gemma3",
     .qk_norm = 1, .sandwich_norms = 1, .norm_unit_offset_hf = 1, .activation = CINFER_ACTIVATION_GELU_TANH,
     .embedding_scale_sqrt_hidden = 1, .sliding = CINFER_SLIDING_PATTERN, .default_sliding_window = 4096,
     .default_query_pre_attn_scalar = 256.0f, .default_rope_theta = 1000000.0f,
     .default_rope_theta_local = 10000.0f},
    {.name = "qwen3_moe", .hf_model_type = "qwen3_moe", .hf_class = "Qwen3MoeForCausalLM", .gguf_arch = "qwen3moe",
     .qk_norm = 1, .sliding = CINFER_SLIDING_FROM_LAYER, .default_sliding_window = 4096,
     .moe = CINFER_MOE_QWEN, .default_rope_theta = 10000.0f},
    /* GGUF: llama.cpp converts Mixtral as llama with llama.expert_count */
    {.name = "mixtral", .hf_model_type = "mixtral", .hf_class = "MixtralForCausalLM", .gguf_arch = NULL,
     .gguf_permuted_qk = 1, .sliding = CINFER_SLIDING_UNIFORM, .moe = CINFER_MOE_MIXTRAL,
     .default_rope_theta = 1000000.0f},
    {.name = "phi3", .hf_model_type = "phi3", .hf_class = "Phi3ForCausalLM", .gguf_arch = "phi3", .fused_qkv = 1,
     .fused_gate_up = 1, .sliding = CINFER_SLIDING_UNIFORM, .default_rope_theta = 10000.0f},
    /* Qwen2MoeConfig: attention as Qwen2's, experts with a shared expert */
    {.name = "qwen2_moe", .hf_model_type = "qwen2_moe", .hf_class = "Qwen2MoeForCausalLM", .gguf_arch = "qwen2moe",
     .attention_bias = 1, .sliding = CINFER_SLIDING_FROM_LAYER, .default_sliding_window = 4096,
     .moe = CINFER_MOE_QWEN_SHARED, .default_rope_theta = 10000.0f},
    /* gpt-oss: GptOssConfig's defaults; its YaRN rope_scaling default is set in hf_config.c */
    {.name = "gpt_oss", .hf_model_type = "gpt_oss", .hf_class = "GptOssForCausalLM", .gguf_arch = "gpt-oss",
     .attention_bias = 1, .attn_output_bias = 1, .attn_sinks = 1, .activation = CINFER_ACTIVATION_SWIGLU_OAI,
     .sliding = CINFER_SLIDING_ALTERNATE, .default_sliding_window = 128, .moe = CINFER_MOE_GPT_OSS,
     .default_rope_theta = 150000.0f, .gguf_ffn_norm = "post_attention_norm.weight"},
};
#define N_FAMILIES (sizeof families / sizeof families[0])

static const char *key_of(const struct cinfer_arch_traits *t, enum cinfer_arch_key key)
{
    switch (key) {
    case CINFER_ARCH_KEY_HF_MODEL_TYPE: return t->hf_model_type;
    case CINFER_ARCH_KEY_HF_CLASS: return t->hf_class;
    case CINFER_ARCH_KEY_GGUF: return t->gguf_arch;
    }
    return NULL;
}

static const struct cinfer_arch_traits *find(enum cinfer_arch_key key, const char *value, size_t len)
{
    for (size_t i = 0; i < N_FAMILIES; i++) {
        const char *k = key_of(&families[i], key);
        if (k && strlen(k) == len && !memcmp(k, value, len))
            return &families[i];
    }
    return NULL;
}

const struct cinfer_arch_traits *cinfer_arch_by_hf_model_type(const char *model_type)
{
    return find(CINFER_ARCH_KEY_HF_MODEL_TYPE, model_type, strlen(model_type));
}

const struct cinfer_arch_traits *cinfer_arch_by_hf_class(const char *class_name)
{
    return find(CINFER_ARCH_KEY_HF_CLASS, class_name, strlen(class_name));
}

const struct cinfer_arch_traits *cinfer_arch_by_gguf(const char *arch, size_t len)
{
    return find(CINFER_ARCH_KEY_GGUF, arch, len);
}

const struct cinfer_arch_traits *cinfer_arch_by_name(const char *name)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(families[i].name, name))
            return &families[i];
    return NULL;
}

void cinfer_arch_list(enum cinfer_arch_key key, char *out, size_t out_bytes)
{
    const char *names[N_FAMILIES];
    size_t n = 0;
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (key_of(&families[i], key))
            names[n++] = key_of(&families[i], key);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < out_bytes; i++)
        used += (size_t)snprintf(out + used, out_bytes - used, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                 names[i]);
}
