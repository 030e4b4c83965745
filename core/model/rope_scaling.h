/* core/model/rope_scaling.h — RoPE frequencies with the scalings model families use
 * (Llama 3, linear, YaRN, dynamic NTK, LongRoPE), folded into one inverse frequency per
 * pair, and the factor some of them put on cos and sin. */
#ifndef CINFER_MODEL_ROPE_SCALING_H
#define CINFER_MODEL_ROPE_SCALING_H

#include "model/model.h"

/* inv_freq (head_dim / 2) for base theta; scaled 0 leaves rope_scaling out (Gemma 3's
 * local layers). context_length is the longest sequence served: dynamic NTK and
 * LongRoPE, which Hugging Face recomputes from each call's length, are fixed by it here
 * once, so every cached K was rotated as the later queries are (llama.cpp's rule). */
void cinfer_rope_inv_freq(const struct cinfer_model_config *c, double theta, int scaled, int context_length,
                          double *inv_freq);

/* The scaling's numbers are ones its formula can use; errors name source. */
int cinfer_rope_scaling_check(const struct cinfer_model_config *c, const char *source, struct cinfer_error *err);

/* What cos and sin are multiplied by (1 but for YaRN and LongRoPE). */
double cinfer_rope_attention_factor(const struct cinfer_model_config *c);

#endif
