/* tests/support/random_model.c — random-weight models for forward-pass tests. Weights
 * are scaled by 1/sqrt(fan_in) so activations stay near 1 through the layers, the way
 * trained models keep them; norms are near 1. */
#include "support/random_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/gguf.h"
#include "kernels.h"
#include "support/gguf_builder.h"
#include "support/quantize.h"

float random_uniform(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (float)((double)(x >> 11) * 0x1p-53 * 2.0 - 1.0);
}

size_t random_model_row_bytes(enum cinfer_dtype dtype, int k)
{
    return cinfer_kernel_row_bytes((enum cinfer_kernel_wtype)dtype, k);
}

void random_model_store_row(const float *src, int k, enum cinfer_dtype dtype, void *dst)
{
    uint8_t *out = dst;
    switch (dtype) {
    case CINFER_DTYPE_F32:
        memcpy(dst, src, (size_t)k * sizeof(float));
        break;
    case CINFER_DTYPE_F16:
    case CINFER_DTYPE_BF16:
        for (int i = 0; i < k; i++) {
            uint16_t h = dtype == CINFER_DTYPE_F16 ? cinfer_kernel_f32_to_f16(src[i]) : cinfer_kernel_f32_to_bf16(src[i]);
            memcpy(out + 2 * i, &h, 2);
        }
        break;
    default: /* Q8_0 and the other block-quantized types */
        test_quantize_row(src, k, (int)dtype, dst);
        break;
    }
}

/* All weight memory of the model, freed at once. */
struct random_storage {
    void **blocks;
    int n_blocks, cap_blocks;
};

static void *storage_alloc(struct random_storage *st, size_t bytes)
{
    if (st->n_blocks == st->cap_blocks) {
        int cap = st->cap_blocks ? st->cap_blocks * 2 : 64;
        void **grown = realloc(st->blocks, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        st->blocks = grown;
        st->cap_blocks = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p)
        st->blocks[st->n_blocks++] = p;
    return p;
}

/* A (rows, cols) weight with values center + spread * uniform. */
static int fill_weight(struct random_storage *st, struct cinfer_weight *w, int rows, int cols, enum cinfer_dtype dtype,
                       float center, float spread, uint64_t *rng)
{
    w->dtype = dtype;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = random_model_row_bytes(dtype, cols);
    uint8_t *data = storage_alloc(st, w->row_bytes * (size_t)rows);
    float *row = malloc((size_t)cols * sizeof(float));
    if (!data || !row) {
        free(row);
        return -1;
    }
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++)
            row[c] = center + spread * random_uniform(rng);
        random_model_store_row(row, cols, dtype, data + (size_t)r * w->row_bytes);
    }
    free(row);
    w->data = data;
    return 0;
}

struct cinfer_model *random_model_create(const struct random_model_spec *s)
{
    struct cinfer_model *m = calloc(1, sizeof *m);
    struct random_storage *st = calloc(1, sizeof *st);
    if (!m || !st) {
        free(m);
        free(st);
        return NULL;
    }
    m->storage = st;
    struct cinfer_model_config *c = &m->config;
    strcpy(c->architecture, s->qk_norm ? "qwen3" : s->attention_bias ? "qwen2" : "llama");
    c->vocab_size = s->vocab;
    c->hidden_size = s->hidden;
    c->intermediate_size = s->intermediate;
    c->num_layers = s->layers;
    c->num_heads = s->heads;
    c->num_kv_heads = s->kv_heads;
    c->head_dim = s->head_dim;
    c->max_position_embeddings = 4096;
    c->rms_norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->rope_interleaved = s->rope_interleaved;
    if (s->llama3_rope_scaling) {
        c->rope_scaling.type = CINFER_ROPE_SCALING_LLAMA3;
        c->rope_scaling.factor = 8.0f;
        c->rope_scaling.low_freq_factor = 1.0f;
        c->rope_scaling.high_freq_factor = 4.0f;
        c->rope_scaling.original_max_position_embeddings = 32;
    }
    c->attention_bias = s->attention_bias;
    c->qk_norm = s->qk_norm;
    c->bos_token_id = -1;

    uint64_t rng = s->seed ? s->seed : 0x9e3779b97f4a7c15ull;
    int q_dim = s->heads * s->head_dim, kv_dim = s->kv_heads * s->head_dim;
    float in_hidden = 1.0f / sqrtf((float)s->hidden);
    int bad = 0;
    bad |= fill_weight(st, &m->tok_embeddings, s->vocab, s->hidden, s->dtype, 0.0f, 1.0f, &rng);
    bad |= fill_weight(st, &m->lm_head, s->vocab, s->hidden, s->dtype, 0.0f, in_hidden, &rng);
    bad |= fill_weight(st, &m->output_norm, 1, s->hidden, CINFER_DTYPE_F32, 1.0f, 0.2f, &rng);
    m->layers = calloc((size_t)s->layers, sizeof *m->layers);
    if (!m->layers)
        bad = -1;
    for (int l = 0; !bad && l < s->layers; l++) {
        struct cinfer_layer_weights *w = &m->layers[l];
        bad |= fill_weight(st, &w->attn_norm, 1, s->hidden, CINFER_DTYPE_F32, 1.0f, 0.2f, &rng);
        bad |= fill_weight(st, &w->ffn_norm, 1, s->hidden, CINFER_DTYPE_F32, 1.0f, 0.2f, &rng);
        /* q/k a little larger than 1/sqrt(fan_in) so attention is not uniform */
        bad |= fill_weight(st, &w->wq, q_dim, s->hidden, s->dtype, 0.0f, 3.0f * in_hidden, &rng);
        bad |= fill_weight(st, &w->wk, kv_dim, s->hidden, s->dtype, 0.0f, 3.0f * in_hidden, &rng);
        bad |= fill_weight(st, &w->wv, kv_dim, s->hidden, s->dtype, 0.0f, in_hidden, &rng);
        bad |= fill_weight(st, &w->wo, s->hidden, q_dim, s->dtype, 0.0f, 1.0f / sqrtf((float)q_dim), &rng);
        bad |= fill_weight(st, &w->w_gate, s->intermediate, s->hidden, s->dtype, 0.0f, in_hidden, &rng);
        bad |= fill_weight(st, &w->w_up, s->intermediate, s->hidden, s->dtype, 0.0f, in_hidden, &rng);
        bad |= fill_weight(st, &w->w_down, s->hidden, s->intermediate, s->dtype, 0.0f,
                           1.0f / sqrtf((float)s->intermediate), &rng);
        if (s->attention_bias) {
            bad |= fill_weight(st, &w->bq, 1, q_dim, CINFER_DTYPE_F32, 0.0f, 0.3f, &rng);
            bad |= fill_weight(st, &w->bk, 1, kv_dim, CINFER_DTYPE_F32, 0.0f, 0.3f, &rng);
            bad |= fill_weight(st, &w->bv, 1, kv_dim, CINFER_DTYPE_F32, 0.0f, 0.3f, &rng);
        }
        if (s->qk_norm) {
            bad |= fill_weight(st, &w->q_norm, 1, s->head_dim, CINFER_DTYPE_F32, 1.0f, 0.2f, &rng);
            bad |= fill_weight(st, &w->k_norm, 1, s->head_dim, CINFER_DTYPE_F32, 1.0f, 0.2f, &rng);
        }
    }
    if (bad) {
        random_model_free(&m);
        return NULL;
    }
    return m;
}

void random_model_free(struct cinfer_model **mp)
{
    struct cinfer_model *m = mp ? *mp : NULL;
    if (!m)
        return;
    struct random_storage *st = m->storage;
    if (st) {
        for (int i = 0; i < st->n_blocks; i++)
            free(st->blocks[i]);
        free(st->blocks);
        free(st);
    }
    free(m->layers);
    free(m);
    *mp = NULL;
}

static void add_tensor(struct gguf_builder *b, const char *name, const struct cinfer_weight *w)
{
    static const uint32_t ggml_type[] = {
        [CINFER_DTYPE_F32] = CINFER_GGML_F32,
        [CINFER_DTYPE_F16] = CINFER_GGML_F16,
        [CINFER_DTYPE_BF16] = CINFER_GGML_BF16,
        [CINFER_DTYPE_Q8_0] = CINFER_GGML_Q8_0,
    };
    uint64_t ne[2] = {(uint64_t)w->cols, (uint64_t)w->rows};
    gguf_builder_tensor(b, name, ggml_type[w->dtype], w->rows == 1 ? 1 : 2, ne, w->data,
                        (size_t)w->rows * w->row_bytes);
}

int random_model_write_gguf(const struct random_model_spec *spec, const char *path)
{
    struct cinfer_model *m = random_model_create(spec);
    if (!m)
        return -1;
    const struct cinfer_model_config *c = &m->config;
    const char *a = c->architecture;
    struct gguf_builder b;
    gguf_builder_init(&b, 3);
    char key[128];
    gguf_builder_kv_str(&b, "general.architecture", a);
#define KEY_U32(suffix, v) (snprintf(key, sizeof key, "%s.%s", a, suffix), gguf_builder_kv_u32(&b, key, (uint32_t)(v)))
    KEY_U32("embedding_length", c->hidden_size);
    KEY_U32("feed_forward_length", c->intermediate_size);
    KEY_U32("block_count", c->num_layers);
    KEY_U32("attention.head_count", c->num_heads);
    KEY_U32("attention.head_count_kv", c->num_kv_heads);
    KEY_U32("attention.key_length", c->head_dim);
    KEY_U32("context_length", c->max_position_embeddings);
    KEY_U32("vocab_size", c->vocab_size);
#undef KEY_U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    gguf_builder_kv_f32(&b, key, c->rms_norm_eps);
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    gguf_builder_kv_f32(&b, key, c->rope_theta);
    add_tensor(&b, "token_embd.weight", &m->tok_embeddings);
    for (int l = 0; l < c->num_layers; l++) {
        const struct cinfer_layer_weights *w = &m->layers[l];
        const struct {
            const char *suffix;
            const struct cinfer_weight *w;
        } tensors[] = {
            {"attn_norm.weight", &w->attn_norm}, {"attn_q.weight", &w->wq},       {"attn_k.weight", &w->wk},
            {"attn_v.weight", &w->wv},           {"attn_output.weight", &w->wo},  {"attn_q.bias", &w->bq},
            {"attn_k.bias", &w->bk},             {"attn_v.bias", &w->bv},         {"attn_q_norm.weight", &w->q_norm},
            {"attn_k_norm.weight", &w->k_norm},  {"ffn_norm.weight", &w->ffn_norm}, {"ffn_gate.weight", &w->w_gate},
            {"ffn_up.weight", &w->w_up},         {"ffn_down.weight", &w->w_down},
        };
        for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
            if (!tensors[i].w->data)
                continue;
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, tensors[i].suffix);
            add_tensor(&b, name, tensors[i].w);
        }
    }
    add_tensor(&b, "output_norm.weight", &m->output_norm);
    add_tensor(&b, "output.weight", &m->lm_head);
    int rc = gguf_builder_write(&b, path, NULL);
    gguf_builder_free(&b);
    random_model_free(&m);
    return rc;
}
