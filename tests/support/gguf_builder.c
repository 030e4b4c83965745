/* GGUF writer for tests: every field is appended explicitly in file order, so the
 * bytes follow the format description rather than the reader under test. */
#include "support/gguf_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void buf_put(struct gguf_byte_buf *buf, const void *p, size_t n)
{
    if (buf->len + n > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 256;
        while (cap < buf->len + n)
            cap *= 2;
        buf->bytes = realloc(buf->bytes, cap);
        if (!buf->bytes)
            abort(); /* a test helper: out of memory is fatal */
        buf->cap = cap;
    }
    if (n)
        memcpy(buf->bytes + buf->len, p, n);
    buf->len += n;
}

static void put_u32(struct gguf_byte_buf *buf, uint32_t v)
{
    unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                           (unsigned char)(v >> 24)};
    buf_put(buf, le, 4);
}

static void put_u64(struct gguf_byte_buf *buf, uint64_t v)
{
    put_u32(buf, (uint32_t)v);
    put_u32(buf, (uint32_t)(v >> 32));
}

static void put_str(struct gguf_byte_buf *buf, const char *s)
{
    put_u64(buf, strlen(s));
    buf_put(buf, s, strlen(s));
}

static void key_header(struct gguf_builder *b, const char *key, uint32_t type)
{
    put_str(&b->kv, key);
    put_u32(&b->kv, type);
    b->n_kv++;
}

void gguf_builder_init(struct gguf_builder *b, uint32_t version)
{
    memset(b, 0, sizeof *b);
    b->version = version;
    b->alignment = 32;
}

void gguf_builder_free(struct gguf_builder *b)
{
    free(b->kv.bytes);
    free(b->infos.bytes);
    free(b->data.bytes);
    free(b->info_pos);
    memset(b, 0, sizeof *b);
}

void gguf_builder_set_alignment(struct gguf_builder *b, uint32_t alignment)
{
    gguf_builder_kv_u32(b, "general.alignment", alignment);
    b->alignment = alignment;
}

void gguf_builder_kv_raw(struct gguf_builder *b, const char *key, uint32_t type, const void *value, size_t n)
{
    key_header(b, key, type);
    buf_put(&b->kv, value, n);
}

void gguf_builder_kv_u8(struct gguf_builder *b, const char *key, uint8_t v)
{
    key_header(b, key, 0);
    buf_put(&b->kv, &v, 1);
}

void gguf_builder_kv_u32(struct gguf_builder *b, const char *key, uint32_t v)
{
    key_header(b, key, 4);
    put_u32(&b->kv, v);
}

void gguf_builder_kv_i32(struct gguf_builder *b, const char *key, int32_t v)
{
    key_header(b, key, 5);
    put_u32(&b->kv, (uint32_t)v);
}

void gguf_builder_kv_u64(struct gguf_builder *b, const char *key, uint64_t v)
{
    key_header(b, key, 10);
    put_u64(&b->kv, v);
}

void gguf_builder_kv_i64(struct gguf_builder *b, const char *key, int64_t v)
{
    key_header(b, key, 11);
    put_u64(&b->kv, (uint64_t)v);
}

void gguf_builder_kv_f32(struct gguf_builder *b, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    key_header(b, key, 6);
    put_u32(&b->kv, bits);
}

void gguf_builder_kv_f64(struct gguf_builder *b, const char *key, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    key_header(b, key, 12);
    put_u64(&b->kv, bits);
}

void gguf_builder_kv_bool(struct gguf_builder *b, const char *key, int v)
{
    unsigned char byte = v ? 1 : 0;
    key_header(b, key, 7);
    buf_put(&b->kv, &byte, 1);
}

void gguf_builder_kv_str(struct gguf_builder *b, const char *key, const char *v)
{
    key_header(b, key, 8);
    put_str(&b->kv, v);
}

void gguf_builder_kv_str_array(struct gguf_builder *b, const char *key, const char *const *v, size_t n)
{
    key_header(b, key, 9);
    put_u32(&b->kv, 8);
    put_u64(&b->kv, n);
    for (size_t i = 0; i < n; i++)
        put_str(&b->kv, v[i]);
}

void gguf_builder_kv_f32_array(struct gguf_builder *b, const char *key, const float *v, size_t n)
{
    key_header(b, key, 9);
    put_u32(&b->kv, 6);
    put_u64(&b->kv, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        put_u32(&b->kv, bits);
    }
}

void gguf_builder_kv_i32_array(struct gguf_builder *b, const char *key, const int32_t *v, size_t n)
{
    key_header(b, key, 9);
    put_u32(&b->kv, 5);
    put_u64(&b->kv, n);
    for (size_t i = 0; i < n; i++)
        put_u32(&b->kv, (uint32_t)v[i]);
}

void gguf_builder_tensor(struct gguf_builder *b, const char *name, uint32_t ggml_type, uint32_t n_dims,
                         const uint64_t *ne, const void *data, size_t nbytes)
{
    static const unsigned char zeros[256];
    while (b->data.len % b->alignment)
        buf_put(&b->data, zeros, 1);
    b->info_pos = realloc(b->info_pos, (b->n_tensors + 1) * sizeof *b->info_pos);
    if (!b->info_pos)
        abort();
    b->info_pos[b->n_tensors++] = b->infos.len;
    put_str(&b->infos, name);
    put_u32(&b->infos, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        put_u64(&b->infos, ne[d]);
    put_u32(&b->infos, ggml_type);
    put_u64(&b->infos, b->data.len);
    buf_put(&b->data, data, nbytes);
}

unsigned char *gguf_builder_finish(const struct gguf_builder *b, size_t *len, struct gguf_layout *layout)
{
    struct gguf_byte_buf out = {0};
    struct gguf_layout lay;
    memset(&lay, 0, sizeof lay);
    buf_put(&out, "GGUF", 4);
    put_u32(&out, b->version);
    lay.n_tensors_pos = out.len;
    put_u64(&out, b->n_tensors);
    lay.n_kv_pos = out.len;
    put_u64(&out, b->n_kv);
    lay.kv_start = out.len;
    buf_put(&out, b->kv.bytes, b->kv.len);
    lay.infos_start = out.len;
    for (uint64_t i = 0; i < b->n_tensors && i < 64; i++)
        lay.tensor_record[i] = lay.infos_start + b->info_pos[i];
    buf_put(&out, b->infos.bytes, b->infos.len);
    static const unsigned char zero = 0;
    while (out.len % b->alignment)
        buf_put(&out, &zero, 1);
    lay.data_start = out.len;
    buf_put(&out, b->data.bytes, b->data.len);
    lay.total_bytes = out.len;
    if (layout)
        *layout = lay;
    *len = out.len;
    return out.bytes;
}

int gguf_write_bytes(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t wrote = len ? fwrite(bytes, 1, len, f) : 0;
    return fclose(f) == 0 && wrote == len ? 0 : -1;
}

int gguf_builder_write(const struct gguf_builder *b, const char *path, struct gguf_layout *layout)
{
    size_t len;
    unsigned char *bytes = gguf_builder_finish(b, &len, layout);
    int rc = gguf_write_bytes(path, bytes, len);
    free(bytes);
    return rc;
}

void gguf_patch_u32(unsigned char *file, size_t pos, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        file[pos + i] = (unsigned char)(v >> (8 * i));
}

void gguf_patch_u64(unsigned char *file, size_t pos, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        file[pos + i] = (unsigned char)(v >> (8 * i));
}
