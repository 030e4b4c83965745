#include "ipc/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *reserve(struct wire_writer *w, size_t n)
{
    if (w->failed)
        return NULL;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *grown = realloc(w->buf, cap);
        if (!grown) {
            w->failed = 1;
            return NULL;
        }
        w->buf = grown;
        w->cap = cap;
    }
    uint8_t *at = w->buf + w->len;
    w->len += n;
    return at;
}

static void put_le(struct wire_writer *w, uint64_t v, size_t n)
{
    uint8_t *at = reserve(w, n);
    for (size_t i = 0; at && i < n; i++)
        at[i] = (uint8_t)(v >> (8 * i));
}

void cinfer_wire_put_u8(struct wire_writer *w, uint8_t v) { put_le(w, v, 1); }
void cinfer_wire_put_u32(struct wire_writer *w, uint32_t v) { put_le(w, v, 4); }
void cinfer_wire_put_i32(struct wire_writer *w, int32_t v) { put_le(w, (uint32_t)v, 4); }
void cinfer_wire_put_u64(struct wire_writer *w, uint64_t v) { put_le(w, v, 8); }

void cinfer_wire_put_f32(struct wire_writer *w, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    put_le(w, bits, 4);
}

void cinfer_wire_put_bytes(struct wire_writer *w, const void *data, uint32_t len)
{
    cinfer_wire_put_u32(w, len);
    uint8_t *at = reserve(w, len);
    if (at && len)
        memcpy(at, data, len);
}

void cinfer_wire_put_str(struct wire_writer *w, const char *s)
{
    cinfer_wire_put_bytes(w, s ? s : "", s ? (uint32_t)strlen(s) : 0);
}

void cinfer_wire_put_i32_array(struct wire_writer *w, const int32_t *v, uint32_t n)
{
    cinfer_wire_put_u32(w, n);
    for (uint32_t i = 0; i < n; i++)
        cinfer_wire_put_i32(w, v[i]);
}

void cinfer_wire_writer_free(struct wire_writer *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

void cinfer_wire_reader_init(struct wire_reader *r, const void *data, size_t len)
{
    r->p = data;
    r->end = r->p + len;
    r->failed_field = NULL;
    r->why[0] = '\0';
}

static int fail(struct wire_reader *r, const char *field, const char *fmt, unsigned long long a,
                unsigned long long b)
{
    if (!r->failed_field) {
        r->failed_field = field;
        snprintf(r->why, sizeof r->why, fmt, a, b);
    }
    return 0;
}

/* 1 when n more bytes are there. */
static int have(struct wire_reader *r, const char *field, size_t n)
{
    if (r->failed_field)
        return 0;
    size_t left = (size_t)(r->end - r->p);
    if (n > left)
        return fail(r, field, "needs %llu bytes, only %llu left", n, left);
    return 1;
}

static uint64_t get_le(struct wire_reader *r, const char *field, size_t n)
{
    if (!have(r, field, n))
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

uint8_t cinfer_wire_get_u8(struct wire_reader *r, const char *field) { return (uint8_t)get_le(r, field, 1); }
uint32_t cinfer_wire_get_u32(struct wire_reader *r, const char *field) { return (uint32_t)get_le(r, field, 4); }
int32_t cinfer_wire_get_i32(struct wire_reader *r, const char *field) { return (int32_t)(uint32_t)get_le(r, field, 4); }
uint64_t cinfer_wire_get_u64(struct wire_reader *r, const char *field) { return get_le(r, field, 8); }

float cinfer_wire_get_f32(struct wire_reader *r, const char *field)
{
    uint32_t bits = (uint32_t)get_le(r, field, 4);
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

const uint8_t *cinfer_wire_get_bytes(struct wire_reader *r, const char *field, uint32_t max_len, uint32_t *len)
{
    *len = 0;
    uint32_t n = cinfer_wire_get_u32(r, field);
    if (r->failed_field)
        return NULL;
    if (n > max_len) {
        fail(r, field, "length %llu exceeds the limit %llu", n, max_len);
        return NULL;
    }
    if (!have(r, field, n))
        return NULL;
    const uint8_t *at = r->p;
    r->p += n;
    *len = n;
    return at;
}

char *cinfer_wire_get_str(struct wire_reader *r, const char *field, uint32_t max_len)
{
    uint32_t n;
    const uint8_t *at = cinfer_wire_get_bytes(r, field, max_len, &n);
    if (!at && r->failed_field)
        return NULL;
    if (n && memchr(at, 0, n)) {
        fail(r, field, "string of %llu bytes holds a NUL byte%.0llu", n, 0);
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        fail(r, field, "out of memory for %llu bytes%.0llu", n, 0);
        return NULL;
    }
    if (n)
        memcpy(s, at, n);
    s[n] = '\0';
    return s;
}

int32_t *cinfer_wire_get_i32_array(struct wire_reader *r, const char *field, uint32_t max_n, uint32_t *n)
{
    *n = 0;
    uint32_t count = cinfer_wire_get_u32(r, field);
    if (r->failed_field)
        return NULL;
    if (count > max_n) {
        fail(r, field, "count %llu exceeds the limit %llu", count, max_n);
        return NULL;
    }
    if (!have(r, field, (size_t)count * 4))
        return NULL;
    if (count == 0)
        return NULL;
    int32_t *v = malloc((size_t)count * sizeof *v);
    if (!v) {
        fail(r, field, "out of memory for %llu ids%.0llu", count, 0);
        return NULL;
    }
    for (uint32_t i = 0; i < count; i++)
        v[i] = cinfer_wire_get_i32(r, field);
    *n = count;
    return v;
}

int cinfer_wire_reader_done(struct wire_reader *r)
{
    if (r->failed_field)
        return 0;
    if (r->p != r->end) {
        fail(r, "end of frame", "%llu trailing bytes after the last field%.0llu", (unsigned long long)(r->end - r->p),
             0);
        return 0;
    }
    return 1;
}
