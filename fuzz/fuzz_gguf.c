/* libFuzzer target for the GGUF reader: any bytes either open cleanly or fail with a
 * message; on success every getter and tensor view is exercised within bounds. */
#include <stdint.h>
#include <string.h>

#include "cinfer/gguf.h"
#include "fuzz_input_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned char sink;

static void touch(const void *p, uint64_t n)
{
    if (n)
        sink ^= ((const unsigned char *)p)[0] ^ ((const unsigned char *)p)[n - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_input_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct cinfer_gguf *g = NULL;
    struct cinfer_error err;
    if (cinfer_gguf_open(path, &g, &err) == 0) {
        for (int64_t k = 0; k < cinfer_gguf_key_count(g); k++) {
            struct cinfer_gguf_str name = cinfer_gguf_key_name(g, k);
            char key[128];
            if (name.len >= sizeof key)
                continue;
            memcpy(key, name.data, name.len);
            key[name.len] = 0;
            uint64_t u64, count;
            int32_t i32;
            float f;
            int b;
            struct cinfer_gguf_str s;
            enum cinfer_gguf_value_type et;
            cinfer_gguf_get_u64(g, key, &u64, &err);
            cinfer_gguf_get_i32(g, key, &i32, &err);
            cinfer_gguf_get_f32(g, key, &f, &err);
            cinfer_gguf_get_bool(g, key, &b, &err);
            if (cinfer_gguf_get_str(g, key, &s, &err) == 0)
                touch(s.data, s.len);
            if (cinfer_gguf_get_array(g, key, &et, &count, &err) == 0)
                for (uint64_t i = 0; i < count && i < 64; i++) {
                    int64_t i64;
                    if (cinfer_gguf_array_str(g, key, i, &s) == 0)
                        touch(s.data, s.len);
                    cinfer_gguf_array_f32(g, key, i, &f);
                    cinfer_gguf_array_i64(g, key, i, &i64);
                }
        }
        for (uint64_t i = 0; i < cinfer_gguf_tensor_count(g); i++) {
            const struct cinfer_gguf_tensor *t = cinfer_gguf_tensor_at(g, i);
            touch(t->data, t->nbytes);
            touch(t->name.data, t->name.len);
        }
        cinfer_gguf_close(&g);
    }
    close(fd);
    return 0;
}
