/* The batching core of the scheduler process, free of any IPC so it can be driven
 * and tested in one process: requests are added, and each step runs one forward
 * pass over a batch mixing prefill chunks of new requests with one decode token of
 * every running request, samples, and reports each request's new token and whether
 * it finished. The KV cache is paged; when it runs out, the newest running request is
 * retracted to the queue (its pages freed, its tokens recomputed later).
 *
 * A radix prefix cache (radix_cache.h) keeps the full KV pages of prefilled and
 * finished requests; a new request starts from its longest cached prefix. Waiting
 * requests are ordered by priority (higher first), then by the policy: arrival (fcfs)
 * or longest cached prefix (lpm). */
#ifndef CINFER_SCHEDULER_SCHEDULER_H
#define CINFER_SCHEDULER_SCHEDULER_H

#include <stdint.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/error.h"
#include "grammar/grammar.h"
#include "model/runtime.h"

struct cinfer_scheduler_options {
    int max_running_requests;   /* requests decoding together */
    int max_queued_requests;    /* beyond it add() refuses with CINFER_ERR_OVERLOADED "queue full" */
    int max_prefill_tokens;     /* prompt tokens one step may carry */
    int chunked_prefill_size;   /* a prompt is prefilled in chunks of at most this (0: whole) */
    int context_length;         /* prompt + output limit per request */
    int vocab_size;
    const int32_t *eos_ids;     /* the model's end-of-sequence ids */
    int n_eos;
    uint64_t default_seed;      /* for requests without a seed: mixed with the request id */
    enum cinfer_schedule_policy schedule_policy;
    int disable_radix_cache;    /* 1: every request computes its whole prompt */
    /* The vocabulary's bytes, for constrained decoding (sampling params json_schema,
     * regex, ebnf); NULL: such requests are refused. Must outlive the scheduler. */
    const struct cinfer_token_table *token_table;
    int64_t (*now_ms)(void);    /* clock for the timeouts; NULL: CLOCK_MONOTONIC */
};

/* Counters since creation (server_info reports them). */
struct cinfer_scheduler_stats {
    int64_t prefix_cache_query_tokens; /* tokens of admitted requests (each admission) */
    int64_t prefix_cache_hit_tokens;   /* of those, found in the prefix cache */
    int64_t prefill_tokens;            /* prompt positions run through the model */
    int64_t retractions;               /* running requests put back to wait for pages */
    int cached_pages;                  /* KV pages the prefix cache holds now */
    int evictable_pages;               /* of those, not in use by any request */
    int64_t grammar_lookups;           /* constrained requests added */
    int64_t grammar_cache_hits;        /* of those, whose grammar was compiled already */
};

struct cinfer_scheduler;

/* One request's outcome of a step. */
struct cinfer_step_item {
    uint64_t rid;
    int32_t token;              /* the new token, or -1 when none this step */
    float logprob;              /* of token; 0 unless the request asked for logprobs */
    int has_logprobs;           /* 1: logprobs describes token (params.logprobs was set) */
    struct cinfer_token_logprob logprobs; /* with params.top_logprobs alternatives */
    enum cinfer_finish_reason finish_reason;
    int prompt_tokens;
    int completion_tokens;
    const char *error;          /* why, for CINFER_FINISH_ERROR and a timeout's ABORT; or NULL */
    int code;                   /* enum cinfer_status for CINFER_FINISH_ERROR, else 0 */
    char message[64];           /* storage error may point to */
    int cached_tokens;          /* prompt tokens found in the prefix cache when it first started */
};

int cinfer_scheduler_create(struct cinfer_runtime *rt, const struct cinfer_scheduler_options *opts,
                            struct cinfer_scheduler **out, struct cinfer_error *err);
void cinfer_scheduler_destroy(struct cinfer_scheduler **s);

/* Queues a request (copies ids and params). Refusals, each with the numbers in err:
 * CINFER_ERR_INVALID_ARGUMENT for an empty prompt, CINFER_ERR_RANGE for a token outside
 * the vocabulary, CINFER_ERR_CONTEXT_LENGTH for a prompt longer than the context or
 * the KV cache, CINFER_ERR_OVERLOADED "queue full". */
int cinfer_scheduler_add(struct cinfer_scheduler *s, uint64_t rid, const int32_t *ids, int n_ids,
                         const struct cinfer_sampling_params *params, struct cinfer_error *err);
/* Removes the request wherever it is and frees its pages at once. 1 if it was there. */
int cinfer_scheduler_abort(struct cinfer_scheduler *s, uint64_t rid);
int cinfer_scheduler_has_work(const struct cinfer_scheduler *s);
int cinfer_scheduler_running(const struct cinfer_scheduler *s);
int cinfer_scheduler_queued(const struct cinfer_scheduler *s);
int64_t cinfer_scheduler_max_total_tokens(const struct cinfer_scheduler *s);
void cinfer_scheduler_get_stats(const struct cinfer_scheduler *s, struct cinfer_scheduler_stats *out);
/* Empties the prefix cache. Refused (CINFER_ERR_STATE, with the counts) while any
 * request is running or waiting, as SGLang's flush_cache: their locked pages could not
 * go, and a half-flushed cache would be a surprise. */
int cinfer_scheduler_flush_cache(struct cinfer_scheduler *s, struct cinfer_error *err);

/* Runs one step. *items points to scheduler-owned storage valid until the next call;
 * aborted requests are reported once with CINFER_FINISH_ABORT. A request past its
 * waiting or running timeout (sampling params waiting_timeout_ms / running_timeout_ms)
 * finishes with CINFER_FINISH_ABORT and error "waiting timeout of N ms" or "running
 * timeout of N ms". */
int cinfer_scheduler_step(struct cinfer_scheduler *s, const struct cinfer_step_item **items, int *n_items,
                          struct cinfer_error *err);

#endif
