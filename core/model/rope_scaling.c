/* RoPE inverse frequencies in double. Each scaling follows the formula its family's
 * Hugging Face config names (transformers' modeling_rope_utils), with one difference
 * stated in rope_scaling.h: the dynamic ones are fixed by the served context length. */
#include "model/rope_scaling.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Llama 3: long wavelengths divided by factor, short ones kept, the band between
 * blended linearly in 1/wavelength. */
static double llama3(const struct cinfer_model_config *c, double inv)
{
    double factor = c->rope_scaling.factor;
    double low = c->rope_scaling.low_freq_factor;
    double high = c->rope_scaling.high_freq_factor;
    double old_context = c->rope_scaling.original_max_position_embeddings;
    double wavelen = 2.0 * M_PI / inv;
    if (wavelen > old_context / low)
        return inv / factor;
    if (wavelen < old_context / high)
        return inv;
    double smooth = (old_context / wavelen - low) / (high - low);
    return (1.0 - smooth) * inv / factor + smooth * inv;
}

/* YaRN: the pair index where a frequency turns n_rotations times over the original
 * context. Pairs below the fast bound keep their frequency (extrapolated), pairs above
 * the slow bound are divided by factor (interpolated), and a linear ramp joins them. */
static double yarn_correction_dim(double n_rotations, int dim, double theta, double old_context)
{
    return dim * log(old_context / (n_rotations * 2.0 * M_PI)) / (2.0 * log(theta));
}

static void yarn(const struct cinfer_model_config *c, double theta, double *inv_freq)
{
    int dim = cinfer_model_rotary_dim(c), half = dim / 2;
    double factor = c->rope_scaling.factor;
    double old_context = c->rope_scaling.original_max_position_embeddings;
    double low = yarn_correction_dim(c->rope_scaling.beta_fast, dim, theta, old_context);
    double high = yarn_correction_dim(c->rope_scaling.beta_slow, dim, theta, old_context);
    if (!c->rope_scaling.yarn_no_truncate) { /* transformers' truncate (default true) */
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0)
        low = 0;
    if (high > dim - 1)
        high = dim - 1;
    if (low == high)
        high += 0.001; /* no division by zero where the bounds meet */
    for (int i = 0; i < half; i++) {
        double extrapolated = 1.0 / pow(theta, (2.0 * i) / dim);
        double ramp = (i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        inv_freq[i] = extrapolated / factor * ramp + extrapolated * (1.0 - ramp);
    }
}

void cinfer_rope_inv_freq(const struct cinfer_model_config *c, double theta, int scaled, int context_length,
                          double *inv_freq)
{
    int dim = cinfer_model_rotary_dim(c), half = dim / 2;
    for (int i = half; i < c->head_dim / 2; i++)
        inv_freq[i] = 0; /* partial rotary: pairs past the turned dims keep angle 0 (cos 1, sin 0) */
    enum cinfer_rope_scaling_type type = scaled ? c->rope_scaling.type : CINFER_ROPE_SCALING_NONE;
    if (context_length <= 0)
        context_length = c->max_position_embeddings;
    if (type == CINFER_ROPE_SCALING_YARN) {
        yarn(c, theta, inv_freq);
        return;
    }
    if (type == CINFER_ROPE_SCALING_DYNAMIC && context_length > c->max_position_embeddings) {
        /* the base Hugging Face picks for a sequence of context_length tokens */
        double factor = c->rope_scaling.factor;
        double grown = factor * context_length / c->max_position_embeddings - (factor - 1.0);
        theta *= pow(grown, dim / (dim - 2.0));
    }
    const float *divisors = NULL;
    if (type == CINFER_ROPE_SCALING_LONGROPE)
        divisors = context_length > c->rope_scaling.original_max_position_embeddings ? c->rope_scaling.long_factor
                                                                                      : c->rope_scaling.short_factor;
    for (int i = 0; i < half; i++) {
        double inv = 1.0 / pow(theta, (2.0 * i) / dim);
        if (type == CINFER_ROPE_SCALING_LINEAR)
            inv /= c->rope_scaling.factor;
        else if (type == CINFER_ROPE_SCALING_LLAMA3)
            inv = llama3(c, inv);
        else if (divisors)
            inv /= divisors[i];
        inv_freq[i] = inv;
    }
}

double cinfer_rope_attention_factor(const struct cinfer_model_config *c)
{
    if (c->rope_scaling.type != CINFER_ROPE_SCALING_YARN && c->rope_scaling.type != CINFER_ROPE_SCALING_LONGROPE)
        return 1.0;
    return c->rope_scaling.attention_factor > 0.0f ? c->rope_scaling.attention_factor : 1.0;
}

int cinfer_rope_scaling_check(const struct cinfer_model_config *c, const char *source, struct cinfer_error *err)
{
    const float factor = c->rope_scaling.factor;
    const int old_context = c->rope_scaling.original_max_position_embeddings;
    switch (c->rope_scaling.type) {
    case CINFER_ROPE_SCALING_NONE: return CINFER_OK;
    case CINFER_ROPE_SCALING_LLAMA3:
        if (!(factor >= 1.0f) || !(c->rope_scaling.low_freq_factor > 0.0f) ||
            !(c->rope_scaling.high_freq_factor > c->rope_scaling.low_freq_factor) || old_context <= 0)
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s: llama3 rope_scaling needs factor >= 1, high_freq_factor > low_freq_factor > 0 "
                                    "and original_max_position_embeddings > 0; found %g, %g, %g, %d",
                                    source, (double)factor, (double)c->rope_scaling.high_freq_factor,
                                    (double)c->rope_scaling.low_freq_factor, old_context);
        return CINFER_OK;
    case CINFER_ROPE_SCALING_LINEAR:
        if (!(factor > 0.0f))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: linear rope_scaling needs factor > 0; found %g",
                                    source, (double)factor);
        return CINFER_OK;
    case CINFER_ROPE_SCALING_DYNAMIC:
        if (!(factor >= 1.0f) || !(factor <= 1e6f))
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s: dynamic rope_scaling needs 1 <= factor <= 1e6; found %g", source,
                                    (double)factor);
        return CINFER_OK;
    case CINFER_ROPE_SCALING_YARN:
        if (!(factor > 0.0f) || !(factor <= 1e6f) || old_context <= 0 || !(c->rope_scaling.beta_slow > 0.0f) ||
            !(c->rope_scaling.beta_fast > c->rope_scaling.beta_slow) || !(c->rope_scaling.attention_factor >= 0.0f))
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s: yarn rope_scaling needs 0 < factor <= 1e6, original_max_position_embeddings "
                                    "> 0, beta_fast > beta_slow > 0 and attention_factor >= 0; "
                                    "found %g, %d, %g, %g, %g",
                                    source, (double)factor, old_context, (double)c->rope_scaling.beta_fast,
                                    (double)c->rope_scaling.beta_slow, (double)c->rope_scaling.attention_factor);
        return CINFER_OK;
    case CINFER_ROPE_SCALING_LONGROPE:
        if (c->rope_scaling.n_factors != cinfer_model_rotary_dim(c) / 2 || old_context <= 1 ||
            !(c->rope_scaling.attention_factor > 0.0f))
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s: longrope rope_scaling needs rotary dims / 2 = %d factors of each kind, "
                                    "original_max_position_embeddings > 1 and attention_factor > 0; found %d, %d, %g",
                                    source, cinfer_model_rotary_dim(c) / 2, c->rope_scaling.n_factors, old_context,
                                    (double)c->rope_scaling.attention_factor);
        for (int i = 0; i < c->rope_scaling.n_factors; i++)
            if (!(c->rope_scaling.short_factor[i] > 0.0f) || !(c->rope_scaling.long_factor[i] > 0.0f))
                return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                        "%s: longrope factor %d is %g (short) and %g (long); both must be positive",
                                        source, i, (double)c->rope_scaling.short_factor[i],
                                        (double)c->rope_scaling.long_factor[i]);
        return CINFER_OK;
    }
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: rope_scaling type %d is unknown", source,
                            (int)c->rope_scaling.type);
}
