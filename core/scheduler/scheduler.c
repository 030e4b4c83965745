/* Continuous batching over the paged KV cache (scheduler.h). */
#include "scheduler/scheduler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/constraint.h"
#include "scheduler/radix_cache.h"
#include "scheduler/sampler.h"

struct request {
    uint64_t rid;
    int32_t *tokens;        /* (n_tokens) prompt, then every sampled token */
    int n_tokens, cap_tokens;
    int n_prompt;
    int n_output;
    int n_computed;         /* tokens whose K/V are in the pages */
    int32_t *pages;         /* (n_pages) page table */
    int n_pages, cap_pages;
    struct cinfer_sampling_params params; /* stop strings are the detokenizer's: not kept */
    struct cinfer_rng rng;
    uint64_t arrival;       /* order of add(): fcfs and the tie-break of every policy */
    struct cinfer_radix_node *cache_lock; /* the prefix-cache path this request locks, or NULL */
    int64_t queued_at_ms;   /* when add() took it */
    int64_t started_at_ms;  /* when first admitted; -1 before */
    int sort_priority, sort_match; /* ordering keys of the current step */
    struct cinfer_grammar_matcher *matcher; /* constrained decoding, or NULL */
    int cached_tokens;      /* prompt tokens the prefix cache held at the first start; -1 before */
};

struct cinfer_scheduler {
    struct cinfer_runtime *rt;
    struct cinfer_scheduler_options opts;
    int32_t eos_ids[8];
    int page_tokens;
    struct cinfer_sampler sampler;

    struct request **waiting; /* FIFO: waiting[0] is next */
    int n_waiting, cap_waiting;
    struct request **running; /* in admission order */
    int n_running;

    struct cinfer_seq_chunk *chunks; /* (max_running) scratch for one step */
    struct request **chunk_owner;    /* (max_running) */
    float *logits;                   /* (max_running, vocab) */
    struct cinfer_logits_top *tops;  /* (max_running) greedy requests' top tokens, instead of logits */
    /* (max_running) how rows drawn where the logits are (cinfer_runtime_samples) are
     * drawn, and the tokens drawn */
    struct cinfer_backend_sample_params *draws;
    struct cinfer_sampled *drawn;
    struct cinfer_step_item *items;
    int n_items, cap_items;

    struct cinfer_radix_cache *cache; /* NULL when disabled */
    struct cinfer_grammar_cache *grammars; /* NULL without a token table */
    uint64_t *mask;                   /* ((vocab + 63) / 64) allowed tokens of one request */
    struct cinfer_scheduler_stats stats;
    uint64_t n_arrivals;
    uint32_t *window_mark; /* (pages) step a running request last needed a page's window part */
    uint32_t window_step;
};

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void request_free(struct request *r)
{
    if (!r)
        return;
    free(r->tokens);
    free(r->pages);
    cinfer_grammar_matcher_free(&r->matcher);
    free(r);
}

int cinfer_scheduler_create(struct cinfer_runtime *rt, const struct cinfer_scheduler_options *opts,
                            struct cinfer_scheduler **out, struct cinfer_error *err)
{
    *out = NULL;
    if (opts->max_running_requests < 1 || opts->vocab_size < 1 || opts->context_length < 2)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "scheduler: max_running_requests %d, vocab %d, context %d: each must be positive",
                                opts->max_running_requests, opts->vocab_size, opts->context_length);
    struct cinfer_scheduler *s = calloc(1, sizeof *s);
    if (!s)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "scheduler: out of memory");
    s->rt = rt;
    s->opts = *opts;
    s->opts.n_eos = opts->n_eos > 8 ? 8 : opts->n_eos;
    for (int i = 0; i < s->opts.n_eos; i++)
        s->eos_ids[i] = opts->eos_ids[i];
    s->opts.eos_ids = s->eos_ids;
    if (s->opts.max_prefill_tokens <= 0)
        s->opts.max_prefill_tokens = 16384;
    s->page_tokens = cinfer_runtime_kv_page_tokens(rt);
    int n = opts->max_running_requests;
    s->running = calloc((size_t)n, sizeof *s->running);
    s->chunks = calloc((size_t)n, sizeof *s->chunks);
    s->chunk_owner = calloc((size_t)n, sizeof *s->chunk_owner);
    s->logits = malloc((size_t)n * (size_t)opts->vocab_size * sizeof *s->logits);
    s->tops = calloc((size_t)n, sizeof *s->tops);
    s->draws = calloc((size_t)n, sizeof *s->draws);
    s->drawn = calloc((size_t)n, sizeof *s->drawn);
    if (!s->running || !s->chunks || !s->chunk_owner || !s->logits || !s->tops || !s->draws || !s->drawn ||
        cinfer_sampler_init(&s->sampler, opts->vocab_size)) {
        cinfer_scheduler_destroy(&s);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "scheduler: out of memory for %d running requests", n);
    }
    if (cinfer_runtime_kv_window_tokens(rt) > 0 &&
        !(s->window_mark = calloc((size_t)cinfer_runtime_kv_pages_total(rt), sizeof *s->window_mark))) {
        cinfer_scheduler_destroy(&s);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "scheduler: out of memory for the sliding-window marks");
    }
    if (!s->opts.now_ms)
        s->opts.now_ms = monotonic_ms;
    if (opts->token_table) {
        s->mask = calloc(((size_t)opts->vocab_size + 63) / 64, sizeof *s->mask);
        if (!s->mask || cinfer_grammar_cache_create(opts->token_table, 64, &s->grammars)) {
            cinfer_scheduler_destroy(&s);
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "scheduler: out of memory for constrained decoding");
        }
    }
    if (!opts->disable_radix_cache) {
        int rc = cinfer_radix_cache_create(rt, &s->cache, err);
        if (rc) {
            cinfer_scheduler_destroy(&s);
            return rc;
        }
    }
    *out = s;
    return CINFER_OK;
}

static void release_pages(struct cinfer_scheduler *s, struct request *r)
{
    for (int i = 0; i < r->n_pages; i++)
        cinfer_runtime_kv_page_unref(s->rt, r->pages[i]);
    r->n_pages = 0;
    r->n_computed = 0;
    if (s->cache)
        cinfer_radix_cache_unlock(s->cache, r->cache_lock);
    r->cache_lock = NULL;
}

/* Hands the full pages of r's computed tokens to the prefix cache (r keeps its refs). */
static void cache_computed_pages(struct cinfer_scheduler *s, struct request *r)
{
    if (s->cache)
        cinfer_radix_cache_insert(s->cache, r->tokens, r->pages, r->n_computed / s->page_tokens, &r->cache_lock);
}

void cinfer_scheduler_destroy(struct cinfer_scheduler **sp)
{
    if (!sp || !*sp)
        return;
    struct cinfer_scheduler *s = *sp;
    for (int i = 0; i < s->n_running; i++) {
        release_pages(s, s->running[i]);
        request_free(s->running[i]);
    }
    for (int i = 0; i < s->n_waiting; i++)
        request_free(s->waiting[i]);
    cinfer_radix_cache_destroy(&s->cache);
    free(s->window_mark);
    cinfer_grammar_cache_free(&s->grammars);
    free(s->mask);
    free(s->waiting);
    free(s->running);
    free(s->chunks);
    free(s->chunk_owner);
    free(s->logits);
    free(s->tops);
    free(s->draws);
    free(s->drawn);
    free(s->items);
    cinfer_sampler_free(&s->sampler);
    free(s);
    *sp = NULL;
}

int64_t cinfer_scheduler_max_total_tokens(const struct cinfer_scheduler *s)
{
    return (int64_t)cinfer_runtime_kv_pages_total(s->rt) * s->page_tokens;
}

int cinfer_scheduler_has_work(const struct cinfer_scheduler *s)
{
    return s->n_running > 0 || s->n_waiting > 0 || s->n_items > 0;
}
int cinfer_scheduler_running(const struct cinfer_scheduler *s) { return s->n_running; }
int cinfer_scheduler_queued(const struct cinfer_scheduler *s) { return s->n_waiting; }

void cinfer_scheduler_get_stats(const struct cinfer_scheduler *s, struct cinfer_scheduler_stats *out)
{
    *out = s->stats;
    out->cached_pages = s->cache ? cinfer_radix_cache_pages(s->cache) : 0;
    out->evictable_pages = s->cache ? cinfer_radix_cache_evictable_pages(s->cache) : 0;
    if (s->grammars)
        cinfer_grammar_cache_stats(s->grammars, &out->grammar_lookups, &out->grammar_cache_hits);
}

int cinfer_scheduler_flush_cache(struct cinfer_scheduler *s, struct cinfer_error *err)
{
    if (s->n_running > 0 || s->n_waiting > 0)
        return cinfer_error_set(err, CINFER_ERR_STATE,
                                "cannot flush the prefix cache while %d requests are running and %d waiting; "
                                "retry when idle",
                                s->n_running, s->n_waiting);
    if (s->cache)
        cinfer_radix_cache_flush(s->cache);
    return CINFER_OK;
}

static int push_waiting(struct cinfer_scheduler *s, struct request *r, int at_front)
{
    if (s->n_waiting == s->cap_waiting) {
        int cap = s->cap_waiting ? s->cap_waiting * 2 : 64;
        struct request **grown = realloc(s->waiting, (size_t)cap * sizeof *grown);
        if (!grown)
            return CINFER_ERR_NOMEM;
        s->waiting = grown;
        s->cap_waiting = cap;
    }
    if (at_front) {
        memmove(s->waiting + 1, s->waiting, (size_t)s->n_waiting * sizeof *s->waiting);
        s->waiting[0] = r;
    } else {
        s->waiting[s->n_waiting] = r;
    }
    s->n_waiting++;
    return CINFER_OK;
}

static struct cinfer_step_item *new_item(struct cinfer_scheduler *s, const struct request *r)
{
    if (s->n_items == s->cap_items) {
        int cap = s->cap_items ? s->cap_items * 2 : 64;
        struct cinfer_step_item *grown = realloc(s->items, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        s->items = grown;
        s->cap_items = cap;
    }
    struct cinfer_step_item *it = &s->items[s->n_items++];
    memset(it, 0, sizeof *it);
    it->rid = r->rid;
    it->token = -1;
    it->prompt_tokens = r->n_prompt;
    it->completion_tokens = r->n_output;
    it->cached_tokens = r->cached_tokens > 0 ? r->cached_tokens : 0;
    return it;
}

int cinfer_scheduler_add(struct cinfer_scheduler *s, uint64_t rid, const int32_t *ids, int n_ids,
                         const struct cinfer_sampling_params *params, struct cinfer_error *err)
{
    if (n_ids < 1)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "request %llu has an empty prompt",
                                (unsigned long long)rid);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= s->opts.vocab_size)
            return cinfer_error_set(err, CINFER_ERR_RANGE, "prompt token %d at position %d is outside the vocabulary [0, %d)",
                                    ids[i], i, s->opts.vocab_size);
    if (n_ids + 1 > s->opts.context_length)
        return cinfer_error_set(err, CINFER_ERR_CONTEXT_LENGTH,
                                "prompt of %d tokens leaves no room for output in the context length of %d tokens",
                                n_ids, s->opts.context_length);
    int64_t capacity = cinfer_scheduler_max_total_tokens(s);
    if (n_ids + 1 > capacity)
        return cinfer_error_set(err, CINFER_ERR_CONTEXT_LENGTH,
                                "prompt of %d tokens does not fit the KV cache of %lld tokens", n_ids,
                                (long long)capacity);
    if (s->opts.max_queued_requests > 0 && s->n_waiting >= s->opts.max_queued_requests)
        return cinfer_error_set(err, CINFER_ERR_OVERLOADED, "queue full: %d requests are waiting (max_queued_requests %d)",
                                s->n_waiting, s->opts.max_queued_requests);
    /* Constrained decoding: the grammar (compiled once per text, shared) and this
     * request's place in it. */
    struct cinfer_grammar_matcher *matcher = NULL;
    char *grammar = NULL;
    int rc = cinfer_constraint_grammar(params, 0, &grammar, err);
    if (rc)
        return rc;
    if (grammar) {
        struct cinfer_grammar_masks *masks = NULL;
        if (!s->grammars)
            rc = cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                  "constrained decoding needs the model's tokenizer in the scheduler, and none could "
                                  "be opened (see the scheduler's log)");
        else
            rc = cinfer_grammar_cache_get(s->grammars, grammar, &masks, err);
        free(grammar);
        if (rc == CINFER_OK && cinfer_grammar_matcher_create(masks, &matcher))
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory starting the grammar of request %llu",
                                  (unsigned long long)rid);
        cinfer_grammar_masks_unref(&masks);
        if (rc)
            return rc;
    }
    struct request *r = calloc(1, sizeof *r);
    int cap = n_ids + (params->max_new_tokens > 0 ? params->max_new_tokens : 16) + 1;
    if (cap > s->opts.context_length + 1)
        cap = s->opts.context_length + 1;
    if (r)
        r->tokens = malloc((size_t)cap * sizeof *r->tokens);
    if (!r || !r->tokens) {
        request_free(r);
        cinfer_grammar_matcher_free(&matcher);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory queueing request %llu", (unsigned long long)rid);
    }
    r->matcher = matcher;
    r->cached_tokens = -1;
    r->rid = rid;
    r->arrival = s->n_arrivals++;
    r->queued_at_ms = s->opts.now_ms();
    r->started_at_ms = -1;
    memcpy(r->tokens, ids, (size_t)n_ids * sizeof *ids);
    r->n_tokens = r->n_prompt = n_ids;
    r->cap_tokens = cap;
    r->params = *params;
    r->params.n_stop = 0;
    memset(r->params.stop, 0, sizeof r->params.stop);
    r->params.json_schema = r->params.regex = r->params.ebnf = NULL; /* the matcher holds the grammar */
    cinfer_rng_seed(&r->rng, params->has_seed ? params->seed : s->opts.default_seed ^ (rid * 0x9E3779B97F4A7C15ull));
    if (push_waiting(s, r, 0)) {
        request_free(r);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory queueing request %llu", (unsigned long long)rid);
    }
    return CINFER_OK;
}

static void remove_running(struct cinfer_scheduler *s, int i)
{
    memmove(s->running + i, s->running + i + 1, (size_t)(s->n_running - i - 1) * sizeof *s->running);
    s->n_running--;
}

int cinfer_scheduler_abort(struct cinfer_scheduler *s, uint64_t rid)
{
    for (int i = 0; i < s->n_running; i++)
        if (s->running[i]->rid == rid) {
            struct request *r = s->running[i];
            release_pages(s, r);
            remove_running(s, i);
            struct cinfer_step_item *it = new_item(s, r);
            if (it)
                it->finish_reason = CINFER_FINISH_ABORT;
            request_free(r);
            return 1;
        }
    for (int i = 0; i < s->n_waiting; i++)
        if (s->waiting[i]->rid == rid) {
            struct request *r = s->waiting[i];
            memmove(s->waiting + i, s->waiting + i + 1, (size_t)(s->n_waiting - i - 1) * sizeof *s->waiting);
            s->n_waiting--;
            struct cinfer_step_item *it = new_item(s, r);
            if (it)
                it->finish_reason = CINFER_FINISH_ABORT;
            request_free(r);
            return 1;
        }
    return 0;
}

/* Makes r's page table cover n_positions; 0 or CINFER_ERR_NOMEM when the cache is full. */
static int cover(struct cinfer_scheduler *s, struct request *r, int n_positions)
{
    int need = (n_positions + s->page_tokens - 1) / s->page_tokens;
    if (need > r->cap_pages) {
        int cap = need + 4;
        int32_t *grown = realloc(r->pages, (size_t)cap * sizeof *grown);
        if (!grown)
            return CINFER_ERR_NOMEM;
        r->pages = grown;
        r->cap_pages = cap;
    }
    while (r->n_pages < need) {
        int32_t page;
        if (cinfer_runtime_kv_page_alloc(s->rt, &page)) {
            /* Unused cached prefixes go before any running request is retracted. */
            if (!s->cache || cinfer_radix_cache_evict(s->cache, need - r->n_pages) == 0 ||
                cinfer_runtime_kv_page_alloc(s->rt, &page))
                return CINFER_ERR_NOMEM;
        }
        r->pages[r->n_pages++] = page;
    }
    return CINFER_OK;
}

/* Sliding layers: drops the window part of every page no running request can attend
 * to through its window any more (a request's next query is at n_computed and sees
 * from n_computed - window + 1), so those layers hold about a window per request. A
 * request also keeps the window its prompt's cached prefix ends with, so that the same
 * prompt again (a retry, n > 1, a retracted request) resumes from the prefix cache:
 * about two windows per request in all. */
static void release_passed_windows(struct cinfer_scheduler *s)
{
    int window = cinfer_runtime_kv_window_tokens(s->rt);
    if (window == 0 || !s->window_mark)
        return;
    uint32_t step = ++s->window_step;
    int pt = s->page_tokens;
    for (int i = 0; i < s->n_running; i++) {
        const struct request *r = s->running[i];
        int first_seen = r->n_computed - window + 1;
        for (int p = first_seen > 0 ? first_seen / pt : 0; p < r->n_pages; p++)
            s->window_mark[r->pages[p]] = step;
        int prompt_pages = (r->n_prompt - 1) / pt; /* what start_from_cache would match */
        int prompt_seen = prompt_pages * pt - window + 1;
        for (int p = prompt_seen > 0 ? prompt_seen / pt : 0; p < prompt_pages && p < r->n_pages; p++)
            s->window_mark[r->pages[p]] = step;
    }
    for (int i = 0; i < s->n_running; i++) {
        const struct request *r = s->running[i];
        int first_seen = r->n_computed - window + 1;
        for (int p = 0; p < (first_seen > 0 ? first_seen / pt : 0) && p < r->n_pages; p++)
            if (s->window_mark[r->pages[p]] != step)
                cinfer_runtime_kv_page_drop_window(s->rt, r->pages[p]);
    }
}

/* Puts the last running request (the step moves its chosen victim there) back at the
 * front of the queue, freeing its pages;
 * its tokens (prompt and output so far) are recomputed when it runs again, except the
 * full pages the prefix cache still holds by then. */
static void retract_last(struct cinfer_scheduler *s)
{
    struct request *r = s->running[s->n_running - 1];
    s->stats.retractions++;
    cache_computed_pages(s, r);
    release_pages(s, r);
    s->n_running--;
    if (push_waiting(s, r, 1)) { /* cannot requeue: fail it rather than lose it */
        struct cinfer_step_item *it = new_item(s, r);
        if (it) {
            it->finish_reason = CINFER_FINISH_ERROR;
            it->code = CINFER_ERR_NOMEM;
            it->error = "out of memory retracting the request";
        }
        request_free(r);
    }
}

static int is_eos(const struct cinfer_scheduler *s, int32_t id)
{
    for (int i = 0; i < s->opts.n_eos; i++)
        if (s->eos_ids[i] == id)
            return 1;
    return 0;
}

static enum cinfer_finish_reason finished(const struct cinfer_scheduler *s, const struct request *r, int32_t id)
{
    const struct cinfer_sampling_params *p = &r->params;
    if (r->n_output >= p->min_new_tokens) {
        if (!p->ignore_eos && is_eos(s, id))
            return CINFER_FINISH_STOP_TOKEN;
        for (int i = 0; i < p->n_stop_token_ids; i++)
            if (p->stop_token_ids[i] == id)
                return CINFER_FINISH_STOP_TOKEN;
    }
    if (r->n_output >= p->max_new_tokens || r->n_tokens >= s->opts.context_length)
        return CINFER_FINISH_LENGTH;
    return CINFER_FINISH_NONE;
}

/* A running request that failed this step leaves at once (its item is reported). */
static void drop_running(struct cinfer_scheduler *s, struct request *r)
{
    for (int j = 0; j < s->n_running; j++)
        if (s->running[j] == r) {
            release_pages(s, r);
            remove_running(s, j);
            request_free(r);
            return;
        }
}

static int is_stop_id(const struct cinfer_scheduler *s, const struct request *r, int32_t id)
{
    if (!r->params.ignore_eos && is_eos(s, id))
        return 1;
    for (int i = 0; i < r->params.n_stop_token_ids; i++)
        if (r->params.stop_token_ids[i] == id)
            return 1;
    return 0;
}

_Static_assert(CINFER_LOGITS_TOP_MAX >= CINFER_MAX_TOP_LOGPROBS, "a greedy row's top tokens hold every alternative");

/* The greedy token of a row given by its top tokens (cinfer_sampler_takes_argmax_as_is),
 * with its logprob and top alternatives when p asks: what cinfer_sample and
 * cinfer_sample_logprobs give on the whole row, bit for bit. */
static int32_t pick_from_top(const struct cinfer_logits_top *top, const struct cinfer_sampling_params *p,
                             float *logprob, struct cinfer_token_logprobs *lp)
{
    int32_t id = top->n > 0 ? top->ids[0] : 0; /* no entry above -inf: token 0, as the argmax gives */
    if (!p->logprobs)
        return id;
    double logit = top->n > 0 ? top->logits[0] : -INFINITY;
    *logprob = (float)(logit - top->log_sum_exp);
    lp->token = id;
    lp->logprob = *logprob;
    lp->n_top = p->top_logprobs < top->n ? (p->top_logprobs > 0 ? p->top_logprobs : 0) : top->n;
    for (int i = 0; i < lp->n_top; i++) {
        lp->top_ids[i] = top->ids[i];
        lp->top_logprobs[i] = (float)((double)top->logits[i] - top->log_sum_exp);
    }
    return id;
}

/* A token drawn where the logits are, with its logprob and top alternatives when p asks
 * (top: the row's after the temperature): what cinfer_sample and cinfer_sample_logprobs
 * give on the whole row. */
static int32_t logprobs_of_draw(const struct cinfer_logits_top *top, const struct cinfer_sampled *drawn,
                                const struct cinfer_sampling_params *p, float *logprob,
                                struct cinfer_token_logprobs *lp)
{
    if (!p->logprobs)
        return drawn->id;
    *logprob = (float)((double)drawn->logit - top->log_sum_exp);
    lp->token = drawn->id;
    lp->logprob = *logprob;
    lp->n_top = p->top_logprobs < top->n ? (p->top_logprobs > 0 ? p->top_logprobs : 0) : top->n;
    for (int i = 0; i < lp->n_top; i++) {
        lp->top_ids[i] = top->ids[i];
        lp->top_logprobs[i] = (float)((double)top->logits[i] - top->log_sum_exp);
    }
    return drawn->id;
}

/* Constrained decoding, before the sampler sees the row: every token the grammar does
 * not allow next goes to -inf; EOS and stop token ids stay only where the grammar can
 * end. *p is the request's params, changed where the grammar overrides them (no EOS ban
 * from min_new_tokens once only the end is left). Returns the number of tokens left. */
static int constrain(struct cinfer_scheduler *s, struct request *r, float *logits, struct cinfer_sampling_params *p)
{
    int vocab = s->opts.vocab_size;
    uint64_t *bits = s->mask;
    cinfer_grammar_matcher_fill_mask(r->matcher, bits);
    int can_end = cinfer_grammar_matcher_can_end(r->matcher);
    int ids[8 + CINFER_MAX_STOP_TOKEN_IDS], n_ids = 0;
    for (int i = 0; !p->ignore_eos && i < s->opts.n_eos; i++)
        ids[n_ids++] = s->eos_ids[i];
    for (int i = 0; i < p->n_stop_token_ids && i < CINFER_MAX_STOP_TOKEN_IDS; i++)
        ids[n_ids++] = p->stop_token_ids[i];
    for (int i = 0; i < n_ids; i++)
        if (ids[i] >= 0 && ids[i] < vocab) {
            if (can_end)
                bits[ids[i] >> 6] |= 1ull << (ids[i] & 63);
            else if (is_eos(s, ids[i]))
                bits[ids[i] >> 6] &= ~(1ull << (ids[i] & 63));
        }
    int left = 0;
    for (int w = 0; w * 64 < vocab; w++) {
        uint64_t word = bits[w];
        int base = w * 64, end = base + 64 < vocab ? base + 64 : vocab;
        if (word == ~0ull && end - base == 64) {
            left += 64;
            continue;
        }
        for (int i = base; i < end; i++) {
            if (word >> (i - base) & 1)
                left++;
            else
                logits[i] = -INFINITY;
        }
    }
    if (cinfer_grammar_matcher_must_end(r->matcher))
        p->min_new_tokens = 0; /* only the end is left: nothing may ban it */
    return left;
}

/* Waiting order: priority (higher first), then the policy's key, then arrival. */
static int by_waiting_order(const void *a, const void *b)
{
    const struct request *x = *(struct request *const *)a, *y = *(struct request *const *)b;
    if (x->sort_priority != y->sort_priority)
        return x->sort_priority > y->sort_priority ? -1 : 1;
    if (x->sort_match != y->sort_match)
        return x->sort_match > y->sort_match ? -1 : 1;
    return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

static int request_priority(const struct request *r)
{
    return r->params.priority;
}

static void order_waiting(struct cinfer_scheduler *s)
{
    if (s->n_waiting < 2)
        return;
    int lpm = s->cache && s->opts.schedule_policy == CINFER_SCHEDULE_LPM;
    for (int i = 0; i < s->n_waiting; i++) {
        struct request *r = s->waiting[i];
        r->sort_priority = request_priority(r);
        r->sort_match = lpm ? cinfer_radix_cache_peek(s->cache, r->tokens, r->n_tokens - 1) : 0;
    }
    qsort(s->waiting, (size_t)s->n_waiting, sizeof *s->waiting, by_waiting_order);
}

/* Full pages r shares with a running request whose prompt is not all computed (so not
 * yet all in the cache) beyond the cached_pages r already finds in the cache: starting
 * r now would compute those pages twice. */
static int shares_pending_prefix(const struct cinfer_scheduler *s, const struct request *r, int cached_pages)
{
    int limit = r->n_tokens - 1;
    for (int i = 0; i < s->n_running; i++) {
        const struct request *o = s->running[i];
        if (o->n_computed >= o->n_prompt)
            continue;
        int n = limit < o->n_prompt ? limit : o->n_prompt, same = 0;
        while (same < n && r->tokens[same] == o->tokens[same])
            same++;
        if (same / s->page_tokens > cached_pages)
            return 1;
    }
    return 0;
}

/* Starts r from its longest cached prefix: its page table gets the cached pages and
 * only the rest is computed. The last token is always computed, for its logits. */
static int start_from_cache(struct cinfer_scheduler *s, struct request *r)
{
    int matched = 0;
    if (s->cache) {
        int max_pages = (r->n_tokens - 1) / s->page_tokens;
        if (max_pages > r->cap_pages) {
            int32_t *grown = realloc(r->pages, (size_t)(max_pages + 4) * sizeof *grown);
            if (!grown)
                return CINFER_ERR_NOMEM;
            r->pages = grown;
            r->cap_pages = max_pages + 4;
        }
        matched = cinfer_radix_cache_match(s->cache, r->tokens, r->n_tokens - 1, r->pages, &r->cache_lock);
    }
    /* Sliding layers: a cached prefix whose last window lost its window parts cannot be
     * resumed there; the rest is computed again. */
    int usable = cinfer_runtime_kv_window_usable_pages(s->rt, r->pages, matched);
    for (int i = usable; i < matched; i++)
        cinfer_runtime_kv_page_unref(s->rt, r->pages[i]);
    matched = usable;
    r->n_pages = matched;
    r->n_computed = matched * s->page_tokens;
    if (r->cached_tokens < 0) /* the first start: what the caller is told was cached */
        r->cached_tokens = r->n_computed;
    s->stats.prefix_cache_query_tokens += r->n_tokens;
    s->stats.prefix_cache_hit_tokens += r->n_computed;
    return CINFER_OK;
}

/* Moves waiting requests to running while there is room, in waiting order. Room is a
 * free slot and pages for the uncached part of the request's tokens (free pages plus
 * what the prefix cache could evict): admitting more would only retract at once. When
 * nothing runs, the first request goes in regardless, so the queue always moves. */
static void admit(struct cinfer_scheduler *s, int64_t now_ms)
{
    order_waiting(s);
    int available_pages = cinfer_runtime_kv_pages_free(s->rt);
    if (s->cache)
        available_pages += cinfer_radix_cache_evictable_pages(s->cache);
    int kept = 0, blocked = 0;
    for (int i = 0; i < s->n_waiting; i++) {
        struct request *r = s->waiting[i];
        int room = !blocked && s->n_running < s->opts.max_running_requests;
        int cached_pages = s->cache && room ? cinfer_radix_cache_peek(s->cache, r->tokens, r->n_tokens - 1) : 0;
        if (room && s->cache && shares_pending_prefix(s, r, cached_pages))
            room = 0; /* next step it finds the shared pages in the cache */
        /* Pages for all its tokens plus the next one; cached pages may have been
         * counted as evictable, so they are charged too. */
        int need_pages = (r->n_tokens + s->page_tokens) / s->page_tokens;
        if (room && need_pages > available_pages && s->n_running > 0)
            room = 0, blocked = 1; /* later ones wait their turn behind it */
        if (room && start_from_cache(s, r) == CINFER_OK) {
            available_pages -= need_pages;
            if (r->started_at_ms < 0)
                r->started_at_ms = now_ms;
            s->running[s->n_running++] = r;
        } else {
            s->waiting[kept++] = r;
        }
    }
    s->n_waiting = kept;
}

static void report_timeout(struct cinfer_scheduler *s, const struct request *r, const char *which, int limit_ms)
{
    struct cinfer_step_item *it = new_item(s, r);
    if (!it)
        return;
    it->finish_reason = CINFER_FINISH_ABORT;
    snprintf(it->message, sizeof it->message, "%s timeout of %d ms", which, limit_ms);
}

static int past(int64_t since_ms, int limit_ms, int64_t now_ms)
{
    return since_ms >= 0 && limit_ms > 0 && now_ms - since_ms >= limit_ms;
}

/* Requests past their waiting timeout (never started) or running timeout (counted from
 * the first start, retractions included) finish with ABORT and say which. */
static void expire(struct cinfer_scheduler *s, int64_t now_ms)
{
    int kept = 0;
    for (int i = 0; i < s->n_waiting; i++) {
        struct request *r = s->waiting[i];
        if (r->started_at_ms < 0 && past(r->queued_at_ms, r->params.waiting_timeout_ms, now_ms)) {
            report_timeout(s, r, "waiting", r->params.waiting_timeout_ms);
            request_free(r);
        } else if (past(r->started_at_ms, r->params.running_timeout_ms, now_ms)) {
            report_timeout(s, r, "running", r->params.running_timeout_ms);
            request_free(r);
        } else {
            s->waiting[kept++] = r;
        }
    }
    s->n_waiting = kept;
    for (int i = s->n_running - 1; i >= 0; i--) {
        struct request *r = s->running[i];
        if (past(r->started_at_ms, r->params.running_timeout_ms, now_ms)) {
            report_timeout(s, r, "running", r->params.running_timeout_ms);
            release_pages(s, r);
            remove_running(s, i);
            request_free(r);
        }
    }
}

int cinfer_scheduler_step(struct cinfer_scheduler *s, const struct cinfer_step_item **items, int *n_items,
                          struct cinfer_error *err)
{
    /* Items from aborts since the last step are reported now, then cleared. */
    int carried = s->n_items;
    (void)carried;

    /* 1. Admit waiting requests while there is room. */
    int64_t now_ms = s->opts.now_ms();
    expire(s, now_ms);
    admit(s, now_ms);

    /* 2. One chunk per running request: the rest of its prompt (bounded by the chunk
     *    size and the step's prefill budget), or its one decode token. */
    int prefill_budget = s->opts.max_prefill_tokens;
    int n_chunks = 0;
    for (int i = 0; i < s->n_running; i++) {
        struct request *r = s->running[i];
        int pending = r->n_tokens - r->n_computed;
        int take = pending;
        if (pending > 1) {
            if (s->opts.chunked_prefill_size > 0 && take > s->opts.chunked_prefill_size)
                take = s->opts.chunked_prefill_size;
            if (take > prefill_budget)
                take = prefill_budget;
            if (take <= 0)
                continue; /* no budget left this step: it waits its turn */
            prefill_budget -= take;
        }
        while (cover(s, r, r->n_computed + take) != CINFER_OK) {
            if (s->n_running == 1) { /* alone and still no room: it cannot go on */
                struct cinfer_step_item *it = new_item(s, r);
                if (it)
                    it->finish_reason = CINFER_FINISH_LENGTH;
                release_pages(s, r);
                request_free(r);
                s->n_running = 0;
                n_chunks = 0;
                goto run;
            }
            /* The victim: the lowest priority among the requests not yet given a
             * chunk this step (this one included), the newest among equals. */
            int victim = i;
            for (int j = i + 1; j < s->n_running; j++)
                if (request_priority(s->running[j]) <= request_priority(s->running[victim]))
                    victim = j;
            struct request *last = s->running[s->n_running - 1];
            s->running[s->n_running - 1] = s->running[victim];
            s->running[victim] = last;
            int self = (victim == i);
            retract_last(s);
            if (self)
                goto run;
        }
        struct cinfer_seq_chunk *c = &s->chunks[n_chunks];
        c->tokens = r->tokens + r->n_computed;
        c->n_tokens = take;
        c->start_pos = r->n_computed;
        c->page_table = r->pages;
        c->n_pages = r->n_pages;
        int completes = r->n_computed + take == r->n_tokens;
        c->logits = completes ? CINFER_LOGITS_LAST : CINFER_LOGITS_NONE;
        c->logits_out = completes ? s->logits + (size_t)n_chunks * (size_t)s->opts.vocab_size : NULL;
        /* a greedy pick from logits as they come needs the row's top tokens only; a draw
         * from them divided by the temperature alone is made where they are, when the
         * backend can (its uniform number is the request's next, as the host would draw) */
        int top_only = completes && !r->matcher && cinfer_sampler_takes_argmax_as_is(&r->params, r->n_output);
        int drawn_there = completes && !r->matcher && cinfer_runtime_samples(s->rt) &&
                          cinfer_sampler_draws_as_is(&r->params, r->n_output);
        c->sample = NULL;
        c->sampled_out = NULL;
        if (drawn_there) {
            s->draws[n_chunks] = (struct cinfer_backend_sample_params){
                r->params.temperature, r->params.top_k > 0 ? r->params.top_k : 0, r->params.top_p, r->params.min_p,
                cinfer_rng_uniform(&r->rng)};
            c->sample = &s->draws[n_chunks];
            c->sampled_out = &s->drawn[n_chunks];
        }
        int n_top = r->params.logprobs ? r->params.top_logprobs : 0;
        n_top = n_top < CINFER_LOGITS_TOP_MAX ? n_top : CINFER_LOGITS_TOP_MAX; /* as cinfer_sample_logprobs clamps */
        int ranked = top_only || (drawn_there && r->params.logprobs);
        c->top_k = ranked ? (n_top > 1 ? n_top : 1) : 0;
        c->top_log_sum_exp = ranked && r->params.logprobs;
        c->top_out = ranked ? &s->tops[n_chunks] : NULL;
        s->chunk_owner[n_chunks++] = r;
    }
run:
    if (n_chunks > 0) {
        int rc = cinfer_runtime_forward(s->rt, s->chunks, n_chunks, err);
        if (rc)
            return rc;
    }

    /* 3. Sample for every request whose tokens are all computed now. */
    for (int c = 0; c < n_chunks; c++) {
        struct request *r = s->chunk_owner[c];
        int start = s->chunks[c].start_pos, end = start + s->chunks[c].n_tokens;
        if (start < r->n_prompt)
            s->stats.prefill_tokens += (end < r->n_prompt ? end : r->n_prompt) - start;
        r->n_computed = end;
        if (start < r->n_prompt) /* a prefill chunk: later requests may share it at once */
            cache_computed_pages(s, r);
        if (s->chunks[c].logits != CINFER_LOGITS_LAST)
            continue;
        struct cinfer_sample_context ctx = {
            .prompt = r->tokens, .n_prompt = r->n_prompt,
            .output = r->tokens + r->n_prompt, .n_output = r->n_output,
            .eos_ids = r->params.ignore_eos ? NULL : s->eos_ids, .n_eos = r->params.ignore_eos ? 0 : s->opts.n_eos,
        };
        float logprob = 0;
        struct cinfer_sampling_params params = r->params;
        if (r->matcher && constrain(s, r, s->chunks[c].logits_out, &params) == 0) {
            struct cinfer_step_item *it = new_item(s, r);
            if (!it)
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reporting a step");
            it->finish_reason = CINFER_FINISH_ERROR;
            it->code = CINFER_ERR_UNSUPPORTED;
            snprintf(it->message, sizeof it->message, "no token continues the grammar after %d tokens", r->n_output);
            drop_running(s, r);
            continue;
        }
        struct cinfer_token_logprobs lp = {0};
        int32_t id = s->chunks[c].sample ? logprobs_of_draw(s->chunks[c].top_out, s->chunks[c].sampled_out,
                                                             &r->params, &logprob, &lp)
                     : s->chunks[c].top_k ? pick_from_top(s->chunks[c].top_out, &r->params, &logprob, &lp)
                                          : cinfer_sample(&s->sampler, s->chunks[c].logits_out, &params, &ctx, &r->rng,
                                                          r->params.logprobs ? &logprob : NULL);
        int grammar_done = 0;
        if (r->matcher) {
            int stop = is_stop_id(s, r, id) && cinfer_grammar_matcher_can_end(r->matcher);
            if (!stop && cinfer_grammar_matcher_accept_token(r->matcher, id)) {
                struct cinfer_step_item *it = new_item(s, r);
                if (!it)
                    return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reporting a step");
                it->finish_reason = CINFER_FINISH_ERROR;
                it->code = CINFER_ERR_INTERNAL;
                snprintf(it->message, sizeof it->message, "the grammar refused sampled token %d", id);
                drop_running(s, r);
                continue;
            }
            /* finished by the grammar where nothing else could end it */
            grammar_done = !stop && cinfer_grammar_matcher_must_end(r->matcher) &&
                           (r->params.ignore_eos || s->opts.n_eos == 0) && r->params.n_stop_token_ids == 0;
        }
        /* Logprobs from the row cinfer_sample left processed, before the next forward
         * reuses it. */
        if (r->params.logprobs && !s->chunks[c].top_k)
            cinfer_sample_logprobs(s->chunks[c].logits_out, s->opts.vocab_size, id, r->params.top_logprobs, &lp);
        if (r->n_tokens == r->cap_tokens) { /* cannot happen: capacity is prompt + max_new + 1 */
            int cap = r->cap_tokens * 2;
            int32_t *grown = realloc(r->tokens, (size_t)cap * sizeof *grown);
            if (!grown)
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory growing request %llu",
                                        (unsigned long long)r->rid);
            r->tokens = grown;
            r->cap_tokens = cap;
        }
        r->tokens[r->n_tokens++] = id;
        r->n_output++;
        struct cinfer_step_item *it = new_item(s, r);
        if (!it)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reporting a step");
        it->token = id;
        it->logprob = logprob;
        if (r->params.logprobs) {
            it->has_logprobs = 1;
            it->logprobs.token = lp.token;
            it->logprobs.logprob = lp.logprob;
            it->logprobs.n_top = lp.n_top;
            memcpy(it->logprobs.top_ids, lp.top_ids, (size_t)lp.n_top * sizeof lp.top_ids[0]);
            memcpy(it->logprobs.top_logprobs, lp.top_logprobs, (size_t)lp.n_top * sizeof lp.top_logprobs[0]);
        }
        it->finish_reason = finished(s, r, id);
        if (it->finish_reason == CINFER_FINISH_NONE && grammar_done)
            it->finish_reason = CINFER_FINISH_STOP_TOKEN;
    }

    /* 4. Finished requests leave at once and free their pages. */
    for (int i = 0; i < s->n_items; i++) {
        if (s->items[i].finish_reason == CINFER_FINISH_NONE || s->items[i].token < 0)
            continue;
        for (int j = 0; j < s->n_running; j++)
            if (s->running[j]->rid == s->items[i].rid) {
                struct request *r = s->running[j];
                cache_computed_pages(s, r);
                release_pages(s, r);
                remove_running(s, j);
                request_free(r);
                break;
            }
    }
    release_passed_windows(s);
    /* The items may have moved since their messages were written. */
    for (int i = 0; i < s->n_items; i++)
        if (s->items[i].message[0])
            s->items[i].error = s->items[i].message;
    *items = s->items;
    *n_items = s->n_items;
    s->n_items = 0; /* storage stays valid until the next call */
    return CINFER_OK;
}
