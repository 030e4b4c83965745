/* kernels/cuda/logits_rank.cuh — the order rows of logits are ranked in (OpenAI's
 * top_logprobs): the larger logit first, the lower id first on equal logits, and
 * entries at -inf (banned) or NaN left out. The CPU's kernels/logits_rank.c and the
 * device's logits_top.cu both include it, so the two rank by the same code. */
#ifndef CINFER_CUDA_LOGITS_RANK_CUH
#define CINFER_CUDA_LOGITS_RANK_CUH

#include <math.h>
#include <stdint.h>

#include "host_device.cuh"

/* 1 when logit takes part in the ranking */
CINFER_HD int cinfer_logit_rankable(float logit)
{
    return !isnan(logit) && !(isinf(logit) && logit < 0);
}

/* 1 when (logit_a, id_a) ranks before (logit_b, id_b) */
CINFER_HD int cinfer_logit_ranks_before(float logit_a, int32_t id_a, float logit_b, int32_t id_b)
{
    return logit_a > logit_b || (logit_a == logit_b && id_a < id_b);
}

#endif
