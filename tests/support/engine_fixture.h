/* Settings for tests that start a real engine: a small real model (stories260K, in
 * tests/data/models), a modest KV budget, and quiet logs. */
#ifndef CINFER_TEST_ENGINE_FIXTURE_H
#define CINFER_TEST_ENGINE_FIXTURE_H

#include "cinfer/config.h"

/* The model tests run on. */
const char *cinfer_test_engine_model(void);
/* Initialises args for model; aborts the test on failure. */
void cinfer_test_engine_args(struct cinfer_server_args *args, const char *model);

#endif
