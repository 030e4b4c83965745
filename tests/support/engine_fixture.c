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

struct test_worker_pids cinfer_test_worker_pids(struct cinfer_engine *e)
{
    struct test_worker_pids out = {.n = 0};
    struct cinfer_worker_info *workers = NULL;
    int n = 0;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_workers(e, &workers, &n, &err) == 0, "%s", err.message);
    for (int i = 0; i < n && i < CINFER_TEST_MAX_WORKERS; i++)
        out.pid[out.n++] = workers[i].pid;
    free(workers);
    return out;
}
