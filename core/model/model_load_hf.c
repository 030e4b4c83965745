/* Hugging Face model folders: config.json (+ generation_config.json) and the weights in
 * model.safetensors or in the shards that model.safetensors.index.json lists. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels.h"
#include "model/arch_traits.h"
#include "model/hf_config.h"
#include "model/model_load_internal.h"

/* Where the tensors are: one file, or shards found through the index's weight_map. */
struct hf_weights {
    const char *folder;
    struct cinfer_model_storage *storage;
    json_t *weight_map;        /* NULL for a single file */
    char index_path[4096];
};

static int open_shard(struct hf_weights *hw, const char *file_name, struct cinfer_error *err)
{
    struct cinfer_model_storage *s = hw->storage;
    struct cinfer_safetensors **grown = realloc(s->shards, (s->n_shards + 1) * sizeof *grown);
    if (!grown)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", hw->folder);
    s->shards = grown;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", hw->folder, file_name);
    int rc = cinfer_safetensors_open(path, &s->shards[s->n_shards], err);
    if (rc == CINFER_ERR_NOT_FOUND && hw->weight_map)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s names shard %s, which is missing", hw->index_path,
                                file_name);
    if (!rc)
        s->n_shards++;
    return rc;
}

static const char *shard_name_of(const struct cinfer_safetensors *st)
{
    const char *path = cinfer_safetensors_path(st);
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Reads the index and opens every shard it names (each once). */
static int open_index(struct hf_weights *hw, struct cinfer_error *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(hw->index_path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: not valid JSON: %s at byte %d (line %d, column %d)",
                                hw->index_path, jerr.text, jerr.position, jerr.line, jerr.column);
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        json_decref(root);
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: expected an object \"weight_map\"", hw->index_path);
    }
    hw->weight_map = json_incref(map);
    json_decref(root);
    const char *tensor;
    json_t *file;
    json_object_foreach(hw->weight_map, tensor, file) {
        const char *name = json_string_value(file);
        /* Shards live in the folder itself: no paths, so an index cannot point elsewhere. */
        if (!name || !*name || strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "%s: weight_map entry for %s is not a file name in the model folder",
                                    hw->index_path, tensor);
        int seen = 0;
        for (size_t i = 0; i < hw->storage->n_shards && !seen; i++)
            seen = !strcmp(shard_name_of(hw->storage->shards[i]), name);
        if (!seen) {
            int rc = open_shard(hw, name, err);
            if (rc)
                return rc;
        }
    }
    return CINFER_OK;
}

static int open_weights(struct hf_weights *hw, struct cinfer_error *err)
{
    snprintf(hw->index_path, sizeof hw->index_path, "%s/model.safetensors.index.json", hw->folder);
    if (access(hw->index_path, F_OK) == 0)
        return open_index(hw, err);
    char single[4096];
    snprintf(single, sizeof single, "%s/model.safetensors", hw->folder);
    if (access(single, F_OK) != 0)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND,
                                "%s: no model.safetensors and no model.safetensors.index.json in the model folder",
                                hw->folder);
    return open_shard(hw, "model.safetensors", err);
}

static void describe(const struct cinfer_safetensors *st, const struct cinfer_st_tensor *t,
                     struct cinfer_stored_tensor *out)
{
    memset(out, 0, sizeof *out);
    out->file = cinfer_safetensors_path(st);
    out->name = t->name;
    out->dtype_name = cinfer_st_dtype_name(t->dtype);
    out->supported = 1;
    switch (t->dtype) {
    case CINFER_ST_F32: out->dtype = CINFER_DTYPE_F32; break;
    case CINFER_ST_F16: out->dtype = CINFER_DTYPE_F16; break;
    case CINFER_ST_BF16: out->dtype = CINFER_DTYPE_BF16; break;
    default: out->supported = 0; break;
    }
    out->ggml_order = 0;
    out->n_dims = t->n_dims;
    for (int d = 0; d < t->n_dims; d++)
        out->dims[d] = t->shape[d];
    out->data = t->data;
    out->nbytes = t->nbytes;
}

/* Finds a tensor; NOT_FOUND (with a message) when absent, so optional ones can be probed. */
static int find_tensor(const struct hf_weights *hw, const char *name, struct cinfer_stored_tensor *out,
                       struct cinfer_error *err)
{
    const struct cinfer_model_storage *s = hw->storage;
    if (hw->weight_map) {
        const char *file = json_string_value(json_object_get(hw->weight_map, name));
        if (!file)
            return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: missing tensor %s (no weight_map entry)",
                                    hw->index_path, name);
        for (size_t i = 0; i < s->n_shards; i++)
            if (!strcmp(shard_name_of(s->shards[i]), file)) {
                const struct cinfer_st_tensor *t = cinfer_safetensors_find(s->shards[i], name);
                if (!t)
                    return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: missing tensor %s, which %s places in this shard",
                                            cinfer_safetensors_path(s->shards[i]), name, hw->index_path);
                describe(s->shards[i], t, out);
                return CINFER_OK;
            }
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s: shard %s was not opened", hw->index_path, file);
    }
    const struct cinfer_st_tensor *t = cinfer_safetensors_find(s->shards[0], name);
    if (!t)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: missing tensor %s", cinfer_safetensors_path(s->shards[0]),
                                name);
    describe(s->shards[0], t, out);
    return CINFER_OK;
}

static const char *const dim_names[DIM_COUNT] = {
    [DIM_ONE] = "1", [DIM_HIDDEN] = "hidden_size", [DIM_Q] = "num_attention_heads*head_dim",
    [DIM_KV] = "num_key_value_heads*head_dim", [DIM_FFN] = "intermediate_size", [DIM_HEAD] = "head_dim",
    [DIM_QKV] = "(num_attention_heads+2*num_key_value_heads)*head_dim", [DIM_FFN2] = "2*intermediate_size",
    [DIM_EXPERTS] = "num_experts", [DIM_MOE_FFN] = "moe_intermediate_size", [DIM_HEADS] = "num_attention_heads",
    [DIM_SHARED_FFN] = "shared_expert_intermediate_size",
};

static int bind(const struct hf_weights *hw, const char *name, int vector, int64_t rows, int64_t cols,
                const char *rows_from, const char *cols_from, struct cinfer_weight *w, struct cinfer_error *err)
{
    struct cinfer_stored_tensor t;
    int rc = find_tensor(hw, name, &t, err);
    if (rc)
        return rc;
    char from[160];
    if (vector)
        snprintf(from, sizeof from, "config.json %s", cols_from);
    else
        snprintf(from, sizeof from, "config.json %s/%s", rows_from, cols_from);
    struct cinfer_weight_expect want = {vector, rows, cols, from};
    return cinfer_bind_weight(hw->storage, &t, &want, w, err);
}

/* Qwen2-MoE's shared expert of a sparse layer: mlp.shared_expert.{gate,up,down}_proj
 * and its gate, mlp.shared_expert_gate (a (1, hidden) linear map). */
static int bind_shared_expert(const struct hf_weights *hw, struct cinfer_model *m, int l, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    struct cinfer_layer_weights *layer = &m->layers[l];
    if (c->shared_expert_intermediate_size <= 0)
        return CINFER_OK;
    static const char *const parts[3] = {"gate_proj", "up_proj", "down_proj"};
    struct cinfer_weight *dst[3] = {&layer->shared_expert.gate, &layer->shared_expert.up, &layer->shared_expert.down};
    int64_t ffn = c->shared_expert_intermediate_size, hidden = c->hidden_size;
    const char *ffn_from = dim_names[DIM_SHARED_FFN];
    char name[160];
    for (int p = 0; p < 3; p++) {
        int down = p == 2;
        snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert.%s.weight", l, parts[p]);
        int rc = bind(hw, name, 0, down ? hidden : ffn, down ? ffn : hidden, down ? "hidden_size" : ffn_from,
                      down ? ffn_from : "hidden_size", dst[p], err);
        if (rc)
            return rc;
    }
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", l);
    return bind(hw, name, 0, 1, hidden, "1", "hidden_size", &layer->shared_expert_gate, err);
}

/* A sparse layer's router and experts, each expert its own tensors (Qwen3-MoE: mlp.gate,
 * mlp.experts.E.{gate,up,down}_proj; Mixtral: block_sparse_moe.gate and .experts.E.w1
 * (gate), w3 (up), w2 (down)); each is mapped in place like a dense matrix. */
static int bind_experts(const struct hf_weights *hw, struct cinfer_model *m, int l, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    struct cinfer_layer_weights *layer = &m->layers[l];
    int mixtral = cinfer_arch_by_name(c->architecture)->moe == CINFER_MOE_MIXTRAL;
    const char *block = mixtral ? "block_sparse_moe" : "mlp";
    const char *experts_from = mixtral ? "num_local_experts" : "num_experts";
    const char *ffn_from = mixtral ? "intermediate_size" : "moe_intermediate_size";
    static const char *const part_names[2][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
    char name[160];
    snprintf(name, sizeof name, "model.layers.%d.%s.gate.weight", l, block);
    int rc = bind(hw, name, 0, c->n_experts, c->hidden_size, experts_from, "hidden_size", &layer->router, err);
    if (rc || (rc = cinfer_layer_experts_alloc(hw->storage, c, layer, err)))
        return rc;
    for (int e = 0; e < c->n_experts; e++) {
        struct cinfer_expert_weights *x = &layer->experts[e];
        struct cinfer_weight *parts[3] = {&x->gate, &x->up, &x->down};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.experts.%d.%s.weight", l, block, e,
                     part_names[mixtral][p]);
            int down = p == 2;
            int64_t ffn = c->moe_intermediate_size, hidden = c->hidden_size;
            if ((rc = bind(hw, name, 0, down ? hidden : ffn, down ? ffn : hidden, down ? "hidden_size" : ffn_from,
                           down ? ffn_from : "hidden_size", parts[p], err)))
                return rc;
        }
    }
    return bind_shared_expert(hw, m, l, err);
}

/* A gpt-oss expert tensor as transformers stores it, (E, in, out) for x @ W, turned into
 * E row-major (out', in) matrices: out' = out / stride outputs starting at output
 * `first` (gate_up_proj interleaves gate and up: stride 2, first 0 or 1; down_proj:
 * stride 1). Owned copies of the stored element type (a transposition moves bytes only). */
static int transpose_experts(const struct hf_weights *hw, const struct cinfer_stored_tensor *t, int n_experts,
                             int64_t in, int64_t out, int stride, int first, struct cinfer_weight *dst0,
                             size_t dst_step, struct cinfer_error *err)
{
    size_t elem = t->dtype == CINFER_DTYPE_F32 ? 4 : 2;
    int64_t rows = out / stride;
    hw->storage->owned_matrices = 1;
    for (int e = 0; e < n_experts; e++) {
        uint8_t *m = malloc((size_t)rows * (size_t)in * elem); /* (rows, in) */
        if (!m)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory transposing %s", t->file, t->name);
        const uint8_t *src = (const uint8_t *)t->data + (size_t)e * (size_t)in * (size_t)out * elem; /* (in, out) */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < in; i++)
                memcpy(m + ((size_t)r * (size_t)in + (size_t)i) * elem,
                       src + ((size_t)i * (size_t)out + (size_t)(r * stride + first)) * elem, elem);
        int rc = cinfer_storage_own(hw->storage, m, err);
        if (rc)
            return rc;
        struct cinfer_weight *w = (struct cinfer_weight *)((char *)dst0 + (size_t)e * dst_step);
        *w = (struct cinfer_weight){t->dtype, rows, in, m, (size_t)in * elem};
    }
    return CINFER_OK;
}

/* A gpt-oss expert bias (E, out): every expert's outputs first, first + stride, ...
 * widened to f32 vectors. */
static int split_expert_bias(const struct hf_weights *hw, const struct cinfer_stored_tensor *t, int n_experts,
                             int64_t out, int stride, int first, struct cinfer_weight *dst0, size_t dst_step,
                             struct cinfer_error *err)
{
    int64_t n = out / stride;
    float value[1]; /* one at a time: the stored type is f32, f16 or bf16 */
    size_t elem = t->dtype == CINFER_DTYPE_F32 ? 4 : 2;
    for (int e = 0; e < n_experts; e++) {
        float *v = malloc((size_t)n * sizeof *v); /* (n) */
        if (!v)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory widening %s", t->file, t->name);
        for (int64_t j = 0; j < n; j++) {
            size_t at = (size_t)e * (size_t)out + (size_t)(j * stride + first);
            const uint8_t *p = (const uint8_t *)t->data + at * elem;
            cinfer_kernel_dequantize_row((enum cinfer_kernel_wtype)t->dtype, p, 1, value);
            v[j] = value[0];
        }
        int rc = cinfer_storage_own(hw->storage, v, err);
        if (rc)
            return rc;
        struct cinfer_weight *w = (struct cinfer_weight *)((char *)dst0 + (size_t)e * dst_step);
        *w = (struct cinfer_weight){CINFER_DTYPE_F32, 1, n, v, (size_t)n * sizeof(float)};
    }
    return CINFER_OK;
}

/* 1 when t has exactly the n_dims dimensions dims. */
static int dims_equal(const struct cinfer_stored_tensor *t, int n_dims, const int64_t *dims)
{
    int same = t->n_dims == n_dims;
    for (int d = 0; same && d < n_dims; d++)
        same = t->dims[d] == dims[d];
    return same;
}

/* A stored tensor of exactly the given dimensions, in f32, f16 or bf16. */
static int find_shaped(const struct hf_weights *hw, const char *name, int n_dims, const int64_t *dims,
                       const char *from, struct cinfer_stored_tensor *t, struct cinfer_error *err)
{
    int rc = find_tensor(hw, name, t, err);
    if (rc)
        return rc;
    if (!dims_equal(t, n_dims, dims))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tensor %s has %d dimensions, expected (%s) = (%lld, %lld%s",
                                t->file, name, t->n_dims, from, (long long)dims[0], (long long)dims[1],
                                n_dims == 3 ? ", ...)" : ")");
    if (!t->supported)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: tensor %s is stored as %s; expected f32, f16 or bf16",
                                t->file, name, t->dtype_name);
    hw->storage->stored_bytes += t->nbytes;
    return CINFER_OK;
}

/* "(a, b, c)": a stored tensor's dimensions, for messages. */
static const char *shape_text(const struct cinfer_stored_tensor *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < t->n_dims && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    if (used < size)
        snprintf(buf + used, size - used, ")");
    return buf;
}

/* A U8 tensor of exactly the given dimensions (an MXFP4 _blocks or _scales tensor). */
static int find_u8_shaped(const struct hf_weights *hw, const char *name, int n_dims, const int64_t *dims,
                          const char *from, struct cinfer_stored_tensor *t, struct cinfer_error *err)
{
    int rc = find_tensor(hw, name, t, err);
    if (rc)
        return rc;
    char found[128], want[128];
    struct cinfer_stored_tensor expected = {.n_dims = n_dims};
    for (int d = 0; d < n_dims; d++)
        expected.dims[d] = dims[d];
    if (!dims_equal(t, n_dims, dims))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: MXFP4 tensor %s has shape %s, expected (%s) = %s", t->file,
                                name, shape_text(t, found, sizeof found), from,
                                shape_text(&expected, want, sizeof want));
    if (strcmp(t->dtype_name, "U8") != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: MXFP4 tensor %s is stored as %s, expected U8", t->file,
                                name, t->dtype_name);
    hw->storage->stored_bytes += t->nbytes;
    return CINFER_OK;
}

/* A gpt-oss expert tensor as the published checkpoints store it: name_blocks (E, out,
 * in/32, 16) and name_scales (E, out, in/32), rows being output features (already
 * cinfer's row-major (out, in), no transposition). Each expert's rows first, first +
 * stride, ... (gate_up_proj: gate the even rows, up the odd ones, as for the float
 * layout's columns) are repacked into owned MXFP4 matrices: 4.25 bits a value, as stored. */
static int bind_mxfp4_experts(const struct hf_weights *hw, const char *name, int n_experts, int64_t in,
                              int64_t out, const char *from, int stride, struct cinfer_weight *dst[2], size_t dst_step,
                              struct cinfer_error *err)
{
    char blocks_name[192], scales_name[192], blocks_from[192], scales_from[192];
    snprintf(blocks_name, sizeof blocks_name, "%s_blocks", name);
    snprintf(scales_name, sizeof scales_name, "%s_scales", name);
    const char *in_name = stride == 2 ? "hidden_size" : "intermediate_size";
    if (in % CINFER_MXFP4_BLOCK != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s/config.json: %s is %lld, not a multiple of 32 (the MXFP4 "
                                "block that %s is stored in)", hw->folder, in_name, (long long)in, blocks_name);
    int64_t n_blocks = in / CINFER_MXFP4_BLOCK;
    int64_t blocks_dims[4] = {n_experts, out, n_blocks, 16}, scales_dims[3] = {n_experts, out, n_blocks};
    snprintf(blocks_from, sizeof blocks_from, "%s, %s/32, 16", from, in_name);
    snprintf(scales_from, sizeof scales_from, "%s, %s/32", from, in_name);
    struct cinfer_stored_tensor blocks, scales;
    int rc = find_u8_shaped(hw, blocks_name, 4, blocks_dims, blocks_from, &blocks, err);
    if (rc)
        return rc;
    struct cinfer_error scales_err = {0};
    rc = find_u8_shaped(hw, scales_name, 3, scales_dims, scales_from, &scales, &scales_err);
    if (rc == CINFER_ERR_NOT_FOUND)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: tensor %s has no %s (its MXFP4 exponents): %s",
                                blocks.file, blocks_name, scales_name, scales_err.message);
    if (rc) {
        *err = scales_err;
        return rc;
    }
    int64_t rows = out / stride;
    size_t row_bytes = (size_t)n_blocks * CINFER_MXFP4_BLOCK_BYTES;
    hw->storage->owned_matrices = 1;
    for (int part = 0; part < stride; part++)
        for (int e = 0; e < n_experts; e++) {
            uint8_t *m = malloc((size_t)rows * row_bytes); /* (rows, in) in MXFP4 blocks */
            if (!m)
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory repacking %s", blocks.file,
                                        blocks_name);
            for (int64_t r = 0; r < rows; r++) {
                size_t src_row = (size_t)e * (size_t)out + (size_t)(r * stride + part);
                cinfer_mxfp4_repack_row((const uint8_t *)blocks.data + src_row * (size_t)n_blocks * 16,
                                        (const uint8_t *)scales.data + src_row * (size_t)n_blocks, n_blocks,
                                        m + (size_t)r * row_bytes);
            }
            if ((rc = cinfer_storage_own(hw->storage, m, err)))
                return rc;
            struct cinfer_weight *w = (struct cinfer_weight *)((char *)dst[part] + (size_t)e * dst_step);
            *w = (struct cinfer_weight){CINFER_DTYPE_MXFP4, rows, in, m, row_bytes};
        }
    return CINFER_OK;
}

/* An expert tensor in the float layout (transposed and split) or, when that is absent
 * and name_blocks is present, in the published MXFP4 layout. */
static int bind_expert_tensor(const struct hf_weights *hw, const char *name, int n_experts, int64_t in, int64_t out,
                              const char *from, int stride, struct cinfer_weight *dst[2], size_t dst_step,
                              struct cinfer_error *err)
{
    struct cinfer_stored_tensor t, probe;
    struct cinfer_error ignored;
    char blocks[192], float_from[192];
    snprintf(blocks, sizeof blocks, "%s_blocks", name);
    int rc = find_tensor(hw, name, &t, err);
    if (rc == CINFER_ERR_NOT_FOUND && find_tensor(hw, blocks, &probe, &ignored) == CINFER_OK)
        return bind_mxfp4_experts(hw, name, n_experts, in, out, from, stride, dst, dst_step, err);
    if (rc)
        return rc;
    int64_t dims[3] = {n_experts, in, out};
    snprintf(float_from, sizeof float_from, "num_local_experts, %s, %s",
             stride == 2 ? "hidden_size" : "intermediate_size", stride == 2 ? "2*intermediate_size" : "hidden_size");
    if ((rc = find_shaped(hw, name, 3, dims, float_from, &t, err)))
        return rc;
    for (int part = 0; part < stride; part++)
        if ((rc = transpose_experts(hw, &t, n_experts, in, out, stride, part, dst[part], dst_step, err)))
            return rc;
    return CINFER_OK;
}

/* gpt-oss: mlp.router (weight and bias) and the experts' fused tensors, split per expert
 * (gate = gate_up_proj[..., ::2], up = [..., 1::2], as transformers' GptOssExperts reads them),
 * stored in a float type or, as published, in MXFP4 blocks (kept MXFP4). */
static int bind_gpt_oss_experts(const struct hf_weights *hw, struct cinfer_model *m, int l, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    struct cinfer_layer_weights *layer = &m->layers[l];
    int E = c->n_experts;
    int64_t hidden = c->hidden_size, ffn = c->moe_intermediate_size;
    char name[160];
    snprintf(name, sizeof name, "model.layers.%d.mlp.router.weight", l);
    int rc = bind(hw, name, 0, E, hidden, "num_local_experts", "hidden_size", &layer->router, err);
    snprintf(name, sizeof name, "model.layers.%d.mlp.router.bias", l);
    if (rc || (rc = bind(hw, name, 1, 1, E, NULL, "num_local_experts", &layer->router_bias, err)) ||
        (rc = cinfer_layer_experts_alloc(hw->storage, c, layer, err)))
        return rc;
    struct cinfer_expert_weights *x = layer->experts;
    size_t step = sizeof *x;
    struct cinfer_stored_tensor t;
    int64_t gate_up_bias_dims[2] = {E, 2 * ffn}, down_bias_dims[2] = {E, hidden};
    struct cinfer_weight *gate_up[2] = {&x->gate, &x->up}, *down[2] = {&x->down, NULL};
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj", l);
    if ((rc = bind_expert_tensor(hw, name, E, hidden, 2 * ffn, "num_local_experts, 2*intermediate_size", 2, gate_up,
                                 step, err)))
        return rc;
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj", l);
    if ((rc = bind_expert_tensor(hw, name, E, ffn, hidden, "num_local_experts, hidden_size", 1, down, step, err)))
        return rc;
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj_bias", l);
    if ((rc = find_shaped(hw, name, 2, gate_up_bias_dims, "num_local_experts, 2*intermediate_size", &t, err)) ||
        (rc = split_expert_bias(hw, &t, E, 2 * ffn, 2, 0, &x->gate_bias, step, err)) ||
        (rc = split_expert_bias(hw, &t, E, 2 * ffn, 2, 1, &x->up_bias, step, err)))
        return rc;
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj_bias", l);
    if ((rc = find_shaped(hw, name, 2, down_bias_dims, "num_local_experts, hidden_size", &t, err)))
        return rc;
    return split_expert_bias(hw, &t, E, hidden, 1, 0, &x->down_bias, step, err);
}

static int bind_layers(const struct hf_weights *hw, struct cinfer_model *m, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &m->config;
    for (int l = 0; l < c->num_layers; l++) {
        for (size_t k = 0; k < cinfer_layer_weight_spec_count; k++) {
            const struct cinfer_layer_weight_spec *spec = &cinfer_layer_weight_specs[k];
            if (!cinfer_layer_weight_in_layer(spec, c, l))
                continue;
            char name[160];
            snprintf(name, sizeof name, "model.layers.%d.%s", l, cinfer_layer_weight_hf_name(spec, c));
            struct cinfer_weight *w = (struct cinfer_weight *)((char *)&m->layers[l] + spec->offset);
            int rc = bind(hw, name, spec->rows == DIM_ONE, cinfer_layer_dim_size(c, spec->rows),
                          cinfer_layer_dim_size(c, spec->cols), dim_names[spec->rows], dim_names[spec->cols], w, err);
            if (rc)
                return rc;
        }
        for (size_t k = 0; k < cinfer_fused_weight_spec_count; k++) {
            const struct cinfer_fused_weight_spec *spec = &cinfer_fused_weight_specs[k];
            if (!spec->present(c))
                continue;
            char name[160];
            snprintf(name, sizeof name, "model.layers.%d.%s", l, spec->hf_name);
            struct cinfer_weight fused;
            int rc = bind(hw, name, 0, cinfer_layer_dim_size(c, spec->rows), c->hidden_size, dim_names[spec->rows],
                          dim_names[DIM_HIDDEN], &fused, err);
            if (rc)
                return rc;
            cinfer_fused_weight_split(spec, c, &fused, &m->layers[l]);
        }
        if (cinfer_model_layer_sparse(c, l)) {
            int gpt_oss = cinfer_arch_by_name(c->architecture)->moe == CINFER_MOE_GPT_OSS;
            int rc = gpt_oss ? bind_gpt_oss_experts(hw, m, l, err) : bind_experts(hw, m, l, err);
            if (rc)
                return rc;
        }
    }
    return CINFER_OK;
}

/* transformers ties lm_head to the embeddings when tie_word_embeddings is true (ignoring
 * any stored lm_head); a checkpoint without lm_head and without the key is tied too. */
static int bind_lm_head(const struct hf_weights *hw, struct cinfer_model *m, int tie_given, struct cinfer_error *err)
{
    struct cinfer_model_config *c = &m->config;
    struct cinfer_stored_tensor probe;
    struct cinfer_error ignored;
    int present = find_tensor(hw, "lm_head.weight", &probe, &ignored) == CINFER_OK;
    if (c->tie_word_embeddings || (!present && !tie_given)) {
        c->tie_word_embeddings = 1;
        m->lm_head = m->tok_embeddings;
        return CINFER_OK;
    }
    if (!present)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND,
                                "%s: missing tensor lm_head.weight, and config.json has tie_word_embeddings false",
                                hw->folder);
    return bind(hw, "lm_head.weight", 0, c->vocab_size, c->hidden_size, "vocab_size", "hidden_size", &m->lm_head, err);
}

int cinfer_model_load_hf(const char *folder, struct cinfer_model *m, struct cinfer_error *err)
{
    struct cinfer_hf_config hc;
    int rc = cinfer_hf_config_read(folder, &hc, err);
    if (rc)
        return rc;
    char source[4096];
    snprintf(source, sizeof source, "%s/config.json", folder);
    if ((rc = cinfer_model_config_check(&hc.model, source, err)))
        return rc;
    m->config = hc.model;
    m->layers = calloc((size_t)m->config.num_layers, sizeof *m->layers);
    if (!m->layers)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory for %d layers", folder, m->config.num_layers);

    struct hf_weights hw = {.folder = folder, .storage = m->storage};
    const struct cinfer_model_config *c = &m->config;
    if (!(rc = open_weights(&hw, err)) &&
        !(rc = bind(&hw, "model.embed_tokens.weight", 0, c->vocab_size, c->hidden_size, "vocab_size", "hidden_size",
                    &m->tok_embeddings, err)) &&
        !(rc = bind_layers(&hw, m, err)) &&
        !(rc = bind(&hw, "model.norm.weight", 1, 1, c->hidden_size, NULL, "hidden_size", &m->output_norm, err)))
        rc = bind_lm_head(&hw, m, hc.tie_word_embeddings_given, err);
    json_decref(hw.weight_map);
    return rc;
}
