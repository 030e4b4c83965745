#include "scheduler/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    s->vocab = vocab;
    s->probs = malloc((size_t)vocab * sizeof *s->probs);
    s->order = malloc((size_t)vocab * sizeof *s->order);
    s->seen = calloc((size_t)vocab, 1);
    s->counts = calloc((size_t)vocab, sizeof *s->counts);
    if (!s->probs || !s->order || !s->seen || !s->counts) {
        cinfer_sampler_free(s);
        return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

void cinfer_sampler_free(struct cinfer_sampler *s)
{
    free(s->probs);
    free(s->order);
    free(s->seen);
    free(s->counts);
    memset(s, 0, sizeof *s);
}

/* ---- the steps -------------------------------------------------------------------- */

static int in_range(int32_t id, int vocab) { return id >= 0 && id < vocab; }

/* HF's repetition penalty over prompt and output (each distinct token once), then
 * OpenAI's frequency and presence penalties over the output. */
static void apply_penalties(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                            const struct cinfer_sample_context *ctx)
{
    if (p->repetition_penalty != 1.0f && p->repetition_penalty > 0.0f) {
        const int32_t *lists[2] = {ctx->prompt, ctx->output};
        int counts[2] = {ctx->n_prompt, ctx->n_output};
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < counts[l]; i++) {
                int32_t id = lists[l][i];
                if (!in_range(id, s->vocab) || s->seen[id])
                    continue;
                s->seen[id] = 1;
                logits[id] = logits[id] > 0 ? logits[id] / p->repetition_penalty : logits[id] * p->repetition_penalty;
            }
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < counts[l]; i++)
                if (in_range(lists[l][i], s->vocab))
                    s->seen[lists[l][i]] = 0;
    }
    if (p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f) {
        for (int i = 0; i < ctx->n_output; i++)
            if (in_range(ctx->output[i], s->vocab))
                s->counts[ctx->output[i]]++;
        for (int i = 0; i < ctx->n_output; i++) {
            int32_t id = ctx->output[i];
            if (!in_range(id, s->vocab) || s->counts[id] == 0)
                continue;
            logits[id] -= p->frequency_penalty * (float)s->counts[id] + p->presence_penalty;
            s->counts[id] = 0; /* applied once per distinct token */
        }
    }
}

static int32_t argmax(const float *logits, int vocab)
{
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

static const float *sort_base;
static int by_logit_desc(const void *a, const void *b)
{
    float x = sort_base[*(const int32_t *)a], y = sort_base[*(const int32_t *)b];
    if (x != y)
        return x > y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b; /* ties: lower id first, deterministic */
}

/* log-softmax value of one entry. */
static float log_prob_of(const float *logits, int vocab, int32_t id)
{
    float max = logits[argmax(logits, vocab)];
    double sum = 0;
    for (int i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - max);
    return (float)((double)logits[id] - max - log(sum));
}

int32_t cinfer_sample(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                      const struct cinfer_sample_context *ctx, struct cinfer_rng *rng, float *logprob)
{
    int vocab = s->vocab;
    apply_penalties(s, logits, p, ctx);
    if (ctx->n_output < p->min_new_tokens) {
        for (int i = 0; i < ctx->n_eos; i++)
            if (in_range(ctx->eos_ids[i], vocab))
                logits[ctx->eos_ids[i]] = -INFINITY;
        for (int i = 0; i < p->n_stop_token_ids; i++)
            if (in_range(p->stop_token_ids[i], vocab))
                logits[p->stop_token_ids[i]] = -INFINITY;
    }
    if (p->temperature <= 0.0f || p->top_k == 1) {
        int32_t id = argmax(logits, vocab);
        if (logprob)
            *logprob = log_prob_of(logits, vocab, id);
        return id;
    }
    for (int i = 0; i < vocab; i++)
        logits[i] /= p->temperature;

    /* Candidates in descending order (qsort is not reentrant-safe with a static base,
     * but each scheduler samples from one thread). */
    int n = vocab;
    for (int i = 0; i < vocab; i++)
        s->order[i] = i;
    sort_base = logits;
    qsort(s->order, (size_t)vocab, sizeof *s->order, by_logit_desc);
    if (p->top_k > 0 && p->top_k < n)
        n = p->top_k;

    float max = logits[s->order[0]];
    double total = 0;
    for (int i = 0; i < vocab; i++) {
        s->probs[i] = expf(logits[s->order[i]] - max);
        total += s->probs[i];
    }
    if (logprob) /* computed before truncation, as OpenAI reports it */
        *logprob = 0;
    double kept = 0;
    for (int i = 0; i < n; i++)
        kept += s->probs[i];
    if (p->top_p > 0.0f && p->top_p < 1.0f) {
        /* Keep the smallest prefix whose mass reaches top_p of the (top-k) mass. */
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += s->probs[i];
            if (cum >= p->top_p * kept) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        float floor_prob = p->min_p * s->probs[0];
        int keep = 1;
        while (keep < n && s->probs[keep] >= floor_prob)
            keep++;
        n = keep;
    }
    double mass = 0;
    for (int i = 0; i < n; i++)
        mass += s->probs[i];
    double u = cinfer_rng_uniform(rng) * mass;
    int pick = n - 1;
    double cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->probs[i];
        if (u < cum) {
            pick = i;
            break;
        }
    }
    int32_t id = s->order[pick];
    if (logprob)
        *logprob = (float)(logits[id] - max - log(total));
    return id;
}
