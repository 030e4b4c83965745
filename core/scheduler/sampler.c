#include "scheduler/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the rank order the top logprobs and a device's logits_top share */
#include "cuda/logits_rank.cuh"
/* cinfer_kernel_argmax: the greedy pick, vectorized (as a plain loop it was 3% of a
 * step at 32 sequences) */
#include "kernels.h"

/* ---- random numbers --------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void cinfer_rng_seed(struct cinfer_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t cinfer_rng_next(struct cinfer_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double cinfer_rng_uniform(struct cinfer_rng *rng)
{
    return (double)(cinfer_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* ---- scratch ---------------------------------------------------------------------- */

int cinfer_sampler_init(struct cinfer_sampler *s, int vocab)
{
    memset(s, 0, sizeof *s);
    if (vocab <= 0)
        return CINFER_ERR_INVALID_ARGUMENT;
    s->vocab = vocab;
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    s->weights = malloc((size_t)vocab * sizeof *s->weights);
    s->seen = calloc((size_t)vocab, 1);
    s->counts = calloc((size_t)vocab, sizeof *s->counts);
    if (!s->cand || !s->weights || !s->seen || !s->counts) {
        cinfer_sampler_free(s);
        return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

void cinfer_sampler_free(struct cinfer_sampler *s)
{
    free(s->cand);
    free(s->weights);
    free(s->seen);
    free(s->counts);
    memset(s, 0, sizeof *s);
}

/* ---- processing: penalties, bias, bans, temperature -------------------------------- */

/* Below this a temperature is greedy, as in SGLang: dividing by it would overflow the
 * logits, and no draw could tell it from the argmax. NaN (off the wire) is greedy too. */
#define GREEDY_BELOW_TEMPERATURE 1e-5f
static int samples_greedily(const struct cinfer_sampling_params *p)
{
    return !(p->temperature >= GREEDY_BELOW_TEMPERATURE) || p->top_k == 1;
}

static int in_range(int32_t id, int vocab) { return id >= 0 && id < vocab; }

static void apply_repetition_penalty(struct cinfer_sampler *s, float *logits, float penalty,
                                     const struct cinfer_sample_context *ctx)
{
    const int32_t *lists[2] = {ctx->prompt, ctx->output};
    int lengths[2] = {ctx->n_prompt, ctx->n_output};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < lengths[l]; i++) {
            int32_t id = lists[l][i];
            if (!in_range(id, s->vocab) || s->seen[id])
                continue;
            s->seen[id] = 1;
            logits[id] = logits[id] > 0 ? logits[id] / penalty : logits[id] * penalty;
        }
    for (int l = 0; l < 2; l++) /* leave the marks clean for the next call */
        for (int i = 0; i < lengths[l]; i++)
            if (in_range(lists[l][i], s->vocab))
                s->seen[lists[l][i]] = 0;
}

static void apply_frequency_presence(struct cinfer_sampler *s, float *logits, float frequency, float presence,
                                     const struct cinfer_sample_context *ctx)
{
    for (int i = 0; i < ctx->n_output; i++)
        if (in_range(ctx->output[i], s->vocab))
            s->counts[ctx->output[i]]++;
    for (int i = 0; i < ctx->n_output; i++) {
        int32_t id = ctx->output[i];
        if (!in_range(id, s->vocab) || s->counts[id] == 0)
            continue;
        logits[id] -= frequency * (float)s->counts[id] + presence;
        s->counts[id] = 0; /* applied once per distinct token; also leaves the counts clean */
    }
}

void cinfer_sampler_process(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                            const struct cinfer_sample_context *ctx)
{
    int vocab = s->vocab;
    if (p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f)
        apply_repetition_penalty(s, logits, p->repetition_penalty, ctx);
    if (p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f)
        apply_frequency_presence(s, logits, p->frequency_penalty, p->presence_penalty, ctx);
    int n_bias = p->n_logit_bias < 0 ? 0 : p->n_logit_bias > CINFER_MAX_LOGIT_BIAS ? CINFER_MAX_LOGIT_BIAS
                                                                                    : p->n_logit_bias;
    for (int i = 0; i < n_bias; i++)
        if (in_range(p->logit_bias_ids[i], vocab))
            logits[p->logit_bias_ids[i]] += p->logit_bias_values[i];
    if (ctx->n_output < p->min_new_tokens) {
        for (int i = 0; i < ctx->n_eos; i++)
            if (in_range(ctx->eos_ids[i], vocab))
                logits[ctx->eos_ids[i]] = -INFINITY;
        int n_ids = p->n_stop_token_ids < 0 ? 0
                    : p->n_stop_token_ids > CINFER_MAX_STOP_TOKEN_IDS ? CINFER_MAX_STOP_TOKEN_IDS
                                                                      : p->n_stop_token_ids;
        for (int i = 0; i < n_ids; i++)
            if (in_range(p->stop_token_ids[i], vocab))
                logits[p->stop_token_ids[i]] = -INFINITY;
    }
    if (p->temperature >= GREEDY_BELOW_TEMPERATURE && p->temperature != 1.0f && !isinf(p->temperature)) {
        float inv = 1.0f / p->temperature;
        for (int i = 0; i < vocab; i++)
            logits[i] *= inv;
    }
}

/* ---- choosing --------------------------------------------------------------------- */

/* Most likely first; ties: lower id first, so every order is deterministic (the rule
 * the top logprobs and a device's logits_top rank by). */
static int ranks_before(const struct cinfer_candidate *a, const struct cinfer_candidate *b)
{
    return cinfer_logit_ranks_before(a->logit, a->id, b->logit, b->id);
}

static int by_rank(const void *a, const void *b)
{
    const struct cinfer_candidate *x = a, *y = b;
    return ranks_before(x, y) ? -1 : ranks_before(y, x) ? 1 : 0;
}

/* Sift-down in a binary heap of candidates: with best_on_top the root is the most
 * likely, else the least likely. */
static void heap_sift_down(struct cinfer_candidate *h, int n, int i, int best_on_top)
{
    for (;;) {
        int top = i, l = 2 * i + 1, r = l + 1;
        if (l < n && (best_on_top ? ranks_before(&h[l], &h[top]) : ranks_before(&h[top], &h[l])))
            top = l;
        if (r < n && (best_on_top ? ranks_before(&h[r], &h[top]) : ranks_before(&h[top], &h[r])))
            top = r;
        if (top == i)
            return;
        struct cinfer_candidate t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

/* Puts the k most likely tokens, most likely first, in s->cand[0..k): a heap of the k
 * best so far, least likely on top. O(vocab log k). */
static void rank_top_k(struct cinfer_sampler *s, const float *logits, int k)
{
    struct cinfer_candidate *h = s->cand;
    for (int i = 0; i < k; i++)
        h[i] = (struct cinfer_candidate){logits[i], i};
    for (int i = k / 2 - 1; i >= 0; i--)
        heap_sift_down(h, k, i, 0);
    for (int i = k; i < s->vocab; i++) {
        struct cinfer_candidate c = {logits[i], i};
        if (ranks_before(&c, &h[0])) {
            h[0] = c;
            heap_sift_down(h, k, 0, 0);
        }
    }
    qsort(h, (size_t)k, sizeof *h, by_rank);
}

/* top-p and min-p without top-k: a heap of the whole vocabulary, most likely on top,
 * popped only until the kept mass reaches top_p of the total or the next token falls
 * under min_p of the most likely; O(vocab + kept log vocab) where a sort would be
 * O(vocab log vocab). The kept candidates end most likely first in s->cand[0..n) and
 * their weights (exp(logit - max)) in s->weights; returns n, or 0 when every logit is
 * -inf. */
static int rank_until_cut(struct cinfer_sampler *s, const float *logits, float top_p, float min_p)
{
    int vocab = s->vocab;
    struct cinfer_candidate *h = s->cand;
    for (int i = 0; i < vocab; i++)
        h[i] = (struct cinfer_candidate){logits[i], i};
    for (int i = vocab / 2 - 1; i >= 0; i--)
        heap_sift_down(h, vocab, i, 1);
    double max = h[0].logit;
    if (isinf(max) && max < 0)
        return 0;
    double mass_wanted = INFINITY;
    if (top_p < 1.0f) {
        double total = 0;
        for (int i = 0; i < vocab; i++)
            total += exp((double)logits[i] - max);
        mass_wanted = (double)top_p * total;
    }
    double floor_weight = min_p > 0.0f ? (double)min_p : 0.0; /* the most likely weighs 1 */
    /* Each pop moves the root to the end of the shrinking heap, so the kept tokens
     * collect at the back of cand, most likely last. */
    int heap_n = vocab, n = 0;
    double cum = 0;
    while (heap_n > 0) {
        double w = exp((double)h[0].logit - max);
        if (n > 0 && w < floor_weight)
            break;
        struct cinfer_candidate top = h[0];
        h[0] = h[--heap_n];
        h[heap_n] = top;
        heap_sift_down(h, heap_n, 0, 1);
        s->weights[n++] = w;
        cum += w;
        if (cum >= mass_wanted)
            break;
    }
    struct cinfer_candidate *kept = h + vocab - n;
    for (int i = 0; i < n / 2; i++) {
        struct cinfer_candidate t = kept[i];
        kept[i] = kept[n - 1 - i];
        kept[n - 1 - i] = t;
    }
    memmove(h, kept, (size_t)n * sizeof *h);
    return n;
}

/* Draws index i of cand[0..n) with probability weights[i] / sum; the uniform number is
 * *uniform where given (drawn by the caller ahead: the backend's sample op), else the
 * stream's next. */
static int draw(const struct cinfer_sampler *s, int n, struct cinfer_rng *rng, const double *uniform)
{
    double mass = 0;
    for (int i = 0; i < n; i++)
        mass += s->weights[i];
    double u = (uniform ? *uniform : cinfer_rng_uniform(rng)) * mass;
    double cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->weights[i];
        if (u < cum)
            return i;
    }
    /* Rounding left u at the very top: the last token with any weight. */
    int last = n - 1;
    while (last > 0 && s->weights[last] == 0)
        last--;
    return last;
}

int cinfer_sampler_takes_argmax_as_is(const struct cinfer_sampling_params *p, int n_output)
{
    int unscaled = !(p->temperature >= GREEDY_BELOW_TEMPERATURE) || p->temperature == 1.0f;
    int penalized = (p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f) || p->frequency_penalty != 0.0f ||
                    p->presence_penalty != 0.0f;
    return samples_greedily(p) && unscaled && !penalized && p->n_logit_bias <= 0 && n_output >= p->min_new_tokens;
}

static int32_t choose(struct cinfer_sampler *s, const float *logits, const struct cinfer_sampling_params *p,
                      struct cinfer_rng *rng, const double *uniform)
{
    int vocab = s->vocab;
    if (samples_greedily(p))
        return cinfer_kernel_argmax(logits, vocab);
    int top_k_on = p->top_k > 0 && p->top_k < vocab;
    int top_p_on = p->top_p > 0.0f && p->top_p < 1.0f;
    int min_p_on = p->min_p > 0.0f;
    int n;

    if (!top_k_on && !top_p_on && !min_p_on) {
        /* Plain softmax: no ranking needed, candidates in id order. */
        double max = logits[cinfer_kernel_argmax(logits, vocab)];
        if (isinf(max) && max < 0) /* everything banned: nothing to weigh */
            return 0;
        for (int i = 0; i < vocab; i++) {
            s->cand[i] = (struct cinfer_candidate){logits[i], i};
            s->weights[i] = exp((double)logits[i] - max);
        }
        n = vocab;
    } else if (!top_k_on) {
        n = rank_until_cut(s, logits, top_p_on ? p->top_p : 1.0f, min_p_on ? p->min_p : 0.0f);
        if (n == 0)
            return cinfer_kernel_argmax(logits, vocab);
    } else {
        n = p->top_k;
        rank_top_k(s, logits, n);
        double max = s->cand[0].logit;
        if (isinf(max) && max < 0)
            return cinfer_kernel_argmax(logits, vocab);
        for (int i = 0; i < n; i++)
            s->weights[i] = exp((double)s->cand[i].logit - max);
        if (top_p_on) { /* of the mass top-k kept, as SGLang renormalizes before top-p */
            double kept = 0, cum = 0;
            for (int i = 0; i < n; i++)
                kept += s->weights[i];
            for (int i = 0; i < n; i++) {
                cum += s->weights[i];
                if (cum >= (double)p->top_p * kept) {
                    n = i + 1;
                    break;
                }
            }
        }
        if (min_p_on) { /* weights[0] is 1, the most likely */
            int keep = 1;
            while (keep < n && s->weights[keep] >= (double)p->min_p)
                keep++;
            n = keep;
        }
    }
    return s->cand[draw(s, n, rng, uniform)].id;
}

int32_t cinfer_sample(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                      const struct cinfer_sample_context *ctx, struct cinfer_rng *rng, float *logprob)
{
    cinfer_sampler_process(s, logits, p, ctx);
    int32_t id = choose(s, logits, p, rng, NULL);
    if (logprob)
        *logprob = (float)((double)logits[id] - cinfer_kernel_log_sum_exp(logits, s->vocab));
    return id;
}

int32_t cinfer_sampler_draw(struct cinfer_sampler *s, float *logits, const struct cinfer_backend_sample_params *p)
{
    struct cinfer_sampling_params params = {.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p,
                                            .min_p = p->min_p, .repetition_penalty = 1.0f};
    struct cinfer_sample_context none = {0};
    cinfer_sampler_process(s, logits, &params, &none);
    return choose(s, logits, &params, NULL, &p->uniform);
}

int cinfer_sampler_draws_as_is(const struct cinfer_sampling_params *p, int n_output)
{
    int penalized = (p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f) || p->frequency_penalty != 0.0f ||
                    p->presence_penalty != 0.0f;
    return !samples_greedily(p) && !penalized && p->n_logit_bias <= 0 && n_output >= p->min_new_tokens;
}

/* ---- logprobs --------------------------------------------------------------------- */

void cinfer_sample_logprobs(const float *processed_logits, int vocab, int32_t token, int n_top,
                            struct cinfer_token_logprobs *out)
{
    memset(out, 0, sizeof *out);
    out->token = token;
    double lse = cinfer_kernel_log_sum_exp(processed_logits, vocab);
    out->logprob = in_range(token, vocab) ? (float)((double)processed_logits[token] - lse) : -INFINITY;
    if (n_top > CINFER_MAX_TOP_LOGPROBS)
        n_top = CINFER_MAX_TOP_LOGPROBS;
    /* the top logits, then each made a logprob in place */
    out->n_top =
        n_top > 0 ? cinfer_kernel_logits_top(processed_logits, vocab, n_top, out->top_ids, out->top_logprobs) : 0;
    for (int i = 0; i < out->n_top; i++)
        out->top_logprobs[i] = (float)((double)out->top_logprobs[i] - lse);
}
