/* cinfer/gguf.h — a validating reader for GGUF files (v2 and v3), mmapped.
 *
 * Everything is checked on open: the magic, the version, every length and count
 * against the bytes that remain, tensor offsets inside the data section, no overlap,
 * known tensor types. Strings and tensor data point into the mapping and live until
 * cinfer_gguf_close(). Used by the model loader and by the tokenizer plugin (the
 * vocabulary embedded as tokenizer.ggml.* keys). */
#ifndef CINFER_GGUF_H
#define CINFER_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum cinfer_gguf_value_type {
    CINFER_GGUF_UINT8 = 0, CINFER_GGUF_INT8 = 1, CINFER_GGUF_UINT16 = 2, CINFER_GGUF_INT16 = 3,
    CINFER_GGUF_UINT32 = 4, CINFER_GGUF_INT32 = 5, CINFER_GGUF_FLOAT32 = 6, CINFER_GGUF_BOOL = 7,
    CINFER_GGUF_STRING = 8, CINFER_GGUF_ARRAY = 9, CINFER_GGUF_UINT64 = 10, CINFER_GGUF_INT64 = 11,
    CINFER_GGUF_FLOAT64 = 12,
};

/* ggml tensor types cinfer reads (the numbers are ggml's). */
enum cinfer_ggml_type {
    CINFER_GGML_F32 = 0, CINFER_GGML_F16 = 1, CINFER_GGML_Q4_0 = 2, CINFER_GGML_Q4_1 = 3, CINFER_GGML_Q5_0 = 6,
    CINFER_GGML_Q5_1 = 7, CINFER_GGML_Q8_0 = 8, CINFER_GGML_Q2_K = 10, CINFER_GGML_Q3_K = 11, CINFER_GGML_Q4_K = 12,
    CINFER_GGML_Q5_K = 13, CINFER_GGML_Q6_K = 14, CINFER_GGML_IQ4_NL = 20, CINFER_GGML_IQ4_XS = 23,
    CINFER_GGML_BF16 = 30, CINFER_GGML_MXFP4 = 39,
};

struct cinfer_gguf;

/* A string inside the file: not NUL-terminated. */
struct cinfer_gguf_str {
    const char *data;
    uint64_t len;
};

struct cinfer_gguf_tensor {
    struct cinfer_gguf_str name;
    uint32_t type;        /* enum cinfer_ggml_type */
    uint32_t n_dims;      /* 1..4 */
    uint64_t ne[4];       /* ggml order: ne[0] is the fastest-varying (row length) */
    const void *data;     /* inside the mapping, aligned to the file's alignment */
    uint64_t nbytes;
};

CINFER_API int cinfer_gguf_open(const char *path, struct cinfer_gguf **out, struct cinfer_error *err);
CINFER_API void cinfer_gguf_close(struct cinfer_gguf **g);   /* sets *g to NULL */
CINFER_API const char *cinfer_gguf_path(const struct cinfer_gguf *g);
CINFER_API uint32_t cinfer_gguf_version(const struct cinfer_gguf *g);

/* Key-value metadata. Index lookups return -1 when the key is absent. */
CINFER_API int64_t cinfer_gguf_key_count(const struct cinfer_gguf *g);
CINFER_API int64_t cinfer_gguf_find_key(const struct cinfer_gguf *g, const char *key);
CINFER_API struct cinfer_gguf_str cinfer_gguf_key_name(const struct cinfer_gguf *g, int64_t idx);
CINFER_API enum cinfer_gguf_value_type cinfer_gguf_key_type(const struct cinfer_gguf *g, int64_t idx);

/* Typed getters by key name. CINFER_ERR_NOT_FOUND when absent, CINFER_ERR_PARSE with a
 * message naming the file, the key, the expected and the found type otherwise.
 * Integer getters accept any integer type whose value fits. */
CINFER_API int cinfer_gguf_get_u64(const struct cinfer_gguf *g, const char *key, uint64_t *out, struct cinfer_error *err);
CINFER_API int cinfer_gguf_get_u32(const struct cinfer_gguf *g, const char *key, uint32_t *out, struct cinfer_error *err);
CINFER_API int cinfer_gguf_get_i32(const struct cinfer_gguf *g, const char *key, int32_t *out, struct cinfer_error *err);
CINFER_API int cinfer_gguf_get_f32(const struct cinfer_gguf *g, const char *key, float *out, struct cinfer_error *err);
CINFER_API int cinfer_gguf_get_bool(const struct cinfer_gguf *g, const char *key, int *out, struct cinfer_error *err);
CINFER_API int cinfer_gguf_get_str(const struct cinfer_gguf *g, const char *key, struct cinfer_gguf_str *out, struct cinfer_error *err);

/* Arrays: element type and count; numeric elements are read with the element getters
 * (the file gives no alignment guarantee for them), strings with get_array_str. */
CINFER_API int cinfer_gguf_get_array(const struct cinfer_gguf *g, const char *key, enum cinfer_gguf_value_type *elem_type,
                          uint64_t *count, struct cinfer_error *err);
CINFER_API int cinfer_gguf_array_str(const struct cinfer_gguf *g, const char *key, uint64_t i, struct cinfer_gguf_str *out);
CINFER_API int cinfer_gguf_array_f32(const struct cinfer_gguf *g, const char *key, uint64_t i, float *out);   /* FLOAT32 */
CINFER_API int cinfer_gguf_array_i64(const struct cinfer_gguf *g, const char *key, uint64_t i, int64_t *out); /* any integer type */

/* Tensors. */
CINFER_API uint64_t cinfer_gguf_tensor_count(const struct cinfer_gguf *g);
CINFER_API const struct cinfer_gguf_tensor *cinfer_gguf_tensor_at(const struct cinfer_gguf *g, uint64_t i);
CINFER_API const struct cinfer_gguf_tensor *cinfer_gguf_find_tensor(const struct cinfer_gguf *g, const char *name);

#ifdef __cplusplus
}
#endif
#endif
