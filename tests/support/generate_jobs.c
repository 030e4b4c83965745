#include "support/generate_jobs.h"

#include <time.h>

double cinfer_test_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int cinfer_test_job_prompt(int i, int32_t *ids)
{
    int n = 0;
    ids[n++] = 1;
    for (int k = 0; k < 6 + i % 5; k++)
        ids[n++] = 10 + (i * 37 + k * 11) % 480;
    return n;
}

static struct cinfer_generate_request greedy_request(const struct job *j)
{
    struct cinfer_generate_request req = {.input_ids = j->ids, .n_input_ids = (size_t)j->n_ids};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.max_new_tokens = j->max_new;
    req.sampling.ignore_eos = 1;
    return req;
}

static void mark_ended(struct job *j)
{
    double t = cinfer_test_now_s();
    __atomic_store(&j->ended_at, &t, __ATOMIC_SEQ_CST);
}

void *cinfer_test_job_run_blocking(void *arg)
{
    struct job *j = arg;
    struct cinfer_generate_request req = greedy_request(j);
    j->rc = cinfer_engine_generate(j->engine, &req, &j->result, &j->err);
    mark_ended(j);
    return NULL;
}

static int count_chunk(const struct cinfer_stream_chunk *c, void *ctx)
{
    (void)c;
    __atomic_fetch_add(&((struct job *)ctx)->chunks, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void *cinfer_test_job_run_stream(void *arg)
{
    struct job *j = arg;
    struct cinfer_generate_request req = greedy_request(j);
    j->rc = cinfer_engine_generate_stream(j->engine, &req, count_chunk, j, &j->err);
    mark_ended(j);
    return NULL;
}
