/* cinfer_model_load: picks the format (a folder is Hugging Face, a file is GGUF), lets
 * that loader fill the model, checks the result, pre-faults the weights (with a progress
 * bar on a terminal) and logs one summary line. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model_load_internal.h"
#include "model/rope_scaling.h"
#include "util/mmap_file.h"
#include "util/log.h"
#include "util/progress.h"

#define LAYER_FIELD(f) offsetof(struct cinfer_layer_weights, f)

/* In a sandwich_norms family (Gemma 2/3) HF's post_attention_layernorm is the norm on
 * the attention output and pre_feedforward_layernorm the MLP's input norm; in the Llama
 * family post_attention_layernorm is the MLP's input norm. GGUF names them apart. */
const struct cinfer_layer_weight_spec cinfer_layer_weight_specs[] = {
    {"input_layernorm.weight", NULL, "attn_norm.weight", LAYER_FIELD(attn_norm), DIM_ONE, DIM_HIDDEN, PRESENT_ALWAYS},
    {"self_attn.q_proj.weight", NULL, "attn_q.weight", LAYER_FIELD(wq), DIM_Q, DIM_HIDDEN, PRESENT_UNLESS_FUSED_QKV},
    {"self_attn.k_proj.weight", NULL, "attn_k.weight", LAYER_FIELD(wk), DIM_KV, DIM_HIDDEN, PRESENT_UNLESS_FUSED_QKV},
    {"self_attn.v_proj.weight", NULL, "attn_v.weight", LAYER_FIELD(wv), DIM_KV, DIM_HIDDEN, PRESENT_UNLESS_FUSED_QKV},
    {"self_attn.o_proj.weight", NULL, "attn_output.weight", LAYER_FIELD(wo), DIM_HIDDEN, DIM_Q, PRESENT_ALWAYS},
    {"self_attn.q_proj.bias", NULL, "attn_q.bias", LAYER_FIELD(bq), DIM_ONE, DIM_Q, PRESENT_IF_BIAS},
    {"self_attn.k_proj.bias", NULL, "attn_k.bias", LAYER_FIELD(bk), DIM_ONE, DIM_KV, PRESENT_IF_BIAS},
    {"self_attn.v_proj.bias", NULL, "attn_v.bias", LAYER_FIELD(bv), DIM_ONE, DIM_KV, PRESENT_IF_BIAS},
    {"self_attn.q_norm.weight", NULL, "attn_q_norm.weight", LAYER_FIELD(q_norm), DIM_ONE, DIM_HEAD,
     PRESENT_IF_QK_NORM},
    {"self_attn.k_norm.weight", NULL, "attn_k_norm.weight", LAYER_FIELD(k_norm), DIM_ONE, DIM_HEAD,
     PRESENT_IF_QK_NORM},
    {NULL, "post_attention_layernorm.weight", "post_attention_norm.weight", LAYER_FIELD(post_attn_norm), DIM_ONE,
     DIM_HIDDEN, PRESENT_IF_SANDWICH},
    {"post_attention_layernorm.weight", "pre_feedforward_layernorm.weight", "ffn_norm.weight", LAYER_FIELD(ffn_norm),
     DIM_ONE, DIM_HIDDEN, PRESENT_ALWAYS},
    {"mlp.gate_proj.weight", NULL, "ffn_gate.weight", LAYER_FIELD(w_gate), DIM_FFN, DIM_HIDDEN,
     PRESENT_UNLESS_FUSED_GATE_UP},
    {"mlp.up_proj.weight", NULL, "ffn_up.weight", LAYER_FIELD(w_up), DIM_FFN, DIM_HIDDEN, PRESENT_UNLESS_FUSED_GATE_UP},
    {"mlp.down_proj.weight", NULL, "ffn_down.weight", LAYER_FIELD(w_down), DIM_HIDDEN, DIM_FFN, PRESENT_ALWAYS},
    {NULL, "post_feedforward_layernorm.weight", "post_ffw_norm.weight", LAYER_FIELD(post_ffn_norm), DIM_ONE,
     DIM_HIDDEN, PRESENT_IF_SANDWICH},
    /* gpt-oss; its sinks are a bare parameter in HF, a .weight in llama.cpp's files */
    {"self_attn.o_proj.bias", NULL, "attn_output.bias", LAYER_FIELD(bo), DIM_ONE, DIM_HIDDEN,
     PRESENT_IF_OUTPUT_BIAS},
    {"self_attn.sinks", NULL, "attn_sinks.weight", LAYER_FIELD(sinks), DIM_ONE, DIM_HEADS, PRESENT_IF_SINKS},
};
const size_t cinfer_layer_weight_spec_count = sizeof cinfer_layer_weight_specs / sizeof cinfer_layer_weight_specs[0];

static int has_fused_qkv(const struct cinfer_model_config *c)
{
    return c->fused_qkv;
}

static int has_fused_gate_up(const struct cinfer_model_config *c)
{
    return c->fused_gate_up;
}

/* llama.cpp's phi3 files keep the fused gate/up matrix under ffn_up. */
const struct cinfer_fused_weight_spec cinfer_fused_weight_specs[] = {
    {"self_attn.qkv_proj.weight", "attn_qkv.weight", DIM_QKV, has_fused_qkv},
    {"mlp.gate_up_proj.weight", "ffn_up.weight", DIM_FFN2, has_fused_gate_up},
};
const size_t cinfer_fused_weight_spec_count = sizeof cinfer_fused_weight_specs / sizeof cinfer_fused_weight_specs[0];

/* Rows [first, first + count) of w, viewing the same bytes. */
static struct cinfer_weight rows_of(const struct cinfer_weight *w, int64_t first, int64_t count)
{
    struct cinfer_weight part = *w;
    part.rows = count;
    part.data = (const uint8_t *)w->data + (size_t)first * w->row_bytes;
    return part;
}

void cinfer_fused_weight_split(const struct cinfer_fused_weight_spec *spec, const struct cinfer_model_config *c,
                               const struct cinfer_weight *fused, struct cinfer_layer_weights *layer)
{
    if (spec->rows == DIM_QKV) {
        int64_t q = (int64_t)c->num_heads * c->head_dim, kv = (int64_t)c->num_kv_heads * c->head_dim;
        layer->wq = rows_of(fused, 0, q);
        layer->wk = rows_of(fused, q, kv);
        layer->wv = rows_of(fused, q + kv, kv);
    } else {
        layer->w_gate = rows_of(fused, 0, c->intermediate_size);
        layer->w_up = rows_of(fused, c->intermediate_size, c->intermediate_size);
    }
}

int cinfer_layer_weight_present(const struct cinfer_layer_weight_spec *spec, const struct cinfer_model_config *c)
{
    switch (spec->presence) {
    case PRESENT_ALWAYS: return 1;
    case PRESENT_IF_BIAS: return c->attention_bias;
    case PRESENT_IF_QK_NORM: return c->qk_norm;
    case PRESENT_IF_SANDWICH: return c->sandwich_norms;
    case PRESENT_UNLESS_FUSED_QKV: return !c->fused_qkv;
    case PRESENT_UNLESS_FUSED_GATE_UP: return !c->fused_gate_up;
    case PRESENT_IF_OUTPUT_BIAS: return c->attn_output_bias;
    case PRESENT_IF_SINKS: return c->attn_sinks;
    }
    return 0;
}

int cinfer_layer_weight_in_layer(const struct cinfer_layer_weight_spec *spec, const struct cinfer_model_config *c,
                                 int l)
{
    int mlp = spec->offset == offsetof(struct cinfer_layer_weights, w_gate) ||
              spec->offset == offsetof(struct cinfer_layer_weights, w_up) ||
              spec->offset == offsetof(struct cinfer_layer_weights, w_down);
    return cinfer_layer_weight_present(spec, c) && !(mlp && cinfer_model_layer_sparse(c, l));
}

int cinfer_layer_experts_alloc(struct cinfer_model_storage *s, const struct cinfer_model_config *c,
                               struct cinfer_layer_weights *layer, struct cinfer_error *err)
{
    layer->experts = calloc((size_t)c->n_experts, sizeof *layer->experts);
    if (!layer->experts)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "model loader: out of memory for %d experts", c->n_experts);
    return cinfer_storage_own(s, layer->experts, err);
}

int cinfer_moe_config_check(const struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    if (c->n_experts == 0)
        return CINFER_OK;
    /* bounds far past any published model (Qwen3-MoE: 128 experts, 8 used) */
    if (c->n_experts < 1 || c->n_experts > 4096 || c->n_experts_used < 1 || c->n_experts_used > c->n_experts ||
        c->n_experts_used > 64)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: %d experts with %d used per token; expected 1 <= used <= experts <= 4096 and "
                                "used <= 64",
                                source, c->n_experts, c->n_experts_used);
    if (c->moe_intermediate_size <= 0 || c->moe_intermediate_size > (1 << 22))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: expert intermediate size %d, expected 1 to %d", source,
                                c->moe_intermediate_size, 1 << 22);
    return CINFER_OK;
}

const char *cinfer_layer_weight_hf_name(const struct cinfer_layer_weight_spec *spec,
                                        const struct cinfer_model_config *c)
{
    return c->sandwich_norms && spec->hf_name_sandwich ? spec->hf_name_sandwich : spec->hf_name;
}

int64_t cinfer_layer_dim_size(const struct cinfer_model_config *c, enum cinfer_layer_dim d)
{
    switch (d) {
    case DIM_ONE: return 1;
    case DIM_HIDDEN: return c->hidden_size;
    case DIM_Q: return (int64_t)c->num_heads * c->head_dim;
    case DIM_KV: return (int64_t)c->num_kv_heads * c->head_dim;
    case DIM_FFN: return c->intermediate_size;
    case DIM_HEAD: return c->head_dim;
    case DIM_QKV: return (int64_t)(c->num_heads + 2 * c->num_kv_heads) * c->head_dim;
    case DIM_FFN2: return 2 * (int64_t)c->intermediate_size;
    case DIM_EXPERTS: return c->n_experts;
    case DIM_MOE_FFN: return c->moe_intermediate_size;
    case DIM_SHARED_FFN: return c->shared_expert_intermediate_size;
    case DIM_HEADS: return c->num_heads;
    case DIM_COUNT: break;
    }
    return 0;
}

int cinfer_model_config_check(const struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    const struct {
        const char *name;
        int value;
    } positive[] = {
        {"vocab size", c->vocab_size},         {"hidden size", c->hidden_size},
        {"intermediate size", c->intermediate_size}, {"layer count", c->num_layers},
        {"attention head count", c->num_heads}, {"key-value head count", c->num_kv_heads},
        {"head dimension", c->head_dim},
    };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].value <= 0)
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: %s is %d, expected a positive number", source,
                                    positive[i].name, positive[i].value);
    /* Bounds far past any real model, so a corrupt count cannot ask for absurd allocations. */
    if (c->num_layers > CINFER_MAX_LAYERS || c->vocab_size > (1 << 24) || c->hidden_size > (1 << 20) ||
        c->intermediate_size > (1 << 22) || c->num_heads > 4096 || c->head_dim > 1024)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: implausible sizes: %d layers, vocab %d, hidden %d, intermediate %d, %d heads, "
                                "head dimension %d",
                                source, c->num_layers, c->vocab_size, c->hidden_size, c->intermediate_size,
                                c->num_heads, c->head_dim);
    if (c->num_heads % c->num_kv_heads != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: %d attention heads cannot be shared evenly by %d key-value heads", source,
                                c->num_heads, c->num_kv_heads);
    if (c->head_dim % 2 != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: head dimension %d is odd; RoPE rotates pairs", source,
                                c->head_dim);
    if (!(c->rope_theta > 0.0f) || !(c->rms_norm_eps >= 0.0f))
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: rope_theta %g and rms_norm_eps %g must be positive",
                                source, (double)c->rope_theta, (double)c->rms_norm_eps);
    int rotary_dim = cinfer_model_rotary_dim(c);
    int partial = rotary_dim < c->head_dim;
    if (rotary_dim % 2 || rotary_dim < 2 || rotary_dim > c->head_dim || (partial && c->rope_interleaved))
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: RoPE turns %d of each head's %d dims; expected an even number from 2 to the "
                                "head's dims (and all of them where pairs interleave)",
                                source, rotary_dim, c->head_dim);
    int rc = cinfer_rope_scaling_check(c, source, err);
    if (rc)
        return rc;
    if (c->sliding_window < 0 || c->attention_scale < 0.0f || c->embedding_scale < 0.0f)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s: sliding window %d, attention scale %g and embedding scale %g must not be negative",
                                source, c->sliding_window, (double)c->attention_scale, (double)c->embedding_scale);
    if (c->bos_token_id < -1 || c->bos_token_id >= c->vocab_size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: bos token id %d is outside the vocabulary of %d", source,
                                c->bos_token_id, c->vocab_size);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] < 0 || c->eos_token_ids[i] >= c->vocab_size)
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: eos token id %d is outside the vocabulary of %d",
                                    source, c->eos_token_ids[i], c->vocab_size);
    return CINFER_OK;
}

/* ---- pre-faulting -------------------------------------------------------- */

#define PAGE_BYTES 4096u
#define PROGRESS_STEP_BYTES (4u << 20)
#define PROGRESS_MIN_BYTES (64ull << 20) /* smaller models load before a bar is worth drawing */

struct touch_state {
    struct cinfer_progress progress;
    unsigned sum; /* where the (volatile) page reads land */
};

static uint64_t weight_bytes(const struct cinfer_weight *w)
{
    return w->data ? (uint64_t)w->rows * w->row_bytes : 0;
}

static void touch_weight(struct touch_state *t, const struct cinfer_weight *w)
{
    const volatile unsigned char *p = w->data;
    uint64_t n = weight_bytes(w);
    for (uint64_t done = 0; done < n;) {
        uint64_t step = n - done < PROGRESS_STEP_BYTES ? n - done : PROGRESS_STEP_BYTES;
        for (uint64_t off = 0; off < step; off += PAGE_BYTES)
            t->sum += p[done + off];
        done += step;
        cinfer_progress_advance(&t->progress, step);
    }
}

static void for_each_weight(const struct cinfer_model *m, void (*fn)(struct touch_state *, const struct cinfer_weight *),
                            struct touch_state *t)
{
    fn(t, &m->tok_embeddings);
    for (int l = 0; l < m->config.num_layers; l++) {
        for (size_t k = 0; k < cinfer_layer_weight_spec_count; k++)
            fn(t, (const struct cinfer_weight *)((const char *)&m->layers[l] + cinfer_layer_weight_specs[k].offset));
        fn(t, &m->layers[l].router);
        fn(t, &m->layers[l].router_bias);
        for (int e = 0; m->layers[l].experts && e < m->config.n_experts; e++) {
            fn(t, &m->layers[l].experts[e].gate);
            fn(t, &m->layers[l].experts[e].up);
            fn(t, &m->layers[l].experts[e].down);
            fn(t, &m->layers[l].experts[e].gate_bias);
            fn(t, &m->layers[l].experts[e].up_bias);
            fn(t, &m->layers[l].experts[e].down_bias);
        }
        fn(t, &m->layers[l].shared_expert.gate);
        fn(t, &m->layers[l].shared_expert.up);
        fn(t, &m->layers[l].shared_expert.down);
        fn(t, &m->layers[l].shared_expert_gate);
    }
    fn(t, &m->output_norm);
    if (m->lm_head.data != m->tok_embeddings.data)
        fn(t, &m->lm_head);
}

static void add_bytes(struct touch_state *t, const struct cinfer_weight *w)
{
    t->progress.total_bytes += weight_bytes(w);
}

static uint64_t count_params(const struct cinfer_model *m)
{
    uint64_t n = (uint64_t)m->tok_embeddings.rows * m->tok_embeddings.cols;
    for (int l = 0; l < m->config.num_layers; l++)
        for (size_t k = 0; k < cinfer_layer_weight_spec_count; k++) {
            const struct cinfer_weight *w =
                (const struct cinfer_weight *)((const char *)&m->layers[l] + cinfer_layer_weight_specs[k].offset);
            if (w->data)
                n += (uint64_t)w->rows * w->cols;
        }
    for (int l = 0; l < m->config.num_layers; l++) {
        const struct cinfer_layer_weights *w = &m->layers[l];
        if (w->experts)
            n += (uint64_t)w->router.rows * w->router.cols +
                 (uint64_t)m->config.n_experts * 3 * w->experts[0].gate.rows * w->experts[0].gate.cols;
        if (w->shared_expert.gate.data)
            n += 3 * (uint64_t)w->shared_expert.gate.rows * w->shared_expert.gate.cols +
                 (uint64_t)w->shared_expert_gate.cols;
    }
    n += (uint64_t)m->output_norm.cols;
    if (m->lm_head.data != m->tok_embeddings.data)
        n += (uint64_t)m->lm_head.rows * m->lm_head.cols;
    return n;
}

static const char *base_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = memrchr(path, '/', n > 0 ? n - 1 : 0);
    return slash ? slash + 1 : path;
}

/* ---- load and free ------------------------------------------------------- */

int cinfer_model_load(const char *path, const struct cinfer_model_load_options *opts, struct cinfer_model **out,
                      struct cinfer_error *err)
{
    *out = NULL;
    int64_t start_ms = cinfer_monotonic_ms();
    struct stat st;
    if (stat(path, &st) != 0)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND,
                                "%s: no such model: expected a Hugging Face model folder or a .gguf file", path);
    size_t len = strlen(path);
    if (!S_ISDIR(st.st_mode) && len >= 12 && !strcmp(path + len - 12, ".safetensors"))
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "%s: a safetensors file alone has no configuration; give the model folder that holds "
                                "it and config.json",
                                path);
    struct cinfer_model *m = calloc(1, sizeof *m);
    struct cinfer_model_storage *storage = calloc(1, sizeof *storage);
    if (!m || !storage || !(m->path = strdup(path))) {
        free(storage);
        if (m)
            free(m->path);
        free(m);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory loading the model", path);
    }
    m->storage = storage;
    m->config.bos_token_id = -1;
    int rc = S_ISDIR(st.st_mode) ? cinfer_model_load_hf(path, m, err) : cinfer_model_load_gguf(path, m, err);
    if (rc) {
        cinfer_model_free(&m);
        return rc;
    }
    m->weight_bytes = (size_t)storage->stored_bytes;
    /* both loaders bind matrices as views (only vectors are widened into copies), except
     * where a layout had to be rearranged: dropping an owned copy's pages would zero them */
    m->matrices_mapped = !storage->owned_matrices;
    if ((rc = cinfer_model_arrange_partial_rotary(m, err))) {
        cinfer_model_free(&m);
        return rc;
    }
    if (opts && opts->dtype != CINFER_WEIGHT_DTYPE_AUTO) {
        static const enum cinfer_dtype targets[] = {
            [CINFER_WEIGHT_DTYPE_F32] = CINFER_DTYPE_F32,
            [CINFER_WEIGHT_DTYPE_F16] = CINFER_DTYPE_F16,
            [CINFER_WEIGHT_DTYPE_BF16] = CINFER_DTYPE_BF16,
        };
        int converted = 0;
        if ((unsigned)opts->dtype >= sizeof targets / sizeof targets[0])
            rc = cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "model.dtype: unknown value %d", (int)opts->dtype);
        else
            rc = cinfer_model_convert_matrices(m, targets[opts->dtype], &converted, err);
        if (rc) {
            cinfer_model_free(&m);
            return rc;
        }
        if (converted)
            m->matrices_mapped = 0; /* owned copies: dropping their pages would zero them */
    }

    /* Reading one byte per page faults the weights in now rather than during the first
     * forward pass; a bar shows it on a terminal when the model is large enough to wait for.
     * A tensor-parallel rank (no_prefault) reads only its shard, later. */
    struct touch_state touch = {.sum = 0};
    for_each_weight(m, add_bytes, &touch);
    uint64_t total_bytes = touch.progress.total_bytes;
    if (!m->matrices_mapped)
        m->weight_bytes = (size_t)total_bytes; /* converted matrices count at their new size */
    if (!opts || !opts->no_prefault) {
        cinfer_progress_begin(&touch.progress, base_name(path), total_bytes,
                              (!opts || opts->show_progress) && total_bytes >= PROGRESS_MIN_BYTES);
        for_each_weight(m, touch_weight, &touch);
        cinfer_progress_end(&touch.progress);
    }

    const struct cinfer_weight *main_weight = &m->layers[0].wq;
    cinfer_log(CINFER_LOG_SEV_INFO, "loaded %s: %s, %d layers, %.2fM params, %s, %.1f MiB in %lld ms", base_name(path),
            m->config.architecture, m->config.num_layers, (double)count_params(m) / 1e6,
            cinfer_dtype_name(main_weight->dtype), (double)m->weight_bytes / (1024.0 * 1024.0),
            (long long)(cinfer_monotonic_ms() - start_ms));
    *out = m;
    return CINFER_OK;
}

void cinfer_model_drop_stored(const struct cinfer_model *m, const void *data, size_t bytes)
{
    if (m->matrices_mapped && data)
        cinfer_mapped_bytes_drop(data, bytes);
}

void cinfer_model_free(struct cinfer_model **mp)
{
    struct cinfer_model *m = *mp;
    if (!m)
        return;
    struct cinfer_model_storage *s = m->storage;
    if (s) {
        cinfer_gguf_close(&s->gguf);
        cinfer_gguf_split_close(s);
        for (size_t i = 0; i < s->n_shards; i++)
            cinfer_safetensors_close(&s->shards[i]);
        free(s->shards);
        for (size_t i = 0; i < s->n_owned; i++)
            free(s->owned[i]);
        free(s->owned);
        free(s);
    }
    free(m->layers);
    free(m->path);
    free(m);
    *mp = NULL;
}
