/* safetensors writer for tests (see safetensors_builder.h). */
#include "support/safetensors_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need)
        cap2 *= 2;
    *p = realloc(*p, cap2);
    if (!*p)
        abort(); /* a test helper: out of memory is fatal */
    *cap = cap2;
}

static void header_append(struct st_builder *b, const char *text)
{
    size_t n = strlen(text);
    grow((void **)&b->header, &b->header_cap, b->header_len + n + 1);
    memcpy(b->header + b->header_len, text, n + 1);
    b->header_len += n;
}

void st_builder_init(struct st_builder *b)
{
    memset(b, 0, sizeof *b);
    header_append(b, "{\"__metadata__\":{\"format\":\"pt\"}");
}

void st_builder_free(struct st_builder *b)
{
    free(b->header);
    free(b->data);
    memset(b, 0, sizeof *b);
}

void st_builder_add(struct st_builder *b, const char *name, const char *dtype, const int64_t *shape, int n_dims,
                    const void *data, size_t nbytes)
{
    /* Each tensor starts 8-aligned (the header is padded to 8 too), so every element
     * type is naturally aligned in the file whatever order tensors are added in. */
    static const unsigned char zeros[8];
    size_t pad = (8 - b->data_len % 8) % 8;
    if (pad) {
        grow((void **)&b->data, &b->data_cap, b->data_len + pad);
        memcpy(b->data + b->data_len, zeros, pad);
        b->data_len += pad;
    }
    char text[512];
    int n = snprintf(text, sizeof text, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", name, dtype);
    for (int d = 0; d < n_dims; d++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%s%lld", d ? "," : "", (long long)shape[d]);
    snprintf(text + n, sizeof text - (size_t)n, "],\"data_offsets\":[%zu,%zu]}", b->data_len, b->data_len + nbytes);
    header_append(b, text);
    grow((void **)&b->data, &b->data_cap, b->data_len + nbytes);
    if (nbytes)
        memcpy(b->data + b->data_len, data, nbytes);
    b->data_len += nbytes;
    b->n_tensors++;
}

int st_write_raw(const char *path, const char *header_json, const void *data, size_t data_len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    uint64_t n = strlen(header_json);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(n >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(header_json, 1, n, f) == n &&
             (data_len == 0 || fwrite(data, 1, data_len, f) == data_len);
    return fclose(f) == 0 && ok ? 0 : -1;
}

int st_builder_write(const struct st_builder *b, const char *path)
{
    size_t len = b->header_len + 1;
    size_t padded = (len + 8 + 7) / 8 * 8 - 8; /* data starts 8-aligned in the file */
    char *text = malloc(padded + 1);
    if (!text)
        abort();
    memcpy(text, b->header, b->header_len);
    text[b->header_len] = '}';
    memset(text + len, ' ', padded - len);
    text[padded] = 0;
    int rc = st_write_raw(path, text, b->data, b->data_len);
    free(text);
    return rc;
}
