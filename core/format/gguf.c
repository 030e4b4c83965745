/* A validating GGUF reader (v2 and v3), following ggml's gguf.cpp layout:
 *
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims,
 *   u64 ne[n_dims], u32 ggml type, u64 offset), padding to general.alignment, data.
 *
 * Everything is checked once in cinfer_gguf_open(), so the getters can trust the
 * parsed records. All integers are little-endian; cinfer targets little-endian hosts. */
#include "cinfer/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/ggml_types.h"
#include "util/mmap_file.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

struct gguf_kv {
    struct cinfer_gguf_str name;
    enum cinfer_gguf_value_type type;
    const unsigned char *value;   /* scalars: the value; STRING: its length prefix; ARRAY: first element */
    enum cinfer_gguf_value_type elem_type; /* ARRAY only */
    uint64_t count;                        /* ARRAY only */
    uint64_t *str_offsets;        /* ARRAY of STRING: byte offset of each element from value */
};

struct cinfer_gguf {
    char *path;
    struct cinfer_mapped_file file;
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    struct gguf_kv *kv;
    uint64_t n_tensors;
    struct cinfer_gguf_tensor *tensors;
    uint64_t *tensor_offsets;      /* offset of each tensor from the data section */
    uint64_t data_start;           /* file offset of the data section */
};

/* Bounds-checked reading from the mapping. */
struct cursor {
    const unsigned char *base;
    uint64_t pos, size;
    const char *path;
    struct cinfer_error *err;
};

static const char *value_type_name(uint32_t t)
{
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                        "bool", "string", "array", "uint64", "int64", "float64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* Fixed size of a scalar value type; 0 for STRING, ARRAY and unknown types. */
static uint64_t scalar_size(uint32_t t)
{
    switch (t) {
    case CINFER_GGUF_UINT8: case CINFER_GGUF_INT8: case CINFER_GGUF_BOOL: return 1;
    case CINFER_GGUF_UINT16: case CINFER_GGUF_INT16: return 2;
    case CINFER_GGUF_UINT32: case CINFER_GGUF_INT32: case CINFER_GGUF_FLOAT32: return 4;
    case CINFER_GGUF_UINT64: case CINFER_GGUF_INT64: case CINFER_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static int cursor_need(struct cursor *c, uint64_t n_bytes, const char *what)
{
    if (n_bytes <= c->size - c->pos)
        return CINFER_OK;
    return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                            "%s: GGUF file truncated: %s needs %" PRIu64 " bytes at offset %" PRIu64
                            ", only %" PRIu64 " remain",
                            c->path, what, n_bytes, c->pos, c->size - c->pos);
}

static int read_u32(struct cursor *c, uint32_t *out, const char *what)
{
    int rc = cursor_need(c, 4, what);
    if (rc)
        return rc;
    memcpy(out, c->base + c->pos, 4);
    c->pos += 4;
    return CINFER_OK;
}

static int read_u64(struct cursor *c, uint64_t *out, const char *what)
{
    int rc = cursor_need(c, 8, what);
    if (rc)
        return rc;
    memcpy(out, c->base + c->pos, 8);
    c->pos += 8;
    return CINFER_OK;
}

static int read_str(struct cursor *c, struct cinfer_gguf_str *out, const char *what)
{
    uint64_t len;
    int rc = read_u64(c, &len, what);
    if (rc)
        return rc;
    if ((rc = cursor_need(c, len, what)))
        return rc;
    out->data = (const char *)c->base + c->pos;
    out->len = len;
    c->pos += len;
    return CINFER_OK;
}

static int str_eq(struct cinfer_gguf_str s, const char *z)
{
    size_t n = strlen(z);
    return s.len == n && memcmp(s.data, z, n) == 0;
}

static int str_eq_str(struct cinfer_gguf_str a, struct cinfer_gguf_str b)
{
    return a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
}

/* Names in messages are printed with %.*s; cap them so one absurd name cannot fill the message. */
static int name_len(struct cinfer_gguf_str s)
{
    return s.len > 200 ? 200 : (int)s.len;
}

static int parse_value(struct cursor *c, struct gguf_kv *kv, uint64_t key_index)
{
    char what[320];
    snprintf(what, sizeof what, "key %" PRIu64 " (\"%.*s\") of type %s", key_index, name_len(kv->name),
             kv->name.data, value_type_name(kv->type));
    kv->value = c->base + c->pos;
    if (kv->type == CINFER_GGUF_STRING) {
        struct cinfer_gguf_str s;
        return read_str(c, &s, what);
    }
    if (kv->type != CINFER_GGUF_ARRAY) {
        uint64_t n = scalar_size(kv->type);
        if (n == 0)
            return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                    "%s: GGUF key \"%.*s\" has unknown value type %u (expected 0..12)",
                                    c->path, name_len(kv->name), kv->name.data, (unsigned)kv->type);
        int rc = cursor_need(c, n, what);
        c->pos += rc ? 0 : n;
        return rc;
    }
    uint32_t elem_type;
    int rc = read_u32(c, &elem_type, what);
    if (!rc)
        rc = read_u64(c, &kv->count, what);
    if (rc)
        return rc;
    kv->elem_type = (enum cinfer_gguf_value_type)elem_type;
    kv->value = c->base + c->pos;
    if (elem_type == CINFER_GGUF_ARRAY)
        return cinfer_error_set(c->err, CINFER_ERR_UNSUPPORTED, "%s: GGUF key \"%.*s\" is an array of arrays",
                                c->path, name_len(kv->name), kv->name.data);
    if (elem_type == CINFER_GGUF_STRING) {
        /* Each element takes at least its 8-byte length: bound the count before allocating. */
        if (kv->count > (c->size - c->pos) / 8)
            return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                    "%s: GGUF key \"%.*s\": array of %" PRIu64
                                    " strings cannot fit in the %" PRIu64 " bytes that remain (file truncated?)",
                                    c->path, name_len(kv->name), kv->name.data, kv->count, c->size - c->pos);
        kv->str_offsets = malloc((kv->count ? kv->count : 1) * sizeof *kv->str_offsets);
        if (!kv->str_offsets)
            return cinfer_error_set(c->err, CINFER_ERR_NOMEM, "%s: no memory for %" PRIu64 " strings of key \"%.*s\"",
                                    c->path, kv->count, name_len(kv->name), kv->name.data);
        for (uint64_t i = 0; i < kv->count; i++) {
            kv->str_offsets[i] = (uint64_t)(c->base + c->pos - kv->value);
            struct cinfer_gguf_str s;
            snprintf(what, sizeof what, "element %" PRIu64 " of string array \"%.*s\"", i, name_len(kv->name),
                     kv->name.data);
            if ((rc = read_str(c, &s, what)))
                return rc;
        }
        return CINFER_OK;
    }
    uint64_t elem_bytes = scalar_size(elem_type);
    if (elem_bytes == 0)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                "%s: GGUF key \"%.*s\" is an array of unknown element type %u (expected 0..12)",
                                c->path, name_len(kv->name), kv->name.data, (unsigned)elem_type);
    if (kv->count > (c->size - c->pos) / elem_bytes)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                "%s: GGUF key \"%.*s\": array of %" PRIu64 " %s values needs more than the %" PRIu64
                                " bytes that remain at offset %" PRIu64 " (file truncated?)",
                                c->path, name_len(kv->name), kv->name.data, kv->count, value_type_name(elem_type),
                                c->size - c->pos, c->pos);
    c->pos += kv->count * elem_bytes;
    return CINFER_OK;
}

static int parse_kvs(struct cinfer_gguf *g, struct cursor *c)
{
    /* A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes. */
    if (g->n_kv > (c->size - c->pos) / 13)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                "%s: GGUF header claims %" PRIu64 " key-value pairs, more than the %" PRIu64
                                " bytes that remain can hold (file truncated or count corrupt)",
                                g->path, g->n_kv, c->size - c->pos);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    if (!g->kv)
        return cinfer_error_set(c->err, CINFER_ERR_NOMEM, "%s: no memory for %" PRIu64 " keys", g->path, g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        struct gguf_kv *kv = &g->kv[i];
        char what[64];
        snprintf(what, sizeof what, "the name of key %" PRIu64, i);
        int rc = read_str(c, &kv->name, what);
        uint32_t type = 0;
        if (!rc)
            rc = read_u32(c, &type, "a key's value type");
        if (rc)
            return rc;
        kv->type = (enum cinfer_gguf_value_type)type;
        for (uint64_t j = 0; j < i; j++)
            if (str_eq_str(g->kv[j].name, kv->name))
                return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: GGUF key \"%.*s\" appears twice (keys %" PRIu64
                                        " and %" PRIu64 ")", g->path, name_len(kv->name), kv->name.data, j, i);
        if ((rc = parse_value(c, kv, i)))
            return rc;
    }
    return CINFER_OK;
}

static int read_alignment(struct cinfer_gguf *g, struct cinfer_error *err)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t idx = cinfer_gguf_find_key(g, "general.alignment");
    if (idx < 0)
        return CINFER_OK;
    const struct gguf_kv *kv = &g->kv[idx];
    if (kv->type != CINFER_GGUF_UINT32)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: GGUF key general.alignment has type %s, expected uint32",
                                g->path, value_type_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->value, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: GGUF general.alignment is %u, expected a non-zero power of two", g->path, a);
    g->alignment = a;
    return CINFER_OK;
}

static int tensor_nbytes(const struct cinfer_gguf *g, const struct cinfer_gguf_tensor *t, uint64_t *out,
                         struct cinfer_error *err)
{
    const struct cinfer_ggml_type_info *info = cinfer_ggml_type_info(t->type);
    if (!info)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: GGUF tensor %.*s has unknown ggml type %u",
                                g->path, name_len(t->name), t->name.data, (unsigned)t->type);
    if (t->ne[0] % info->block_elems != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: GGUF tensor %.*s of type %s has rows of %" PRIu64
                                " elements, expected a multiple of the block size %u",
                                g->path, name_len(t->name), t->name.data, info->name, t->ne[0], info->block_elems);
    uint64_t bytes = t->ne[0] / info->block_elems * info->block_bytes;
    for (uint32_t d = 1; d < t->n_dims; d++) {
        if (t->ne[d] != 0 && bytes > UINT64_MAX / t->ne[d])
            return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: GGUF tensor %.*s: size of shape overflows 64 bits",
                                    g->path, name_len(t->name), t->name.data);
        bytes *= t->ne[d];
    }
    *out = bytes;
    return CINFER_OK;
}

static int parse_tensor_infos(struct cinfer_gguf *g, struct cursor *c)
{
    /* A tensor record takes at least 8 (name length) + 4 + 8 + 4 + 8 bytes. */
    if (g->n_tensors > (c->size - c->pos) / 32)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                "%s: GGUF header claims %" PRIu64 " tensors, more than the %" PRIu64
                                " bytes that remain can describe (file truncated or count corrupt)",
                                g->path, g->n_tensors, c->size - c->pos);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    g->tensor_offsets = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensor_offsets);
    if (!g->tensors || !g->tensor_offsets)
        return cinfer_error_set(c->err, CINFER_ERR_NOMEM, "%s: no memory for %" PRIu64 " tensors", g->path,
                                g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct cinfer_gguf_tensor *t = &g->tensors[i];
        char what[320];
        snprintf(what, sizeof what, "the name of tensor %" PRIu64, i);
        int rc = read_str(c, &t->name, what);
        if (rc)
            return rc;
        snprintf(what, sizeof what, "the record of tensor %" PRIu64 " (%.*s)", i, name_len(t->name), t->name.data);
        if ((rc = read_u32(c, &t->n_dims, what)))
            return rc;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: GGUF tensor %.*s has %u dimensions, expected 1..4",
                                    g->path, name_len(t->name), t->name.data, (unsigned)t->n_dims);
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if ((rc = read_u64(c, &t->ne[d], what)))
                return rc;
            if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
                return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                        "%s: GGUF tensor %.*s has dimension %u of %" PRIu64 " elements, expected 1..2^63-1",
                                        g->path, name_len(t->name), t->name.data, (unsigned)d, t->ne[d]);
        }
        if ((rc = read_u32(c, &t->type, what)) || (rc = read_u64(c, &g->tensor_offsets[i], what)))
            return rc;
        if ((rc = tensor_nbytes(g, t, &t->nbytes, c->err)))
            return rc;
        if (g->tensor_offsets[i] % g->alignment != 0)
            return cinfer_error_set(c->err, CINFER_ERR_PARSE,
                                    "%s: GGUF tensor %.*s starts at data offset %" PRIu64
                                    ", not a multiple of the alignment %" PRIu64,
                                    g->path, name_len(t->name), t->name.data, g->tensor_offsets[i], g->alignment);
        for (uint64_t j = 0; j < i; j++)
            if (str_eq_str(g->tensors[j].name, t->name))
                return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: GGUF tensor %.*s appears twice (tensors %" PRIu64
                                        " and %" PRIu64 ")", g->path, name_len(t->name), t->name.data, j, i);
    }
    return CINFER_OK;
}

struct placed {
    uint64_t offset; /* from the data section */
    uint64_t index;  /* into tensors */
};

static int compare_by_offset(const void *a, const void *b)
{
    uint64_t oa = ((const struct placed *)a)->offset, ob = ((const struct placed *)b)->offset;
    return oa < ob ? -1 : oa > ob;
}

/* Every tensor lies inside the data section and no two share a byte. */
static int place_tensors(struct cinfer_gguf *g, struct cinfer_error *err)
{
    uint64_t size = g->file.size_bytes;
    if (g->n_tensors == 0)
        return CINFER_OK;
    if (g->data_start > size)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: GGUF file truncated: the data section should start at offset %" PRIu64
                                " but the file has %" PRIu64 " bytes",
                                g->path, g->data_start, size);
    uint64_t data_bytes = size - g->data_start;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct cinfer_gguf_tensor *t = &g->tensors[i];
        uint64_t off = g->tensor_offsets[i];
        if (off > data_bytes || t->nbytes > data_bytes - off)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "%s: GGUF tensor %.*s spans data offsets %" PRIu64 "..+%" PRIu64
                                    ", outside the data section of %" PRIu64 " bytes (file truncated?)",
                                    g->path, name_len(t->name), t->name.data, off, t->nbytes, data_bytes);
        t->data = g->file.data + g->data_start + off;
    }
    struct placed *order = malloc(g->n_tensors * sizeof *order);
    if (!order)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: no memory to sort tensors", g->path);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        order[i] = (struct placed){g->tensor_offsets[i], i};
    qsort(order, g->n_tensors, sizeof *order, compare_by_offset);
    int rc = CINFER_OK;
    for (uint64_t k = 1; k < g->n_tensors && !rc; k++) {
        const struct cinfer_gguf_tensor *a = &g->tensors[order[k - 1].index], *b = &g->tensors[order[k].index];
        uint64_t a_end = order[k - 1].offset + a->nbytes;
        if (a_end > order[k].offset)
            rc = cinfer_error_set(err, CINFER_ERR_PARSE,
                                  "%s: GGUF tensors %.*s (data offsets %" PRIu64 "..%" PRIu64 ") and %.*s (from %" PRIu64
                                  ") overlap",
                                  g->path, name_len(a->name), a->name.data, order[k - 1].offset, a_end,
                                  name_len(b->name), b->name.data, order[k].offset);
    }
    free(order);
    return rc;
}

static int parse(struct cinfer_gguf *g, struct cinfer_error *err)
{
    struct cursor c = {g->file.data, 0, g->file.size_bytes, g->path, err};
    int rc = cursor_need(&c, 4, "the magic \"GGUF\"");
    if (rc)
        return rc;
    if (memcmp(c.base, "GGUF", 4) != 0) {
        char text[4 * 4 + 1];
        size_t t = 0;
        for (int i = 0; i < 4; i++) /* the bytes as text too: "{\n  " says JSON, "PK\x03\x04" a zip */
            t += (size_t)(c.base[i] >= 0x20 && c.base[i] < 0x7f && c.base[i] != '"' && c.base[i] != '\\'
                              ? snprintf(text + t, sizeof text - t, "%c", c.base[i])
                              : snprintf(text + t, sizeof text - t, "\\x%02x", c.base[i]));
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: not a GGUF file: GGUF files start with \"GGUF\" (47 47 55 46); this file starts "
                                "with %02x %02x %02x %02x (\"%s\")",
                                g->path, c.base[0], c.base[1], c.base[2], c.base[3], text);
    }
    c.pos = 4;
    if ((rc = read_u32(&c, &g->version, "the version")))
        return rc;
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version != 0)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: GGUF file is big-endian (version field %#x); "
                                    "cinfer reads little-endian GGUF only", g->path, (unsigned)g->version);
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: GGUF version %u, expected 2 or 3", g->path,
                                (unsigned)g->version);
    }
    if ((rc = read_u64(&c, &g->n_tensors, "the tensor count")) || (rc = read_u64(&c, &g->n_kv, "the key count")))
        return rc;
    if ((rc = parse_kvs(g, &c)) || (rc = read_alignment(g, err)) || (rc = parse_tensor_infos(g, &c)))
        return rc;
    g->data_start = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
    return place_tensors(g, err);
}

int cinfer_gguf_open(const char *path, struct cinfer_gguf **out, struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: no memory to open", path);
    }
    int rc = cinfer_mapped_file_open(path, &g->file, err);
    if (!rc)
        rc = parse(g, err);
    if (rc) {
        cinfer_gguf_close(&g);
        return rc;
    }
    *out = g;
    return CINFER_OK;
}

void cinfer_gguf_close(struct cinfer_gguf **gp)
{
    struct cinfer_gguf *g = *gp;
    if (!g)
        return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++)
            free(g->kv[i].str_offsets);
    free(g->kv);
    free(g->tensors);
    free(g->tensor_offsets);
    cinfer_mapped_file_close(&g->file);
    free(g->path);
    free(g);
    *gp = NULL;
}

const char *cinfer_gguf_path(const struct cinfer_gguf *g)
{
    return g->path;
}

uint32_t cinfer_gguf_version(const struct cinfer_gguf *g)
{
    return g->version;
}

int64_t cinfer_gguf_key_count(const struct cinfer_gguf *g)
{
    return (int64_t)g->n_kv;
}

int64_t cinfer_gguf_find_key(const struct cinfer_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (str_eq(g->kv[i].name, key))
            return (int64_t)i;
    return -1;
}

struct cinfer_gguf_str cinfer_gguf_key_name(const struct cinfer_gguf *g, int64_t idx)
{
    struct cinfer_gguf_str none = {NULL, 0};
    return idx >= 0 && (uint64_t)idx < g->n_kv ? g->kv[idx].name : none;
}

enum cinfer_gguf_value_type cinfer_gguf_key_type(const struct cinfer_gguf *g, int64_t idx)
{
    /* An index from find_key may be -1: answer with a type no key has. */
    if (idx < 0 || (uint64_t)idx >= g->n_kv)
        return (enum cinfer_gguf_value_type)-1;
    return g->kv[idx].type;
}

/* ---- typed getters ------------------------------------------------------ */

static const struct gguf_kv *lookup(const struct cinfer_gguf *g, const char *key, struct cinfer_error *err)
{
    int64_t idx = cinfer_gguf_find_key(g, key);
    if (idx < 0) {
        cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: GGUF key %s is missing", g->path, key);
        return NULL;
    }
    return &g->kv[idx];
}

static int wrong_type(const struct cinfer_gguf *g, const char *key, const char *expected, uint32_t found,
                      struct cinfer_error *err)
{
    return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: GGUF key %s has type %s, expected %s", g->path, key,
                            value_type_name(found), expected);
}

/* An integer of any width as a sign flag plus magnitude bits, so range checks are exact. */
static int load_integer(uint32_t type, const unsigned char *p, int *negative, uint64_t *magnitude)
{
    *negative = 0;
    int64_t s;
    switch (type) {
    case CINFER_GGUF_UINT8: *magnitude = p[0]; return 1;
    case CINFER_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *magnitude = v; return 1; }
    case CINFER_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *magnitude = v; return 1; }
    case CINFER_GGUF_UINT64: memcpy(magnitude, p, 8); return 1;
    case CINFER_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); s = v; break; }
    case CINFER_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); s = v; break; }
    case CINFER_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); s = v; break; }
    case CINFER_GGUF_INT64: memcpy(&s, p, 8); break;
    default: return 0;
    }
    *negative = s < 0;
    *magnitude = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    return 1;
}

static int get_integer(const struct cinfer_gguf *g, const char *key, int *negative, uint64_t *magnitude,
                       struct cinfer_error *err)
{
    const struct gguf_kv *kv = lookup(g, key, err);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (!load_integer(kv->type, kv->value, negative, magnitude))
        return wrong_type(g, key, "an integer", kv->type, err);
    return CINFER_OK;
}

static int out_of_range(const struct cinfer_gguf *g, const char *key, int negative, uint64_t magnitude,
                        const char *target, struct cinfer_error *err)
{
    return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: GGUF key %s is %s%" PRIu64 ", which does not fit in %s",
                            g->path, key, negative ? "-" : "", magnitude, target);
}

int cinfer_gguf_get_u64(const struct cinfer_gguf *g, const char *key, uint64_t *out, struct cinfer_error *err)
{
    int negative = 0;
    uint64_t m = 0;
    int rc = get_integer(g, key, &negative, &m, err);
    if (rc)
        return rc;
    if (negative)
        return out_of_range(g, key, negative, m, "uint64", err);
    *out = m;
    return CINFER_OK;
}

int cinfer_gguf_get_u32(const struct cinfer_gguf *g, const char *key, uint32_t *out, struct cinfer_error *err)
{
    int negative = 0;
    uint64_t m = 0;
    int rc = get_integer(g, key, &negative, &m, err);
    if (rc)
        return rc;
    if (negative || m > UINT32_MAX)
        return out_of_range(g, key, negative, m, "uint32", err);
    *out = (uint32_t)m;
    return CINFER_OK;
}

int cinfer_gguf_get_i32(const struct cinfer_gguf *g, const char *key, int32_t *out, struct cinfer_error *err)
{
    int negative = 0;
    uint64_t m = 0;
    int rc = get_integer(g, key, &negative, &m, err);
    if (rc)
        return rc;
    if (negative ? m > (uint64_t)INT32_MAX + 1 : m > INT32_MAX)
        return out_of_range(g, key, negative, m, "int32", err);
    *out = negative ? (int32_t)(0 - (int64_t)m) : (int32_t)m;
    return CINFER_OK;
}

int cinfer_gguf_get_f32(const struct cinfer_gguf *g, const char *key, float *out, struct cinfer_error *err)
{
    const struct gguf_kv *kv = lookup(g, key, err);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (kv->type == CINFER_GGUF_FLOAT32) {
        memcpy(out, kv->value, 4);
    } else if (kv->type == CINFER_GGUF_FLOAT64) {
        double d;
        memcpy(&d, kv->value, 8);
        *out = (float)d;
    } else {
        return wrong_type(g, key, "float32", kv->type, err);
    }
    return CINFER_OK;
}

int cinfer_gguf_get_bool(const struct cinfer_gguf *g, const char *key, int *out, struct cinfer_error *err)
{
    const struct gguf_kv *kv = lookup(g, key, err);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (kv->type != CINFER_GGUF_BOOL)
        return wrong_type(g, key, "bool", kv->type, err);
    *out = kv->value[0] != 0;
    return CINFER_OK;
}

int cinfer_gguf_get_str(const struct cinfer_gguf *g, const char *key, struct cinfer_gguf_str *out,
                        struct cinfer_error *err)
{
    const struct gguf_kv *kv = lookup(g, key, err);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (kv->type != CINFER_GGUF_STRING)
        return wrong_type(g, key, "string", kv->type, err);
    memcpy(&out->len, kv->value, 8);
    out->data = (const char *)kv->value + 8;
    return CINFER_OK;
}

int cinfer_gguf_get_array(const struct cinfer_gguf *g, const char *key, enum cinfer_gguf_value_type *elem_type,
                          uint64_t *count, struct cinfer_error *err)
{
    const struct gguf_kv *kv = lookup(g, key, err);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (kv->type != CINFER_GGUF_ARRAY)
        return wrong_type(g, key, "array", kv->type, err);
    *elem_type = kv->elem_type;
    *count = kv->count;
    return CINFER_OK;
}

static const struct gguf_kv *array_elem_kv(const struct cinfer_gguf *g, const char *key, uint64_t i)
{
    int64_t idx = cinfer_gguf_find_key(g, key);
    if (idx < 0 || g->kv[idx].type != CINFER_GGUF_ARRAY || i >= g->kv[idx].count)
        return NULL;
    return &g->kv[idx];
}

int cinfer_gguf_array_str(const struct cinfer_gguf *g, const char *key, uint64_t i, struct cinfer_gguf_str *out)
{
    const struct gguf_kv *kv = array_elem_kv(g, key, i);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (kv->elem_type != CINFER_GGUF_STRING)
        return CINFER_ERR_PARSE;
    const unsigned char *p = kv->value + kv->str_offsets[i];
    memcpy(&out->len, p, 8);
    out->data = (const char *)p + 8;
    return CINFER_OK;
}

int cinfer_gguf_array_f32(const struct cinfer_gguf *g, const char *key, uint64_t i, float *out)
{
    const struct gguf_kv *kv = array_elem_kv(g, key, i);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    if (kv->elem_type != CINFER_GGUF_FLOAT32)
        return CINFER_ERR_PARSE;
    memcpy(out, kv->value + 4 * i, 4);
    return CINFER_OK;
}

int cinfer_gguf_array_i64(const struct cinfer_gguf *g, const char *key, uint64_t i, int64_t *out)
{
    const struct gguf_kv *kv = array_elem_kv(g, key, i);
    if (!kv)
        return CINFER_ERR_NOT_FOUND;
    uint64_t size = scalar_size(kv->elem_type);
    int negative;
    uint64_t m;
    if (kv->elem_type == CINFER_GGUF_BOOL || kv->elem_type == CINFER_GGUF_FLOAT32 ||
        kv->elem_type == CINFER_GGUF_FLOAT64 || !load_integer(kv->elem_type, kv->value + size * i, &negative, &m))
        return CINFER_ERR_PARSE;
    if (negative ? m > (uint64_t)INT64_MAX + 1 : m > INT64_MAX)
        return CINFER_ERR_RANGE;
    *out = negative ? (int64_t)(0 - m) : (int64_t)m;
    return CINFER_OK;
}

/* ---- tensors ------------------------------------------------------------ */

uint64_t cinfer_gguf_tensor_count(const struct cinfer_gguf *g)
{
    return g->n_tensors;
}

const struct cinfer_gguf_tensor *cinfer_gguf_tensor_at(const struct cinfer_gguf *g, uint64_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct cinfer_gguf_tensor *cinfer_gguf_find_tensor(const struct cinfer_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (str_eq(g->tensors[i].name, name))
            return &g->tensors[i];
    return NULL;
}
