/* fuzz_worker_settings: what a worker reads on its standard input before anything else
 * (core/ipc/worker_settings.c): a WORKER_SETTINGS frame whose settings text goes through
 * the configuration reader and checks. It is accepted whole or refused with a message;
 * nothing may crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "ipc/worker_settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cinfer_server_args args;
    struct cinfer_port_args ports;
    struct cinfer_error err = {0};
    if (cinfer_worker_settings_parse(data, size, &args, &ports, &err) == CINFER_OK) {
        cinfer_server_args_free(&args);
        return 0;
    }
    if (!err.message[0])
        abort(); /* a refusal must say why */
    return 0;
}
