/* config.json for Llama-family models, with transformers' defaults (LlamaConfig,
 * MistralConfig, Qwen2Config, Qwen3Config) for keys a file leaves out. A JSON null is
 * treated as an absent key, as transformers does for head_dim and rope_scaling. */
#include "model/hf_config.h"

#include "model/arch_traits.h"
#include "model/model_load_internal.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static json_t *get(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a fractional number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

/* An integer key: absent gives fallback (or an error when fallback is "required"). */
#define REQUIRED INT_MIN
static int get_int(json_t *obj, const char *key, int fallback, int *out, const char *source, struct cinfer_error *err)
{
    json_t *v = get(obj, key);
    if (!v) {
        if (fallback == REQUIRED)
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"%s\" is missing", source, key);
        *out = fallback;
        return CINFER_OK;
    }
    if (!json_is_integer(v))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"%s\" is %s, expected an integer", source, key,
                                json_kind(v));
    json_int_t n = json_integer_value(v);
    if (n < INT_MIN + 1 || n > INT_MAX)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"%s\" is %lld, outside the range of int", source,
                                key, (long long)n);
    *out = (int)n;
    return CINFER_OK;
}

static int get_float(json_t *obj, const char *key, double fallback, float *out, const char *source,
                     struct cinfer_error *err)
{
    json_t *v = get(obj, key);
    if (!v) {
        *out = (float)fallback;
        return CINFER_OK;
    }
    if (!json_is_number(v))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"%s\" is %s, expected a number", source, key,
                                json_kind(v));
    *out = (float)json_number_value(v);
    return CINFER_OK;
}

static int get_bool(json_t *obj, const char *key, int fallback, int *out, int *given, const char *source,
                    struct cinfer_error *err)
{
    json_t *v = get(obj, key);
    if (given)
        *given = v != NULL;
    if (!v) {
        *out = fallback;
        return CINFER_OK;
    }
    if (!json_is_boolean(v))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"%s\" is %s, expected true or false", source, key,
                                json_kind(v));
    *out = json_is_true(v);
    return CINFER_OK;
}

static int read_family(json_t *root, struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    json_t *model_type = get(root, "model_type");
    json_t *archs = get(root, "architectures");
    const struct cinfer_arch_traits *traits;
    char expected[256];
    if (model_type) {
        if (!json_is_string(model_type))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"model_type\" is %s, expected a string", source,
                                    json_kind(model_type));
        if (!(traits = cinfer_arch_by_hf_model_type(json_string_value(model_type)))) {
            cinfer_arch_list(CINFER_ARCH_KEY_HF_MODEL_TYPE, expected, sizeof expected);
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (expected %s)",
                                    source, json_string_value(model_type), expected);
        }
    } else if (json_is_array(archs) && json_is_string(json_array_get(archs, 0))) {
        const char *arch = json_string_value(json_array_get(archs, 0));
        if (!(traits = cinfer_arch_by_hf_class(arch))) {
            cinfer_arch_list(CINFER_ARCH_KEY_HF_CLASS, expected, sizeof expected);
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: architecture \"%s\" is not supported (expected %s)", source, arch, expected);
        }
    } else {
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: neither \"model_type\" nor \"architectures\" names the model", source);
    }
    snprintf(c->architecture, sizeof c->architecture, "%s", traits->name);
    return CINFER_OK;
}

/* LongRoPE's short_factor or long_factor: one positive number per turned pair (rotary dims / 2). */
static int read_rope_factors(json_t *rs, const char *key, const struct cinfer_model_config *c, float *out,
                             const char *source, struct cinfer_error *err)
{
    json_t *list = get(rs, key);
    size_t want = (size_t)cinfer_model_rotary_dim(c) / 2;
    if (!json_is_array(list) || json_array_size(list) != want)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: longrope rope_scaling needs \"%s\" as a list of %zu numbers (rotary dims / 2); "
                                "found %s (%zu items)",
                                source, key, want, list ? json_kind(list) : "nothing",
                                json_is_array(list) ? json_array_size(list) : 0);
    if (want > CINFER_MAX_ROPE_FACTORS)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: head_dim %d is over %d", source, c->head_dim,
                                2 * CINFER_MAX_ROPE_FACTORS);
    for (size_t i = 0; i < want; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_number(v) || !(json_number_value(v) > 0))
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s: rope_scaling %s[%zu] is %s, expected a positive number", source, key, i,
                                    json_kind(v));
        out[i] = (float)json_number_value(v);
    }
    return CINFER_OK;
}

/* YaRN (Qwen's long-context configs): factor, the original context (else
 * max_position_embeddings), the ramp's bounds and the attention factor, defaulted as the
 * YaRN paper does. The factor is used as given (vLLM and llama.cpp do likewise). */
static int read_yarn(json_t *rs, struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    int rc, truncate = 1;
    static const char *const deepseek_keys[] = {"mscale", "mscale_all_dim"};
    for (size_t i = 0; i < 2; i++)
        if (get(rs, deepseek_keys[i]))
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: yarn rope_scaling has \"%s\" (DeepSeek's variant); not supported", source,
                                    deepseek_keys[i]);
    c->rope_scaling.type = CINFER_ROPE_SCALING_YARN;
    if ((rc = get_float(rs, "factor", NAN, &c->rope_scaling.factor, source, err)) ||
        (rc = get_int(rs, "original_max_position_embeddings", c->max_position_embeddings,
                      &c->rope_scaling.original_max_position_embeddings, source, err)) ||
        (rc = get_float(rs, "beta_fast", 32.0, &c->rope_scaling.beta_fast, source, err)) ||
        (rc = get_float(rs, "beta_slow", 1.0, &c->rope_scaling.beta_slow, source, err)) ||
        (rc = get_float(rs, "attention_factor", 0.0, &c->rope_scaling.attention_factor, source, err)) ||
        (rc = get_bool(rs, "truncate", 1, &truncate, NULL, source, err)))
        return rc;
    c->rope_scaling.yarn_no_truncate = !truncate; /* gpt-oss: false */
    if (c->rope_scaling.attention_factor == 0.0f && c->rope_scaling.factor > 1.0f)
        c->rope_scaling.attention_factor = (float)(0.1 * log(c->rope_scaling.factor) + 1.0);
    return CINFER_OK;
}

/* LongRoPE (Phi-3's "su", "longrope"): a divisor per frequency for contexts up to the
 * original one and another beyond, and an attention factor from the extension ratio. */
static int read_longrope(json_t *root, json_t *rs, struct cinfer_model_config *c, const char *source,
                         struct cinfer_error *err)
{
    int rc;
    c->rope_scaling.type = CINFER_ROPE_SCALING_LONGROPE;
    c->rope_scaling.n_factors = cinfer_model_rotary_dim(c) / 2;
    int original = 0;
    if ((rc = get_int(root, "original_max_position_embeddings", 0, &original, source, err)) ||
        (rc = get_int(rs, "original_max_position_embeddings", original,
                      &c->rope_scaling.original_max_position_embeddings, source, err)) ||
        (rc = read_rope_factors(rs, "short_factor", c, c->rope_scaling.short_factor, source, err)) ||
        (rc = read_rope_factors(rs, "long_factor", c, c->rope_scaling.long_factor, source, err)) ||
        (rc = get_float(rs, "attention_factor", 0.0, &c->rope_scaling.attention_factor, source, err)))
        return rc;
    int old_context = c->rope_scaling.original_max_position_embeddings;
    if (old_context <= 1)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: longrope rope_scaling needs original_max_position_embeddings > 1; found %d",
                                source, old_context);
    float factor = 0;
    if ((rc = get_float(rs, "factor", (double)c->max_position_embeddings / old_context, &factor, source, err)))
        return rc;
    c->rope_scaling.factor = factor;
    if (c->rope_scaling.attention_factor == 0.0f)
        c->rope_scaling.attention_factor =
            factor > 1.0f ? (float)sqrt(1.0 + log(factor) / log((double)old_context)) : 1.0f;
    return CINFER_OK;
}

static int read_rope_scaling(json_t *root, struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    json_t *rs = get(root, "rope_scaling");
    c->rope_scaling.type = CINFER_ROPE_SCALING_NONE;
    if (!rs)
        return CINFER_OK;
    if (!json_is_object(rs))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"rope_scaling\" is %s, expected an object", source,
                                json_kind(rs));
    json_t *type = get(rs, "rope_type");
    if (!type)
        type = get(rs, "type"); /* the older spelling */
    if (!json_is_string(type))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: rope_scaling has no \"rope_type\" string", source);
    const char *t = json_string_value(type);
    if (!strcmp(t, "default"))
        return CINFER_OK;
    if (!strcmp(t, "yarn"))
        return read_yarn(rs, c, source, err);
    if (!strcmp(t, "longrope") || !strcmp(t, "su"))
        return read_longrope(root, rs, c, source, err);
    if (!strcmp(t, "linear") || !strcmp(t, "dynamic")) {
        if (!json_is_number(get(rs, "factor")))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: %s rope_scaling needs a number \"factor\"", source,
                                    t);
        c->rope_scaling.type = !strcmp(t, "linear") ? CINFER_ROPE_SCALING_LINEAR : CINFER_ROPE_SCALING_DYNAMIC;
        c->rope_scaling.factor = (float)json_number_value(get(rs, "factor"));
        return CINFER_OK;
    }
    if (strcmp(t, "llama3") != 0)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: rope_scaling type \"%s\" is not supported (cinfer implements llama3, linear, "
                                "yarn, dynamic and longrope)",
                                source, t);
    static const char *const keys[] = {"factor", "low_freq_factor", "high_freq_factor"};
    for (size_t i = 0; i < 3; i++)
        if (!json_is_number(get(rs, keys[i])))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: llama3 rope_scaling needs a number \"%s\"", source,
                                    keys[i]);
    c->rope_scaling.type = CINFER_ROPE_SCALING_LLAMA3;
    c->rope_scaling.factor = (float)json_number_value(get(rs, "factor"));
    c->rope_scaling.low_freq_factor = (float)json_number_value(get(rs, "low_freq_factor"));
    c->rope_scaling.high_freq_factor = (float)json_number_value(get(rs, "high_freq_factor"));
    return get_int(rs, "original_max_position_embeddings", REQUIRED,
                   &c->rope_scaling.original_max_position_embeddings, source, err);
}

/* bos_token_id: an integer or null; eos_token_id: an integer, a list of them, or null. */
static int read_special_ids(json_t *root, struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    int rc;
    if (get(root, "bos_token_id") && (rc = get_int(root, "bos_token_id", -1, &c->bos_token_id, source, err)))
        return rc;
    json_t *eos = get(root, "eos_token_id");
    if (!eos)
        return CINFER_OK;
    int max_eos = (int)(sizeof c->eos_token_ids / sizeof c->eos_token_ids[0]);
    if (json_is_integer(eos)) {
        rc = get_int(root, "eos_token_id", 0, &c->eos_token_ids[0], source, err);
        c->n_eos = rc ? 0 : 1;
        return rc;
    }
    if (!json_is_array(eos))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"eos_token_id\" is %s, expected an integer or a list",
                                source, json_kind(eos));
    if ((int)json_array_size(eos) > max_eos)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: %zu eos_token_id values, at most %d supported",
                                source, json_array_size(eos), max_eos);
    c->n_eos = 0;
    for (size_t i = 0; i < json_array_size(eos); i++) {
        json_t *v = json_array_get(eos, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: eos_token_id[%zu] is not a token id", source, i);
        c->eos_token_ids[c->n_eos++] = (int)json_integer_value(v);
    }
    return CINFER_OK;
}

/* Features of the architectures that cinfer's forward pass has no slot for. */
static int refuse_unsupported(json_t *root, const struct cinfer_model_config *c, const char *source,
                              struct cinfer_error *err)
{
    int flag, rc;
    /* Llama/Mistral/Qwen3 attention_bias adds an o_proj bias too; Qwen2 has q/k/v biases always. */
    if (!cinfer_arch_by_name(c->architecture)->attention_bias) {
        if ((rc = get_bool(root, "attention_bias", 0, &flag, NULL, source, err)))
            return rc;
        if (flag)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: attention_bias is true (biases on q/k/v/o projections); not supported for %s",
                                    source, c->architecture);
    }
    if ((rc = get_bool(root, "mlp_bias", 0, &flag, NULL, source, err)))
        return rc;
    if (flag)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: mlp_bias is true; not supported", source);
    return CINFER_OK;
}

/* hidden_activation (Gemma's key) or hidden_act: the gate's activation, by name. */
static int read_activation(json_t *root, struct cinfer_model_config *c, const struct cinfer_arch_traits *traits,
                           const char *source, struct cinfer_error *err)
{
    const char *key = get(root, "hidden_activation") ? "hidden_activation" : "hidden_act";
    json_t *act = get(root, key);
    c->activation = traits->activation;
    if (!act || traits->activation == CINFER_ACTIVATION_SWIGLU_OAI) /* gpt-oss's experts ignore hidden_act */
        return CINFER_OK;
    if (!json_is_string(act))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"%s\" is %s, expected a string", source, key,
                                json_kind(act));
    const char *name = json_string_value(act);
    if (!strcmp(name, "silu") || !strcmp(name, "swish"))
        c->activation = CINFER_ACTIVATION_SILU;
    else if (!strcmp(name, "gelu_pytorch_tanh"))
        c->activation = CINFER_ACTIVATION_GELU_TANH;
    else
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: %s \"%s\" is not supported (expected \"silu\" or \"gelu_pytorch_tanh\")", source,
                                key, name);
    return CINFER_OK;
}

/* Gemma's scales and caps: query_pre_attn_scalar, attn_logit_softcapping,
 * final_logit_softcapping (null: none), the sqrt(hidden) embedding scale, (1 + w) norms. */
static int read_scales(json_t *root, struct cinfer_model_config *c, const struct cinfer_arch_traits *traits,
                       const char *source, struct cinfer_error *err)
{
    float query_pre_attn_scalar = 0.0f;
    int rc;
    if ((rc = get_float(root, "query_pre_attn_scalar", traits->default_query_pre_attn_scalar, &query_pre_attn_scalar,
                        source, err)))
        return rc;
    int has_attn_cap = json_object_get(root, "attn_logit_softcapping") != NULL;
    int has_final_cap = json_object_get(root, "final_logit_softcapping") != NULL;
    /* a key given as null means no capping, an absent key the family's default */
    if ((rc = get_float(root, "attn_logit_softcapping", has_attn_cap ? 0.0 : traits->default_attn_logit_softcap,
                        &c->attn_logit_softcap, source, err)) ||
        (rc = get_float(root, "final_logit_softcapping", has_final_cap ? 0.0 : traits->default_final_logit_softcap,
                        &c->final_logit_softcap, source, err)))
        return rc;
    if (query_pre_attn_scalar < 0.0f || c->attn_logit_softcap < 0.0f || c->final_logit_softcap < 0.0f)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: query_pre_attn_scalar %g, attn_logit_softcapping %g and final_logit_softcapping "
                                "%g must not be negative",
                                source, (double)query_pre_attn_scalar, (double)c->attn_logit_softcap,
                                (double)c->final_logit_softcap);
    c->attention_scale = query_pre_attn_scalar > 0.0f ? 1.0f / sqrtf(query_pre_attn_scalar) : 0.0f;
    c->embedding_scale = traits->embedding_scale_sqrt_hidden ? sqrtf((float)c->hidden_size) : 0.0f;
    c->norm_unit_offset = traits->norm_unit_offset_hf;
    c->sandwich_norms = traits->sandwich_norms;
    return get_float(root, "rope_local_base_freq", traits->default_rope_theta_local, &c->rope_theta_local, source,
                     err);
}

/* layer_types, when given, names each layer "sliding_attention" or "full_attention". */
static int read_layer_types(json_t *types, struct cinfer_model_config *c, const char *source,
                            struct cinfer_error *err)
{
    if (!json_is_array(types) || (int)json_array_size(types) != c->num_layers)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"layer_types\" is %s of %zu, expected a list of %d",
                                source, json_kind(types), json_is_array(types) ? json_array_size(types) : 0,
                                c->num_layers);
    for (int l = 0; l < c->num_layers; l++) {
        const char *t = json_string_value(json_array_get(types, (size_t)l));
        if (t && !strcmp(t, "sliding_attention"))
            cinfer_model_set_layer_slides(c, l);
        else if (!t || strcmp(t, "full_attention") != 0)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: layer_types[%d] is %s%s%s, expected \"sliding_attention\" or "
                                    "\"full_attention\"",
                                    source, l, t ? "\"" : "", t ? t : "not a string", t ? "\"" : "");
    }
    return CINFER_OK;
}

/* The mixture of experts, as transformers' Qwen3MoeConfig, Qwen2MoeConfig and MixtralConfig
 * read it: Qwen3-MoE's (and Qwen2-MoE's) layer l is sparse unless listed in mlp_only_layers, when (l + 1) is a
 * multiple of decoder_sparse_step; Mixtral's every layer, its experts
 * intermediate_size wide, their weights always renormalised. */
static int read_moe(json_t *root, struct cinfer_model_config *c, const struct cinfer_arch_traits *traits,
                    const char *source, struct cinfer_error *err)
{
    int rc, step = 1;
    if (traits->moe == CINFER_MOE_NONE)
        return CINFER_OK;
    if (traits->moe == CINFER_MOE_MIXTRAL) {
        if ((rc = get_int(root, "num_local_experts", 8, &c->n_experts, source, err)) ||
            (rc = get_int(root, "num_experts_per_tok", 2, &c->n_experts_used, source, err)))
            return rc;
        c->moe_intermediate_size = c->intermediate_size;
        c->moe_norm_topk = 1;
    } else if (traits->moe == CINFER_MOE_GPT_OSS) {
        /* softmax over the top-k logits = the full softmax's top k renormalised */
        if ((rc = get_int(root, "num_local_experts", 128, &c->n_experts, source, err)) ||
            (rc = get_int(root, "num_experts_per_tok", 4, &c->n_experts_used, source, err)))
            return rc;
        c->moe_intermediate_size = c->intermediate_size;
        c->moe_norm_topk = 1;
        c->moe_biases = 1;
    } else {
        /* Qwen3MoeConfig's defaults, or Qwen2MoeConfig's (60 experts, 4 used, 1408 wide) */
        int shared = traits->moe == CINFER_MOE_QWEN_SHARED;
        if ((rc = get_int(root, "num_experts", shared ? 60 : 128, &c->n_experts, source, err)) ||
            (rc = get_int(root, "num_experts_per_tok", shared ? 4 : 8, &c->n_experts_used, source, err)) ||
            (rc = get_int(root, "moe_intermediate_size", shared ? 1408 : 768, &c->moe_intermediate_size, source,
                          err)) ||
            (rc = get_bool(root, "norm_topk_prob", 0, &c->moe_norm_topk, NULL, source, err)) ||
            (rc = get_int(root, "decoder_sparse_step", 1, &step, source, err)) ||
            (shared && (rc = get_int(root, "shared_expert_intermediate_size", 5632,
                                     &c->shared_expert_intermediate_size, source, err))))
            return rc;
        if (shared && (c->shared_expert_intermediate_size < 0 || c->shared_expert_intermediate_size > (1 << 22)))
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s: key \"shared_expert_intermediate_size\" is %d, expected 0 to %d", source,
                                    c->shared_expert_intermediate_size, 1 << 22);
    }
    if (c->n_experts == 0) {
        c->shared_expert_intermediate_size = 0;
        return CINFER_OK; /* transformers: no experts, every layer dense */
    }
    if ((rc = cinfer_moe_config_check(c, source, err)))
        return rc;
    if (step < 1)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"decoder_sparse_step\" is %d, expected >= 1",
                                source, step);
    for (int l = 0; l < c->num_layers; l++)
        if ((l + 1) % step == 0)
            cinfer_model_set_layer_sparse(c, l);
    json_t *dense = traits->moe != CINFER_MOE_MIXTRAL ? get(root, "mlp_only_layers") : NULL;
    if (dense && !json_is_null(dense)) {
        if (!json_is_array(dense))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: key \"mlp_only_layers\" is %s, expected a list",
                                    source, json_kind(dense));
        for (size_t i = 0; i < json_array_size(dense); i++) {
            json_t *v = json_array_get(dense, i);
            json_int_t l = json_is_integer(v) ? json_integer_value(v) : -1;
            if (l < 0 || l >= c->num_layers)
                return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                        "%s: mlp_only_layers[%zu] is %s, expected a layer index below %d", source, i,
                                        json_is_integer(v) ? "out of range" : json_kind(v), c->num_layers);
            c->moe_layers[l / 64] &= ~((uint64_t)1 << (l % 64));
        }
    }
    return CINFER_OK;
}

/* gpt-oss (transformers' GptOssConfig and GptOssExperts): its own defaults for
 * rms_norm_eps, max_position_embeddings and head_dim, a YaRN rope_scaling when the key
 * is absent (factor 32 over 4096 tokens, truncate false), the clamped SwiGLU
 * (swiglu_limit, alpha 1.702), biases on every projection and attention sinks. */
static int read_gpt_oss(json_t *root, struct cinfer_model_config *c, const struct cinfer_arch_traits *traits,
                        const char *source, struct cinfer_error *err)
{
    int rc;
    if (traits->moe != CINFER_MOE_GPT_OSS)
        return CINFER_OK;
    if ((rc = get_float(root, "rms_norm_eps", 1e-5, &c->rms_norm_eps, source, err)) ||
        (rc = get_int(root, "max_position_embeddings", 131072, &c->max_position_embeddings, source, err)) ||
        (rc = get_int(root, "head_dim", 64, &c->head_dim, source, err)) ||
        (rc = get_float(root, "swiglu_limit", 7.0, &c->swiglu_limit, source, err)))
        return rc;
    c->rotary_dim = c->head_dim;
    if (!json_object_get(root, "rope_scaling")) {
        c->rope_scaling.type = CINFER_ROPE_SCALING_YARN;
        c->rope_scaling.factor = 32.0f;
        c->rope_scaling.beta_fast = 32.0f;
        c->rope_scaling.beta_slow = 1.0f;
        c->rope_scaling.yarn_no_truncate = 1;
        c->rope_scaling.original_max_position_embeddings = 4096;
        c->rope_scaling.attention_factor = (float)(0.1 * log(32.0) + 1.0);
    }
    if (!(c->swiglu_limit > 0.0f))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: swiglu_limit is %g, expected a positive number", source,
                                (double)c->swiglu_limit);
    c->swiglu_alpha = 1.702f;
    c->attn_output_bias = traits->attn_output_bias;
    c->attn_sinks = traits->attn_sinks;
    return CINFER_OK;
}

/* quantization_config: the only scheme read is the published gpt-oss checkpoints' mxfp4
 * (transformers' Mxfp4Config), which quantizes the experts alone (stored as _blocks and
 * _scales, model_load_hf.c); modules_to_not_convert then lists float modules, which are
 * read as stored whatever it says, so only its form is checked. */
static int read_quantization(json_t *root, const struct cinfer_model_config *c, const struct cinfer_arch_traits *traits,
                             const char *source, struct cinfer_error *err)
{
    json_t *q = get(root, "quantization_config");
    if (!q)
        return CINFER_OK;
    if (!json_is_object(q))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: quantization_config is %s, expected an object", source,
                                json_kind(q));
    json_t *method = get(q, "quant_method");
    if (!json_is_string(method))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: quantization_config.quant_method is %s, expected a string "
                                "(cinfer reads \"mxfp4\")", source, method ? json_kind(method) : "absent");
    if (strcmp(json_string_value(method), "mxfp4") != 0)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: quantization_config.quant_method is \"%s\"; cinfer "
                                "reads \"mxfp4\" only (gpt-oss's experts), or unquantized checkpoints", source,
                                json_string_value(method));
    if (traits->moe != CINFER_MOE_GPT_OSS)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: quantization_config.quant_method \"mxfp4\" is read "
                                "for gpt-oss experts only; this model is %s", source, c->architecture);
    json_t *keep = get(q, "modules_to_not_convert");
    size_t i;
    json_t *module;
    if (keep && !json_is_array(keep))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: quantization_config.modules_to_not_convert is %s, "
                                "expected an array of module names", source, json_kind(keep));
    json_array_foreach(keep, i, module)
        if (!json_is_string(module))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: quantization_config.modules_to_not_convert[%zu] is "
                                    "%s, expected a module name", source, i, json_kind(module));
    return CINFER_OK;
}

/* Which layers slide and by how much, by the family's rule (arch_traits.h). */
static int read_sliding_window(json_t *root, struct cinfer_model_config *c, const struct cinfer_arch_traits *traits,
                               const char *source, struct cinfer_error *err)
{
    int window = 0, use = 1, from_layer = 0, pattern = 0, rc;
    memset(c->sliding_layers, 0, sizeof c->sliding_layers);
    c->sliding_window = 0;
    if (traits->sliding == CINFER_SLIDING_NONE) {
        if (get(root, "sliding_window") || get(root, "layer_types"))
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: sliding_window is set; %s has no sliding layers",
                                    source, c->architecture);
        return CINFER_OK;
    }
    int given = json_object_get(root, "sliding_window") != NULL; /* null: no window */
    if ((rc = get_int(root, "sliding_window", given ? 0 : traits->default_sliding_window, &window, source, err)))
        return rc;
    if (traits->sliding == CINFER_SLIDING_FROM_LAYER &&
        ((rc = get_bool(root, "use_sliding_window", 0, &use, NULL, source, err)) ||
         (rc = get_int(root, "max_window_layers", 28, &from_layer, source, err))))
        return rc;
    if (traits->sliding == CINFER_SLIDING_PATTERN &&
        (rc = get_int(root, "sliding_window_pattern", 6, &pattern, source, err)))
        return rc;
    if (window < 0 || (traits->sliding == CINFER_SLIDING_PATTERN && pattern < 1))
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: sliding_window %d must not be negative and sliding_window_pattern %d positive",
                                source, window, pattern);
    if (!use || window == 0)
        return CINFER_OK;
    c->sliding_window = window;
    if (get(root, "layer_types"))
        return read_layer_types(get(root, "layer_types"), c, source, err);
    for (int l = 0; l < c->num_layers && l < CINFER_MAX_LAYERS; l++) {
        int slides = traits->sliding == CINFER_SLIDING_UNIFORM || (traits->sliding == CINFER_SLIDING_FROM_LAYER &&
                                                                   l >= from_layer) ||
                     (traits->sliding == CINFER_SLIDING_ALTERNATE && l % 2 == 0) ||
                     (traits->sliding == CINFER_SLIDING_PATTERN && (l + 1) % pattern != 0);
        if (slides)
            cinfer_model_set_layer_slides(c, l);
    }
    return CINFER_OK;
}

static int parse_root(json_t *root, const char *source, struct cinfer_hf_config *out, struct cinfer_error *err)
{
    struct cinfer_model_config *c = &out->model;
    int rc;
    if (!json_is_object(root))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: expected a JSON object, found %s", source,
                                json_kind(root));
    if ((rc = read_family(root, c, source, err)))
        return rc;
    const struct cinfer_arch_traits *traits = cinfer_arch_by_name(c->architecture);
    if ((rc = get_int(root, "vocab_size", REQUIRED, &c->vocab_size, source, err)) ||
        (rc = get_int(root, "hidden_size", REQUIRED, &c->hidden_size, source, err)) ||
        (rc = get_int(root, "intermediate_size", REQUIRED, &c->intermediate_size, source, err)) ||
        (rc = get_int(root, "num_hidden_layers", REQUIRED, &c->num_layers, source, err)) ||
        (rc = get_int(root, "num_attention_heads", REQUIRED, &c->num_heads, source, err)) ||
        (rc = get_int(root, "num_key_value_heads", c->num_heads, &c->num_kv_heads, source, err)) ||
        (rc = get_int(root, "max_position_embeddings", 2048, &c->max_position_embeddings, source, err)) ||
        (rc = get_float(root, "rms_norm_eps", 1e-6, &c->rms_norm_eps, source, err)) ||
        (rc = get_float(root, "rope_theta", traits->default_rope_theta, &c->rope_theta, source, err)))
        return rc;
    if (c->num_layers > CINFER_MAX_LAYERS)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: num_hidden_layers %d is over %d", source, c->num_layers,
                                CINFER_MAX_LAYERS);
    if (c->num_heads <= 0 || c->hidden_size <= 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: num_attention_heads %d and hidden_size %d must be positive", source, c->num_heads,
                                c->hidden_size);
    if (get(root, "head_dim")) {
        if ((rc = get_int(root, "head_dim", 0, &c->head_dim, source, err)))
            return rc;
    } else if (c->hidden_size % c->num_heads != 0) {
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: no head_dim, and hidden_size %d is not a multiple of num_attention_heads %d",
                                source, c->hidden_size, c->num_heads);
    } else {
        c->head_dim = c->hidden_size / c->num_heads;
    }
    /* Phi-4-mini rotates 3/4 of each head: int(head_dim * factor) dims, as transformers */
    float rotary_fraction = 1.0f;
    if ((rc = get_float(root, "partial_rotary_factor", 1.0, &rotary_fraction, source, err)))
        return rc;
    if (!(rotary_fraction > 0.0f && rotary_fraction <= 1.0f))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: partial_rotary_factor is %g, expected a number in (0, 1]",
                                source, (double)rotary_fraction);
    c->rotary_dim = (int)((double)c->head_dim * (double)rotary_fraction);
    if ((rc = read_rope_scaling(root, c, source, err)) ||
        (rc = get_bool(root, "tie_word_embeddings", 0, &c->tie_word_embeddings, &out->tie_word_embeddings_given,
                       source, err)) ||
        (rc = read_special_ids(root, c, source, err)) || (rc = refuse_unsupported(root, c, source, err)) ||
        (rc = read_activation(root, c, traits, source, err)) || (rc = read_scales(root, c, traits, source, err)) ||
        (rc = read_sliding_window(root, c, traits, source, err)) || (rc = read_moe(root, c, traits, source, err)) ||
        (rc = read_gpt_oss(root, c, traits, source, err)) || (rc = read_quantization(root, c, traits, source, err)))
        return rc;
    c->rope_interleaved = 0; /* Hugging Face checkpoints use rotate_half pairing */
    c->attention_bias = traits->attention_bias;
    c->qk_norm = traits->qk_norm;
    c->fused_qkv = traits->fused_qkv;
    c->fused_gate_up = traits->fused_gate_up;
    return CINFER_OK;
}

static json_t *load_json(const char *text, size_t len, const char *source, struct cinfer_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        cinfer_error_set(err, CINFER_ERR_PARSE, "%s: not valid JSON: %s at byte %d (line %d, column %d)", source,
                         jerr.text, jerr.position, jerr.line, jerr.column);
    return root;
}

int cinfer_hf_config_parse(const char *text, size_t len, const char *source, struct cinfer_hf_config *out,
                           struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    out->model.bos_token_id = -1;
    json_t *root = load_json(text, len, source, err);
    if (!root)
        return CINFER_ERR_PARSE;
    int rc = parse_root(root, source, out, err);
    json_decref(root);
    return rc;
}

int cinfer_hf_generation_config_parse(const char *text, size_t len, const char *source, struct cinfer_hf_config *cfg,
                                      struct cinfer_error *err)
{
    json_t *root = load_json(text, len, source, err);
    if (!root)
        return CINFER_ERR_PARSE;
    int rc = json_is_object(root) ? read_special_ids(root, &cfg->model, source, err)
                                  : cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: expected a JSON object, found %s",
                                                     source, json_kind(root));
    json_decref(root);
    return rc;
}

/* The whole of a small text file; NOT_FOUND when it does not exist. */
static int read_text_file(const char *path, char **text, size_t *len, struct cinfer_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cinfer_error_set(err, errno == ENOENT ? CINFER_ERR_NOT_FOUND : CINFER_ERR_IO, "%s: cannot open: %s",
                                path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *grown = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL; /* configs are small */
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory or over 64 MiB", path);
    if (failed) {
        free(buf);
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: read error", path);
    }
    *text = buf;
    *len = n;
    return CINFER_OK;
}

int cinfer_hf_config_read(const char *folder, struct cinfer_hf_config *out, struct cinfer_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", folder);
    char *text;
    size_t len;
    int rc = read_text_file(path, &text, &len, err);
    if (rc)
        return rc;
    rc = cinfer_hf_config_parse(text, len, path, out, err);
    free(text);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/generation_config.json", folder);
    rc = read_text_file(path, &text, &len, err);
    if (rc == CINFER_ERR_NOT_FOUND)
        return CINFER_OK;
    if (rc)
        return rc;
    rc = cinfer_hf_generation_config_parse(text, len, path, out, err);
    free(text);
    return rc;
}
