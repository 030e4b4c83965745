/* A validating safetensors reader, following the format's specification
 * (huggingface/safetensors, "Format"): an 8-byte little-endian header length, a JSON
 * header, then a byte buffer indexed by each tensor's data_offsets. */
#include "format/safetensors.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/mmap_file.h"

/* The reference implementation refuses headers above 100 MB; so do we. */
#define ST_MAX_HEADER_BYTES (100u * 1000u * 1000u)

struct cinfer_safetensors {
    char *path;
    struct cinfer_mapped_file file;
    size_t n_tensors;
    struct cinfer_st_tensor *tensors; /* sorted by name */
};

static const struct {
    const char *name;
    size_t bytes;
} dtype_table[] = {
    [CINFER_ST_BOOL] = {"BOOL", 1},     [CINFER_ST_U8] = {"U8", 1},   [CINFER_ST_I8] = {"I8", 1},
    [CINFER_ST_F8_E4M3] = {"F8_E4M3", 1}, [CINFER_ST_F8_E5M2] = {"F8_E5M2", 1},
    [CINFER_ST_I16] = {"I16", 2},       [CINFER_ST_U16] = {"U16", 2}, [CINFER_ST_F16] = {"F16", 2},
    [CINFER_ST_BF16] = {"BF16", 2},     [CINFER_ST_I32] = {"I32", 4}, [CINFER_ST_U32] = {"U32", 4},
    [CINFER_ST_F32] = {"F32", 4},       [CINFER_ST_I64] = {"I64", 8}, [CINFER_ST_U64] = {"U64", 8},
    [CINFER_ST_F64] = {"F64", 8},
};
#define N_DTYPES (sizeof dtype_table / sizeof dtype_table[0])

const char *cinfer_st_dtype_name(enum cinfer_st_dtype t)
{
    return (size_t)t < N_DTYPES ? dtype_table[t].name : "unknown";
}

size_t cinfer_st_dtype_bytes(enum cinfer_st_dtype t)
{
    return (size_t)t < N_DTYPES ? dtype_table[t].bytes : 0;
}

static int parse_dtype(const char *s, enum cinfer_st_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (!strcmp(dtype_table[i].name, s)) {
            *out = (enum cinfer_st_dtype)i;
            return 1;
        }
    return 0;
}

static int compare_by_name(const void *a, const void *b)
{
    return strcmp(((const struct cinfer_st_tensor *)a)->name, ((const struct cinfer_st_tensor *)b)->name);
}

struct span {
    uint64_t begin, end;
    size_t index; /* into tensors */
};

static int compare_by_begin(const void *a, const void *b)
{
    uint64_t x = ((const struct span *)a)->begin, y = ((const struct span *)b)->begin;
    return x < y ? -1 : x > y;
}

/* One header entry: {"dtype", "shape", "data_offsets"}. */
static int parse_entry(const struct cinfer_safetensors *st, const char *name, json_t *entry, uint64_t buffer_bytes,
                       uint64_t buffer_start, struct cinfer_st_tensor *t, struct cinfer_error *err)
{
    const char *path = st->path;
    if (!json_is_object(entry))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors tensor %s: expected an object, found %s", path,
                                name, json_is_array(entry) ? "an array" : "a scalar");
    json_t *dtype = json_object_get(entry, "dtype");
    json_t *shape = json_object_get(entry, "shape");
    json_t *offsets = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors tensor %s: \"dtype\" is %s, expected a string",
                                path, name, dtype ? "not a string" : "missing");
    if (!parse_dtype(json_string_value(dtype), &t->dtype))
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: safetensors tensor %s has unknown dtype \"%s\"", path,
                                name, json_string_value(dtype));
    if (!json_is_array(shape))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors tensor %s: \"shape\" is %s, expected an array",
                                path, name, shape ? "not an array" : "missing");
    if (json_array_size(shape) > CINFER_ST_MAX_DIMS)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: safetensors tensor %s has %zu dimensions, at most %d supported",
                                path, name, json_array_size(shape), CINFER_ST_MAX_DIMS);
    t->n_dims = (int)json_array_size(shape);
    uint64_t n_bytes = cinfer_st_dtype_bytes(t->dtype);
    for (int d = 0; d < t->n_dims; d++) {
        json_t *dim = json_array_get(shape, (size_t)d);
        if (!json_is_integer(dim) || json_integer_value(dim) < 0)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "%s: safetensors tensor %s: shape[%d] is not a non-negative integer", path, name, d);
        t->shape[d] = json_integer_value(dim);
        uint64_t n = (uint64_t)t->shape[d];
        if (n != 0 && n_bytes > UINT64_MAX / n)
            return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors tensor %s: size of shape overflows 64 bits",
                                    path, name);
        n_bytes *= n;
    }
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 || !json_is_integer(json_array_get(offsets, 0)) ||
        !json_is_integer(json_array_get(offsets, 1)))
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors tensor %s: \"data_offsets\" is %s, expected [begin, end] integers", path,
                                name, offsets ? "malformed" : "missing");
    json_int_t begin = json_integer_value(json_array_get(offsets, 0));
    json_int_t end = json_integer_value(json_array_get(offsets, 1));
    if (begin < 0 || end < begin || (uint64_t)end > buffer_bytes)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors tensor %s: data_offsets [%lld, %lld] are outside the data buffer of %" PRIu64
                                " bytes (file truncated?)",
                                path, name, (long long)begin, (long long)end, buffer_bytes);
    if ((uint64_t)(end - begin) != n_bytes)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors tensor %s: data_offsets [%lld, %lld] span %lld bytes, but dtype %s x shape "
                                "needs %" PRIu64,
                                path, name, (long long)begin, (long long)end, (long long)(end - begin),
                                cinfer_st_dtype_name(t->dtype), n_bytes);
    /* The weights are read in place as arrays of their element type. */
    if ((buffer_start + (uint64_t)begin) % cinfer_st_dtype_bytes(t->dtype) != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors tensor %s starts at file offset %" PRIu64
                                ", not aligned to its %zu-byte %s elements",
                                path, name, buffer_start + (uint64_t)begin, cinfer_st_dtype_bytes(t->dtype),
                                cinfer_st_dtype_name(t->dtype));
    t->data = st->file.data + buffer_start + (uint64_t)begin;
    t->nbytes = n_bytes;
    return CINFER_OK;
}

static int check_no_overlap(const struct cinfer_safetensors *st, struct span *spans, struct cinfer_error *err)
{
    qsort(spans, st->n_tensors, sizeof *spans, compare_by_begin);
    for (size_t k = 1; k < st->n_tensors; k++) {
        /* Zero-byte tensors occupy nothing and cannot collide. */
        if (spans[k].begin == spans[k].end)
            continue;
        if (spans[k - 1].end > spans[k].begin)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "%s: safetensors tensors %s [%" PRIu64 ", %" PRIu64 ") and %s [%" PRIu64 ", %" PRIu64
                                    ") overlap",
                                    st->path, st->tensors[spans[k - 1].index].name, spans[k - 1].begin, spans[k - 1].end,
                                    st->tensors[spans[k].index].name, spans[k].begin, spans[k].end);
    }
    return CINFER_OK;
}

static int parse_header(struct cinfer_safetensors *st, struct cinfer_error *err)
{
    const unsigned char *bytes = st->file.data;
    uint64_t size = st->file.size_bytes;
    if (size < 8)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors file truncated: %" PRIu64 " bytes, the header length alone needs 8",
                                st->path, size);
    uint64_t header_bytes;
    memcpy(&header_bytes, bytes, 8);
    if (header_bytes > size - 8)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors file truncated: header of %" PRIu64 " bytes, but only %" PRIu64
                                " follow the length",
                                st->path, header_bytes, size - 8);
    if (header_bytes > ST_MAX_HEADER_BYTES)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors header of %" PRIu64 " bytes is over the 100 MB limit",
                                st->path, header_bytes);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)bytes + 8, header_bytes, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: safetensors header is not valid JSON: %s at header byte %d (line %d, column %d)",
                                st->path, jerr.text, jerr.position, jerr.line, jerr.column);
    int rc = CINFER_OK;
    struct span *spans = NULL;
    if (!json_is_object(root)) {
        rc = cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors header is JSON but not an object", st->path);
        goto done;
    }
    size_t n = json_object_size(root) - (json_object_get(root, "__metadata__") ? 1 : 0);
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    spans = calloc(n ? n : 1, sizeof *spans);
    if (!st->tensors || !spans) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: no memory for %zu tensors", st->path, n);
        goto done;
    }
    uint64_t buffer_start = 8 + header_bytes;
    const char *name;
    json_t *entry;
    json_object_foreach(root, name, entry) {
        if (!strcmp(name, "__metadata__")) {
            if (!json_is_object(entry)) {
                rc = cinfer_error_set(err, CINFER_ERR_PARSE, "%s: safetensors __metadata__ is not an object", st->path);
                goto done;
            }
            continue;
        }
        struct cinfer_st_tensor *t = &st->tensors[st->n_tensors];
        if (!(t->name = strdup(name))) {
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: no memory for tensor names", st->path);
            goto done;
        }
        st->n_tensors++;
        rc = parse_entry(st, name, entry, size - buffer_start, buffer_start, t, err);
        if (rc)
            goto done;
    }
    /* Sorted by name for lookups; the spans index that sorted array. */
    qsort(st->tensors, st->n_tensors, sizeof *st->tensors, compare_by_name);
    for (size_t i = 0; i < st->n_tensors; i++) {
        spans[i].index = i;
        spans[i].begin = (uint64_t)((const unsigned char *)st->tensors[i].data - bytes) - buffer_start;
        spans[i].end = spans[i].begin + st->tensors[i].nbytes;
    }
    rc = check_no_overlap(st, spans, err);
done:
    free(spans);
    json_decref(root);
    return rc;
}

int cinfer_safetensors_open(const char *path, struct cinfer_safetensors **out, struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: no memory to open", path);
    }
    int rc = cinfer_mapped_file_open(path, &st->file, err);
    if (!rc)
        rc = parse_header(st, err);
    if (rc) {
        cinfer_safetensors_close(&st);
        return rc;
    }
    *out = st;
    return CINFER_OK;
}

void cinfer_safetensors_close(struct cinfer_safetensors **stp)
{
    struct cinfer_safetensors *st = *stp;
    if (!st)
        return;
    for (size_t i = 0; i < st->n_tensors; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    cinfer_mapped_file_close(&st->file);
    free(st->path);
    free(st);
    *stp = NULL;
}

const char *cinfer_safetensors_path(const struct cinfer_safetensors *st)
{
    return st->path;
}

size_t cinfer_safetensors_count(const struct cinfer_safetensors *st)
{
    return st->n_tensors;
}

const struct cinfer_st_tensor *cinfer_safetensors_at(const struct cinfer_safetensors *st, size_t i)
{
    return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const struct cinfer_st_tensor *cinfer_safetensors_find(const struct cinfer_safetensors *st, const char *name)
{
    struct cinfer_st_tensor key = {.name = (char *)name};
    return bsearch(&key, st->tensors, st->n_tensors, sizeof key, compare_by_name);
}

size_t cinfer_safetensors_file_bytes(const struct cinfer_safetensors *st)
{
    return st->file.size_bytes;
}
