/* libFuzzer target for the safetensors reader: any bytes either open cleanly or fail
 * with a message; on success every tensor view is touched at both ends. */
#include <stdint.h>

#include "format/safetensors.h"
#include "fuzz_input_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned char sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_input_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct cinfer_safetensors *st = NULL;
    struct cinfer_error err;
    if (cinfer_safetensors_open(path, &st, &err) == 0) {
        for (size_t i = 0; i < cinfer_safetensors_count(st); i++) {
            const struct cinfer_st_tensor *t = cinfer_safetensors_at(st, i);
            if (t->nbytes)
                sink ^= ((const unsigned char *)t->data)[0] ^ ((const unsigned char *)t->data)[t->nbytes - 1];
            if (cinfer_safetensors_find(st, t->name) != t)
                __builtin_trap(); /* lookup must find every listed tensor */
        }
        cinfer_safetensors_close(&st);
    }
    close(fd);
    return 0;
}
