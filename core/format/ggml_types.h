/* core/format/ggml_types.h — block geometry of ggml's tensor types, so a GGUF reader can
 * size (and bounds-check) any tensor, including types cinfer does not compute with. */
#ifndef CINFER_FORMAT_GGML_TYPES_H
#define CINFER_FORMAT_GGML_TYPES_H

#include <stdint.h>

struct cinfer_ggml_type_info {
    const char *name;        /* ggml's name, e.g. "q8_0" */
    uint32_t block_elems;    /* elements per block along a row */
    uint32_t block_bytes;    /* bytes per block */
};

/* NULL when ggml has no such type (or it was removed from ggml). */
const struct cinfer_ggml_type_info *cinfer_ggml_type_info(uint32_t type);

#endif
