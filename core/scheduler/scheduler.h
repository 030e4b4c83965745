/* The batching core of the scheduler process, free of any IPC so it can be driven
 * and tested in one process: requests are added, and each step runs one forward
 * pass over a batch mixing prefill chunks of new requests with one decode token of
 * every running request, samples, and reports each request's new token and whether
 * it finished. The KV cache is paged; when it runs out, the newest running request is
 * retracted to the front of the queue (its pages freed, its tokens recomputed later). */
#ifndef CINFER_SCHEDULER_SCHEDULER_H
#define CINFER_SCHEDULER_SCHEDULER_H

#include <stdint.h>

#include "cinfer/engine.h"
#include "cinfer/error.h"
#include "model/runtime.h"

struct cinfer_scheduler_options {
    int max_running_requests;   /* requests decoding together */
    int max_queued_requests;    /* beyond it add() refuses with "queue full" */
    int max_prefill_tokens;     /* prompt tokens one step may carry */
    int chunked_prefill_size;   /* a prompt is prefilled in chunks of at most this (0: whole) */
    int context_length;         /* prompt + output limit per request */
    int vocab_size;
    const int32_t *eos_ids;     /* the model's end-of-sequence ids */
    int n_eos;
    uint64_t default_seed;      /* for requests without a seed: mixed with the request id */
};

struct cinfer_scheduler;

/* One request's outcome of a step. */
struct cinfer_step_item {
    uint64_t rid;
    int32_t token;              /* the new token, or -1 when none this step */
    float logprob;
    enum cinfer_finish_reason finish_reason;
    int prompt_tokens;
    int completion_tokens;
    const char *error;          /* static text for CINFER_FINISH_ERROR */
};

int cinfer_scheduler_create(struct cinfer_runtime *rt, const struct cinfer_scheduler_options *opts,
                            struct cinfer_scheduler **out, struct cinfer_error *err);
void cinfer_scheduler_destroy(struct cinfer_scheduler **s);

/* Queues a request (copies ids and params). CINFER_ERR_RANGE with the numbers for a
 * prompt longer than the context or the cache; CINFER_ERR_STATE "queue full". */
int cinfer_scheduler_add(struct cinfer_scheduler *s, uint64_t rid, const int32_t *ids, int n_ids,
                         const struct cinfer_sampling_params *params, struct cinfer_error *err);
/* Removes the request wherever it is and frees its pages at once. 1 if it was there. */
int cinfer_scheduler_abort(struct cinfer_scheduler *s, uint64_t rid);
int cinfer_scheduler_has_work(const struct cinfer_scheduler *s);
int cinfer_scheduler_running(const struct cinfer_scheduler *s);
int cinfer_scheduler_queued(const struct cinfer_scheduler *s);
int64_t cinfer_scheduler_max_total_tokens(const struct cinfer_scheduler *s);

/* Runs one step. *items points to scheduler-owned storage valid until the next call;
 * aborted requests are reported once with CINFER_FINISH_ABORT. */
int cinfer_scheduler_step(struct cinfer_scheduler *s, const struct cinfer_step_item **items, int *n_items,
                          struct cinfer_error *err);

#endif
