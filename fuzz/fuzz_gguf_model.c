/* libFuzzer target for the GGUF model loader on top of the reader: hyperparameter keys,
 * tensor names, shapes and types, rope_freqs fitting. Any bytes load or fail cleanly. */
#include <stdint.h>

#include "fuzz_input_file.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_input_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct cinfer_model *m = NULL;
    struct cinfer_error err;
    struct cinfer_model_load_options opts = {.show_progress = 0};
    if (cinfer_model_load(path, &opts, &m, &err) == 0) {
        if (m->layers == NULL || m->tok_embeddings.data == NULL || m->lm_head.data == NULL)
            __builtin_trap(); /* a loaded model has every required weight */
        cinfer_model_free(&m);
    } else if (err.message[0] == 0) {
        __builtin_trap();
    }
    close(fd);
    return 0;
}
