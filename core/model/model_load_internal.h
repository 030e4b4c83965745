/* core/model/model_load_internal.h — what the format-specific loaders (HF safetensors
 * folders, GGUF files) share: the loader-private storage behind cinfer_model.storage,
 * a format-neutral view of a stored tensor, and the checked binding of one tensor to
 * one cinfer_weight. */
#ifndef CINFER_MODEL_LOAD_INTERNAL_H
#define CINFER_MODEL_LOAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/gguf.h"
#include "format/safetensors.h"
#include "model/model.h"

#define CINFER_Q8_0_BLOCK 32
#define CINFER_Q8_0_BLOCK_BYTES 34
#define CINFER_MXFP4_BLOCK 32
#define CINFER_MXFP4_BLOCK_BYTES 17

/* One row of n_blocks MXFP4 blocks as the published gpt-oss checkpoints store them
 * (blocks: (n_blocks, 16) nibble pairs, scales: (n_blocks) e8m0 exponents) into cinfer's
 * MXFP4 row (n_blocks * 17 bytes), the same values (mxfp4_repack.c). */
void cinfer_mxfp4_repack_row(const uint8_t *blocks, const uint8_t *scales, int64_t n_blocks, uint8_t *out);

size_t cinfer_dtype_row_bytes(enum cinfer_dtype t, int64_t cols);
float cinfer_f16_to_f32(uint16_t h);
float cinfer_bf16_to_f32(uint16_t b);

/* Everything a loaded model keeps alive: open files (their mappings hold the weights
 * used in place) and buffers the loader converted into. */
struct cinfer_model_storage {
    struct cinfer_gguf *gguf;          /* a GGUF model, or its first part */
    struct cinfer_gguf **parts;        /* the other parts of a split GGUF model (gguf_split.c) */
    size_t n_parts;
    struct cinfer_safetensors **shards;
    size_t n_shards;
    void **owned;
    size_t n_owned, cap_owned;
    uint64_t stored_bytes;      /* of every bound tensor, as stored in the files */
    int owned_matrices;         /* some matrix is a loader-made copy, not a view of a mapping (HF gpt-oss
                                 * experts, transposed or repacked): the model's matrices_mapped is then 0 */
};

/* A stored tensor as the binder sees it. dims are in the file's own order: for
 * safetensors row-major (dims[0] = rows), for GGUF ggml order (dims[0] = row length). */
struct cinfer_stored_tensor {
    const char *file;          /* for messages */
    const char *name;
    int supported;             /* dtype maps to a cinfer_dtype */
    enum cinfer_dtype dtype;
    const char *dtype_name;    /* the file's spelling, for messages */
    int ggml_order;
    int n_dims;
    int64_t dims[8];
    const void *data;
    uint64_t nbytes;
};

/* What a weight should be and which configuration fields say so, e.g.
 * rows_from "config.json intermediate_size", cols_from "hidden_size". A vector has rows 1
 * and is stored 1-D. */
struct cinfer_weight_expect {
    int vector;
    int64_t rows, cols;
    const char *from;          /* "config.json intermediate_size/hidden_size" */
};

/* Checks t against want and fills w: 2-D weights point into the mapping, 1-D weights are
 * widened to f32 into storage-owned buffers when stored as f16/bf16 (so every norm and
 * bias the forward pass reads is f32). */
int cinfer_bind_weight(struct cinfer_model_storage *s, const struct cinfer_stored_tensor *t,
                       const struct cinfer_weight_expect *want, struct cinfer_weight *w, struct cinfer_error *err);

/* Takes ownership of p (freed with the model); on failure frees p and returns NOMEM. */
int cinfer_storage_own(struct cinfer_model_storage *s, void *p, struct cinfer_error *err);

/* The per-layer weights both formats hold, with their names in each. */
enum cinfer_layer_dim {
    DIM_ONE, DIM_HIDDEN, DIM_Q, DIM_KV, DIM_FFN, DIM_HEAD, DIM_QKV, DIM_FFN2,
    DIM_EXPERTS, DIM_MOE_FFN, /* a sparse layer's expert count and expert intermediate size */
    DIM_SHARED_FFN,           /* its shared expert's intermediate size (Qwen2-MoE) */
    DIM_HEADS,                /* query heads (gpt-oss's attention sinks: one per head) */
    DIM_COUNT
};
enum cinfer_layer_presence {
    PRESENT_ALWAYS,
    PRESENT_IF_BIAS,
    PRESENT_IF_QK_NORM,
    PRESENT_IF_SANDWICH,
    PRESENT_UNLESS_FUSED_QKV,     /* wq, wk, wv: views of the fused matrix otherwise */
    PRESENT_UNLESS_FUSED_GATE_UP, /* w_gate, w_up */
    PRESENT_IF_OUTPUT_BIAS,       /* bo (gpt-oss) */
    PRESENT_IF_SINKS,             /* attention sinks (gpt-oss) */
};
struct cinfer_layer_weight_spec {
    const char *hf_name;       /* after "model.layers.N." */
    const char *hf_name_sandwich; /* its name in a sandwich_norms family (Gemma), NULL: the same */
    const char *gguf_name;     /* after "blk.N." */
    size_t offset;             /* of the cinfer_weight in cinfer_layer_weights */
    enum cinfer_layer_dim rows, cols;  /* rows DIM_ONE: a vector of cols */
    enum cinfer_layer_presence presence;
};
extern const struct cinfer_layer_weight_spec cinfer_layer_weight_specs[];
extern const size_t cinfer_layer_weight_spec_count;
/* A fused matrix as stored (Phi-3) and the layer weights that are row ranges of it. */
struct cinfer_fused_weight_spec {
    const char *hf_name;       /* after "model.layers.N." */
    const char *gguf_name;     /* after "blk.N." */
    enum cinfer_layer_dim rows; /* DIM_QKV or DIM_FFN2; cols are DIM_HIDDEN */
    int (*present)(const struct cinfer_model_config *c);
};
extern const struct cinfer_fused_weight_spec cinfer_fused_weight_specs[];
extern const size_t cinfer_fused_weight_spec_count;
/* Points the layer's parts (wq/wk/wv or w_gate/w_up) at their rows of the bound fused matrix. */
void cinfer_fused_weight_split(const struct cinfer_fused_weight_spec *spec, const struct cinfer_model_config *c,
                               const struct cinfer_weight *fused, struct cinfer_layer_weights *layer);

/* Whether a model of this configuration holds the weight, and its HF name. */
int cinfer_layer_weight_present(const struct cinfer_layer_weight_spec *spec, const struct cinfer_model_config *c);
const char *cinfer_layer_weight_hf_name(const struct cinfer_layer_weight_spec *spec,
                                        const struct cinfer_model_config *c);
/* ... and whether layer l holds it: a sparse layer has experts instead of the dense MLP. */
int cinfer_layer_weight_in_layer(const struct cinfer_layer_weight_spec *spec, const struct cinfer_model_config *c,
                                 int l);
/* A sparse layer's expert array, zeroed and owned by the storage. */
int cinfer_layer_experts_alloc(struct cinfer_model_storage *s, const struct cinfer_model_config *c,
                               struct cinfer_layer_weights *layer, struct cinfer_error *err);
/* Checks the mixture-of-experts numbers of c (source names the file). */
int cinfer_moe_config_check(const struct cinfer_model_config *c, const char *source, struct cinfer_error *err);
int64_t cinfer_layer_dim_size(const struct cinfer_model_config *c, enum cinfer_layer_dim d);

/* model.dtype: every matrix not already of type target becomes an owned copy of that
 * type (weight_convert.c); *converted says whether any did. */
int cinfer_model_convert_matrices(struct cinfer_model *m, enum cinfer_dtype target, int *converted,
                                  struct cinfer_error *err);

/* Split GGUF models (gguf_split.c): opens the parts after s->gguf when its split.count
 * says there are some (checking split.no, split.count and split.tensors.count), finds a
 * tensor in any part, names the file a tensor is in, and closes the parts. */
int cinfer_gguf_split_open(const char *path, struct cinfer_model_storage *s, struct cinfer_error *err);
const struct cinfer_gguf_tensor *cinfer_gguf_split_find(const struct cinfer_model_storage *s, const char *name);
const char *cinfer_gguf_split_file_of(const struct cinfer_model_storage *s, const struct cinfer_gguf_tensor *t);
void cinfer_gguf_split_close(struct cinfer_model_storage *s);

/* The format loaders fill m (config, weights, storage); model_load.c does the rest. */
int cinfer_model_load_hf(const char *folder, struct cinfer_model *m, struct cinfer_error *err);
int cinfer_model_load_gguf(const char *path, struct cinfer_model *m, struct cinfer_error *err);

/* Checks the numbers any Llama-family config must satisfy; names source ("config.json"). */
int cinfer_model_config_check(const struct cinfer_model_config *c, const char *source, struct cinfer_error *err);

#endif
