/* Settings for tests that start a real engine: a small real model (stories260K, in
 * tests/data/models), a modest KV budget, and quiet logs. */
#ifndef CINFER_TEST_ENGINE_FIXTURE_H
#define CINFER_TEST_ENGINE_FIXTURE_H

#include <sys/types.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"

/* The model tests run on. */
const char *cinfer_test_engine_model(void);
/* Initialises args for model; aborts the test on failure. */
void cinfer_test_engine_args(struct cinfer_server_args *args, const char *model);

/* The pids of an engine's workers (the detokenizer, then the schedulers in order), as
 * cinfer_engine_workers lists them; aborts the test on failure. */
#define CINFER_TEST_MAX_WORKERS 64
struct test_worker_pids {
    pid_t pid[CINFER_TEST_MAX_WORKERS];
    int n;
};
struct test_worker_pids cinfer_test_worker_pids(struct cinfer_engine *e);

#endif
