/* The model loader: the real stories260K GGUF, synthetic Hugging Face folders (f32, f16,
 * bf16; tied and untied; sharded; qwen2 biases; qwen3 norms; llama3 RoPE scaling) and
 * synthetic GGUF files, each checked value by value against what the test wrote, and
 * each kind of broken model refused with its specific message. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cinfer/gguf.h"
#include "kernels.h"
#include "model/hf_config.h"
#include "model/model_load_internal.h"
#include "model/model.h"
#include "support/gguf_builder.h"
#include "support/random_model.h"
#include "support/runner.h"
#include "support/tmp_dir.h"
#include "support/safetensors_builder.h"

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static const struct cinfer_model_load_options quiet = {0};

/* ---- stories260K ---------------------------------------------------------- */

START_TEST(loads_stories260k)
{
    const char *path = CINFER_TEST_DATA_DIR "/models/stories260K.gguf";
    struct cinfer_model *m = NULL;
    struct cinfer_error err;
    int rc = cinfer_model_load(path, &quiet, &m, &err);
    ck_assert_msg(rc == 0, "%s", err.message);
    const struct cinfer_model_config *c = &m->config;
    ck_assert_str_eq(c->architecture, "llama");
    ck_assert_int_eq(c->hidden_size, 64);
    ck_assert_int_eq(c->num_layers, 5);
    ck_assert_int_eq(c->num_heads, 8);
    ck_assert_int_eq(c->num_kv_heads, 4);
    ck_assert_int_eq(c->vocab_size, 512);
    ck_assert_int_eq(c->head_dim, 8);
    ck_assert_int_eq(c->intermediate_size, 172);
    ck_assert_int_eq(c->max_position_embeddings, 128);
    ck_assert_float_eq_tol(c->rms_norm_eps, 1e-5f, 1e-9f);
    ck_assert_float_eq(c->rope_theta, 10000.0f);
    ck_assert_int_eq(c->rope_interleaved, 1);
    ck_assert_int_eq(c->tie_word_embeddings, 0);
    ck_assert_int_eq(c->bos_token_id, 1);
    ck_assert_int_eq(c->n_eos, 1);
    ck_assert_int_eq(c->eos_token_ids[0], 2);
    ck_assert_int_eq(m->layers[4].w_down.rows, 64);
    ck_assert_int_eq(m->layers[4].w_down.cols, 172);
    ck_assert_uint_eq(m->layers[4].w_down.row_bytes, 172 * 4);
    ck_assert_int_eq(m->lm_head.rows, 512);

    /* The weights are the file's bytes, in place: compare with the GGUF reader's view. */
    struct cinfer_gguf *g = NULL;
    ck_assert_int_eq(cinfer_gguf_open(path, &g, &err), 0);
    const struct cinfer_gguf_tensor *t = cinfer_gguf_find_tensor(g, "blk.3.ffn_up.weight");
    ck_assert_int_eq(memcmp(m->layers[3].w_up.data, t->data, t->nbytes), 0);
    t = cinfer_gguf_find_tensor(g, "output_norm.weight");
    ck_assert_int_eq(memcmp(m->output_norm.data, t->data, t->nbytes), 0);
    uint64_t total = 0;
    for (uint64_t i = 0; i < cinfer_gguf_tensor_count(g); i++)
        total += cinfer_gguf_tensor_at(g, i)->nbytes;
    ck_assert_uint_eq(m->weight_bytes, total);
    cinfer_gguf_close(&g);
    printf("model_load: stories260K: dim %d, %d layers, %d heads, %d kv heads, vocab %d, %zu weight bytes\n",
           c->hidden_size, c->num_layers, c->num_heads, c->num_kv_heads, c->vocab_size, m->weight_bytes);
    cinfer_model_free(&m);
    ck_assert_ptr_null(m);
}
END_TEST

/* ---- synthetic Hugging Face folders ---------------------------------------- */

enum { VOCAB = 32, HIDDEN = 16, HEADS = 4, KV_HEADS = 2, INTER = 24, LAYERS = 2 };

struct hf_model {
    const char *model_type;
    const char *dtype;        /* "F32", "F16", "BF16" */
    int head_dim;             /* written explicitly when not HIDDEN / HEADS */
    int tie_key;              /* -1: no key; 0/1: tie_word_embeddings */
    int write_lm_head;
    int shards;               /* 0: model.safetensors; 2: two shards and an index */
    const char *extra_config; /* appended inside config.json's object */
    const char *skip_tensor;  /* left out of the files */
    const char *short_tensor; /* written with its last dimension one short */
    const char *index_shard;  /* the name the index gives the second shard */
};

/* Exactly representable in f16 and bf16: k / 64 with |k| <= 32. */
static float value_at(int tensor_seed, int i)
{
    return (float)((i * 7 + tensor_seed * 13) % 65 - 32) / 64.0f;
}

static uint16_t to_f16(float v)
{
    if (v == 0.0f)
        return 0;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint32_t sign = (bits >> 16) & 0x8000, exponent = (bits >> 23) & 0xff, mantissa = bits & 0x7fffff;
    return (uint16_t)(sign | ((exponent - 112) << 10) | (mantissa >> 13)); /* normal values only */
}

static uint16_t to_bf16(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return (uint16_t)(bits >> 16);
}

static size_t dtype_bytes(const char *dtype)
{
    return !strcmp(dtype, "F32") ? 4 : 2;
}

/* Encodes n values of a tensor in dtype; returns a malloc'd buffer. */
static void *encode(const char *dtype, int seed, int64_t n)
{
    unsigned char *out = malloc((size_t)n * dtype_bytes(dtype));
    for (int64_t i = 0; i < n; i++) {
        float v = value_at(seed, (int)i);
        if (!strcmp(dtype, "F32")) {
            memcpy(out + 4 * i, &v, 4);
        } else {
            uint16_t h = !strcmp(dtype, "F16") ? to_f16(v) : to_bf16(v);
            memcpy(out + 2 * i, &h, 2);
        }
    }
    return out;
}

static int seed_of(const char *name)
{
    unsigned h = 5381;
    for (const char *p = name; *p; p++)
        h = h * 33 + (unsigned char)*p;
    return (int)(h % 1000);
}

struct tensor_plan {
    char name[96];
    int64_t shape[2];
    int n_dims;
};

static void plan_add(struct tensor_plan *plan, int *n, const char *prefix, const char *suffix, int64_t rows,
                     int64_t cols, int n_dims)
{
    snprintf(plan[*n].name, sizeof plan[*n].name, "%s%s", prefix, suffix);
    plan[*n].shape[0] = rows;
    plan[*n].shape[1] = cols;
    plan[*n].n_dims = n_dims;
    (*n)++;
}

static int plan_tensors(const struct hf_model *hm, struct tensor_plan *plan)
{
    int hd = hm->head_dim ? hm->head_dim : HIDDEN / HEADS, n = 0;
    int biases = !strcmp(hm->model_type, "qwen2"), norms = !strcmp(hm->model_type, "qwen3");
    plan_add(plan, &n, "", "model.embed_tokens.weight", VOCAB, HIDDEN, 2);
    for (int l = 0; l < LAYERS; l++) {
        char p[64];
        snprintf(p, sizeof p, "model.layers.%d.", l);
        plan_add(plan, &n, p, "input_layernorm.weight", HIDDEN, 0, 1);
        plan_add(plan, &n, p, "self_attn.q_proj.weight", HEADS * hd, HIDDEN, 2);
        plan_add(plan, &n, p, "self_attn.k_proj.weight", KV_HEADS * hd, HIDDEN, 2);
        plan_add(plan, &n, p, "self_attn.v_proj.weight", KV_HEADS * hd, HIDDEN, 2);
        plan_add(plan, &n, p, "self_attn.o_proj.weight", HIDDEN, HEADS * hd, 2);
        if (biases) {
            plan_add(plan, &n, p, "self_attn.q_proj.bias", HEADS * hd, 0, 1);
            plan_add(plan, &n, p, "self_attn.k_proj.bias", KV_HEADS * hd, 0, 1);
            plan_add(plan, &n, p, "self_attn.v_proj.bias", KV_HEADS * hd, 0, 1);
        }
        if (norms) {
            plan_add(plan, &n, p, "self_attn.q_norm.weight", hd, 0, 1);
            plan_add(plan, &n, p, "self_attn.k_norm.weight", hd, 0, 1);
        }
        plan_add(plan, &n, p, "post_attention_layernorm.weight", HIDDEN, 0, 1);
        plan_add(plan, &n, p, "mlp.gate_proj.weight", INTER, HIDDEN, 2);
        plan_add(plan, &n, p, "mlp.up_proj.weight", INTER, HIDDEN, 2);
        plan_add(plan, &n, p, "mlp.down_proj.weight", HIDDEN, INTER, 2);
    }
    plan_add(plan, &n, "", "model.norm.weight", HIDDEN, 0, 1);
    if (hm->write_lm_head)
        plan_add(plan, &n, "", "lm_head.weight", VOCAB, HIDDEN, 2);
    return n;
}

static void write_hf_model(const char *dir, const struct hf_model *hm)
{
    mkdir(dir, 0755);
    char path[512], config[2048];
    int hd = hm->head_dim ? hm->head_dim : HIDDEN / HEADS;
    char head_dim_key[64] = "", tie_key[64] = "";
    if (hm->head_dim)
        snprintf(head_dim_key, sizeof head_dim_key, "\"head_dim\": %d,", hd);
    if (hm->tie_key >= 0)
        snprintf(tie_key, sizeof tie_key, "\"tie_word_embeddings\": %s,", hm->tie_key ? "true" : "false");
    snprintf(config, sizeof config,
             "{\"architectures\": [\"X\"], \"model_type\": \"%s\", \"vocab_size\": %d, \"hidden_size\": %d,\n"
             " \"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,\n"
             " \"num_key_value_heads\": %d, %s %s \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0,\n"
             " \"max_position_embeddings\": 4096, %s \"bos_token_id\": 1,\n"
             " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"%s%s}\n",
             hm->model_type, VOCAB, HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, head_dim_key, tie_key,
             hm->extra_config && strstr(hm->extra_config, "hidden_act") ? "" : "\"hidden_act\": \"silu\",",
             hm->extra_config ? ", " : "", hm->extra_config ? hm->extra_config : "");
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, config);

    struct tensor_plan plan[64];
    int n = plan_tensors(hm, plan);
    struct st_builder b[2];
    st_builder_init(&b[0]);
    st_builder_init(&b[1]);
    char index[8192];
    int index_len = snprintf(index, sizeof index, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    const char *shard_names[2] = {"model-00001-of-00002.safetensors",
                                  hm->index_shard ? hm->index_shard : "model-00002-of-00002.safetensors"};
    for (int i = 0; i < n; i++) {
        if (hm->skip_tensor && !strcmp(plan[i].name, hm->skip_tensor))
            continue;
        int64_t shape[2] = {plan[i].shape[0], plan[i].shape[1]};
        if (hm->short_tensor && !strcmp(plan[i].name, hm->short_tensor))
            shape[plan[i].n_dims - 1]--;
        int64_t count = plan[i].n_dims == 2 ? shape[0] * shape[1] : shape[0];
        void *data = encode(hm->dtype, seed_of(plan[i].name), count);
        int shard = hm->shards && i >= n / 2;
        st_builder_add(&b[shard], plan[i].name, hm->dtype, shape, plan[i].n_dims, data,
                       (size_t)count * dtype_bytes(hm->dtype));
        free(data);
        index_len += snprintf(index + index_len, sizeof index - (size_t)index_len, "%s\"%s\": \"%s\"",
                              index_len > 60 ? ", " : "", plan[i].name, shard_names[shard]);
    }
    if (hm->shards) {
        snprintf(path, sizeof path, "%s/%s", dir, shard_names[0]);
        ck_assert_int_eq(st_builder_write(&b[0], path), 0);
        snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
        ck_assert_int_eq(st_builder_write(&b[1], path), 0);
        snprintf(index + index_len, sizeof index - (size_t)index_len, "}}\n");
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        write_text(path, index);
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        ck_assert_int_eq(st_builder_write(&b[0], path), 0);
    }
    st_builder_free(&b[0]);
    st_builder_free(&b[1]);
}

/* Every value of w is the one the test wrote for tensor name (vectors widened to f32). */
static void check_weight(const struct cinfer_weight *w, const char *name, const char *dtype, int64_t rows,
                         int64_t cols)
{
    ck_assert_msg(w->data != NULL, "%s not bound", name);
    ck_assert_int_eq(w->rows, rows);
    ck_assert_int_eq(w->cols, cols);
    if (rows == 1) { /* a vector: f32 whatever the file held */
        ck_assert_int_eq(w->dtype, CINFER_DTYPE_F32);
        for (int64_t i = 0; i < cols; i++)
            ck_assert_msg(((const float *)w->data)[i] == value_at(seed_of(name), (int)i), "%s[%lld]", name,
                          (long long)i);
        return;
    }
    enum cinfer_dtype want = !strcmp(dtype, "F32") ? CINFER_DTYPE_F32
                             : !strcmp(dtype, "F16") ? CINFER_DTYPE_F16 : CINFER_DTYPE_BF16;
    ck_assert_int_eq(w->dtype, want);
    ck_assert_uint_eq(w->row_bytes, (size_t)cols * dtype_bytes(dtype));
    void *expect = encode(dtype, seed_of(name), rows * cols);
    ck_assert_msg(memcmp(w->data, expect, (size_t)(rows * cols) * dtype_bytes(dtype)) == 0, "%s differs", name);
    free(expect);
}

static void check_hf_model(const struct cinfer_model *m, const struct hf_model *hm)
{
    int hd = hm->head_dim ? hm->head_dim : HIDDEN / HEADS;
    const struct cinfer_model_config *c = &m->config;
    ck_assert_str_eq(c->architecture, hm->model_type);
    ck_assert_int_eq(c->vocab_size, VOCAB);
    ck_assert_int_eq(c->hidden_size, HIDDEN);
    ck_assert_int_eq(c->num_heads, HEADS);
    ck_assert_int_eq(c->num_kv_heads, KV_HEADS);
    ck_assert_int_eq(c->head_dim, hd);
    ck_assert_int_eq(c->rope_interleaved, 0);
    ck_assert_float_eq(c->rope_theta, 500000.0f);
    check_weight(&m->tok_embeddings, "model.embed_tokens.weight", hm->dtype, VOCAB, HIDDEN);
    check_weight(&m->output_norm, "model.norm.weight", hm->dtype, 1, HIDDEN);
    for (int l = 0; l < LAYERS; l++) {
        const struct cinfer_layer_weights *L = &m->layers[l];
        char nm[128];
#define CHECK(field, suffix, r, c)                                                    \
    (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix), check_weight(&L->field, nm, hm->dtype, r, c))
        CHECK(attn_norm, "input_layernorm.weight", 1, HIDDEN);
        CHECK(wq, "self_attn.q_proj.weight", HEADS * hd, HIDDEN);
        CHECK(wk, "self_attn.k_proj.weight", KV_HEADS * hd, HIDDEN);
        CHECK(wv, "self_attn.v_proj.weight", KV_HEADS * hd, HIDDEN);
        CHECK(wo, "self_attn.o_proj.weight", HIDDEN, HEADS * hd);
        CHECK(ffn_norm, "post_attention_layernorm.weight", 1, HIDDEN);
        CHECK(w_gate, "mlp.gate_proj.weight", INTER, HIDDEN);
        CHECK(w_up, "mlp.up_proj.weight", INTER, HIDDEN);
        CHECK(w_down, "mlp.down_proj.weight", HIDDEN, INTER);
        if (!strcmp(hm->model_type, "qwen2")) {
            ck_assert_int_eq(c->attention_bias, 1);
            CHECK(bq, "self_attn.q_proj.bias", 1, HEADS * hd);
            CHECK(bk, "self_attn.k_proj.bias", 1, KV_HEADS * hd);
            CHECK(bv, "self_attn.v_proj.bias", 1, KV_HEADS * hd);
        } else {
            ck_assert_ptr_null(L->bq.data);
        }
        if (!strcmp(hm->model_type, "qwen3")) {
            ck_assert_int_eq(c->qk_norm, 1);
            CHECK(q_norm, "self_attn.q_norm.weight", 1, hd);
            CHECK(k_norm, "self_attn.k_norm.weight", 1, hd);
        } else {
            ck_assert_ptr_null(L->q_norm.data);
        }
#undef CHECK
    }
    if (hm->write_lm_head && hm->tie_key != 1) {
        ck_assert_int_eq(c->tie_word_embeddings, 0);
        check_weight(&m->lm_head, "lm_head.weight", hm->dtype, VOCAB, HIDDEN);
    } else {
        ck_assert_int_eq(c->tie_word_embeddings, 1);
        ck_assert_ptr_eq(m->lm_head.data, m->tok_embeddings.data);
    }
}

static struct cinfer_model *load_ok(const char *path)
{
    struct cinfer_model *m = NULL;
    struct cinfer_error err;
    int rc = cinfer_model_load(path, &quiet, &m, &err);
    ck_assert_msg(rc == 0, "%s", err.message);
    return m;
}

static void load_and_check(const char *name, const struct hf_model *hm)
{
    const char *dir = cinfer_test_tmp_path(name);
    write_hf_model(dir, hm);
    struct cinfer_model *m = load_ok(dir);
    check_hf_model(m, hm);
    cinfer_model_free(&m);
}

START_TEST(hf_llama_every_dtype_tied_and_untied)
{
    cinfer_test_make_tmp_dir("test_model_load");
    static const char *const dtypes[] = {"F32", "F16", "BF16"};
    for (int d = 0; d < 3; d++) {
        struct hf_model untied = {.model_type = "llama", .dtype = dtypes[d], .tie_key = 0, .write_lm_head = 1};
        load_and_check("untied", &untied);
        struct hf_model tied = {.model_type = "llama", .dtype = dtypes[d], .tie_key = 1, .write_lm_head = 0};
        load_and_check("tied", &tied);
        /* tie_word_embeddings true wins over a stored lm_head, as in transformers */
        struct hf_model tied_extra = {.model_type = "llama", .dtype = dtypes[d], .tie_key = 1, .write_lm_head = 1};
        load_and_check("tied_extra", &tied_extra);
        /* no key and no lm_head: tied */
        struct hf_model implicit = {.model_type = "mistral", .dtype = dtypes[d], .tie_key = -1};
        load_and_check("implicit", &implicit);
    }
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(hf_sharded_with_index)
{
    cinfer_test_make_tmp_dir("test_model_load");
    struct hf_model hm = {.model_type = "llama", .dtype = "BF16", .tie_key = 0, .write_lm_head = 1, .shards = 2};
    load_and_check("sharded", &hm);
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(hf_qwen2_biases_and_qwen3_norms)
{
    cinfer_test_make_tmp_dir("test_model_load");
    struct hf_model qwen2 = {.model_type = "qwen2", .dtype = "F16", .tie_key = 1};
    load_and_check("qwen2", &qwen2);
    struct hf_model qwen3 = {.model_type = "qwen3", .dtype = "BF16", .tie_key = 1, .head_dim = 8};
    load_and_check("qwen3", &qwen3);
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(hf_llama3_rope_scaling_and_generation_config)
{
    cinfer_test_make_tmp_dir("test_model_load");
    struct hf_model hm = {.model_type = "llama", .dtype = "F32", .tie_key = 1,
                          .extra_config = "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, "
                                          "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, "
                                          "\"rope_type\": \"llama3\"}"};
    const char *dir = cinfer_test_tmp_path("llama3");
    write_hf_model(dir, &hm);
    char path[512];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    write_text(path, "{\"bos_token_id\": 3, \"eos_token_id\": [2, 5, 7], \"do_sample\": true}");
    struct cinfer_model *m = load_ok(dir);
    const struct cinfer_model_config *c = &m->config;
    ck_assert_int_eq(c->rope_scaling.type, CINFER_ROPE_SCALING_LLAMA3);
    ck_assert_float_eq(c->rope_scaling.factor, 8.0f);
    ck_assert_float_eq(c->rope_scaling.low_freq_factor, 1.0f);
    ck_assert_float_eq(c->rope_scaling.high_freq_factor, 4.0f);
    ck_assert_int_eq(c->rope_scaling.original_max_position_embeddings, 8192);
    ck_assert_int_eq(c->bos_token_id, 3);
    ck_assert_int_eq(c->n_eos, 3);
    ck_assert_int_eq(c->eos_token_ids[2], 7);
    cinfer_model_free(&m);

    struct hf_model sw = {.model_type = "mistral", .dtype = "F32", .tie_key = 1, .extra_config = "\"sliding_window\": 1024"};
    dir = cinfer_test_tmp_path("mistral_sw");
    write_hf_model(dir, &sw);
    m = load_ok(dir);
    ck_assert_int_eq(m->config.max_position_embeddings, 4096); /* the window no longer cuts the context */
    ck_assert_int_eq(m->config.sliding_window, 1024);
    for (int l = 0; l < LAYERS; l++)
        ck_assert(cinfer_model_layer_slides(&m->config, l));
    ck_assert_int_eq(m->config.n_eos, 1);
    cinfer_model_free(&m);
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* config.json text with the given keys after a small model's sizes (four layers). */
static int parse_config(const char *model_type, const char *extra, struct cinfer_hf_config *out,
                        struct cinfer_error *err)
{
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "{\"model_type\": \"%s\", \"vocab_size\": 32, \"hidden_size\": 16, \"intermediate_size\": 24,"
                     " \"num_hidden_layers\": 4, \"num_attention_heads\": 2, \"num_key_value_heads\": 1%s%s}",
                     model_type, extra[0] ? ", " : "", extra);
    return cinfer_hf_config_parse(text, (size_t)n, "config.json", out, err);
}

static unsigned sliding_bits(const struct cinfer_model_config *c)
{
    unsigned bits = 0;
    for (int l = 0; l < c->num_layers; l++)
        bits |= (unsigned)cinfer_model_layer_slides(c, l) << l;
    return bits;
}

START_TEST(hf_config_sliding_windows_and_gemma_keys)
{
    struct cinfer_hf_config hc;
    struct cinfer_error err = {0};
    /* Mistral: transformers' default window covers every layer; null turns it off */
    ck_assert_int_eq(parse_config("mistral", "", &hc, &err), 0);
    ck_assert_int_eq(hc.model.sliding_window, 4096);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0xfu);
    ck_assert_int_eq(parse_config("mistral", "\"sliding_window\": null", &hc, &err), 0);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0u);
    /* Qwen2: off unless use_sliding_window; then layers from max_window_layers on */
    ck_assert_int_eq(parse_config("qwen2", "\"sliding_window\": 64", &hc, &err), 0);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0u);
    ck_assert_int_eq(parse_config("qwen2", "\"sliding_window\": 64, \"use_sliding_window\": true, "
                                           "\"max_window_layers\": 1", &hc, &err), 0);
    ck_assert_int_eq(hc.model.sliding_window, 64);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0xeu);
    /* layer_types wins over the family's rule */
    ck_assert_int_eq(parse_config("qwen3", "\"sliding_window\": 8, \"use_sliding_window\": true, \"layer_types\": "
                                           "[\"full_attention\", \"sliding_attention\", \"full_attention\", "
                                           "\"sliding_attention\"]", &hc, &err), 0);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0xau);
    /* Gemma 2: even layers local; soft-caps, scales and (1 + w) norms from its defaults */
    ck_assert_int_eq(parse_config("gemma2", "\"head_dim\": 8, \"sliding_window\": 16", &hc, &err), 0);
    ck_assert_str_eq(hc.model.architecture, "gemma2");
    ck_assert_uint_eq(sliding_bits(&hc.model), 0x5u);
    ck_assert_float_eq(hc.model.attn_logit_softcap, 50.0f);
    ck_assert_float_eq(hc.model.final_logit_softcap, 30.0f);
    ck_assert_float_eq(hc.model.attention_scale, 1.0f / 16.0f); /* query_pre_attn_scalar 256 */
    ck_assert_float_eq(hc.model.embedding_scale, 4.0f);        /* sqrt(16) */
    ck_assert_int_eq(hc.model.activation, CINFER_ACTIVATION_GELU_TANH);
    ck_assert_int_eq(hc.model.norm_unit_offset, 1);
    ck_assert_int_eq(hc.model.sandwich_norms, 1);
    ck_assert_int_eq(parse_config("gemma2", "\"final_logit_softcapping\": null", &hc, &err), 0);
    ck_assert_float_eq(hc.model.final_logit_softcap, 0.0f);
    /* Gemma 3: every sliding_window_pattern-th layer global; local RoPE base; linear scaling */
    ck_assert_int_eq(parse_config("gemma3_text", "\"sliding_window_pattern\": 2, \"rope_scaling\": "
                                                 "{\"rope_type\": \"linear\", \"factor\": 8.0}", &hc, &err), 0);
    ck_assert_str_eq(hc.model.architecture, "gemma3");
    ck_assert_uint_eq(sliding_bits(&hc.model), 0x5u);
    ck_assert_int_eq(hc.model.qk_norm, 1);
    ck_assert_float_eq(hc.model.rope_theta, 1000000.0f);
    ck_assert_float_eq(hc.model.rope_theta_local, 10000.0f);
    ck_assert_int_eq(hc.model.rope_scaling.type, CINFER_ROPE_SCALING_LINEAR);
    ck_assert_float_eq(hc.model.attn_logit_softcap, 0.0f);
    /* Phi-3: fused projections; a window on every layer when sliding_window is set */
    ck_assert_int_eq(parse_config("phi3", "\"sliding_window\": 2047", &hc, &err), 0);
    ck_assert_int_eq(hc.model.fused_qkv, 1);
    ck_assert_int_eq(hc.model.fused_gate_up, 1);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0xfu);
    ck_assert_int_eq(parse_config("phi3", "", &hc, &err), 0);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0u);
    /* partial rotary: int(head_dim * factor) dims turn (head_dim 8 here) */
    ck_assert_int_eq(parse_config("phi3", "\"partial_rotary_factor\": 0.75", &hc, &err), 0);
    ck_assert_int_eq(hc.model.rotary_dim, 6);
    ck_assert_int_eq(parse_config("phi3", "\"partial_rotary_factor\": 1.5", &hc, &err), CINFER_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.message, "partial_rotary_factor is 1.5, expected a number in (0, 1]"));
    /* LongRoPE: head_dim / 2 = 4 divisors of each kind; the attention factor from the
     * extension 4096 / 1024 when none is given */
    ck_assert_int_eq(parse_config("phi3", "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1.0]}", &hc,
                                  &err), CINFER_ERR_CONFIG);
    ck_assert_ptr_nonnull(
        strstr(err.message, "\"short_factor\" as a list of 4 numbers (rotary dims / 2); found an array (1 items)"));
    ck_assert_int_eq(parse_config("phi3",
                                  "\"max_position_embeddings\": 4096, \"original_max_position_embeddings\": 1024, "
                                  "\"rope_scaling\": {\"type\": \"su\", \"short_factor\": [1, 1.5, 2, 3], "
                                  "\"long_factor\": [2, 3, 4, 5]}",
                                  &hc, &err),
                     0);
    ck_assert_int_eq(hc.model.rope_scaling.type, CINFER_ROPE_SCALING_LONGROPE);
    ck_assert_int_eq(hc.model.rope_scaling.original_max_position_embeddings, 1024);
    ck_assert_float_eq(hc.model.rope_scaling.long_factor[3], 5.0f);
    ck_assert_double_eq_tol(hc.model.rope_scaling.attention_factor, sqrt(1 + log(4.0) / log(1024.0)), 1e-6);
    /* YaRN: the paper's defaults for what the config leaves out */
    ck_assert_int_eq(parse_config("qwen3", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                                           "\"original_max_position_embeddings\": 32768}",
                                  &hc, &err),
                     0);
    ck_assert_int_eq(hc.model.rope_scaling.type, CINFER_ROPE_SCALING_YARN);
    ck_assert_float_eq(hc.model.rope_scaling.beta_fast, 32.0f);
    ck_assert_float_eq(hc.model.rope_scaling.beta_slow, 1.0f);
    ck_assert_double_eq_tol(hc.model.rope_scaling.attention_factor, 0.1 * log(4.0) + 1, 1e-6);
    ck_assert_int_eq(parse_config("llama", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}", &hc, &err),
                     0);
    ck_assert_int_eq(hc.model.rope_scaling.type, CINFER_ROPE_SCALING_DYNAMIC);
    ck_assert_int_eq(parse_config("qwen3", "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, \"mscale\": 1}",
                                  &hc, &err),
                     CINFER_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "yarn rope_scaling has \"mscale\" (DeepSeek's variant)"));
    /* refusals name the key */
    ck_assert_int_eq(parse_config("llama", "\"sliding_window\": 8", &hc, &err), CINFER_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "sliding_window is set; llama has no sliding layers"));
    ck_assert_int_eq(parse_config("gemma2", "\"hidden_activation\": \"relu\"", &hc, &err), CINFER_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "hidden_activation \"relu\" is not supported"));
    ck_assert_int_eq(parse_config("qwen2", "\"use_sliding_window\": true, \"layer_types\": [\"full_attention\"]",
                                  &hc, &err), CINFER_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.message, "layer_types"));
    ck_assert_int_eq(parse_config("gemma3", "", &hc, &err), CINFER_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "model_type \"gemma3\" is not supported"));
}
END_TEST

static unsigned sparse_bits(const struct cinfer_model_config *c)
{
    unsigned bits = 0;
    for (int l = 0; l < c->num_layers; l++)
        bits |= (unsigned)cinfer_model_layer_sparse(c, l) << l;
    return bits;
}

/* Qwen2-MoE: Qwen2MoeConfig's defaults (60 experts, 4 per token, 1408 wide, a shared
 * expert 5632 wide, no renormalising), Qwen2's biases and sliding rule, and the sparse
 * layers by decoder_sparse_step and mlp_only_layers. */
START_TEST(hf_config_qwen2_moe_keys)
{
    struct cinfer_hf_config hc;
    struct cinfer_error err = {0};
    ck_assert_int_eq(parse_config("qwen2_moe", "", &hc, &err), 0);
    ck_assert_str_eq(hc.model.architecture, "qwen2_moe");
    ck_assert_int_eq(hc.model.n_experts, 60);
    ck_assert_int_eq(hc.model.n_experts_used, 4);
    ck_assert_int_eq(hc.model.moe_intermediate_size, 1408);
    ck_assert_int_eq(hc.model.shared_expert_intermediate_size, 5632);
    ck_assert_int_eq(hc.model.moe_norm_topk, 0);
    ck_assert_int_eq(hc.model.attention_bias, 1);
    ck_assert_int_eq(hc.model.qk_norm, 0);
    ck_assert_uint_eq(sparse_bits(&hc.model), 0xfu);
    ck_assert_uint_eq(sliding_bits(&hc.model), 0u);
    ck_assert_int_eq(parse_config("qwen2_moe", "\"num_experts\": 8, \"num_experts_per_tok\": 2, "
                                               "\"shared_expert_intermediate_size\": 48, \"norm_topk_prob\": true, "
                                               "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [1], "
                                               "\"use_sliding_window\": true, \"sliding_window\": 64, "
                                               "\"max_window_layers\": 2",
                                  &hc, &err),
                     0);
    ck_assert_int_eq(hc.model.shared_expert_intermediate_size, 48);
    ck_assert_int_eq(hc.model.moe_norm_topk, 1);
    ck_assert_uint_eq(sparse_bits(&hc.model), 0x8u); /* layers 1 and 3 by the step, 1 dense by the list */
    ck_assert_uint_eq(sliding_bits(&hc.model), 0xcu);
    ck_assert_int_eq(parse_config("qwen2_moe", "\"shared_expert_intermediate_size\": -1", &hc, &err),
                     CINFER_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.message, "shared_expert_intermediate_size"));
    /* Qwen3-MoE keeps its own defaults and has no shared expert */
    ck_assert_int_eq(parse_config("qwen3_moe", "", &hc, &err), 0);
    ck_assert_int_eq(hc.model.n_experts, 128);
    ck_assert_int_eq(hc.model.shared_expert_intermediate_size, 0);
}
END_TEST

/* quantization_config: gpt-oss's mxfp4 (transformers' Mxfp4Config) is read, any other
 * method refused naming config.json and the field; the published gpt-oss-20b config.json
 * (fuzz/seeds/fuzz_hf_config/gpt_oss_20b_mxfp4.json) parses. */
START_TEST(hf_config_quantization)
{
    struct cinfer_hf_config hc;
    struct cinfer_error err = {0};
    static const char mxfp4[] = "\"quantization_config\": {\"quant_method\": \"mxfp4\", \"modules_to_not_convert\": "
                                "[\"model.layers.*.self_attn\", \"model.layers.*.mlp.router\", \"lm_head\"]}";
    ck_assert_msg(parse_config("gpt_oss", mxfp4, &hc, &err) == 0, "%s", err.message);
    static const struct {
        const char *model_type, *extra;
        int code;
        const char *want;
    } refused[] = {
        {"gpt_oss", "\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true}",
         CINFER_ERR_UNSUPPORTED, "config.json: quantization_config.quant_method is \"bitsandbytes\"; cinfer reads "
                                 "\"mxfp4\" only"},
        {"llama", "\"quantization_config\": {\"quant_method\": \"mxfp4\"}", CINFER_ERR_UNSUPPORTED,
         "config.json: quantization_config.quant_method \"mxfp4\" is read for gpt-oss experts only; this model is "
         "llama"},
        {"gpt_oss", "\"quantization_config\": {\"bits\": 4}", CINFER_ERR_CONFIG,
         "config.json: quantization_config.quant_method is absent, expected a string"},
        {"gpt_oss", "\"quantization_config\": \"mxfp4\"", CINFER_ERR_CONFIG,
         "config.json: quantization_config is a string, expected an object"},
        {"gpt_oss",
         "\"quantization_config\": {\"quant_method\": \"mxfp4\", \"modules_to_not_convert\": [\"lm_head\", 3]}",
         CINFER_ERR_CONFIG, "quantization_config.modules_to_not_convert[1] is an integer, expected a module name"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert_int_eq(parse_config(refused[i].model_type, refused[i].extra, &hc, &err), refused[i].code);
        ck_assert_msg(strstr(err.message, refused[i].want), "expected \"%s\" in: %s", refused[i].want, err.message);
    }
    FILE *f = fopen(CINFER_SOURCE_DIR "/fuzz/seeds/fuzz_hf_config/gpt_oss_20b_mxfp4.json", "rb");
    ck_assert_ptr_nonnull(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    ck_assert_msg(cinfer_hf_config_parse(text, n, "gpt-oss-20b/config.json", &hc, &err) == 0, "%s", err.message);
    ck_assert_int_eq(hc.model.n_experts, 32);
    ck_assert_int_eq(hc.model.n_experts_used, 4);
    ck_assert_int_eq(hc.model.hidden_size, 2880);
}
END_TEST

static void expect_refused(const char *path, int code, const char *want)
{
    struct cinfer_model *m = NULL;
    struct cinfer_error err;
    memset(&err, 0, sizeof err);
    int rc = cinfer_model_load(path, &quiet, &m, &err);
    ck_assert_msg(rc == code, "expected code %d for \"%s\", got %d: %s", code, want, rc, err.message);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.message, want) != NULL, "expected \"%s\" in: %s", want, err.message);
}

static void expect_hf_refused(const char *name, const struct hf_model *hm, int code, const char *want)
{
    const char *dir = cinfer_test_tmp_path(name);
    write_hf_model(dir, hm);
    expect_refused(dir, code, want);
}

START_TEST(hf_errors_name_the_problem)
{
    cinfer_test_make_tmp_dir("test_model_load");
    struct hf_model base = {.model_type = "llama", .dtype = "F32", .tie_key = 0, .write_lm_head = 1};
    struct hf_model hm = base;

    hm.short_tensor = "model.layers.1.mlp.up_proj.weight";
    expect_hf_refused("short", &hm, CINFER_ERR_PARSE,
                      "model.safetensors: tensor model.layers.1.mlp.up_proj.weight has shape [24, 15], expected [24, "
                      "16] from config.json intermediate_size/hidden_size");
    hm = base;
    hm.short_tensor = "model.layers.0.input_layernorm.weight";
    expect_hf_refused("short_norm", &hm, CINFER_ERR_PARSE,
                      "tensor model.layers.0.input_layernorm.weight has shape [15], expected [16] from config.json hidden_size");
    hm = base;
    hm.skip_tensor = "model.layers.1.self_attn.v_proj.weight";
    expect_hf_refused("missing", &hm, CINFER_ERR_NOT_FOUND,
                      "model.safetensors: missing tensor model.layers.1.self_attn.v_proj.weight");
    hm = base;
    hm.write_lm_head = 0;
    expect_hf_refused("no_lm_head", &hm, CINFER_ERR_NOT_FOUND,
                      "missing tensor lm_head.weight, and config.json has tie_word_embeddings false");
    hm = base;
    hm.model_type = "gpt2";
    expect_hf_refused("gpt2", &hm, CINFER_ERR_UNSUPPORTED,
                      "config.json: model_type \"gpt2\" is not supported (expected llama, mistral, qwen2, qwen3, "
                      "gemma2, gemma3_text, qwen3_moe, mixtral, phi3, qwen2_moe or gpt_oss)");
    hm = base;
    hm.extra_config = "\"rope_scaling\": {\"type\": \"ntk-by-parts\", \"factor\": 4.0}";
    expect_hf_refused("ntk", &hm, CINFER_ERR_UNSUPPORTED, "rope_scaling type \"ntk-by-parts\" is not supported");
    hm = base;
    hm.extra_config = "\"attention_bias\": true";
    expect_hf_refused("bias", &hm, CINFER_ERR_UNSUPPORTED, "attention_bias is true");
    hm = base;
    hm.extra_config = "\"hidden_act\": \"gelu\"";
    expect_hf_refused("gelu", &hm, CINFER_ERR_UNSUPPORTED, "hidden_act \"gelu\" is not supported");
    hm = base;
    hm.extra_config = "\"mlp_bias\": true";
    expect_hf_refused("mlp_bias", &hm, CINFER_ERR_UNSUPPORTED, "mlp_bias is true");
    hm = base;
    hm.shards = 2;
    hm.index_shard = "model-00003-of-00002.safetensors";
    expect_hf_refused("bad_index", &hm, CINFER_ERR_NOT_FOUND,
                      "model.safetensors.index.json names shard model-00003-of-00002.safetensors, which is missing");
    hm = base;
    hm.shards = 2;
    hm.index_shard = "../elsewhere.safetensors";
    expect_hf_refused("escape_index", &hm, CINFER_ERR_PARSE, "is not a file name in the model folder");

    /* Damaged files in an otherwise good folder. */
    const char *dir = cinfer_test_tmp_path("broken");
    write_hf_model(dir, &base);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, "{\"model_type\": \"llama\",\n \"vocab_size\": 32,, }");
    expect_refused(dir, CINFER_ERR_PARSE, "config.json: not valid JSON: ");
    expect_refused(dir, CINFER_ERR_PARSE, "string or '}' expected near ',' at byte 43 (line 2, column 19)");
    write_text(path, "{\"model_type\": \"llama\", \"vocab_size\": 32}");
    expect_refused(dir, CINFER_ERR_CONFIG, "config.json: key \"hidden_size\" is missing");
    write_text(path, "{\"model_type\": \"llama\", \"vocab_size\": \"32\"}");
    expect_refused(dir, CINFER_ERR_CONFIG, "config.json: key \"vocab_size\" is a string, expected an integer");
    write_text(path, "{\"model_type\": \"llama\", \"vocab_size\": 32, \"hidden_size\": 16, \"intermediate_size\": 24,"
                     " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 3}");
    expect_refused(dir, CINFER_ERR_CONFIG, "config.json: 4 attention heads cannot be shared evenly by 3 key-value heads");
    write_text(path, "{\"model_type\": \"llama\", \"vocab_size\": 32, \"hidden_size\": 16, \"intermediate_size\": 24,"
                     " \"num_hidden_layers\": 2, \"num_attention_heads\": 3}");
    expect_refused(dir, CINFER_ERR_CONFIG, "no head_dim, and hidden_size 16 is not a multiple of num_attention_heads 3");
    unlink(path);
    expect_refused(dir, CINFER_ERR_NOT_FOUND, "config.json: cannot open");

    write_hf_model(dir, &base);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    expect_refused(dir, CINFER_ERR_NOT_FOUND, "no model.safetensors and no model.safetensors.index.json");
    static const unsigned char zeros[64];
    ck_assert_int_eq(st_write_raw(path, "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [16], "
                                        "\"data_offsets\": [0, 64]}}     ", zeros, sizeof zeros), 0);
    expect_refused(dir, CINFER_ERR_NOT_FOUND, "model.safetensors: missing tensor model.embed_tokens.weight");
    expect_refused(cinfer_test_tmp_path("nothing_here"), CINFER_ERR_NOT_FOUND, "no such model");
    expect_refused(path, CINFER_ERR_INVALID_ARGUMENT, "give the model folder");
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(hf_unsupported_dtype)
{
    cinfer_test_make_tmp_dir("test_model_load");
    struct hf_model hm = {.model_type = "llama", .dtype = "F32", .tie_key = 0, .write_lm_head = 1};
    const char *dir = cinfer_test_tmp_path("i32");
    write_hf_model(dir, &hm);
    /* Replace the weights with a file whose embedding is I32. */
    struct st_builder b;
    st_builder_init(&b);
    int32_t ints[VOCAB * HIDDEN] = {0};
    st_builder_add(&b, "model.embed_tokens.weight", "I32", (int64_t[]){VOCAB, HIDDEN}, 2, ints, sizeof ints);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_int_eq(st_builder_write(&b, path), 0);
    st_builder_free(&b);
    expect_refused(dir, CINFER_ERR_UNSUPPORTED,
                   "tensor model.embed_tokens.weight is stored as I32; cinfer reads f32, f16, bf16, q8_0, q4_0, q4_1, "
                   "q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs and mxfp4 weights");
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* ---- synthetic GGUF files ------------------------------------------------- */

struct gguf_model {
    const char *arch;
    uint32_t matrix_type;      /* CINFER_GGML_F32 / F16 / Q8_0 ... */
    int head_dim;
    int tied;
    const char *skip_tensor;
    const char *wrong_tensor;  /* its row length one short */
    const float *rope_freqs;   /* head_dim / 2 values, or NULL */
    double rope_theta;
    int real_values;           /* uniform in [-1, 1) rather than byte patterns (NaN, Inf, 1e38...) */
    /* > 1: written as gguf-split writes a model, PREFIX-0000i-of-0000N.gguf with the path
     * ending in -00001-of-0000N.gguf, the metadata in the first, tensors dealt round */
    int split_parts;
    int split_fault; /* 1: part 2 says split.no 2; 2: split.tensors.count one short; 3: a tensor twice */
};

/* The builder the next tensor of a split model goes to (round the parts). */
static struct gguf_builder *split_builders;
static int split_count, split_next;

static struct gguf_builder *tensor_builder(struct gguf_builder *b)
{
    if (split_count <= 1)
        return b;
    return &split_builders[split_next++ % split_count];
}

enum { G_VOCAB = 32, G_HIDDEN = 64, G_HEADS = 4, G_KV = 2, G_INTER = 96, G_LAYERS = 2 };

/* The model dtype of a ggml type this test writes. */
static enum cinfer_dtype dtype_of_ggml(uint32_t type)
{
    switch (type) {
    case CINFER_GGML_F32: return CINFER_DTYPE_F32;
    case CINFER_GGML_F16: return CINFER_DTYPE_F16;
    case CINFER_GGML_BF16: return CINFER_DTYPE_BF16;
    case CINFER_GGML_Q8_0: return CINFER_DTYPE_Q8_0;
    case CINFER_GGML_Q4_0: return CINFER_DTYPE_Q4_0;
    case CINFER_GGML_Q4_1: return CINFER_DTYPE_Q4_1;
    case CINFER_GGML_Q5_0: return CINFER_DTYPE_Q5_0;
    case CINFER_GGML_Q5_1: return CINFER_DTYPE_Q5_1;
    case CINFER_GGML_Q2_K: return CINFER_DTYPE_Q2_K;
    case CINFER_GGML_Q3_K: return CINFER_DTYPE_Q3_K;
    case CINFER_GGML_Q4_K: return CINFER_DTYPE_Q4_K;
    case CINFER_GGML_Q5_K: return CINFER_DTYPE_Q5_K;
    case CINFER_GGML_Q6_K: return CINFER_DTYPE_Q6_K;
    case CINFER_GGML_IQ4_NL: return CINFER_DTYPE_IQ4_NL;
    case CINFER_GGML_IQ4_XS: return CINFER_DTYPE_IQ4_XS;
    case CINFER_GGML_MXFP4: return CINFER_DTYPE_MXFP4;
    }
    return (enum cinfer_dtype)-1; /* one cinfer does not read (q8_1) */
}

static void add_gguf_tensor(struct gguf_builder *b, const struct gguf_model *gm, const char *name, uint32_t type,
                            uint64_t cols, uint64_t rows)
{
    if (gm->skip_tensor && !strcmp(name, gm->skip_tensor))
        return;
    enum cinfer_dtype dtype = dtype_of_ggml(type);
    if (gm->wrong_tensor && !strcmp(name, gm->wrong_tensor))
        cols -= (uint64_t)cinfer_dtype_block_values(dtype);
    /* q8_1 (9): 32 values in 36 bytes, a type cinfer refuses */
    size_t bytes = (size_t)rows * (type == 9 ? cols / 32 * 36 : random_model_row_bytes(dtype, (int)cols));
    unsigned char *data = malloc(bytes);
    if (gm->real_values) {
        uint64_t state = (uint64_t)seed_of(name) * 2654435761u + 1;
        float *row = malloc(cols * sizeof *row);
        size_t row_bytes = bytes / rows;
        for (uint64_t r = 0; r < rows; r++) {
            for (uint64_t c = 0; c < cols; c++)
                row[c] = random_uniform(&state);
            random_model_store_row(row, (int)cols, dtype, data + r * row_bytes);
        }
        free(row);
    } else {
        for (size_t i = 0; i < bytes; i++)
            data[i] = (unsigned char)(i * 31 + (size_t)seed_of(name));
    }
    uint64_t ne[2] = {cols, rows};
    gguf_builder_tensor(tensor_builder(b), name, type, rows == 1 ? 1 : 2, ne, data, bytes);
    free(data);
}

static void write_gguf_model(const char *path, const struct gguf_model *gm)
{
    struct gguf_builder b, parts[8];
    split_count = gm->split_parts;
    split_next = 0;
    split_builders = parts;
    for (int i = 0; i < split_count; i++)
        gguf_builder_init(&parts[i], 3);
    gguf_builder_init(&b, 3);
    char key[128];
    const char *a = gm->arch;
    int hd = gm->head_dim ? gm->head_dim : G_HIDDEN / G_HEADS;
    gguf_builder_kv_str(&b, "general.architecture", a);
#define KEY_U32(suffix, v) (snprintf(key, sizeof key, "%s.%s", a, suffix), gguf_builder_kv_u32(&b, key, v))
    KEY_U32("embedding_length", G_HIDDEN);
    KEY_U32("feed_forward_length", G_INTER);
    KEY_U32("block_count", G_LAYERS);
    KEY_U32("attention.head_count", G_HEADS);
    KEY_U32("attention.head_count_kv", G_KV);
    KEY_U32("context_length", 512);
    KEY_U32("vocab_size", G_VOCAB);
    if (gm->head_dim)
        KEY_U32("attention.key_length", hd);
#undef KEY_U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    gguf_builder_kv_f32(&b, key, 1e-6f);
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    gguf_builder_kv_f32(&b, key, (float)(gm->rope_theta ? gm->rope_theta : 10000.0));
    gguf_builder_kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
    gguf_builder_kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    gguf_builder_kv_u32(&b, "tokenizer.ggml.eot_token_id", 3);

    uint32_t mt = gm->matrix_type;
    add_gguf_tensor(&b, gm, "token_embd.weight", mt, G_HIDDEN, G_VOCAB);
    if (gm->rope_freqs)
        gguf_builder_tensor(&b, "rope_freqs.weight", CINFER_GGML_F32, 1, (uint64_t[]){(uint64_t)hd / 2},
                            gm->rope_freqs, (size_t)hd / 2 * 4);
    for (int l = 0; l < G_LAYERS; l++) {
        char nm[64];
#define T(suffix, type, cols, rows) (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), add_gguf_tensor(&b, gm, nm, type, cols, rows))
        T("attn_norm.weight", CINFER_GGML_F32, G_HIDDEN, 1);
        T("attn_q.weight", mt, G_HIDDEN, G_HEADS * hd);
        T("attn_k.weight", mt, G_HIDDEN, G_KV * hd);
        T("attn_v.weight", mt, G_HIDDEN, G_KV * hd);
        T("attn_output.weight", mt, G_HEADS * hd, G_HIDDEN);
        if (!strcmp(a, "qwen2")) {
            T("attn_q.bias", CINFER_GGML_F32, G_HEADS * hd, 1);
            T("attn_k.bias", CINFER_GGML_F32, G_KV * hd, 1);
            T("attn_v.bias", CINFER_GGML_F32, G_KV * hd, 1);
        }
        if (!strcmp(a, "qwen3")) {
            T("attn_q_norm.weight", CINFER_GGML_F16, hd, 1); /* f16 on purpose: widened by the loader */
            T("attn_k_norm.weight", CINFER_GGML_F32, hd, 1);
        }
        T("ffn_norm.weight", CINFER_GGML_F32, G_HIDDEN, 1);
        T("ffn_gate.weight", mt, G_HIDDEN, G_INTER);
        T("ffn_up.weight", mt, G_HIDDEN, G_INTER);
        T("ffn_down.weight", mt, G_INTER, G_HIDDEN);
#undef T
    }
    add_gguf_tensor(&b, gm, "output_norm.weight", CINFER_GGML_F32, G_HIDDEN, 1);
    if (!gm->tied)
        add_gguf_tensor(&b, gm, "output.weight", mt, G_HIDDEN, G_VOCAB);
    if (split_count <= 1) {
        ck_assert_int_eq(gguf_builder_write(&b, path, NULL), 0);
        gguf_builder_free(&b);
        return;
    }
    if (gm->split_fault == 3) /* output_norm again, in the last part */
        gguf_builder_tensor(&parts[split_count - 1], "output_norm.weight", CINFER_GGML_F32, 1,
                            (uint64_t[]){G_HIDDEN}, (float[G_HIDDEN]){0}, G_HIDDEN * 4);
    /* the metadata of the first part: the model's, then the split keys (u16, u16, i32) */
    size_t len = strlen(path), plen = strlen("-00001-of-00000.gguf");
    for (int i = 0; i < split_count; i++) {
        struct gguf_builder *pb = &parts[i];
        if (i == 0) { /* b holds the model's keys and no tensors: keys go to part 0 */
            free(pb->kv.bytes);
            pb->kv = b.kv, pb->n_kv = b.n_kv;
            memset(&b.kv, 0, sizeof b.kv), b.n_kv = 0;
        }
        uint16_t no = (uint16_t)(gm->split_fault == 1 && i == 1 ? 2 : i), count = (uint16_t)split_count;
        int32_t total = split_next + (gm->split_fault == 3) - (gm->split_fault == 2);
        gguf_builder_kv_raw(pb, "split.no", 2, &no, 2);
        gguf_builder_kv_raw(pb, "split.count", 2, &count, 2);
        gguf_builder_kv_i32(pb, "split.tensors.count", total);
        char part[PATH_MAX];
        snprintf(part, sizeof part, "%.*s-%05d-of-%05d.gguf", (int)(len - plen), path, i + 1, split_count);
        ck_assert_int_eq(gguf_builder_write(pb, part, NULL), 0);
        gguf_builder_free(pb);
    }
    gguf_builder_free(&b);
    split_count = 0;
}

START_TEST(gguf_families_and_types)
{
    cinfer_test_make_tmp_dir("test_model_load");
    /* G_HIDDEN and G_INTER are multiples of 32, not of 256: the 32-value block types
     * (K-quants: tests/test_model_reference.c's models) */
    static const uint32_t types[] = {CINFER_GGML_F32,  CINFER_GGML_F16,  CINFER_GGML_BF16,   CINFER_GGML_Q8_0,
                                     CINFER_GGML_Q4_0, CINFER_GGML_Q4_1, CINFER_GGML_Q5_0,   CINFER_GGML_Q5_1,
                                     CINFER_GGML_IQ4_NL, CINFER_GGML_MXFP4};
    static const char *const archs[] = {"llama", "qwen2", "qwen3"};
    for (int ai = 0; ai < 3; ai++)
        for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
            struct gguf_model gm = {.arch = archs[ai], .matrix_type = types[ti], .tied = ai != 0,
                                    .head_dim = ai == 2 ? 32 : 0};
            const char *path = cinfer_test_tmp_path("m.gguf");
            write_gguf_model(path, &gm);
            struct cinfer_model *m = load_ok(path);
            const struct cinfer_model_config *c = &m->config;
            int hd = gm.head_dim ? gm.head_dim : G_HIDDEN / G_HEADS;
            ck_assert_str_eq(c->architecture, archs[ai]);
            ck_assert_int_eq(c->rope_interleaved, ai == 0);
            ck_assert_int_eq(c->attention_bias, ai == 1);
            ck_assert_int_eq(c->qk_norm, ai == 2);
            ck_assert_int_eq(c->head_dim, hd);
            ck_assert_int_eq(c->vocab_size, G_VOCAB);
            ck_assert_int_eq(c->tie_word_embeddings, gm.tied);
            ck_assert_int_eq(c->n_eos, 2); /* eos and eot */
            ck_assert_int_eq(c->eos_token_ids[1], 3);
            ck_assert_float_eq(c->rms_norm_eps, 1e-6f);
            const struct cinfer_weight *wq = &m->layers[1].wq;
            ck_assert_int_eq(wq->rows, G_HEADS * hd);
            ck_assert_int_eq(wq->cols, G_HIDDEN);
            static const size_t row_bytes[] = {G_HIDDEN * 4, G_HIDDEN * 2, G_HIDDEN * 2, G_HIDDEN / 32 * 34,
                                               G_HIDDEN / 32 * 18, G_HIDDEN / 32 * 20, G_HIDDEN / 32 * 22,
                                               G_HIDDEN / 32 * 24, G_HIDDEN / 32 * 18, G_HIDDEN / 32 * 17};
            ck_assert_uint_eq(wq->row_bytes, row_bytes[ti]);
            ck_assert_int_eq(wq->dtype, dtype_of_ggml(types[ti]));
            /* In place: the same bytes the GGUF reader sees. */
            struct cinfer_gguf *g = NULL;
            struct cinfer_error err;
            ck_assert_int_eq(cinfer_gguf_open(path, &g, &err), 0);
            const struct cinfer_gguf_tensor *t = cinfer_gguf_find_tensor(g, "blk.1.attn_q.weight");
            ck_assert_int_eq(memcmp(wq->data, t->data, t->nbytes), 0);
            if (ai == 2) { /* the f16 q_norm came out as f32 with the same values */
                t = cinfer_gguf_find_tensor(g, "blk.0.attn_q_norm.weight");
                ck_assert_int_eq(m->layers[0].q_norm.dtype, CINFER_DTYPE_F32);
                for (int i = 0; i < hd; i++) {
                    uint16_t h;
                    memcpy(&h, (const char *)t->data + 2 * i, 2);
                    /* decode f16 by formula, independently of the loader's bit manipulation */
                    int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
                    double v = e == 0 ? ldexp(mant, -24) : e == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, e - 25);
                    if (h & 0x8000)
                        v = -v;
                    float got = ((const float *)m->layers[0].q_norm.data)[i];
                    ck_assert_msg((isnan(v) && isnan(got)) || got == (float)v, "q_norm[%d]: %g vs %g", i, got, v);
                }
            }
            if (ai == 1)
                ck_assert_int_eq(m->layers[0].bk.cols, G_KV * hd);
            if (gm.tied)
                ck_assert_ptr_eq(m->lm_head.data, m->tok_embeddings.data);
            else
                ck_assert_ptr_ne(m->lm_head.data, m->tok_embeddings.data);
            cinfer_gguf_close(&g);
            cinfer_model_free(&m);
        }
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* A model split over 3 files as gguf-split writes them loads from its first part, each
 * weight the bytes of the same model in one file; a missing part, a part opened first,
 * a part out of place, a wrong tensor count, a tensor in two parts and a first part not
 * named as gguf-split names it are refused, naming the file. */
START_TEST(split_gguf_loads_from_its_first_part)
{
    cinfer_test_make_tmp_dir("test_model_load");
    struct gguf_model gm = {.arch = "llama", .matrix_type = CINFER_GGML_Q4_0, .real_values = 1};
    const char *one = cinfer_test_tmp_path("whole.gguf");
    write_gguf_model(one, &gm);
    char first[PATH_MAX], second[PATH_MAX], third[PATH_MAX];
    snprintf(first, sizeof first, "%s", cinfer_test_tmp_path("m-00001-of-00003.gguf"));
    snprintf(second, sizeof second, "%s", cinfer_test_tmp_path("m-00002-of-00003.gguf"));
    snprintf(third, sizeof third, "%s", cinfer_test_tmp_path("m-00003-of-00003.gguf"));
    gm.split_parts = 3;
    write_gguf_model(first, &gm);
    struct cinfer_model *whole = load_ok(one), *split = load_ok(first);
    const struct cinfer_weight *pairs[64][2];
    int n = 0;
    pairs[n][0] = &whole->tok_embeddings, pairs[n++][1] = &split->tok_embeddings;
    pairs[n][0] = &whole->lm_head, pairs[n++][1] = &split->lm_head;
    pairs[n][0] = &whole->output_norm, pairs[n++][1] = &split->output_norm;
    for (int l = 0; l < G_LAYERS; l++)
        for (size_t k = 0; k < cinfer_layer_weight_spec_count; k++) {
            size_t off = cinfer_layer_weight_specs[k].offset;
            pairs[n][0] = (const struct cinfer_weight *)((const char *)&whole->layers[l] + off);
            pairs[n++][1] = (const struct cinfer_weight *)((const char *)&split->layers[l] + off);
        }
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(pairs[i][0]->dtype, pairs[i][1]->dtype);
        ck_assert_int_eq(pairs[i][0]->rows, pairs[i][1]->rows);
        if (pairs[i][0]->data)
            ck_assert_msg(!memcmp(pairs[i][0]->data, pairs[i][1]->data, pairs[i][0]->rows * pairs[i][0]->row_bytes),
                          "weight %d differs in the split model", i);
    }
    ck_assert_int_eq(whole->weight_bytes, split->weight_bytes);
    cinfer_model_free(&whole);
    cinfer_model_free(&split);

    expect_refused(second, CINFER_ERR_INVALID_ARGUMENT, "this is part 2 of 3 of a split model (split.no 1); open its "
                                                        "first part");
    char renamed[PATH_MAX];
    snprintf(renamed, sizeof renamed, "%s", cinfer_test_tmp_path("m.gguf"));
    ck_assert_int_eq(rename(first, renamed), 0);
    expect_refused(renamed, CINFER_ERR_INVALID_ARGUMENT, "does not end in -00001-of-00003.gguf");
    ck_assert_int_eq(rename(renamed, first), 0);
    ck_assert_int_eq(unlink(third), 0);
    expect_refused(first, CINFER_ERR_NOT_FOUND, "part 3 of 3 of the split model");
    expect_refused(first, CINFER_ERR_NOT_FOUND, "m-00003-of-00003.gguf");
    gm.split_fault = 1;
    write_gguf_model(first, &gm);
    expect_refused(first, CINFER_ERR_PARSE, "split.no 2 and split.count 3, expected 1 and 3");
    gm.split_fault = 2;
    write_gguf_model(first, &gm);
    expect_refused(first, CINFER_ERR_PARSE, "split.tensors.count is");
    gm.split_fault = 3;
    write_gguf_model(first, &gm);
    expect_refused(first, CINFER_ERR_PARSE, "tensor output_norm.weight is also in an earlier part");
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* One stored value decoded by its format's definition (not by the loader's code). */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = e == 0 ? ldexp(mant, -24) : e == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, e - 25);
    return h & 0x8000 ? -v : v;
}

static double stored_value(const struct cinfer_weight *w, int64_t r, int64_t c)
{
    const unsigned char *row = (const unsigned char *)w->data + (size_t)r * w->row_bytes;
    uint16_t h;
    uint32_t bits;
    float f;
    switch (w->dtype) {
    case CINFER_DTYPE_F32: memcpy(&f, row + 4 * c, 4); return f;
    case CINFER_DTYPE_F16: memcpy(&h, row + 2 * c, 2); return f16_value(h);
    case CINFER_DTYPE_BF16:
        memcpy(&h, row + 2 * c, 2);
        bits = (uint32_t)h << 16;
        memcpy(&f, &bits, 4);
        return f;
    case CINFER_DTYPE_Q8_0: {
        const unsigned char *block = row + (size_t)(c / 32) * 34; /* f16 scale, then 32 int8 */
        memcpy(&h, block, 2);
        return f16_value(h) * (double)(int8_t)block[2 + c % 32];
    }
    default: { /* the type's definition, checked against numpy by test_dequant */
        int bv = cinfer_dtype_block_values(w->dtype);
        float values[256];
        cinfer_kernel_dequantize_row((enum cinfer_kernel_wtype)w->dtype,
                                     row + (size_t)(c / bv) * cinfer_dtype_row_bytes(w->dtype, bv), bv, values);
        return values[c % bv];
    }
    }
}

/* --dtype: every matrix held in the chosen type, each value the stored one widened
 * exactly or rounded to the nearest of the narrower type; vectors untouched. */
START_TEST(dtype_option_converts_every_matrix)
{
    cinfer_test_make_tmp_dir("test_model_load");
    static const uint32_t stored[] = {CINFER_GGML_F32, CINFER_GGML_F16,  CINFER_GGML_BF16,
                                      CINFER_GGML_Q8_0, CINFER_GGML_Q4_0, CINFER_GGML_MXFP4};
    static const struct { enum cinfer_weight_dtype option; enum cinfer_dtype type; double rel; } targets[] = {
        {CINFER_WEIGHT_DTYPE_F32, CINFER_DTYPE_F32, 0},
        {CINFER_WEIGHT_DTYPE_F16, CINFER_DTYPE_F16, 0x1p-11},   /* half an f16 ulp */
        {CINFER_WEIGHT_DTYPE_BF16, CINFER_DTYPE_BF16, 0x1p-8},  /* half a bf16 ulp */
    };
    int checked = 0;
    for (int si = 0; si < (int)(sizeof stored / sizeof stored[0]); si++)
        for (int tied = 0; tied < 2; tied++) {
            struct gguf_model gm = {.arch = "llama", .matrix_type = stored[si], .tied = tied, .real_values = 1};
            const char *path = cinfer_test_tmp_path("m.gguf");
            write_gguf_model(path, &gm);
            struct cinfer_model *ref = load_ok(path);
            for (int ti = 0; ti < 3; ti++) {
                struct cinfer_model_load_options opts = {.dtype = targets[ti].option};
                struct cinfer_model *m = NULL;
                struct cinfer_error err;
                ck_assert_msg(cinfer_model_load(path, &opts, &m, &err) == 0, "%s", err.message);
                const struct cinfer_weight *pairs[64][2];
                int n = 0;
                pairs[n][0] = &ref->tok_embeddings, pairs[n++][1] = &m->tok_embeddings;
                pairs[n][0] = &ref->lm_head, pairs[n++][1] = &m->lm_head;
                for (int l = 0; l < m->config.num_layers; l++) {
                    const struct cinfer_layer_weights *a = &ref->layers[l], *b = &m->layers[l];
                    const struct cinfer_weight *mats[][2] = {{&a->wq, &b->wq}, {&a->wk, &b->wk}, {&a->wv, &b->wv},
                                                              {&a->wo, &b->wo}, {&a->w_gate, &b->w_gate},
                                                              {&a->w_up, &b->w_up}, {&a->w_down, &b->w_down}};
                    for (size_t k = 0; k < 7; k++)
                        pairs[n][0] = mats[k][0], pairs[n++][1] = mats[k][1];
                    ck_assert_int_eq(b->attn_norm.dtype, CINFER_DTYPE_F32);
                    ck_assert_int_eq(memcmp(a->attn_norm.data, b->attn_norm.data, (size_t)b->attn_norm.cols * 4), 0);
                }
                for (int p = 0; p < n; p++) {
                    const struct cinfer_weight *was = pairs[p][0], *now = pairs[p][1];
                    ck_assert_int_eq(now->dtype, targets[ti].type);
                    ck_assert_int_eq(now->rows, was->rows);
                    for (int64_t r = 0; r < now->rows; r++)
                        for (int64_t c = 0; c < now->cols; c++) {
                            double want = stored_value(was, r, c), got = stored_value(now, r, c);
                            /* widening is exact; narrowing within half an ulp (subnormals: absolute) */
                            int exact = now->dtype == CINFER_DTYPE_F32 || was->dtype == now->dtype;
                            double bound = exact ? 0 : targets[ti].rel * fabs(want) + 0x1p-24;
                            ck_assert_msg((isnan(got) && isnan(want)) || fabs(got - want) <= bound,
                                          "stored %d as %d: [%lld][%lld] %.9g, expected %.9g",
                                          (int)was->dtype, (int)now->dtype, (long long)r, (long long)c, got, want);
                            checked++;
                        }
                }
                ck_assert_int_eq(tied, m->lm_head.data == m->tok_embeddings.data);
                int converted = ref->layers[0].wq.dtype != targets[ti].type;
                ck_assert_int_eq(m->matrices_mapped, !converted);
                cinfer_model_free(&m);
            }
            cinfer_model_free(&ref);
        }
    printf("model_load: --dtype: %d converted values checked\n", checked);
    /* A finite value beyond f16's range would become infinite: refused, named. */
    struct gguf_model wild = {.arch = "llama", .matrix_type = CINFER_GGML_F32};
    const char *path = cinfer_test_tmp_path("wild.gguf");
    write_gguf_model(path, &wild);
    struct cinfer_model_load_options to_f16 = {.dtype = CINFER_WEIGHT_DTYPE_F16};
    struct cinfer_model *m = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(cinfer_model_load(path, &to_f16, &m, &err), CINFER_ERR_RANGE);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.message, "model.dtype (--dtype) f16: the token embedding matrix holds ") &&
                      strstr(err.message, "beyond the range of f16"),
                  "%s", err.message);
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* llama.cpp's convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors), in double. */
static void llama3_rope_freqs(double theta, int head_dim, double factor, double low, double high, double orig,
                              float *out)
{
    for (int i = 0; i < head_dim / 2; i++) {
        double freq = 1.0 / pow(theta, (2.0 * i) / head_dim);
        double wavelen = 2 * M_PI / freq;
        if (wavelen < orig / high)
            out[i] = 1.0f;
        else if (wavelen > orig / low)
            out[i] = (float)factor;
        else {
            double smooth = (orig / wavelen - low) / (high - low);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

/* Hugging Face's _compute_llama3_parameters multiplier of frequency inv, from the config. */
static double hf_llama3_multiplier(const struct cinfer_model_config *c, double inv)
{
    double factor = c->rope_scaling.factor, low = c->rope_scaling.low_freq_factor;
    double high = c->rope_scaling.high_freq_factor, orig = c->rope_scaling.original_max_position_embeddings;
    double wavelen = 2 * M_PI / inv;
    if (wavelen < orig / high)
        return 1.0;
    if (wavelen > orig / low)
        return 1.0 / factor;
    double smooth = (orig / wavelen - low) / (high - low);
    return (1 - smooth) / factor + smooth;
}

START_TEST(gguf_llama3_rope_freqs_reproduced)
{
    cinfer_test_make_tmp_dir("test_model_load");
    static const struct {
        double theta;
        int head_dim;
        double factor, low, high, orig;
    } cases[] = {
        {500000.0, 128, 8.0, 1.0, 4.0, 8192.0}, /* Llama 3.1 8B */
        {500000.0, 64, 32.0, 1.0, 4.0, 8192.0}, /* Llama 3.2 1B */
        {10000.0, 16, 8.0, 1.0, 4.0, 64.0},     /* tests/reference's llama3 family */
        {10000.0, 32, 4.0, 2.0, 3.0, 30.0},     /* one blended pair */
        {10000.0, 16, 2.0, 1.0, 1.5, 3000.0},   /* no blended pair: a step */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        float freqs[64];
        llama3_rope_freqs(cases[k].theta, cases[k].head_dim, cases[k].factor, cases[k].low, cases[k].high,
                          cases[k].orig, freqs);
        struct gguf_model gm = {.arch = "llama", .matrix_type = CINFER_GGML_F32, .head_dim = cases[k].head_dim,
                                .rope_freqs = freqs, .rope_theta = cases[k].theta};
        const char *path = cinfer_test_tmp_path("l3.gguf");
        write_gguf_model(path, &gm);
        struct cinfer_model *m = load_ok(path);
        const struct cinfer_model_config *c = &m->config;
        ck_assert_int_eq(c->rope_scaling.type, CINFER_ROPE_SCALING_LLAMA3);
        ck_assert_float_eq(c->rope_scaling.factor, (float)cases[k].factor);
        double worst = 0;
        for (int i = 0; i < cases[k].head_dim / 2; i++) {
            double inv = 1.0 / pow(cases[k].theta, (2.0 * i) / cases[k].head_dim);
            double rel = fabs(hf_llama3_multiplier(c, inv) * freqs[i] - 1.0);
            worst = fmax(worst, rel);
        }
        ck_assert_msg(worst < 1e-5, "case %zu: worst relative error %g", k, worst);
        printf("model_load: llama3 rope_freqs case %zu (head_dim %d): reproduced within %.1e (low %g, high %g, "
               "orig %d)\n",
               k, cases[k].head_dim, worst, (double)c->rope_scaling.low_freq_factor,
               (double)c->rope_scaling.high_freq_factor, c->rope_scaling.original_max_position_embeddings);
        cinfer_model_free(&m);
    }
    /* Factors that no Llama 3 curve gives are refused, not approximated. */
    float odd[8] = {1, 3, 1, 3, 1, 3, 1, 3};
    struct gguf_model gm = {.arch = "llama", .matrix_type = CINFER_GGML_F32, .rope_freqs = odd, .head_dim = 16};
    write_gguf_model(cinfer_test_tmp_path("odd.gguf"), &gm);
    expect_refused(cinfer_test_tmp_path("odd.gguf"), CINFER_ERR_UNSUPPORTED, "rope_freqs.weight");
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(gguf_errors_name_the_problem)
{
    cinfer_test_make_tmp_dir("test_model_load");
    const char *path = cinfer_test_tmp_path("bad.gguf");
    struct gguf_model base = {.arch = "llama", .matrix_type = CINFER_GGML_F16};
    struct gguf_model gm = base;
    gm.arch = "gpt2";
    write_gguf_model(path, &gm);
    expect_refused(path, CINFER_ERR_UNSUPPORTED, "general.architecture \"gpt2\" is not supported");
    gm = base;
    gm.skip_tensor = "blk.1.ffn_gate.weight";
    write_gguf_model(path, &gm);
    expect_refused(path, CINFER_ERR_NOT_FOUND, "bad.gguf: missing tensor blk.1.ffn_gate.weight");
    gm = base;
    gm.wrong_tensor = "blk.0.ffn_down.weight";
    write_gguf_model(path, &gm);
    expect_refused(path, CINFER_ERR_PARSE,
                   "tensor blk.0.ffn_down.weight has shape [95, 64] (ggml order), expected [96, 64] from GGUF "
                   "llama.embedding_length/llama.feed_forward_length");
    gm = base;
    gm.matrix_type = 9; /* q8_1: a valid ggml type (llama.cpp's activation blocks) no model file holds */
    write_gguf_model(path, &gm);
    expect_refused(path, CINFER_ERR_UNSUPPORTED, "tensor token_embd.weight is stored as q8_1");

    struct gguf_builder b;
    gguf_builder_init(&b, 3);
    gguf_builder_kv_str(&b, "general.architecture", "llama");
    gguf_builder_kv_u32(&b, "llama.embedding_length", 64);
    write_text(path, "");
    ck_assert_int_eq(gguf_builder_write(&b, path, NULL), 0);
    gguf_builder_free(&b);
    expect_refused(path, CINFER_ERR_NOT_FOUND, "GGUF key llama.feed_forward_length is missing");
    /* A corrupt count is refused before anything is sized by it. */
    gguf_builder_init(&b, 3);
    gguf_builder_kv_str(&b, "general.architecture", "llama");
    gguf_builder_kv_u32(&b, "llama.embedding_length", 64);
    gguf_builder_kv_u32(&b, "llama.feed_forward_length", 96);
    gguf_builder_kv_u32(&b, "llama.block_count", 2000000000);
    gguf_builder_kv_u32(&b, "llama.attention.head_count", 4);
    gguf_builder_kv_u32(&b, "llama.vocab_size", 32);
    gguf_builder_kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    ck_assert_int_eq(gguf_builder_write(&b, path, NULL), 0);
    gguf_builder_free(&b);
    expect_refused(path, CINFER_ERR_CONFIG, "implausible sizes: 2000000000 layers");
    write_text(path, "GGUF\3\0\0\0");
    expect_refused(path, CINFER_ERR_PARSE, "GGUF file truncated");
    cinfer_test_remove_tmp_dir();
}
END_TEST

static Suite *suite_model_load(void)
{
    Suite *s = suite_create("model_load");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300); /* file-heavy: generous on a loaded machine */
    tcase_add_test(tc, loads_stories260k);
    tcase_add_test(tc, hf_llama_every_dtype_tied_and_untied);
    tcase_add_test(tc, hf_sharded_with_index);
    tcase_add_test(tc, hf_qwen2_biases_and_qwen3_norms);
    tcase_add_test(tc, hf_llama3_rope_scaling_and_generation_config);
    tcase_add_test(tc, hf_errors_name_the_problem);
    tcase_add_test(tc, hf_config_sliding_windows_and_gemma_keys);
    tcase_add_test(tc, hf_config_qwen2_moe_keys);
    tcase_add_test(tc, hf_config_quantization);
    tcase_add_test(tc, hf_unsupported_dtype);
    tcase_add_test(tc, gguf_families_and_types);
    tcase_add_test(tc, split_gguf_loads_from_its_first_part);
    tcase_add_test(tc, dtype_option_converts_every_matrix);
    tcase_add_test(tc, gguf_llama3_rope_freqs_reproduced);
    tcase_add_test(tc, gguf_errors_name_the_problem);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_model_load)
