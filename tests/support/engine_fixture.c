#include "support/engine_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *cinfer_test_engine_model(void)
{
    static const char *const candidates[] = {
        CINFER_SHARED_DIR "/models/stories260K.gguf",
        CINFER_SOURCE_DIR "/models/default",
    };
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        struct stat st;
        char probe[1024];
        snprintf(probe, sizeof probe, "%s%s", candidates[i], i == 1 ? "/config.json" : "");
        if (stat(probe, &st) == 0)
            return candidates[i];
    }
    fprintf(stderr, "SKIP: no model for engine tests (neither %s/models/stories260K.gguf nor models/default)\n",
            CINFER_SHARED_DIR);
    return NULL;
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
