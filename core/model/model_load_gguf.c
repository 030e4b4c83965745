/* GGUF model files, with llama.cpp's conventions: hyperparameters under
 * "<arch>.*" keys, tensors named token_embd / blk.N.* / output_norm / output, ggml
 * shapes (ne[0] is the row length). For arch llama, llama.cpp's converter permuted the
 * Q and K rows so that interleaved RoPE pairs (2i, 2i+1) reproduce Hugging Face's
 * rotate_half; the weights are used as stored and rope_interleaved is set. qwen2 and
 * qwen3 use NEOX RoPE in llama.cpp: no permutation, rotate_half pairing. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/ggml_types.h"
#include "kernels.h"
#include "model/arch_traits.h"
#include "model/model_load_internal.h"
#include "model/rope_scaling.h"

struct gguf_source {
    const struct cinfer_gguf *g; /* the file with the metadata: the model's, or its first part */
    const char *path;
    const char *arch;                        /* the key prefix: general.architecture */
    const struct cinfer_arch_traits *traits;
    struct cinfer_model_storage *storage;
    char dim_names[DIM_COUNT + 1][96]; /* config keys per dimension; [DIM_COUNT]: the vocabulary */
};

static int key_u32_as_int(const struct gguf_source *src, const char *suffix, int required, int fallback, int *out,
                          struct cinfer_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", src->arch, suffix);
    uint32_t v;
    int rc = cinfer_gguf_get_u32(src->g, key, &v, err);
    if (rc == CINFER_ERR_NOT_FOUND && !required) {
        *out = fallback;
        return CINFER_OK;
    }
    if (rc)
        return rc;
    if (v > (uint32_t)INT32_MAX)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "%s: GGUF key %s is %u, too large", src->path, key, v);
    *out = (int)v;
    return CINFER_OK;
}

static int key_f32(const struct gguf_source *src, const char *suffix, int required, float fallback, float *out,
                   struct cinfer_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", src->arch, suffix);
    int rc = cinfer_gguf_get_f32(src->g, key, out, err);
    if (rc == CINFER_ERR_NOT_FOUND && !required) {
        *out = fallback;
        return CINFER_OK;
    }
    return rc;
}

static int read_vocab_size(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    int rc = key_u32_as_int(src, "vocab_size", 0, -1, &c->vocab_size, err);
    if (rc || c->vocab_size >= 0)
        return rc;
    enum cinfer_gguf_value_type type;
    uint64_t count;
    if (cinfer_gguf_get_array(src->g, "tokenizer.ggml.tokens", &type, &count, err) == CINFER_OK && count <= INT32_MAX) {
        c->vocab_size = (int)count;
        return CINFER_OK;
    }
    const struct cinfer_gguf_tensor *emb = cinfer_gguf_split_find(src->storage, "token_embd.weight");
    if (emb && emb->n_dims == 2 && emb->ne[1] <= INT32_MAX) {
        c->vocab_size = (int)emb->ne[1];
        return CINFER_OK;
    }
    return cinfer_error_set(err, CINFER_ERR_NOT_FOUND,
                            "%s: vocabulary size unknown: no %s.vocab_size, tokenizer.ggml.tokens or token_embd.weight",
                            src->path, src->arch);
}

static int read_special_ids(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    uint32_t id;
    int rc = cinfer_gguf_get_u32(src->g, "tokenizer.ggml.bos_token_id", &id, err);
    if (rc == CINFER_OK)
        c->bos_token_id = id > (uint32_t)INT32_MAX ? INT32_MAX : (int)id; /* out of range: caught by the check */
    else if (rc != CINFER_ERR_NOT_FOUND)
        return rc;
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    for (size_t k = 0; k < sizeof eos_keys / sizeof eos_keys[0]; k++) {
        rc = cinfer_gguf_get_u32(src->g, eos_keys[k], &id, err);
        if (rc == CINFER_ERR_NOT_FOUND)
            continue;
        if (rc)
            return rc;
        int seen = 0;
        for (int i = 0; i < c->n_eos; i++)
            seen |= c->eos_token_ids[i] == (int)id;
        if (!seen)
            c->eos_token_ids[c->n_eos++] = id > (uint32_t)INT32_MAX ? INT32_MAX : (int)id;
    }
    return CINFER_OK;
}

/* ---- Llama 3 RoPE scaling -------------------------------------------------
 * llama.cpp stores Llama 3 scaling as rope_freqs.weight: per frequency pair, the divisor
 * of the rotation frequency. cinfer's runtime computes those divisors from (factor,
 * low_freq_factor, high_freq_factor, original_max_position_embeddings), so the loader
 * finds parameters that reproduce the stored divisors and verifies that they do.
 *
 * With s(f) = (orig * f / 2pi - low) / (high - low) for frequency f, the divisor is 1
 * where s > 1, factor where s < 0 and 1 / ((1 - s) / factor + s) between: only factor
 * and the line s = a f + b matter, a = orig / (2pi (high - low)), b = -low / (high - low). */

/* The runtime's multiplier of frequency inv (see compute_inv_freq in runtime.c). */
static double llama3_multiplier(const struct cinfer_model_config *c, double inv)
{
    double factor = c->rope_scaling.factor, low = c->rope_scaling.low_freq_factor;
    double high = c->rope_scaling.high_freq_factor, old_context = c->rope_scaling.original_max_position_embeddings;
    double wavelen = 2.0 * M_PI / inv;
    if (wavelen > old_context / low)
        return 1.0 / factor;
    if (!(wavelen < old_context / high)) {
        double smooth = (old_context / wavelen - low) / (high - low);
        return (1.0 - smooth) / factor + smooth;
    }
    return 1.0;
}

static int fit_llama3_scaling(const struct gguf_source *src, struct cinfer_model_config *c, const float *divisors,
                              int n, struct cinfer_error *err)
{
    double inv[512], s[512]; /* (head_dim / 2) */
    double factor = 1.0;
    for (int i = 0; i < n; i++) {
        if (!(divisors[i] >= 0.999f) || !isfinite(divisors[i]))
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: rope_freqs.weight[%d] is %g; cinfer reads Llama 3 scaling factors (>= 1)",
                                    src->path, i, (double)divisors[i]);
        factor = fmax(factor, divisors[i]);
    }
    if (factor <= 1.0 + 1e-6) /* every divisor 1: no scaling */
        return CINFER_OK;
    int first_mid = -1, last_mid = -1, last_high = -1, first_low = -1;
    for (int i = 0; i < n; i++) {
        inv[i] = 1.0 / pow((double)c->rope_theta, (2.0 * i) / (double)c->head_dim);
        s[i] = (1.0 / divisors[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
        if (s[i] >= 1.0 - 1e-6) {
            last_high = i;
        } else if (s[i] <= 1e-6) {
            if (first_low < 0)
                first_low = i;
        } else {
            if (first_mid < 0)
                first_mid = i;
            last_mid = i;
        }
    }
    double a, b;
    if (first_mid >= 0 && last_mid > first_mid) { /* the line through the blended band */
        a = (s[first_mid] - s[last_mid]) / (inv[first_mid] - inv[last_mid]);
        b = s[first_mid] - a * inv[first_mid];
    } else if (first_mid >= 0) { /* one blended frequency: steep enough to clear its neighbours */
        int m = first_mid;
        a = 2.0 * s[m] / inv[m];
        if (m > 0)
            a = fmax(a, 1.01 * (1.0 - s[m]) / (inv[m - 1] - inv[m]));
        if (m + 1 < n)
            a = fmax(a, 1.01 * s[m] / (inv[m] - inv[m + 1]));
        b = s[m] - a * inv[m];
    } else if (last_high >= 0 && first_low >= 0) { /* a clean step: s = 1.25 and -0.25 at its sides */
        a = 1.5 / (inv[last_high] - inv[first_low]);
        b = -0.25 - a * inv[first_low];
    } else { /* every frequency divided by factor */
        a = 1.0 / inv[0];
        b = -2.0;
    }
    if (!(a > 0.0) || !(b < 0.0))
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: rope_freqs.weight does not follow Llama 3 scaling (factors do not fall with "
                                "frequency)", src->path);
    /* Any (orig, low, high) on the line will do; pick high - low near 3 with orig whole. */
    double orig = fmax(1.0, round(2.0 * M_PI * a * 3.0));
    double span = orig / (2.0 * M_PI * a);
    c->rope_scaling.type = CINFER_ROPE_SCALING_LLAMA3;
    c->rope_scaling.factor = (float)factor;
    c->rope_scaling.original_max_position_embeddings = (int)fmin(orig, (double)INT32_MAX);
    c->rope_scaling.low_freq_factor = (float)(-b * span);
    c->rope_scaling.high_freq_factor = (float)(-b * span + span);
    for (int i = 0; i < n; i++) {
        double want = 1.0 / divisors[i], got = llama3_multiplier(c, inv[i]);
        if (fabs(got - want) > 1e-5 * want)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: rope_freqs.weight[%d] = %g is not reproduced by Llama 3 scaling (got %g); "
                                    "the factors do not follow its formula",
                                    src->path, i, (double)divisors[i], 1.0 / got);
    }
    return CINFER_OK;
}

/* LongRoPE's divisors as llama.cpp's converter stores them: f32 tensors, one per turned pair. */
static int read_rope_factor_tensor(const struct gguf_source *src, const char *name, const struct cinfer_model_config *c,
                                   float *out, struct cinfer_error *err)
{
    const struct cinfer_gguf_tensor *t = cinfer_gguf_split_find(src->storage, name);
    int want = cinfer_model_rotary_dim(c) / 2;
    if (!t || t->type != CINFER_GGML_F32 || t->n_dims != 1 || t->ne[0] != (uint64_t)want)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: LongRoPE needs tensor %s as f32 of %d values (rotary dims / 2); found %s",
                                src->path, name, want, t ? "another type or shape" : "none");
    if (c->head_dim / 2 > CINFER_MAX_ROPE_FACTORS)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: head_dim %d is over %d", src->path, c->head_dim,
                                2 * CINFER_MAX_ROPE_FACTORS);
    memcpy(out, t->data, (size_t)t->ne[0] * sizeof(float));
    return CINFER_OK;
}

/* YaRN: factor and original context as the converter writes them; the attention factor
 * is YaRN's default (a file that overrides it is refused, not guessed at). */
static int read_yarn(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    int rc;
    float attn = 1.0f;
    c->rope_scaling.type = CINFER_ROPE_SCALING_YARN;
    if ((rc = key_f32(src, "rope.scaling.factor", 1, 0, &c->rope_scaling.factor, err)) ||
        (rc = key_u32_as_int(src, "rope.scaling.original_context_length", 1, 0,
                             &c->rope_scaling.original_max_position_embeddings, err)) ||
        (rc = key_f32(src, "rope.scaling.yarn_beta_fast", 0, 32.0f, &c->rope_scaling.beta_fast, err)) ||
        (rc = key_f32(src, "rope.scaling.yarn_beta_slow", 0, 1.0f, &c->rope_scaling.beta_slow, err)) ||
        (rc = key_f32(src, "rope.scaling.yarn_attn_factor", 0, 1.0f, &attn, err)))
        return rc;
    if (attn != 1.0f)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: %s.rope.scaling.yarn_attn_factor is %g; cinfer implements YaRN's default (1)",
                                src->path, src->arch, (double)attn);
    float factor = c->rope_scaling.factor;
    c->rope_scaling.attention_factor = factor > 1.0f ? (float)(0.1 * log(factor) + 1.0) : 1.0f;
    return CINFER_OK;
}

/* LongRoPE (Phi-3): the two tensors, the original context and the attention factor. */
static int read_longrope(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    int rc;
    c->rope_scaling.type = CINFER_ROPE_SCALING_LONGROPE;
    c->rope_scaling.n_factors = cinfer_model_rotary_dim(c) / 2;
    if ((rc = read_rope_factor_tensor(src, "rope_factors_short.weight", c, c->rope_scaling.short_factor, err)) ||
        (rc = read_rope_factor_tensor(src, "rope_factors_long.weight", c, c->rope_scaling.long_factor, err)) ||
        (rc = key_u32_as_int(src, "rope.scaling.original_context_length", 1, 0,
                             &c->rope_scaling.original_max_position_embeddings, err)) ||
        (rc = key_f32(src, "rope.scaling.attn_factor", 0, 1.0f, &c->rope_scaling.attention_factor, err)))
        return rc;
    return CINFER_OK;
}

static int read_rope_scaling(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", src->arch);
    struct cinfer_gguf_str type;
    int rc = cinfer_gguf_get_str(src->g, key, &type, err);
    if (rc && rc != CINFER_ERR_NOT_FOUND)
        return rc;
    int has_type = rc == CINFER_OK;
#define TYPE_IS(name) (has_type && type.len == sizeof(name) - 1 && !memcmp(type.data, name, sizeof(name) - 1))
    if (TYPE_IS("longrope") || cinfer_gguf_split_find(src->storage, "rope_factors_long.weight"))
        return read_longrope(src, c, err);
    if (TYPE_IS("yarn"))
        return read_yarn(src, c, err);
    if (TYPE_IS("linear")) {
        c->rope_scaling.type = CINFER_ROPE_SCALING_LINEAR;
        return key_f32(src, "rope.scaling.factor", 1, 0, &c->rope_scaling.factor, err);
    }
    if (has_type && !TYPE_IS("none")) {
        if (!TYPE_IS("llama3"))
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: %s is \"%.*s\"; cinfer implements llama3, linear, yarn and longrope RoPE "
                                    "scaling",
                                    src->path, key, (int)(type.len > 64 ? 64 : type.len), type.data);
        c->rope_scaling.type = CINFER_ROPE_SCALING_LLAMA3;
        if ((rc = key_f32(src, "rope.scaling.factor", 1, 0, &c->rope_scaling.factor, err)) ||
            (rc = key_f32(src, "rope.scaling.low_freq_factor", 1, 0, &c->rope_scaling.low_freq_factor, err)) ||
            (rc = key_f32(src, "rope.scaling.high_freq_factor", 1, 0, &c->rope_scaling.high_freq_factor, err)) ||
            (rc = key_u32_as_int(src, "rope.scaling.original_context_length", 1, 0,
                                 &c->rope_scaling.original_max_position_embeddings, err)))
            return rc;
    }
#undef TYPE_IS
    /* llama.cpp's own representation wins when present: it is what llama.cpp applies. */
    const struct cinfer_gguf_tensor *t = cinfer_gguf_split_find(src->storage, "rope_freqs.weight");
    if (!t)
        return CINFER_OK;
    if (t->type != CINFER_GGML_F32 || t->n_dims != 1 || t->ne[0] != (uint64_t)c->head_dim / 2)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: tensor rope_freqs.weight should be f32 of %d values (head_dim / 2), found type %u "
                                "with %" PRIu64 " values in dimension 0",
                                src->path, c->head_dim / 2, (unsigned)t->type, t->ne[0]);
    if (c->head_dim / 2 > 512)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: head_dim %d is over 1024", src->path, c->head_dim);
    float divisors[512];
    memcpy(divisors, t->data, (size_t)t->ne[0] * sizeof(float));
    c->rope_scaling.type = CINFER_ROPE_SCALING_NONE;
    return fit_llama3_scaling(src, c, divisors, (int)t->ne[0], err);
}

/* gpt-oss's sliding layers (every other one from layer 0, attention.sliding_window) are
 * read here too, with its activation; nothing else of Gemma applies to it.
 * Gemma 2/3 as llama.cpp runs them: (1 + w) already folded into the norm weights by
 * its converter; embeddings scaled by sqrt(hidden); gelu-tanh MLP; soft-capping from
 * <arch>.attn_logit_softcapping / final_logit_softcapping; attention scaled by
 * 1/sqrt(head_dim) except for the 27B models (46 layers of Gemma 2, 62 of Gemma 3),
 * whose query_pre_attn_scalar is hidden/heads, which llama.cpp picks by layer count;
 * sliding layers every other one (Gemma 2) or five of six (Gemma 3, or
 * <arch>.attention.sliding_window_pattern), with Gemma 3's local RoPE base 10000. */
static int read_gemma_blocks(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    const struct cinfer_arch_traits *traits = src->traits;
    c->activation = traits->activation;
    c->sandwich_norms = traits->sandwich_norms;
    c->norm_unit_offset = 0;
    c->embedding_scale = traits->embedding_scale_sqrt_hidden ? sqrtf((float)c->hidden_size) : 0.0f;
    c->rope_theta_local = traits->default_rope_theta_local;
    memset(c->sliding_layers, 0, sizeof c->sliding_layers);
    c->sliding_window = 0;
    if (traits->sliding != CINFER_SLIDING_ALTERNATE && traits->sliding != CINFER_SLIDING_PATTERN)
        return CINFER_OK; /* llama.cpp runs llama, qwen2 and qwen3 files without a window */
    int large = traits->sandwich_norms && c->num_layers == (traits->sliding == CINFER_SLIDING_ALTERNATE ? 46 : 62);
    c->attention_scale = 1.0f / sqrtf(large ? (float)c->hidden_size / (float)c->num_heads : (float)c->head_dim);
    int pattern, rc;
    if ((rc = key_f32(src, "attn_logit_softcapping", 0, 0.0f, &c->attn_logit_softcap, err)) ||
        (rc = key_f32(src, "final_logit_softcapping", 0, 0.0f, &c->final_logit_softcap, err)) ||
        (rc = key_u32_as_int(src, "attention.sliding_window", 0, traits->default_sliding_window, &c->sliding_window,
                             err)) ||
        (rc = key_u32_as_int(src, "attention.sliding_window_pattern", 0,
                             traits->sliding == CINFER_SLIDING_ALTERNATE ? 2 : 6, &pattern, err)))
        return rc;
    if (pattern < 1 || c->attn_logit_softcap < 0.0f || c->final_logit_softcap < 0.0f)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: %s.attention.sliding_window_pattern %d must be positive and the soft-caps %g, %g "
                                "not negative",
                                src->path, src->arch, pattern, (double)c->attn_logit_softcap,
                                (double)c->final_logit_softcap);
    if (c->num_layers > CINFER_MAX_LAYERS)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: %s.block_count %d is over %d", src->path, src->arch,
                                c->num_layers, CINFER_MAX_LAYERS);
    for (int l = 0; l < c->num_layers; l++)
        if (l % pattern < pattern - 1) /* llama.cpp's set_swa_pattern */
            cinfer_model_set_layer_slides(c, l);
    return CINFER_OK;
}

/* A mixture of experts: <arch>.expert_count (qwen3moe, qwen2moe; llama for Mixtral) and
 * expert_used_count; the experts' width is expert_feed_forward_length (qwen3moe,
 * qwen2moe) or feed_forward_length (Mixtral). A layer is sparse when it holds a router
 * (blk.N.ffn_gate_inp). llama.cpp renormalises the chosen experts' weights for qwen3moe
 * and Mixtral, not for qwen2moe, whose sparse layers also hold a shared expert of
 * expert_shared_feed_forward_length. */
static int read_moe(const struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    int rc;
    c->n_experts = 0;
    memset(c->moe_layers, 0, sizeof c->moe_layers);
    if ((rc = key_u32_as_int(src, "expert_count", 0, 0, &c->n_experts, err)) || c->n_experts == 0)
        return rc;
    int shared = src->traits->moe == CINFER_MOE_QWEN_SHARED;
    if ((rc = key_u32_as_int(src, "expert_used_count", 1, 0, &c->n_experts_used, err)))
        return rc;
    /* llama.cpp's qwen2moe: experts feed_forward_length / expert_used_count wide unless
     * given, the shared expert feed_forward_length */
    int moe_ffn = shared && c->n_experts_used > 0 ? c->intermediate_size / c->n_experts_used : c->intermediate_size;
    if ((rc = key_u32_as_int(src, "expert_feed_forward_length", 0, moe_ffn, &c->moe_intermediate_size, err)) ||
        (shared && (rc = key_u32_as_int(src, "expert_shared_feed_forward_length", 0, c->intermediate_size,
                                        &c->shared_expert_intermediate_size, err))))
        return rc;
    c->moe_norm_topk = !shared; /* llama.cpp's qwen2moe keeps the softmax weights as they are */
    if (c->shared_expert_intermediate_size < 0 || c->shared_expert_intermediate_size > (1 << 22))
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: %s.expert_shared_feed_forward_length is %d, expected 0 to %d", src->path,
                                src->arch, c->shared_expert_intermediate_size, 1 << 22);
    if ((rc = cinfer_moe_config_check(c, src->path, err)))
        return rc;
    int sparse = 0;
    for (int l = 0; l < c->num_layers && l < CINFER_MAX_LAYERS; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
        if (cinfer_gguf_split_find(src->storage, name)) {
            cinfer_model_set_layer_sparse(c, l);
            sparse++;
        }
    }
    if (!sparse)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: %s.expert_count is %d but no layer has a router (blk.N.ffn_gate_inp.weight)",
                                src->path, src->arch, c->n_experts);
    return CINFER_OK;
}

static int read_config(struct gguf_source *src, struct cinfer_model_config *c, struct cinfer_error *err)
{
    struct cinfer_gguf_str arch;
    int rc = cinfer_gguf_get_str(src->g, "general.architecture", &arch, err);
    if (rc)
        return rc;
    const struct cinfer_arch_traits *traits = cinfer_arch_by_gguf(arch.data, arch.len);
    if (!traits) {
        char expected[256];
        cinfer_arch_list(CINFER_ARCH_KEY_GGUF, expected, sizeof expected);
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: general.architecture \"%.*s\" is not supported (expected %s)", src->path,
                                (int)(arch.len > 64 ? 64 : arch.len), arch.data, expected);
    }
    src->traits = traits;
    src->arch = traits->gguf_arch;
    snprintf(c->architecture, sizeof c->architecture, "%s", src->arch);
    if ((rc = key_u32_as_int(src, "embedding_length", 1, 0, &c->hidden_size, err)) ||
        (rc = key_u32_as_int(src, "feed_forward_length", 1, 0, &c->intermediate_size, err)) ||
        (rc = key_u32_as_int(src, "block_count", 1, 0, &c->num_layers, err)) ||
        (rc = key_u32_as_int(src, "attention.head_count", 1, 0, &c->num_heads, err)) ||
        (rc = key_u32_as_int(src, "attention.head_count_kv", 0, c->num_heads, &c->num_kv_heads, err)) ||
        (rc = key_u32_as_int(src, "context_length", 0, 2048, &c->max_position_embeddings, err)) ||
        (rc = key_f32(src, "attention.layer_norm_rms_epsilon", 1, 0, &c->rms_norm_eps, err)) ||
        (rc = key_f32(src, "rope.freq_base", 0, 10000.0f, &c->rope_theta, err)) || (rc = read_vocab_size(src, c, err)))
        return rc;
    if (c->num_heads <= 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: %s.attention.head_count is 0", src->path, src->arch);
    int default_head_dim = c->hidden_size / c->num_heads;
    if ((rc = key_u32_as_int(src, "attention.key_length", 0, default_head_dim, &c->head_dim, err)))
        return rc;
    int value_length, rope_dims;
    if ((rc = key_u32_as_int(src, "attention.value_length", 0, c->head_dim, &value_length, err)) ||
        (rc = key_u32_as_int(src, "rope.dimension_count", 0, c->head_dim, &rope_dims, err)))
        return rc;
    if (value_length != c->head_dim || rope_dims > c->head_dim)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: key_length %d, value_length %d and rope.dimension_count %d: cinfer needs the "
                                "first two equal and the third no larger",
                                src->path, c->head_dim, value_length, rope_dims);
    c->rotary_dim = rope_dims; /* fewer: partial rotary (Phi-4-mini) */
    c->bos_token_id = -1;
    if ((rc = read_special_ids(src, c, err)))
        return rc;
    c->rope_interleaved = traits->gguf_permuted_qk;
    c->attention_bias = traits->attention_bias;
    c->qk_norm = traits->qk_norm;
    c->fused_qkv = traits->fused_qkv;
    c->fused_gate_up = traits->fused_gate_up;
    if ((rc = read_gemma_blocks(src, c, err)) || (rc = cinfer_model_config_check(c, src->path, err)) ||
        (rc = read_moe(src, c, err)))
        return rc;
    if ((rc = cinfer_model_config_check(c, src->path, err)) || (rc = read_rope_scaling(src, c, err)))
        return rc;
    /* gpt-oss: biases on wo, the router and the experts, sinks, and the clamped SwiGLU with
     * the constants llama.cpp (and transformers' GptOssExperts) hold fixed */
    c->attn_output_bias = traits->attn_output_bias;
    c->attn_sinks = traits->attn_sinks;
    if (traits->moe == CINFER_MOE_GPT_OSS) {
        c->moe_biases = c->n_experts > 0;
        c->swiglu_alpha = 1.702f;
        c->swiglu_limit = 7.0f;
    }
    return cinfer_model_config_check(c, src->path, err); /* again, for the scaling found */
}

/* ---- tensors ---------------------------------------------------------------- */

static void describe(const struct gguf_source *src, const struct cinfer_gguf_tensor *t, const char *name,
                     struct cinfer_stored_tensor *out)
{
    memset(out, 0, sizeof *out);
    out->file = cinfer_gguf_split_file_of(src->storage, t);
    out->name = name;
    const struct cinfer_ggml_type_info *info = cinfer_ggml_type_info(t->type);
    out->dtype_name = info ? info->name : "unknown";
    out->supported = 1;
    switch (t->type) {
    case CINFER_GGML_F32: out->dtype = CINFER_DTYPE_F32; break;
    case CINFER_GGML_F16: out->dtype = CINFER_DTYPE_F16; break;
    case CINFER_GGML_BF16: out->dtype = CINFER_DTYPE_BF16; break;
    case CINFER_GGML_Q8_0: out->dtype = CINFER_DTYPE_Q8_0; break;
    case CINFER_GGML_Q4_0: out->dtype = CINFER_DTYPE_Q4_0; break;
    case CINFER_GGML_Q4_1: out->dtype = CINFER_DTYPE_Q4_1; break;
    case CINFER_GGML_Q5_0: out->dtype = CINFER_DTYPE_Q5_0; break;
    case CINFER_GGML_Q5_1: out->dtype = CINFER_DTYPE_Q5_1; break;
    case CINFER_GGML_Q2_K: out->dtype = CINFER_DTYPE_Q2_K; break;
    case CINFER_GGML_Q3_K: out->dtype = CINFER_DTYPE_Q3_K; break;
    case CINFER_GGML_Q4_K: out->dtype = CINFER_DTYPE_Q4_K; break;
    case CINFER_GGML_Q5_K: out->dtype = CINFER_DTYPE_Q5_K; break;
    case CINFER_GGML_Q6_K: out->dtype = CINFER_DTYPE_Q6_K; break;
    case CINFER_GGML_IQ4_NL: out->dtype = CINFER_DTYPE_IQ4_NL; break;
    case CINFER_GGML_IQ4_XS: out->dtype = CINFER_DTYPE_IQ4_XS; break;
    case CINFER_GGML_MXFP4: out->dtype = CINFER_DTYPE_MXFP4; break;
    default: out->supported = 0; break;
    }
    out->ggml_order = 1;
    out->n_dims = (int)t->n_dims;
    for (uint32_t d = 0; d < t->n_dims; d++)
        out->dims[d] = (int64_t)t->ne[d];
    out->data = t->data;
    out->nbytes = t->nbytes;
}

static int bind(const struct gguf_source *src, const char *name, int vector, enum cinfer_layer_dim rows_dim,
                enum cinfer_layer_dim cols_dim, int64_t rows, int64_t cols, struct cinfer_weight *w,
                struct cinfer_error *err)
{
    const struct cinfer_gguf_tensor *t = cinfer_gguf_split_find(src->storage, name);
    if (!t)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: missing tensor %s%s", src->path, name,
                                src->storage->n_parts ? " (in every part of the split model)" : "");
    struct cinfer_stored_tensor st;
    describe(src, t, name, &st);
    char from[256];
    if (vector)
        snprintf(from, sizeof from, "GGUF %s", src->dim_names[cols_dim]);
    else
        snprintf(from, sizeof from, "GGUF %s/%s", src->dim_names[rows_dim], src->dim_names[cols_dim]);
    struct cinfer_weight_expect want = {vector, rows, cols, from};
    return cinfer_bind_weight(src->storage, &st, &want, w, err);
}

/* One part (gate, up or down) of every expert of layer l: the merged 3-D tensor
 * blk.l.<merged> (ggml ne = [cols, rows, n_experts]), viewed as n_experts matrices one
 * after another in the mapping; else, as older Mixtral files store them, one 2-D
 * tensor per expert, blk.l.<single>.E. */
static int bind_expert_part(const struct gguf_source *src, struct cinfer_model *m, int l, const char *merged,
                            const char *single, enum cinfer_layer_dim rows_dim, enum cinfer_layer_dim cols_dim,
                            size_t part_offset, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    struct cinfer_layer_weights *layer = &m->layers[l];
    int64_t rows = cinfer_layer_dim_size(c, rows_dim), cols = cinfer_layer_dim_size(c, cols_dim);
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s", l, merged);
    const struct cinfer_gguf_tensor *t = cinfer_gguf_split_find(src->storage, name);
    if (!t) {
        for (int e = 0; e < c->n_experts; e++) {
            char one[128];
            snprintf(one, sizeof one, "blk.%d.%s.%d.weight", l, single, e);
            if (!cinfer_gguf_split_find(src->storage, one))
                return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: layer %d has a router but neither %s nor %s",
                                        src->path, l, name, one);
            int rc = bind(src, one, 0, rows_dim, cols_dim, rows, cols,
                          (struct cinfer_weight *)((char *)&layer->experts[e] + part_offset), err);
            if (rc)
                return rc;
        }
        return CINFER_OK;
    }
    struct cinfer_stored_tensor st;
    describe(src, t, name, &st);
    if (st.n_dims != 3 || st.dims[0] != cols || st.dims[1] != rows || st.dims[2] != c->n_experts)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: tensor %s has %d dimensions [%" PRId64 ", %" PRId64 ", %" PRId64
                                "] (ggml order), expected [%" PRId64 ", %" PRId64
                                ", %d] from GGUF %s/%s/%s.expert_count",
                                src->path, name, st.n_dims, st.dims[0], st.n_dims > 1 ? st.dims[1] : 0,
                                st.n_dims > 2 ? st.dims[2] : 0, cols, rows, c->n_experts, src->dim_names[cols_dim],
                                src->dim_names[rows_dim], src->arch);
    /* the experts' rows end to end: one (n_experts * rows, cols) matrix */
    st.n_dims = 2;
    st.dims[1] = rows * c->n_experts;
    char from[256];
    snprintf(from, sizeof from, "GGUF %s.expert_count*%s/%s", src->arch, src->dim_names[rows_dim],
             src->dim_names[cols_dim]);
    struct cinfer_weight_expect want = {0, rows * c->n_experts, cols, from};
    struct cinfer_weight all;
    int rc = cinfer_bind_weight(src->storage, &st, &want, &all, err);
    if (rc)
        return rc;
    for (int e = 0; e < c->n_experts; e++) {
        struct cinfer_weight *w = (struct cinfer_weight *)((char *)&layer->experts[e] + part_offset);
        *w = all;
        w->rows = rows;
        w->data = (const uint8_t *)all.data + (size_t)e * (size_t)rows * all.row_bytes;
    }
    return CINFER_OK;
}

/* qwen2moe's shared expert: blk.l.ffn_{gate,up,down}_shexp and its gate
 * blk.l.ffn_gate_inp_shexp, which llama.cpp's converter writes as ne [hidden, 1] (a file
 * may hold it 1-D, [hidden], as llama.cpp also reads it). */
static int bind_shared_expert(const struct gguf_source *src, struct cinfer_model *m, int l, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    struct cinfer_layer_weights *layer = &m->layers[l];
    int64_t ffn = c->shared_expert_intermediate_size, hidden = c->hidden_size;
    char name[128];
    static const char *const parts[3] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
    struct cinfer_weight *dst[3] = {&layer->shared_expert.gate, &layer->shared_expert.up, &layer->shared_expert.down};
    for (int p = 0; p < 3; p++) {
        int down = p == 2;
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[p]);
        int rc = bind(src, name, 0, down ? DIM_HIDDEN : DIM_SHARED_FFN, down ? DIM_SHARED_FFN : DIM_HIDDEN,
                      down ? hidden : ffn, down ? ffn : hidden, dst[p], err);
        if (rc)
            return rc;
    }
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", l);
    const struct cinfer_gguf_tensor *t = cinfer_gguf_split_find(src->storage, name);
    int one_dim = t && t->n_dims == 1;
    return bind(src, name, one_dim, DIM_ONE, DIM_HIDDEN, 1, hidden, &layer->shared_expert_gate, err);
}

/* One bias (gate, up or down) of every expert of layer l (gpt-oss): blk.l.<merged>, ggml
 * ne = [n, n_experts], viewed as n_experts vectors of n values, each widened to f32. */
static int bind_expert_bias(const struct gguf_source *src, struct cinfer_model *m, int l, const char *merged,
                            enum cinfer_layer_dim dim, size_t part_offset, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    int64_t n = cinfer_layer_dim_size(c, dim);
    char name[128];
    snprintf(name, sizeof name, "blk.%d.%s", l, merged);
    struct cinfer_weight all;
    int rc = bind(src, name, 0, DIM_EXPERTS, dim, c->n_experts, n, &all, err);
    if (rc)
        return rc;
    for (int e = 0; e < c->n_experts; e++) {
        struct cinfer_weight *w = (struct cinfer_weight *)((char *)&m->layers[l].experts[e] + part_offset);
        float *v = malloc((size_t)n * sizeof *v); /* (n) */
        if (!v)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory widening tensor %s", src->path, name);
        cinfer_kernel_dequantize_row((enum cinfer_kernel_wtype)all.dtype,
                                     (const uint8_t *)all.data + (size_t)e * all.row_bytes, n, v);
        if ((rc = cinfer_storage_own(src->storage, v, err)))
            return rc;
        *w = (struct cinfer_weight){CINFER_DTYPE_F32, 1, n, v, (size_t)n * sizeof(float)};
    }
    return CINFER_OK;
}

static int bind_experts(const struct gguf_source *src, struct cinfer_model *m, int l, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    struct cinfer_layer_weights *layer = &m->layers[l];
    char name[128];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
    int rc = bind(src, name, 0, DIM_EXPERTS, DIM_HIDDEN, c->n_experts, c->hidden_size, &layer->router, err);
    if (rc || (rc = cinfer_layer_experts_alloc(src->storage, c, layer, err)) ||
        (rc = bind_expert_part(src, m, l, "ffn_gate_exps.weight", "ffn_gate", DIM_MOE_FFN, DIM_HIDDEN,
                               offsetof(struct cinfer_expert_weights, gate), err)) ||
        (rc = bind_expert_part(src, m, l, "ffn_up_exps.weight", "ffn_up", DIM_MOE_FFN, DIM_HIDDEN,
                               offsetof(struct cinfer_expert_weights, up), err)) ||
        (rc = bind_expert_part(src, m, l, "ffn_down_exps.weight", "ffn_down", DIM_HIDDEN, DIM_MOE_FFN,
                               offsetof(struct cinfer_expert_weights, down), err)))
        return rc;
    if (c->shared_expert_intermediate_size > 0 && (rc = bind_shared_expert(src, m, l, err)))
        return rc;
    if (!c->moe_biases)
        return CINFER_OK;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.bias", l);
    if ((rc = bind(src, name, 1, DIM_ONE, DIM_EXPERTS, 1, c->n_experts, &layer->router_bias, err)) ||
        (rc = bind_expert_bias(src, m, l, "ffn_gate_exps.bias", DIM_MOE_FFN,
                               offsetof(struct cinfer_expert_weights, gate_bias), err)) ||
        (rc = bind_expert_bias(src, m, l, "ffn_up_exps.bias", DIM_MOE_FFN,
                               offsetof(struct cinfer_expert_weights, up_bias), err)))
        return rc;
    return bind_expert_bias(src, m, l, "ffn_down_exps.bias", DIM_HIDDEN,
                            offsetof(struct cinfer_expert_weights, down_bias), err);
}

static int bind_all(const struct gguf_source *src, struct cinfer_model *m, struct cinfer_error *err)
{
    struct cinfer_model_config *c = &m->config;
    int64_t vocab = c->vocab_size, hidden = c->hidden_size;
    int rc = bind(src, "token_embd.weight", 0, DIM_COUNT, DIM_HIDDEN, vocab, hidden, &m->tok_embeddings, err);
    for (int l = 0; !rc && l < c->num_layers; l++)
        for (size_t k = 0; !rc && k < cinfer_layer_weight_spec_count; k++) {
            const struct cinfer_layer_weight_spec *spec = &cinfer_layer_weight_specs[k];
            if (!cinfer_layer_weight_in_layer(spec, c, l))
                continue;
            char name[128];
            int own_ffn_norm = spec->offset == offsetof(struct cinfer_layer_weights, ffn_norm) &&
                               src->traits->gguf_ffn_norm; /* gpt-oss: post_attention_norm */
            snprintf(name, sizeof name, "blk.%d.%s", l, own_ffn_norm ? src->traits->gguf_ffn_norm : spec->gguf_name);
            struct cinfer_weight *w = (struct cinfer_weight *)((char *)&m->layers[l] + spec->offset);
            rc = bind(src, name, spec->rows == DIM_ONE, spec->rows, spec->cols, cinfer_layer_dim_size(c, spec->rows),
                      cinfer_layer_dim_size(c, spec->cols), w, err);
        }
    for (int l = 0; !rc && l < c->num_layers; l++)
        for (size_t k = 0; !rc && k < cinfer_fused_weight_spec_count; k++) {
            const struct cinfer_fused_weight_spec *spec = &cinfer_fused_weight_specs[k];
            if (!spec->present(c))
                continue;
            char name[128];
            snprintf(name, sizeof name, "blk.%d.%s", l, spec->gguf_name);
            struct cinfer_weight fused;
            rc = bind(src, name, 0, spec->rows, DIM_HIDDEN, cinfer_layer_dim_size(c, spec->rows), hidden, &fused, err);
            if (!rc)
                cinfer_fused_weight_split(spec, c, &fused, &m->layers[l]);
        }
    for (int l = 0; !rc && l < c->num_layers; l++)
        if (cinfer_model_layer_sparse(c, l))
            rc = bind_experts(src, m, l, err);
    if (!rc)
        rc = bind(src, "output_norm.weight", 1, DIM_ONE, DIM_HIDDEN, 1, hidden, &m->output_norm, err);
    if (rc)
        return rc;
    /* llama.cpp writes no output.weight for tied embeddings. */
    if (!cinfer_gguf_split_find(src->storage, "output.weight")) {
        c->tie_word_embeddings = 1;
        m->lm_head = m->tok_embeddings;
        return CINFER_OK;
    }
    c->tie_word_embeddings = 0;
    return bind(src, "output.weight", 0, DIM_COUNT, DIM_HIDDEN, vocab, hidden, &m->lm_head, err);
}

int cinfer_model_load_gguf(const char *path, struct cinfer_model *m, struct cinfer_error *err)
{
    struct cinfer_model_storage *storage = m->storage;
    int rc = cinfer_gguf_open(path, &storage->gguf, err);
    if (rc || (rc = cinfer_gguf_split_open(path, storage, err)))
        return rc;
    struct gguf_source src = {.g = storage->gguf, .path = path, .storage = storage};
    if ((rc = read_config(&src, &m->config, err)))
        return rc;
    const char *a = src.arch;
    snprintf(src.dim_names[DIM_ONE], sizeof src.dim_names[0], "1");
    snprintf(src.dim_names[DIM_HIDDEN], sizeof src.dim_names[0], "%s.embedding_length", a);
    snprintf(src.dim_names[DIM_Q], sizeof src.dim_names[0], "%s.attention.head_count*key_length", a);
    snprintf(src.dim_names[DIM_KV], sizeof src.dim_names[0], "%s.attention.head_count_kv*key_length", a);
    snprintf(src.dim_names[DIM_FFN], sizeof src.dim_names[0], "%s.feed_forward_length", a);
    snprintf(src.dim_names[DIM_HEAD], sizeof src.dim_names[0], "%s.attention.key_length", a);
    snprintf(src.dim_names[DIM_QKV], sizeof src.dim_names[0], "(%s.attention.head_count+2*head_count_kv)*key_length",
             a);
    snprintf(src.dim_names[DIM_FFN2], sizeof src.dim_names[0], "2*%s.feed_forward_length", a);
    snprintf(src.dim_names[DIM_EXPERTS], sizeof src.dim_names[0], "%s.expert_count", a);
    snprintf(src.dim_names[DIM_HEADS], sizeof src.dim_names[0], "%s.attention.head_count", a);
    char key[128];
    uint32_t width;
    struct cinfer_error ignored;
    snprintf(key, sizeof key, "%s.expert_feed_forward_length", a);
    int own_width = cinfer_gguf_get_u32(src.g, key, &width, &ignored) == CINFER_OK; /* else Mixtral's */
    snprintf(src.dim_names[DIM_MOE_FFN], sizeof src.dim_names[0], "%s.%s", a,
             own_width ? "expert_feed_forward_length" : "feed_forward_length");
    snprintf(src.dim_names[DIM_SHARED_FFN], sizeof src.dim_names[0], "%s.expert_shared_feed_forward_length", a);
    snprintf(src.dim_names[DIM_COUNT], sizeof src.dim_names[0], "%s.vocab_size", a);
    m->layers = calloc((size_t)m->config.num_layers, sizeof *m->layers);
    if (!m->layers)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory for %d layers", path, m->config.num_layers);
    return bind_all(&src, m, err);
}
