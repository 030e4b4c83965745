/* Little-endian encoding with a length check on every field. A writer grows its
 * buffer; a reader never reads past its end and remembers the first failure with
 * the field it was reading, so a malformed frame is rejected with a reason. */
#ifndef CINFER_IPC_WIRE_H
#define CINFER_IPC_WIRE_H

#include <stddef.h>
#include <stdint.h>

struct wire_writer {
    uint8_t *buf;
    size_t len;
    size_t cap;
    int failed; /* an allocation failed; the buffer is incomplete */
};

void cinfer_wire_put_u8(struct wire_writer *w, uint8_t v);
void cinfer_wire_put_u32(struct wire_writer *w, uint32_t v);
void cinfer_wire_put_i32(struct wire_writer *w, int32_t v);
void cinfer_wire_put_u64(struct wire_writer *w, uint64_t v);
void cinfer_wire_put_f32(struct wire_writer *w, float v);
void cinfer_wire_put_bytes(struct wire_writer *w, const void *data, uint32_t len); /* u32 length + bytes */
void cinfer_wire_put_str(struct wire_writer *w, const char *s);                    /* NULL is written as "" */
void cinfer_wire_put_i32_array(struct wire_writer *w, const int32_t *v, uint32_t n); /* u32 count + values */
void cinfer_wire_writer_free(struct wire_writer *w);

struct wire_reader {
    const uint8_t *p;
    const uint8_t *end;
    const char *failed_field; /* NULL while everything read fit; else the first field that did not */
    char why[128];
};

void cinfer_wire_reader_init(struct wire_reader *r, const void *data, size_t len);
uint8_t cinfer_wire_get_u8(struct wire_reader *r, const char *field);
uint32_t cinfer_wire_get_u32(struct wire_reader *r, const char *field);
int32_t cinfer_wire_get_i32(struct wire_reader *r, const char *field);
uint64_t cinfer_wire_get_u64(struct wire_reader *r, const char *field);
float cinfer_wire_get_f32(struct wire_reader *r, const char *field);
/* Points into the frame (no copy); *len gets the length. max_len bounds it. */
const uint8_t *cinfer_wire_get_bytes(struct wire_reader *r, const char *field, uint32_t max_len, uint32_t *len);
/* A malloc'd NUL-terminated copy; rejects embedded NULs. NULL on failure. */
char *cinfer_wire_get_str(struct wire_reader *r, const char *field, uint32_t max_len);
/* A malloc'd array (NULL with *n = 0 when empty); max_n bounds the count. */
int32_t *cinfer_wire_get_i32_array(struct wire_reader *r, const char *field, uint32_t max_n, uint32_t *n);
/* 1 when every byte was consumed and nothing failed; otherwise records why. */
int cinfer_wire_reader_done(struct wire_reader *r);

#endif
