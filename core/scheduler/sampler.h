/* Picking the next token from a row of logits, per request: penalties, logit bias,
 * temperature, top-k, top-p, min-p, and a per-request random stream so that the same
 * seed and the same prompt give the same output whatever else is in the batch; and the
 * logprobs of the chosen token with its top alternatives, as OpenAI reports them. */
#ifndef CINFER_SCHEDULER_SAMPLER_H
#define CINFER_SCHEDULER_SAMPLER_H

#include <stdint.h>

#include "cinfer/backend.h"
#include "cinfer/engine.h"

/* xoshiro256** seeded through splitmix64. */
struct cinfer_rng {
    uint64_t s[4];
};
void cinfer_rng_seed(struct cinfer_rng *rng, uint64_t seed);
uint64_t cinfer_rng_next(struct cinfer_rng *rng);
double cinfer_rng_uniform(struct cinfer_rng *rng); /* [0, 1) */

/* One token still in the running, with its processed logit. */
struct cinfer_candidate {
    float logit;
    int32_t id;
};

/* Scratch for one vocabulary size; one per scheduler (not shared between threads). */
struct cinfer_sampler {
    int vocab;
    struct cinfer_candidate *cand; /* (vocab) candidates, most likely first once ranked */
    double *weights;               /* (vocab) exp(logit - max) of cand, unnormalized */
    uint8_t *seen;                 /* (vocab) marks for the repetition penalty */
    uint32_t *counts;              /* (vocab) occurrences in the output */
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

/* The steps before any truncation, in place on logits (vocab), in this order:
 *   1. repetition penalty (HF: over prompt and output, each distinct token once:
 *      positive logits divided, negative multiplied);
 *   2. frequency and presence penalties (OpenAI: over the output,
 *      logit -= frequency * count + presence);
 *   3. logit bias (OpenAI: added; ids outside the vocabulary are ignored);
 *   4. EOS and stop token ids set to -inf while n_output < min_new_tokens;
 *   5. division by the temperature when it is at least 1e-5 (below, the choice is
 *      greedy and the scale is kept).
 * Afterwards logits hold the final distribution that logprobs describe. */
void cinfer_sampler_process(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                            const struct cinfer_sample_context *ctx);

/* Processes logits (above), then picks: the argmax (lowest id on ties) when the
 * temperature is below 1e-5 (0 is greedy, as in SGLang) or top_k is 1; else a draw
 * from the softmax restricted to top-k, then top-p (smallest prefix, most likely
 * first, whose mass reaches top_p of what top-k kept), then min-p (at least min_p
 * times the most likely). Returns the id;
 * *logprob (may be NULL) gets its log-probability under the final distribution
 * (after penalties, bias and temperature, before truncation). logits are left
 * processed, ready for cinfer_sample_logprobs(). */
int32_t cinfer_sample(struct cinfer_sampler *s, float *logits, const struct cinfer_sampling_params *p,
                      const struct cinfer_sample_context *ctx, struct cinfer_rng *rng, float *logprob);

/* 1 when cinfer_sample() of a request with params p and n_output tokens so far would
 * draw (not pick the argmax) from the logits divided by the temperature alone (no
 * penalty, bias or ban applies): what backend.h's sample op does where the logits are,
 * given the draw's uniform number, cinfer_rng_uniform() of the request's stream. */
int cinfer_sampler_draws_as_is(const struct cinfer_sampling_params *p, int n_output);

/* cinfer_sample() of such a row with p's uniform as its one draw: logits (vocab) left
 * divided by the temperature, the token returned. The CPU backend's sample op. */
int32_t cinfer_sampler_draw(struct cinfer_sampler *s, float *logits, const struct cinfer_backend_sample_params *p);

/* 1 when cinfer_sample() of a request with params p and n_output tokens so far would
 * leave the logits as they are (no penalty, bias, ban or temperature scaling applies)
 * and pick their argmax: its token and logprobs then follow from the row's top tokens
 * and log-sum-exp alone (kernels.h cinfer_kernel_logits_top), which a device backend
 * computes without sending the row to the host. */
int cinfer_sampler_takes_argmax_as_is(const struct cinfer_sampling_params *p, int n_output);

/* The chosen token's logprob and the n_top most likely alternatives (OpenAI's
 * top_logprobs: most likely first, lower id first on ties, tokens at -inf left out). */
struct cinfer_token_logprobs {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_ids[CINFER_MAX_TOP_LOGPROBS];
    float top_logprobs[CINFER_MAX_TOP_LOGPROBS];
};
/* processed_logits (vocab) as cinfer_sample() left them; n_top is clamped to
 * [0, CINFER_MAX_TOP_LOGPROBS]. */
void cinfer_sample_logprobs(const float *processed_logits, int vocab, int32_t token, int n_top,
                            struct cinfer_token_logprobs *out);

#endif
