/* core/format/safetensors.h — a validating reader for one .safetensors file, mmapped.
 *
 * Layout: u64 header_bytes (little-endian), a JSON object of header_bytes bytes
 *   { "<name>": {"dtype": "F16", "shape": [r, c], "data_offsets": [begin, end]}, ...,
 *     "__metadata__": {"k": "v"} }
 * then the data buffer that the offsets index. Checked on open: the JSON, every field's
 * type, offsets inside the buffer and matching dtype x shape, element alignment, no
 * overlap. Tensor data points into the mapping and lives until close. */
#ifndef CINFER_FORMAT_SAFETENSORS_H
#define CINFER_FORMAT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

enum cinfer_st_dtype {
    CINFER_ST_BOOL, CINFER_ST_U8, CINFER_ST_I8, CINFER_ST_F8_E4M3, CINFER_ST_F8_E5M2,
    CINFER_ST_I16, CINFER_ST_U16, CINFER_ST_F16, CINFER_ST_BF16,
    CINFER_ST_I32, CINFER_ST_U32, CINFER_ST_F32,
    CINFER_ST_I64, CINFER_ST_U64, CINFER_ST_F64,
};

#define CINFER_ST_MAX_DIMS 8

struct cinfer_st_tensor {
    char *name;
    enum cinfer_st_dtype dtype;
    int n_dims;                          /* 0 for a scalar */
    int64_t shape[CINFER_ST_MAX_DIMS];   /* row-major: shape[n_dims-1] is contiguous */
    const void *data;                    /* inside the mapping */
    uint64_t nbytes;
};

struct cinfer_safetensors;

int cinfer_safetensors_open(const char *path, struct cinfer_safetensors **out, struct cinfer_error *err);
void cinfer_safetensors_close(struct cinfer_safetensors **st); /* sets *st to NULL */

const char *cinfer_safetensors_path(const struct cinfer_safetensors *st);
size_t cinfer_safetensors_count(const struct cinfer_safetensors *st);
/* Tensors in name order. */
const struct cinfer_st_tensor *cinfer_safetensors_at(const struct cinfer_safetensors *st, size_t i);
const struct cinfer_st_tensor *cinfer_safetensors_find(const struct cinfer_safetensors *st, const char *name);
/* Bytes of the whole file (for progress and statistics). */
size_t cinfer_safetensors_file_bytes(const struct cinfer_safetensors *st);

const char *cinfer_st_dtype_name(enum cinfer_st_dtype t);
size_t cinfer_st_dtype_bytes(enum cinfer_st_dtype t);

#endif
