/* tests/support/safetensors_builder.h — writes .safetensors files for tests: the JSON
 * header is assembled as text (offsets computed here, padded to 8 bytes as the
 * reference writer does), so tests can also write any broken header verbatim. */
#ifndef CINFER_TEST_SAFETENSORS_BUILDER_H
#define CINFER_TEST_SAFETENSORS_BUILDER_H

#include <stddef.h>
#include <stdint.h>

struct st_builder {
    char *header;              /* JSON text so far, without the closing brace */
    size_t header_len, header_cap;
    unsigned char *data;
    size_t data_len, data_cap;
    int n_tensors;
};

void st_builder_init(struct st_builder *b);
void st_builder_free(struct st_builder *b);
/* dtype as the format spells it ("F32", "BF16"); shape row-major. */
void st_builder_add(struct st_builder *b, const char *name, const char *dtype, const int64_t *shape, int n_dims,
                    const void *data, size_t nbytes);
/* Finishes and writes; returns 0 or -1. */
int st_builder_write(const struct st_builder *b, const char *path);

/* A file from a header text and data, exactly as given (no padding). */
int st_write_raw(const char *path, const char *header_json, const void *data, size_t data_len);

#endif
