/* kernels/logits_rank.c — a row of logits ranked (the order of cuda/logits_rank.cuh): its
 * most likely tokens and its log-sum-exp, in plain C. The definition the sampler's
 * logprobs, the CPU backend's logits_top and the conformance suite share, so a greedy
 * token and its logprobs come out with the same bits whichever of them computed it. */
#include <math.h>

#include "cuda/logits_rank.cuh"
#include "kernels.h"

int cinfer_kernel_logits_top(const float *logits, int vocab, int k, int32_t *top_ids, float *top_logits)
{
    if (k == 1 && vocab > 0) { /* greedy: the vector argmax, unless its answer is one the list leaves out */
        int best = cinfer_kernel_argmax(logits, vocab);
        if (cinfer_logit_rankable(logits[best])) {
            top_ids[0] = best;
            top_logits[0] = logits[best];
            return 1;
        }
    }
    int n = 0;
    /* Insertion into a short ranked list: k is small (backend.h's logits_top takes 64 at most). */
    for (int32_t i = 0; i < vocab && k > 0; i++) {
        float logit = logits[i];
        if (!cinfer_logit_rankable(logit))
            continue;
        if (n == k && !cinfer_logit_ranks_before(logit, i, top_logits[n - 1], top_ids[n - 1]))
            continue;
        int at = n < k ? n++ : n - 1;
        while (at > 0 && cinfer_logit_ranks_before(logit, i, top_logits[at - 1], top_ids[at - 1])) {
            top_logits[at] = top_logits[at - 1];
            top_ids[at] = top_ids[at - 1];
            at--;
        }
        top_logits[at] = logit;
        top_ids[at] = i;
    }
    return n;
}

double cinfer_kernel_log_sum_exp(const float *logits, int vocab)
{
    double max = logits[cinfer_kernel_argmax(logits, vocab)];
    if (isinf(max))
        return max;
    double sum = 0;
    for (int i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - max);
    return max + log(sum);
}
