/* libFuzzer target for split GGUF models (core/model/gguf_split.c): the input is the
 * parts one after another, separated by the 8 bytes "GGUFPART"; each is written to a
 * fresh folder as m-0000i-of-0000N.gguf, as llama.cpp's gguf-split names them, and the
 * model is loaded from the first. Any parts load or fail cleanly, with a message. Seeds
 * (scripts/fuzz.sh): stories260K's Q4_K_M split in 3 by gguf-split, joined so. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"

#define MAX_PARTS 8
#define SEPARATOR "GGUFPART"
#define SEPARATOR_BYTES 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_part(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t done = size ? fwrite(data, 1, size, f) : 0;
    return fclose(f) == 0 && done == size ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the parts: [start[i], end[i]) of data */
    size_t start[MAX_PARTS], end[MAX_PARTS];
    int n = 0;
    size_t from = 0;
    for (size_t i = 0; n < MAX_PARTS - 1 && i + SEPARATOR_BYTES <= size; i++) {
        if (memcmp(data + i, SEPARATOR, SEPARATOR_BYTES) == 0) {
            start[n] = from;
            end[n++] = i;
            from = i + SEPARATOR_BYTES;
            i = from - 1;
        }
    }
    start[n] = from;
    end[n++] = size;

    char dir[] = "/tmp/fuzz-gguf-split-XXXXXX";
    if (!mkdtemp(dir))
        return 0;
    char paths[MAX_PARTS][64];
    int written = 0;
    for (int i = 0; i < n; i++, written++) {
        snprintf(paths[i], sizeof paths[i], "%s/m-%05d-of-%05d.gguf", dir, i + 1, n);
        if (write_part(paths[i], data + start[i], end[i] - start[i]) < 0)
            break;
    }
    if (written == n) {
        struct cinfer_model *m = NULL;
        struct cinfer_error err;
        struct cinfer_model_load_options opts = {.show_progress = 0};
        if (cinfer_model_load(paths[0], &opts, &m, &err) == 0) {
            if (m->layers == NULL || m->tok_embeddings.data == NULL || m->lm_head.data == NULL)
                __builtin_trap(); /* a loaded model has every required weight */
            cinfer_model_free(&m);
        } else if (err.message[0] == 0) {
            __builtin_trap();
        }
    }
    for (int i = 0; i < (written < n ? written + 1 : n); i++) /* a part that failed may exist */
        unlink(paths[i]);
    rmdir(dir);
    return 0;
}
