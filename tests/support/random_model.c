/* tests/support/random_model.c — random-weight models for forward-pass tests. Weights
 * are scaled by 1/sqrt(fan_in) so activations stay near 1 through the layers, the way
 * trained models keep them; norms are near 1. */
#include "support/random_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
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
