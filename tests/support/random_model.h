/* tests/support/random_model.h — a small Llama-family model with random weights, built
 * in memory for tests of the forward pass (no file, no loader). */
#ifndef CINFER_TEST_RANDOM_MODEL_H
#define CINFER_TEST_RANDOM_MODEL_H

#include <stdint.h>

#include "model/model.h"

struct random_model_spec {
    int vocab, hidden, intermediate, layers;
    int heads, kv_heads, head_dim; /* head_dim may differ from hidden / heads */
    int qk_norm;                   /* per-head q/k RMSNorm (Qwen3) */
    int attention_bias;            /* q/k/v biases (Qwen2) */
    int rope_interleaved;
    int llama3_rope_scaling;       /* factor 8, low 1, high 4, original context 32 */
    enum cinfer_dtype dtype;       /* of the matrices (any); norms and biases stay F32 */
    uint64_t seed;
};

/* NULL when out of memory. Free with random_model_free. */
struct cinfer_model *random_model_create(const struct random_model_spec *spec);
void random_model_free(struct cinfer_model **m);

/* The same model written as a GGUF file (architecture llama, qwen2 or qwen3 as the
 * spec's flags say; tied embeddings never), for tests that need its weights in a file
 * mapping. A llama GGUF loads with rope_interleaved 1 whatever the spec says: the
 * loaded model is the file's, not the in-memory one. Returns 0, or -1 when it cannot
 * be built or written. */
int random_model_write_gguf(const struct random_model_spec *spec, const char *path);

/* Deterministic uniform floats in [-1, 1) (xorshift). */
float random_uniform(uint64_t *state);

/* Stores k floats as dtype into dst (block-quantized types: k a multiple of the block,
 * tests/support/quantize.c's simple rounding). */
void random_model_store_row(const float *src, int k, enum cinfer_dtype dtype, void *dst);
/* Bytes of a row of k values of dtype. */
size_t random_model_row_bytes(enum cinfer_dtype dtype, int k);

#endif
