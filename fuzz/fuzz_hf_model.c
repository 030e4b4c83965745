/* libFuzzer target for the Hugging Face folder loader on top of the config and
 * safetensors readers: config.json's fields against the tensors' names, shapes and types,
 * fused and per-expert layouts, gpt-oss's MXFP4 _blocks/_scales repacked in place. The
 * input is one folder: a little-endian u32 length, that many bytes of config.json, then
 * model.safetensors. Any bytes load or fail cleanly, with words. Seeds: tiny random
 * models written by scripts/fuzz.sh (kind hf-model). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t done = fwrite(p, 1, n, f);
    return fclose(f) == 0 && done == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64];
    if (!dir[0]) { /* one folder for the process, rewritten by every input */
        snprintf(dir, sizeof dir, "/tmp/fuzz-hf-model-XXXXXX");
        if (!mkdtemp(dir))
            abort();
    }
    if (size < 4)
        return 0;
    uint32_t config_bytes = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                            (uint32_t)data[3] << 24;
    if (config_bytes > size - 4)
        return 0;
    if (write_file(dir, "config.json", data + 4, config_bytes) < 0 ||
        write_file(dir, "model.safetensors", data + 4 + config_bytes, size - 4 - config_bytes) < 0)
        abort();
    struct cinfer_model *m = NULL;
    struct cinfer_error err = {0};
    struct cinfer_model_load_options opts = {.show_progress = 0};
    if (cinfer_model_load(dir, &opts, &m, &err) == 0) {
        if (m->layers == NULL || m->tok_embeddings.data == NULL || m->lm_head.data == NULL)
            __builtin_trap(); /* a loaded model has every required weight */
        cinfer_model_free(&m);
    } else if (err.message[0] == 0) {
        __builtin_trap(); /* a refusal says why */
    }
    return 0;
}
