/* libFuzzer target for config.json / generation_config.json parsing: any bytes either
 * parse into a configuration or fail with a message naming the key or position. */
#include <stdint.h>
#include <string.h>

#include "model/hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cinfer_hf_config cfg;
    struct cinfer_error err;
    if (cinfer_hf_config_parse((const char *)data, size, "config.json", &cfg, &err) == 0) {
        if (cfg.model.n_eos < 0 || cfg.model.n_eos > 8)
            __builtin_trap(); /* the eos list never overruns its array */
        cinfer_hf_generation_config_parse((const char *)data, size, "generation_config.json", &cfg, &err);
    } else if (err.message[0] == 0) {
        __builtin_trap(); /* every failure explains itself */
    }
    return 0;
}
