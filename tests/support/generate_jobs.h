/* tests/support/generate_jobs.h — requests run on their own threads against an engine,
 * for the tests that serve several at once and kill workers under them (the launcher
 * tests): greedy, EOS ignored, blocking or streamed (counting chunks). */
#ifndef CINFER_TEST_GENERATE_JOBS_H
#define CINFER_TEST_GENERATE_JOBS_H

#include <stdint.h>

#include "cinfer/engine.h"

struct job {
    struct cinfer_engine *engine;
    int32_t ids[32];
    int n_ids;
    int max_new;
    int chunks;      /* streamed: chunks seen so far (read atomically) */
    int rc;
    double ended_at; /* monotonic seconds when the call returned; written by its thread, read atomically */
    struct cinfer_generate_result result;
    struct cinfer_error err;
};

/* Monotonic seconds. */
double cinfer_test_now_s(void);

/* Prompt i into ids: BOS then a few ids of a 512-token vocabulary; returns how many. */
int cinfer_test_job_prompt(int i, int32_t *ids);

/* Thread bodies (arg: struct job *): cinfer_engine_generate into result, or
 * cinfer_engine_generate_stream counting chunks; both set rc, err and ended_at. */
void *cinfer_test_job_run_blocking(void *arg);
void *cinfer_test_job_run_stream(void *arg);

#endif
