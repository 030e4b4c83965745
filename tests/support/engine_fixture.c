#include "support/engine_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cinfer_test_engine_model(void)
{
    return CINFER_TEST_DATA_DIR "/models/stories260K.gguf";
}

void cinfer_test_engine_args(struct cinfer_server_args *args, const char *model)
{
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_server_args_init(args, &err), 0);
    free(args->model_path);
    args->model_path = strdup(model);
    args->kv_cache_bytes = 64ll << 20;
    args->start_timeout_ms = 30000;
    args->log_level = CINFER_LOG_ERROR;
    args->num_threads = 1;
}
