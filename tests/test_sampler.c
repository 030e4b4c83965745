/* The per-request sampler and its validator.
 *
 * - The random stream matches an independent (Python) xoshiro256** / splitmix64, and a
 *   seed reproduces its tokens exactly whatever other requests draw in between.
 * - The distribution of 200,000 draws matches the softmax of the reference logits,
 *   computed here in double with its own truncation rules, for temperature alone, top-k,
 *   top-p, min-p and all together: a chi-square test (false alarm below 1e-6) and every
 *   token within 5 standard deviations, with a fixed seed; tokens truncated away are
 *   never drawn. The same test refuses a wrong reference, so it can fail.
 * - Penalties and logit bias change the logits exactly as hand-computed; min_new_tokens
 *   bans EOS and stop token ids; greedy picks the argmax, lower id on ties; logprobs are
 *   the log-softmax after penalties, bias and temperature, before truncation.
 * - The validator refuses each bad parameter naming it, its value and its range, and
 *   the largest request it accepts passes the GENERATE frame's limits unchanged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/messages.h"
#include "scheduler/sampler.h"
#include "scheduler/sampling_validate.h"
#include "support/runner.h"

/* Logits of a 12-token vocabulary, deliberately not in rank order. */
#define VOCAB 12
static const float base_logits[VOCAB] = {0.3f, 2.0f, -0.9f, 1.2f, 0.0f, 1.5f, -2.2f, 0.7f, -0.4f, 1.0f, -3.0f, -1.5f};
static const struct cinfer_sample_context no_history = {0};

/* ---- the random stream ------------------------------------------------------------ */

START_TEST(rng_matches_an_independent_implementation)
{
    /* Computed with Python integers from the published splitmix64 and xoshiro256**. */
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 0);
    ck_assert_uint_eq(rng.s[0], 0xe220a8397b1dcdafull);
    ck_assert_uint_eq(rng.s[1], 0x6e789e6aa1b965f4ull);
    ck_assert_uint_eq(rng.s[2], 0x06c45d188009454full);
    ck_assert_uint_eq(rng.s[3], 0xf88bb8a8724c81ecull);
    ck_assert_uint_eq(cinfer_rng_next(&rng), 0x99ec5f36cb75f2b4ull);
    ck_assert_uint_eq(cinfer_rng_next(&rng), 0xbf6e1f784956452aull);
    ck_assert_uint_eq(cinfer_rng_next(&rng), 0x1a5f849d4933e6e0ull);
    for (int i = 0; i < 1000; i++) {
        double u = cinfer_rng_uniform(&rng);
        ck_assert(u >= 0.0 && u < 1.0);
    }
}
END_TEST

#define SEQ_LEN 2000

/* SEQ_LEN tokens of one request with the given seed; when other_seed is nonzero another
 * request with its own parameters samples between every two of ours, as in a batch. */
static void sample_sequence(uint64_t seed, uint64_t other_seed, int32_t *out)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, VOCAB), CINFER_OK);
    struct cinfer_sampling_params p, other;
    cinfer_sampling_params_init(&p);
    p.temperature = 0.8f;
    p.top_p = 0.95f;
    cinfer_sampling_params_init(&other);
    other.top_k = 3;
    struct cinfer_rng rng, other_rng;
    cinfer_rng_seed(&rng, seed);
    cinfer_rng_seed(&other_rng, other_seed);
    float logits[VOCAB];
    for (int i = 0; i < SEQ_LEN; i++) {
        if (other_seed) {
            memcpy(logits, base_logits, sizeof logits);
            logits[i % VOCAB] += 1.0f;
            cinfer_sample(&s, logits, &other, &no_history, &other_rng, NULL);
        }
        memcpy(logits, base_logits, sizeof logits);
        out[i] = cinfer_sample(&s, logits, &p, &no_history, &rng, NULL);
    }
    cinfer_sampler_free(&s);
}

START_TEST(same_seed_same_tokens_whatever_the_batch)
{
    static int32_t a[SEQ_LEN], b[SEQ_LEN], c[SEQ_LEN], d[SEQ_LEN];
    sample_sequence(1234, 0, a);
    sample_sequence(1234, 0, b);
    sample_sequence(1234, 99, c);
    sample_sequence(1235, 0, d);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert_mem_eq(a, c, sizeof a);
    int differ = 0;
    for (int i = 0; i < SEQ_LEN; i++)
        differ += a[i] != d[i];
    printf("seeds 1234 and 1235: %d of %d tokens differ\n", differ, SEQ_LEN);
    /* Two independent draws from this distribution agree about 1/4 of the time. */
    ck_assert_int_gt(differ, SEQ_LEN / 2);
}
END_TEST

/* ---- distribution ----------------------------------------------------------------- */

/* The reference: softmax of logits / temperature in double, then top-k, top-p and
 * min-p written from their definitions (SGLang's order), renormalized. Fills want[]
 * and returns the smallest distance of a top-p prefix mass from its threshold, so the
 * test can check that its cases are not decided by rounding. */
static double reference_distribution(float temperature, int top_k, float top_p, float min_p, double *want)
{
    double prob[VOCAB], max = -INFINITY, sum = 0;
    for (int i = 0; i < VOCAB; i++)
        max = fmax(max, (double)base_logits[i] / temperature);
    for (int i = 0; i < VOCAB; i++)
        sum += prob[i] = exp((double)base_logits[i] / temperature - max);
    for (int i = 0; i < VOCAB; i++)
        prob[i] /= sum;
    int rank[VOCAB]; /* ids, most likely first (no ties among base_logits) */
    for (int i = 0; i < VOCAB; i++)
        rank[i] = i;
    for (int i = 0; i < VOCAB; i++)
        for (int j = i + 1; j < VOCAB; j++)
            if (prob[rank[j]] > prob[rank[i]]) {
                int t = rank[i];
                rank[i] = rank[j];
                rank[j] = t;
            }
    int keep = VOCAB;
    if (top_k > 0 && top_k < keep)
        keep = top_k;
    double margin = INFINITY;
    if (top_p < 1.0f) {
        double kept = 0, cum = 0;
        for (int i = 0; i < keep; i++)
            kept += prob[rank[i]];
        for (int i = 0; i < keep; i++) {
            cum += prob[rank[i]] / kept;
            margin = fmin(margin, fabs(cum - (double)top_p));
            if (cum >= (double)top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (min_p > 0.0f) {
        int n = 1;
        while (n < keep && prob[rank[n]] >= (double)min_p * prob[rank[0]])
            n++;
        if (n < keep)
            margin = fmin(margin, fabs(prob[rank[n]] / prob[rank[0]] - (double)min_p));
        keep = n;
    }
    double mass = 0;
    for (int i = 0; i < keep; i++)
        mass += prob[rank[i]];
    memset(want, 0, VOCAB * sizeof *want);
    for (int i = 0; i < keep; i++)
        want[rank[i]] = prob[rank[i]] / mass;
    return margin;
}

#define DRAWS 200000

static void draw_counts(float temperature, int top_k, float top_p, float min_p, uint64_t seed, long *counts)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, VOCAB), CINFER_OK);
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, seed);
    memset(counts, 0, VOCAB * sizeof *counts);
    float logits[VOCAB];
    for (int i = 0; i < DRAWS; i++) {
        memcpy(logits, base_logits, sizeof logits);
        int32_t id = cinfer_sample(&s, logits, &p, &no_history, &rng, NULL);
        ck_assert(id >= 0 && id < VOCAB);
        counts[id]++;
    }
    cinfer_sampler_free(&s);
}

/* Upper quantile of chi-square with df degrees of freedom at z standard normal
 * deviations (Wilson-Hilferty). At z = 4.753 (normal tail 1e-6) its true tail, by
 * numerical integration, is 1.6e-7 at df 1, 2.7e-7 at df 2, 6.5e-7 at df 11: a chance
 * below 1e-6 that a correct sampler fails a check. */
static double chi_square_quantile(int df, double z)
{
    double a = 2.0 / (9.0 * df);
    double c = 1.0 - a + z * sqrt(a);
    return df * c * c * c;
}

struct fit {
    double chi2, bound, worst_sigma;
    int df, drawn_outside;
};

static struct fit goodness_of_fit(const long *counts, const double *want)
{
    struct fit f = {0};
    int kept = 0;
    for (int i = 0; i < VOCAB; i++) {
        if (want[i] == 0) {
            f.drawn_outside += counts[i] != 0;
            continue;
        }
        kept++;
        double expected = want[i] * DRAWS;
        double d = (double)counts[i] - expected;
        f.chi2 += d * d / expected;
        double sigma = sqrt(DRAWS * want[i] * (1 - want[i]));
        if (sigma > 0)
            f.worst_sigma = fmax(f.worst_sigma, fabs(d) / sigma);
    }
    f.df = kept - 1;
    f.bound = f.df > 0 ? chi_square_quantile(f.df, 4.753) : 0;
    return f;
}

/* Returns how many tokens the reference kept. */
static int check_distribution(const char *name, float temperature, int top_k, float top_p, float min_p,
                              uint64_t seed)
{
    double want[VOCAB];
    double margin = reference_distribution(temperature, top_k, top_p, min_p, want);
    ck_assert_msg(margin > 1e-3, "%s: the case sits %g from a truncation threshold; pick another", name, margin);
    long counts[VOCAB];
    draw_counts(temperature, top_k, top_p, min_p, seed, counts);
    struct fit f = goodness_of_fit(counts, want);
    printf("%-40s kept %2d of %d  chi2 %7.2f (df %2d, bound %6.2f, p<1e-6)  worst token %.2f sigma\n", name,
           f.df + 1, VOCAB, f.chi2, f.df, f.bound, f.worst_sigma);
    ck_assert_int_eq(f.drawn_outside, 0);
    if (f.df > 0) {
        ck_assert_msg(f.chi2 < f.bound, "%s: chi2 %g >= %g", name, f.chi2, f.bound);
        ck_assert_msg(f.worst_sigma < 5.0, "%s: a token is %g sigma off", name, f.worst_sigma);
    } else {
        ck_assert_int_eq(counts[1], DRAWS); /* only the most likely token is left */
    }
    return f.df + 1;
}

START_TEST(temperature_alone_matches_softmax)
{
    check_distribution("temperature 1", 1.0f, -1, 1.0f, 0.0f, 1);
    check_distribution("temperature 0.6", 0.6f, -1, 1.0f, 0.0f, 2);
    check_distribution("temperature 1.7", 1.7f, 0, 1.0f, 0.0f, 3);
}
END_TEST

START_TEST(top_k_matches_truncated_softmax)
{
    check_distribution("top_k 4, temperature 1.3", 1.3f, 4, 1.0f, 0.0f, 4);
    check_distribution("top_k 2, temperature 1", 1.0f, 2, 1.0f, 0.0f, 5);
    check_distribution("top_k 11, temperature 0.9", 0.9f, 11, 1.0f, 0.0f, 6);
}
END_TEST

START_TEST(top_p_matches_truncated_softmax)
{
    check_distribution("top_p 0.8, temperature 1", 1.0f, -1, 0.8f, 0.0f, 7);
    check_distribution("top_p 0.5, temperature 1.5", 1.5f, -1, 0.5f, 0.0f, 8);
    check_distribution("top_p 0.97, temperature 0.8", 0.8f, -1, 0.97f, 0.0f, 9);
}
END_TEST

START_TEST(min_p_matches_truncated_softmax)
{
    check_distribution("min_p 0.2, temperature 0.9", 0.9f, -1, 1.0f, 0.2f, 10);
    check_distribution("min_p 0.05, temperature 1.2", 1.2f, -1, 1.0f, 0.05f, 11);
    check_distribution("min_p 0.9, temperature 1", 1.0f, -1, 1.0f, 0.9f, 12);
}
END_TEST

START_TEST(all_together_match)
{
    check_distribution("top_k 8, top_p 0.9, min_p 0.05, T 0.8", 0.8f, 8, 0.9f, 0.05f, 13);
    check_distribution("top_k 6, top_p 0.85, min_p 0.1, T 1.4", 1.4f, 6, 0.85f, 0.1f, 14);
    /* top-p's mass is that of what top-k kept: 5 kept here, 6 were it the whole mass. */
    ck_assert_int_eq(check_distribution("top_k 6, top_p 0.9, T 1", 1.0f, 6, 0.9f, 0.0f, 15), 5);
    /* Each stage cuts: top-k to 6, top-p to 5, min-p to 4. */
    ck_assert_int_eq(check_distribution("top_k 6, top_p 0.9, min_p 0.3, T 1", 1.0f, 6, 0.9f, 0.3f, 16), 4);
    /* Without top-k (the lazily ranked path): top-p cuts first, then min-p does. */
    ck_assert_int_eq(check_distribution("top_p 0.75, min_p 0.1, T 1", 1.0f, -1, 0.75f, 0.1f, 17), 4);
    ck_assert_int_eq(check_distribution("top_p 0.95, min_p 0.15, T 1", 1.0f, -1, 0.95f, 0.15f, 18), 6);
}
END_TEST

START_TEST(the_test_refuses_a_wrong_reference)
{
    /* Draws at temperature 0.9 against the softmax at temperature 1, and top-k 5 draws
     * against the untruncated softmax: both must fail the fit by far. */
    double want[VOCAB];
    long counts[VOCAB];
    reference_distribution(1.0f, -1, 1.0f, 0.0f, want);
    draw_counts(0.9f, -1, 1.0f, 0.0f, 21, counts);
    struct fit f = goodness_of_fit(counts, want);
    printf("wrong reference (T 0.9 vs T 1):    chi2 %.1f vs bound %.2f\n", f.chi2, f.bound);
    ck_assert(f.chi2 > 10 * f.bound);
    draw_counts(1.0f, 5, 1.0f, 0.0f, 22, counts);
    f = goodness_of_fit(counts, want);
    printf("wrong reference (top_k 5 vs none): chi2 %.1f vs bound %.2f\n", f.chi2, f.bound);
    ck_assert(f.chi2 > 10 * f.bound);
}
END_TEST

/* ---- penalties, bias, bans -------------------------------------------------------- */

START_TEST(penalties_and_bias_as_specified)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, 6), CINFER_OK);
    float logits[6] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
    int32_t prompt[] = {0, 1, 1};
    int32_t output[] = {1, 3, 3, 4};
    struct cinfer_sample_context ctx = {.prompt = prompt, .n_prompt = 3, .output = output, .n_output = 4};
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.repetition_penalty = 1.5f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.logit_bias_ids[0] = 2;
    p.logit_bias_values[0] = 5.0f;
    p.logit_bias_ids[1] = 5;
    p.logit_bias_values[1] = -100.0f;
    p.logit_bias_ids[2] = 4000; /* outside the vocabulary: ignored */
    p.logit_bias_values[2] = 7.0f;
    p.n_logit_bias = 3;
    p.temperature = 2.0f;
    cinfer_sampler_process(&s, logits, &p, &ctx);
    /* By hand, the steps in order, then / 2 for the temperature:
     * 0: in the prompt, positive: 2 / 1.5                                   = 1.33333
     * 1: prompt and output, negative: -1 * 1.5 = -1.5; once in the output:
     *    -1.5 - 0.5 * 1 - 0.25                                              = -2.25
     * 2: untouched by penalties; bias +5: 0.5 + 5                           = 5.5
     * 3: 3 / 1.5 = 2; twice in the output: 2 - 0.5 * 2 - 0.25                = 0.75
     * 4: -2 * 1.5 = -3; once: -3 - 0.5 - 0.25                               = -3.75
     * 5: bias -100: 1 - 100                                                 = -99 */
    const float want[6] = {2.0f / 1.5f / 2, -2.25f / 2, 5.5f / 2, 0.75f / 2, -3.75f / 2, -99.0f / 2};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(fabsf(logits[i] - want[i]) < 1e-6f, "token %d: %.7g, expected %.7g", i, (double)logits[i],
                      (double)want[i]);

    /* The scratch marks are left clean: a second call with no history changes nothing
     * but the temperature. */
    float again[6] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
    p.n_logit_bias = 0;
    cinfer_sampler_process(&s, again, &p, &no_history);
    ck_assert_float_eq_tol(again[3], 1.5f, 1e-7f);
    ck_assert_float_eq_tol(again[1], -0.5f, 1e-7f);
    cinfer_sampler_free(&s);
}
END_TEST

START_TEST(logit_bias_steers_the_choice)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, VOCAB), CINFER_OK);
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.temperature = 0;
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 7);
    float logits[VOCAB];
    memcpy(logits, base_logits, sizeof logits);
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, NULL), 1); /* the argmax */
    p.logit_bias_ids[0] = 1;
    p.logit_bias_values[0] = -100.0f;
    p.n_logit_bias = 1;
    memcpy(logits, base_logits, sizeof logits);
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, NULL), 5); /* the runner-up */
    p.logit_bias_ids[1] = 10; /* the least likely, -3 + 100 */
    p.logit_bias_values[1] = 100.0f;
    p.n_logit_bias = 2;
    p.temperature = 1.0f;
    for (int i = 0; i < 1000; i++) {
        memcpy(logits, base_logits, sizeof logits);
        ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, NULL), 10);
    }
    cinfer_sampler_free(&s);
}
END_TEST

START_TEST(min_new_tokens_bans_eos_and_stop_ids)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, VOCAB), CINFER_OK);
    int32_t eos[] = {1}; /* the most likely token */
    int32_t output[4] = {3, 3, 3, 3};
    struct cinfer_sample_context ctx = {.output = output, .n_output = 1, .eos_ids = eos, .n_eos = 1};
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.min_new_tokens = 3;
    p.stop_token_ids[0] = 5; /* the runner-up */
    p.n_stop_token_ids = 1;
    p.temperature = 0;
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 3);
    float logits[VOCAB];
    memcpy(logits, base_logits, sizeof logits);
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &ctx, &rng, NULL), 3); /* third: 1.2 */
    ck_assert(isinf(logits[1]) && isinf(logits[5]));
    struct cinfer_token_logprobs lp;
    cinfer_sample_logprobs(logits, VOCAB, 1, 5, &lp);
    ck_assert(isinf(lp.logprob) && lp.logprob < 0);
    for (int i = 0; i < lp.n_top; i++)
        ck_assert(lp.top_ids[i] != 1 && lp.top_ids[i] != 5);

    p.temperature = 1.0f; /* sampled: never EOS or the stop id while banned */
    for (int i = 0; i < 20000; i++) {
        memcpy(logits, base_logits, sizeof logits);
        int32_t id = cinfer_sample(&s, logits, &p, &ctx, &rng, NULL);
        ck_assert(id != 1 && id != 5);
    }
    ctx.n_output = 3; /* reached: free again */
    p.temperature = 0;
    memcpy(logits, base_logits, sizeof logits);
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &ctx, &rng, NULL), 1);
    cinfer_sampler_free(&s);
}
END_TEST

START_TEST(greedy_picks_the_argmax_lowest_id_on_ties)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, 8), CINFER_OK);
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.temperature = 0;
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 11);
    const float tied[8] = {0.5f, 4.0f, -1.0f, 4.0f, 3.9f, 4.0f, 0.0f, -7.0f};
    float logits[8];
    for (int i = 0; i < 100; i++) {
        memcpy(logits, tied, sizeof logits);
        ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, NULL), 1);
    }
    p.temperature = 0.7f; /* top_k 1 is greedy too */
    p.top_k = 1;
    memcpy(logits, tied, sizeof logits);
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, NULL), 1);
    /* A temperature too small to divide by is greedy, with a finite logprob; so is
     * NaN, which only an unchecked frame could carry. */
    p.top_k = -1;
    const float tiny_t[] = {1e-7f, 9.9e-6f, NAN};
    for (int t = 0; t < 3; t++) {
        p.temperature = tiny_t[t];
        for (int i = 0; i < 50; i++) {
            memcpy(logits, tied, sizeof logits);
            float logprob = NAN;
            ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, &logprob), 1);
            ck_assert(isfinite(logprob));
        }
    }
    const float last[8] = {0, 0, 0, 0, 0, 0, 0, 9};
    p.temperature = 0;
    memcpy(logits, last, sizeof logits);
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &no_history, &rng, NULL), 7);
    cinfer_sampler_free(&s);
}
END_TEST

/* ---- logprobs --------------------------------------------------------------------- */

START_TEST(logprobs_are_log_softmax_before_truncation)
{
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, 8), CINFER_OK);
    const float raw[8] = {1.0f, 3.0f, -2.0f, 2.5f, 2.5f, 0.0f, -1.0f, 1.5f};
    int32_t output[] = {7};
    struct cinfer_sample_context ctx = {.output = output, .n_output = 1};
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.temperature = 0.5f;
    p.top_k = 2;               /* truncation must not change the reported numbers */
    p.presence_penalty = 1.0f; /* token 7: 1.5 - 1 = 0.5 */
    p.logit_bias_ids[0] = 5;
    p.logit_bias_values[0] = 2.5f; /* token 5: 0 + 2.5 = 2.5, ties with 3 and 4 */
    p.n_logit_bias = 1;
    p.logprobs = 1;
    p.top_logprobs = 4;

    /* The reference in double: processed logits by hand, then log-softmax. */
    const double processed[8] = {1.0 / 0.5, 3.0 / 0.5, -2.0 / 0.5, 2.5 / 0.5, 2.5 / 0.5, 2.5 / 0.5, -1.0 / 0.5,
                                 0.5 / 0.5};
    double sum = 0;
    for (int i = 0; i < 8; i++)
        sum += exp(processed[i]);
    double ref[8];
    for (int i = 0; i < 8; i++)
        ref[i] = processed[i] - log(sum);

    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 5);
    int seen[8] = {0};
    for (int draw = 0; draw < 200; draw++) {
        float logits[8];
        memcpy(logits, raw, sizeof logits);
        float logprob = 0;
        int32_t id = cinfer_sample(&s, logits, &p, &ctx, &rng, &logprob);
        ck_assert(id == 1 || id == 3); /* top-2: 3.0, then 2.5 at the lowest id */
        seen[id] = 1;
        ck_assert_msg(fabs(logprob - ref[id]) < 1e-5, "token %d: %g, expected %g", id, (double)logprob, ref[id]);
        struct cinfer_token_logprobs lp;
        cinfer_sample_logprobs(logits, 8, id, p.top_logprobs, &lp);
        ck_assert_int_eq(lp.token, id);
        ck_assert_float_eq(lp.logprob, logprob);
        ck_assert_int_eq(lp.n_top, 4);
        const int32_t want_ids[4] = {1, 3, 4, 5}; /* ties in id order */
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(lp.top_ids[i], want_ids[i]);
            ck_assert(fabs(lp.top_logprobs[i] - ref[want_ids[i]]) < 1e-5);
        }
    }
    ck_assert(seen[1] && seen[3]);

    /* Greedy reports the distribution at temperature 1 (nothing to divide by). */
    p.temperature = 0;
    p.top_k = -1;
    float logits[8];
    memcpy(logits, raw, sizeof logits);
    float logprob = 0;
    ck_assert_int_eq(cinfer_sample(&s, logits, &p, &ctx, &rng, &logprob), 1);
    double sum1 = 0;
    for (int i = 0; i < 8; i++)
        sum1 += exp(processed[i] * 0.5);
    ck_assert(fabs(logprob - (3.0 - log(sum1))) < 1e-5);

    /* More alternatives than allowed are clamped; fewer than the vocabulary is fine. */
    struct cinfer_token_logprobs lp;
    cinfer_sample_logprobs(logits, 8, 1, 100, &lp);
    ck_assert_int_eq(lp.n_top, 8);
    cinfer_sample_logprobs(logits, 8, 1, 0, &lp);
    ck_assert_int_eq(lp.n_top, 0);
    cinfer_sampler_free(&s);
}
END_TEST

START_TEST(logprobs_top_list_over_a_large_vocabulary)
{
    /* 50,000 tokens with pseudo-random logits: the top 20 equal a full sort's. */
    enum { N = 50000 };
    float *logits = malloc(N * sizeof *logits);
    int32_t *ids = malloc(N * sizeof *ids);
    ck_assert(logits && ids);
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, 77);
    for (int i = 0; i < N; i++) {
        logits[i] = (float)(cinfer_rng_uniform(&rng) * 20.0 - 10.0);
        if (i % 1000 == 999)
            logits[i] = logits[i - 1]; /* some ties */
        ids[i] = i;
    }
    /* Selection sort of the first 20 by (logit desc, id asc): slow and obvious. */
    for (int i = 0; i < CINFER_MAX_TOP_LOGPROBS; i++)
        for (int j = i + 1; j < N; j++)
            if (logits[ids[j]] > logits[ids[i]] || (logits[ids[j]] == logits[ids[i]] && ids[j] < ids[i])) {
                int32_t t = ids[i];
                ids[i] = ids[j];
                ids[j] = t;
            }
    struct cinfer_token_logprobs lp;
    cinfer_sample_logprobs(logits, N, 123, CINFER_MAX_TOP_LOGPROBS, &lp);
    ck_assert_int_eq(lp.n_top, CINFER_MAX_TOP_LOGPROBS);
    for (int i = 0; i < CINFER_MAX_TOP_LOGPROBS; i++)
        ck_assert_int_eq(lp.top_ids[i], ids[i]);

    /* And top-k sampling over this vocabulary draws only from those (k = 20). */
    struct cinfer_sampler s;
    ck_assert_int_eq(cinfer_sampler_init(&s, N), CINFER_OK);
    struct cinfer_sampling_params p;
    cinfer_sampling_params_init(&p);
    p.top_k = CINFER_MAX_TOP_LOGPROBS;
    p.temperature = 3.0f;
    float *row = malloc(N * sizeof *row);
    ck_assert_ptr_nonnull(row);
    for (int draw = 0; draw < 200; draw++) {
        memcpy(row, logits, N * sizeof *row);
        int32_t id = cinfer_sample(&s, row, &p, &no_history, &rng, NULL);
        int found = 0;
        for (int i = 0; i < CINFER_MAX_TOP_LOGPROBS; i++)
            found |= ids[i] == id;
        ck_assert_msg(found, "drew %d, outside the top %d", id, CINFER_MAX_TOP_LOGPROBS);
    }
    cinfer_sampler_free(&s);
    free(row);
    free(logits);
    free(ids);
}
END_TEST

/* ---- validation ------------------------------------------------------------------- */

static void expect_refused(const struct cinfer_sampling_params *p, int vocab, const char *name, const char *value,
                           const char *range)
{
    struct cinfer_error err = {0};
    int rc = cinfer_sampling_validate(p, vocab, &err);
    ck_assert_msg(rc == CINFER_ERR_RANGE || rc == CINFER_ERR_INVALID_ARGUMENT, "%s %s accepted (rc %d)", name, value,
                  rc);
    ck_assert_int_eq(err.code, rc);
    ck_assert_msg(strstr(err.message, name), "'%s' does not name %s", err.message, name);
    ck_assert_msg(strstr(err.message, value), "'%s' does not give the value %s", err.message, value);
    ck_assert_msg(strstr(err.message, range), "'%s' does not give the range %s", err.message, range);
}

#define REFUSED(field, bad, name, value, range)        \
    do {                                               \
        struct cinfer_sampling_params q = good;        \
        q.field = bad;                                 \
        expect_refused(&q, 1000, name, value, range);  \
    } while (0)

START_TEST(validator_names_parameter_value_and_range)
{
    struct cinfer_sampling_params good;
    cinfer_sampling_params_init(&good);
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_sampling_validate(&good, 1000, &err), CINFER_OK);

    REFUSED(temperature, -0.5f, "temperature", "-0.5", "0 or more");
    REFUSED(temperature, NAN, "temperature", "nan", "finite");
    REFUSED(temperature, INFINITY, "temperature", "inf", "finite");
    REFUSED(top_p, 0.0f, "top_p", "top_p 0:", "(0, 1]");
    REFUSED(top_p, 1.5f, "top_p", "1.5", "(0, 1]");
    REFUSED(top_p, NAN, "top_p", "nan", "(0, 1]");
    REFUSED(top_k, -2, "top_k", "-2", "-1 or 0");
    REFUSED(min_p, -0.1f, "min_p", "-0.1", "[0, 1]");
    REFUSED(min_p, 1.01f, "min_p", "1.01", "[0, 1]");
    REFUSED(repetition_penalty, 0.0f, "repetition_penalty", "repetition_penalty 0:", "(0, 2]");
    REFUSED(repetition_penalty, 2.5f, "repetition_penalty", "2.5", "(0, 2]");
    REFUSED(frequency_penalty, -2.5f, "frequency_penalty", "-2.5", "[-2, 2]");
    REFUSED(presence_penalty, 3.0f, "presence_penalty", "3", "[-2, 2]");
    REFUSED(max_new_tokens, -1, "max_new_tokens", "-1", "0 or more");
    REFUSED(min_new_tokens, 200, "min_new_tokens", "200", "[0, 128]");
    REFUSED(min_new_tokens, -4, "min_new_tokens", "-4", "[0, 128]");
    REFUSED(n_stop, 17, "stop", "17", "0 to 16");
    REFUSED(n_stop, 1, "stop[0]", "NULL", "1 to 4096 bytes");
    REFUSED(n_stop_token_ids, 17, "stop_token_ids", "17", "0 to 16");
    REFUSED(n_logit_bias, 65, "logit_bias", "65", "0 to 64");
    REFUSED(top_logprobs, 21, "top_logprobs", "21", "[0, 20]");
    REFUSED(top_logprobs, -1, "top_logprobs", "-1", "[0, 20]");

    struct cinfer_sampling_params q = good;
    q.stop[0] = "";
    q.n_stop = 1;
    expect_refused(&q, 1000, "stop[0]", "empty", "1 to 4096 bytes");
    char *longer = malloc(CINFER_MAX_STOP_STRING_BYTES + 2);
    ck_assert_ptr_nonnull(longer);
    memset(longer, 'x', CINFER_MAX_STOP_STRING_BYTES + 1);
    longer[CINFER_MAX_STOP_STRING_BYTES + 1] = '\0';
    q.stop[0] = longer;
    expect_refused(&q, 1000, "stop[0]", "longer than 4096", "1 to 4096 bytes");
    free(longer);

    q = good;
    q.stop_token_ids[0] = 2;
    q.stop_token_ids[1] = -3;
    q.n_stop_token_ids = 2;
    expect_refused(&q, 1000, "stop_token_ids[1]", "-3", "0 or more");
    q.stop_token_ids[1] = 1000;
    expect_refused(&q, 1000, "stop_token_ids[1]", "1000", "[0, 1000)");
    ck_assert_int_eq(cinfer_sampling_validate(&q, 0, &err), CINFER_OK); /* vocabulary unknown */

    q = good;
    q.logit_bias_ids[0] = 10;
    q.logit_bias_values[0] = 150.0f;
    q.n_logit_bias = 1;
    expect_refused(&q, 1000, "logit_bias for token 10", "150", "[-100, 100]");
    q.logit_bias_values[0] = NAN;
    expect_refused(&q, 1000, "logit_bias for token 10", "nan", "[-100, 100]");
    q.logit_bias_values[0] = -100.0f;
    q.logit_bias_ids[1] = 5000;
    q.logit_bias_values[1] = 1.0f;
    q.n_logit_bias = 2;
    expect_refused(&q, 1000, "logit_bias[1]", "5000", "[0, 1000)");
    q.logit_bias_ids[1] = 10;
    expect_refused(&q, 1000, "logit_bias: token 10", "entries 0 and 1", "once");

    q = good;
    q.top_logprobs = 3;
    expect_refused(&q, 1000, "top_logprobs", "3", "logprobs is on");

    /* Every boundary that is allowed is accepted. */
    q = good;
    q.temperature = 0;
    q.top_p = 1.0f;
    q.top_k = 1;
    q.min_p = 1.0f;
    q.repetition_penalty = 2.0f;
    q.frequency_penalty = -2.0f;
    q.presence_penalty = 2.0f;
    q.max_new_tokens = 0;
    q.min_new_tokens = 0;
    q.n_stop = CINFER_MAX_STOP_STRINGS;
    for (int i = 0; i < CINFER_MAX_STOP_STRINGS; i++)
        q.stop[i] = "\n";
    q.n_stop_token_ids = CINFER_MAX_STOP_TOKEN_IDS;
    for (int i = 0; i < CINFER_MAX_STOP_TOKEN_IDS; i++)
        q.stop_token_ids[i] = 999 - i;
    q.n_logit_bias = CINFER_MAX_LOGIT_BIAS;
    for (int i = 0; i < CINFER_MAX_LOGIT_BIAS; i++) {
        q.logit_bias_ids[i] = i;
        q.logit_bias_values[i] = i % 2 ? 100.0f : -100.0f;
    }
    q.logprobs = 1;
    q.top_logprobs = CINFER_MAX_TOP_LOGPROBS;
    ck_assert_int_eq(cinfer_sampling_validate(&q, 1000, &err), CINFER_OK);
    q.top_k = -1;
    q.max_new_tokens = 5;
    q.min_new_tokens = 5;
    ck_assert_int_eq(cinfer_sampling_validate(&q, 1000, &err), CINFER_OK);
    q.top_k = 0;
    ck_assert_int_eq(cinfer_sampling_validate(&q, 1000, &err), CINFER_OK);
}
END_TEST

/* The largest request the validator accepts fits the GENERATE frame's limits, and comes
 * out of it equal: the two sets of limits agree. */
START_TEST(what_the_validator_accepts_the_wire_carries)
{
    static char stops[CINFER_MAX_STOP_STRINGS][CINFER_MAX_STOP_STRING_BYTES + 1];
    struct cinfer_msg_generate in = {.rid = 5};
    int32_t prompt[] = {1, 2, 3};
    in.ids = prompt;
    in.n_ids = 3;
    struct cinfer_sampling_params *q = &in.sampling;
    cinfer_sampling_params_init(q);
    q->n_stop = CINFER_MAX_STOP_STRINGS;
    for (int i = 0; i < CINFER_MAX_STOP_STRINGS; i++) {
        memset(stops[i], 'a' + i, CINFER_MAX_STOP_STRING_BYTES);
        q->stop[i] = stops[i];
    }
    q->n_stop_token_ids = CINFER_MAX_STOP_TOKEN_IDS;
    for (int i = 0; i < CINFER_MAX_STOP_TOKEN_IDS; i++)
        q->stop_token_ids[i] = 100 + i;
    q->n_logit_bias = CINFER_MAX_LOGIT_BIAS;
    for (int i = 0; i < CINFER_MAX_LOGIT_BIAS; i++) {
        q->logit_bias_ids[i] = 3 * i;
        q->logit_bias_values[i] = (float)i - 31.5f;
    }
    q->logprobs = 1;
    q->top_logprobs = CINFER_MAX_TOP_LOGPROBS;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_sampling_validate(q, 1000, &err), CINFER_OK);
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_generate(&in, &frame, &len), CINFER_OK);
    struct cinfer_msg_generate out;
    ck_assert_msg(cinfer_msg_decode_generate(frame, len, &out, &err) == CINFER_OK, "%s", err.message);
    ck_assert_int_eq(out.sampling.n_stop, CINFER_MAX_STOP_STRINGS);
    for (int i = 0; i < CINFER_MAX_STOP_STRINGS; i++)
        ck_assert_str_eq(out.sampling.stop[i], stops[i]);
    ck_assert_int_eq(out.sampling.n_logit_bias, CINFER_MAX_LOGIT_BIAS);
    ck_assert_mem_eq(out.sampling.logit_bias_ids, q->logit_bias_ids, sizeof q->logit_bias_ids);
    ck_assert_mem_eq(out.sampling.logit_bias_values, q->logit_bias_values, sizeof q->logit_bias_values);
    ck_assert_int_eq(out.sampling.top_logprobs, CINFER_MAX_TOP_LOGPROBS);
    ck_assert_int_eq(cinfer_sampling_validate(&out.sampling, 1000, &err), CINFER_OK);
    cinfer_msg_generate_free(&out);
    free(frame);
}
END_TEST

static Suite *suite_sampler(void)
{
    Suite *s = suite_create("sampler");
    TCase *seeded = tcase_create("seeded");
    tcase_add_test(seeded, rng_matches_an_independent_implementation);
    tcase_add_test(seeded, same_seed_same_tokens_whatever_the_batch);
    suite_add_tcase(s, seeded);
    TCase *dist = tcase_create("distribution");
    tcase_set_timeout(dist, 300);
    tcase_add_test(dist, temperature_alone_matches_softmax);
    tcase_add_test(dist, top_k_matches_truncated_softmax);
    tcase_add_test(dist, top_p_matches_truncated_softmax);
    tcase_add_test(dist, min_p_matches_truncated_softmax);
    tcase_add_test(dist, all_together_match);
    tcase_add_test(dist, the_test_refuses_a_wrong_reference);
    suite_add_tcase(s, dist);
    TCase *logits = tcase_create("logits");
    tcase_add_test(logits, penalties_and_bias_as_specified);
    tcase_add_test(logits, logit_bias_steers_the_choice);
    tcase_add_test(logits, min_new_tokens_bans_eos_and_stop_ids);
    tcase_add_test(logits, greedy_picks_the_argmax_lowest_id_on_ties);
    tcase_add_test(logits, logprobs_are_log_softmax_before_truncation);
    tcase_add_test(logits, logprobs_top_list_over_a_large_vocabulary);
    suite_add_tcase(s, logits);
    TCase *validate = tcase_create("validate");
    tcase_add_test(validate, validator_names_parameter_value_and_range);
    tcase_add_test(validate, what_the_validator_accepts_the_wire_carries);
    suite_add_tcase(s, validate);
    return s;
}

CINFER_TEST_MAIN(suite_sampler)
