/* tests/support/gguf_builder.h — writes GGUF files byte by byte (independently of the
 * reader in core/format) so tests and fuzz seeds can make good files and precisely
 * broken ones. Layout offsets are reported so a test can corrupt one field. */
#ifndef CINFER_TEST_GGUF_BUILDER_H
#define CINFER_TEST_GGUF_BUILDER_H

#include <stddef.h>
#include <stdint.h>

struct gguf_byte_buf {
    unsigned char *bytes;
    size_t len, cap;
};

struct gguf_builder {
    uint32_t version;
    uint32_t alignment;
    struct gguf_byte_buf kv;      /* the key-value records */
    uint64_t n_kv;
    struct gguf_byte_buf infos;   /* the tensor records */
    uint64_t n_tensors;
    size_t *info_pos;             /* offset of each tensor record inside infos */
    struct gguf_byte_buf data;    /* the data section (each tensor aligned) */
};

/* Where things landed in the finished file (byte offsets from its start). */
struct gguf_layout {
    size_t n_tensors_pos;     /* u64 tensor count */
    size_t n_kv_pos;          /* u64 key count */
    size_t kv_start;          /* first key-value record */
    size_t infos_start;       /* first tensor record */
    size_t tensor_record[64]; /* each tensor record (name length first), first 64 tensors */
    size_t data_start;        /* the data section */
    size_t total_bytes;
};

void gguf_builder_init(struct gguf_builder *b, uint32_t version);
void gguf_builder_free(struct gguf_builder *b);

/* Adds general.alignment (uint32) and aligns tensor data to it. */
void gguf_builder_set_alignment(struct gguf_builder *b, uint32_t alignment);

void gguf_builder_kv_u8(struct gguf_builder *b, const char *key, uint8_t v);
void gguf_builder_kv_u32(struct gguf_builder *b, const char *key, uint32_t v);
void gguf_builder_kv_i32(struct gguf_builder *b, const char *key, int32_t v);
void gguf_builder_kv_u64(struct gguf_builder *b, const char *key, uint64_t v);
void gguf_builder_kv_i64(struct gguf_builder *b, const char *key, int64_t v);
void gguf_builder_kv_f32(struct gguf_builder *b, const char *key, float v);
void gguf_builder_kv_f64(struct gguf_builder *b, const char *key, double v);
void gguf_builder_kv_bool(struct gguf_builder *b, const char *key, int v);
void gguf_builder_kv_str(struct gguf_builder *b, const char *key, const char *v);
void gguf_builder_kv_str_array(struct gguf_builder *b, const char *key, const char *const *v, size_t n);
void gguf_builder_kv_f32_array(struct gguf_builder *b, const char *key, const float *v, size_t n);
void gguf_builder_kv_i32_array(struct gguf_builder *b, const char *key, const int32_t *v, size_t n);
/* Any value: the type number then the value bytes exactly as given. */
void gguf_builder_kv_raw(struct gguf_builder *b, const char *key, uint32_t type, const void *value, size_t n);

/* A tensor; data (nbytes of it) is copied into the data section at the next aligned offset.
 * ne is in ggml order (ne[0] = row length). */
void gguf_builder_tensor(struct gguf_builder *b, const char *name, uint32_t ggml_type, uint32_t n_dims,
                         const uint64_t *ne, const void *data, size_t nbytes);

/* The finished file in a malloc'd buffer the caller frees; layout may be NULL. */
unsigned char *gguf_builder_finish(const struct gguf_builder *b, size_t *len, struct gguf_layout *layout);
/* Finishes and writes to path; returns 0 or -1. */
int gguf_builder_write(const struct gguf_builder *b, const char *path, struct gguf_layout *layout);

/* Writes len bytes to path (for corrupted copies); returns 0 or -1. */
int gguf_write_bytes(const char *path, const void *bytes, size_t len);

/* Little-endian patches into a finished buffer. */
void gguf_patch_u32(unsigned char *file, size_t pos, uint32_t v);
void gguf_patch_u64(unsigned char *file, size_t pos, uint64_t v);

#endif
