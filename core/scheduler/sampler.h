/* Picking the next token from a row of logits, per request: penalties, temperature,
 * top-k, top-p, min-p, and a per-request random stream so that the same seed and the
 * same prompt give the same output whatever else is in the batch. */
#ifndef CINFER_SCHEDULER_SAMPLER_H
#define CINFER_SCHEDULER_SAMPLER_H

#include <stdint.h>

#include "cinfer/engine.h"

/* xoshiro256** seeded through splitmix64. */
struct cinfer_rng {
    uint64_t s[4];
};
void cinfer_rng_seed(struct cinfer_rng *rng, uint64_t seed);
uint64_t cinfer_rng_next(struct cinfer_rng *rng);
double cinfer_rng_uniform(struct cinfer_rng *rng); /* [0, 1) */

/* Scratch for one vocabulary size; one per scheduler (not shared between threads). */
struct cinfer_sampler {
    int vocab;
    float *probs;      /* (vocab) */
    int32_t *order;    /* (vocab) candidate ids */
    uint8_t *seen;     /* (vocab) marks for penalties */
    uint32_t *counts;  /* (vocab) occurrences in the output */
};
int cinfer_sampler_init(struct cinfer_sampler *s, int vocab);
void cinfer_sampler_free(struct cinfer_sampler *s);

struct cinfer_sample_context {
    const int32_t *prompt;      /* (n_prompt) */
    int n_prompt;
    const int32_t *output;      /* (n_output) tokens generated so far */
    int n_output;
    const int32_t *eos_ids;     /* banned while n_output < min_new_tokens */
    int n_eos;
};

/* Modifies logits (vocab) in place and returns the chosen id; *logprob (may be NULL)
 * gets its log-probability under the final distribution (after penalties and
 * temperature, before truncation, as OpenAI reports it). */
int32_t cinfer_sample(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                      const struct cinfer_sample_context *ctx, struct cinfer_rng *rng, float *logprob);

#endif
