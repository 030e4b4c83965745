/* kernels/cuda/attention_math.cuh — the arithmetic of attention.cu that does not touch
 * the device's threads: a score's scale and soft-capping, the window's first position,
 * one step of the online softmax and the merge of partial softmax states with a sink.
 * Host and device code (host_device.cuh), so that tests/test_cuda_kernels_host.c runs
 * the kernel's steps against the CPU backend's attention. */
#ifndef CINFER_CUDA_ATTENTION_MATH_CUH
#define CINFER_CUDA_ATTENTION_MATH_CUH

#include <math.h>

#include "host_device.cuh"

/* A score after scale and soft-capping (cap 0: none), in the CPU backend's order. */
CINFER_HD float cinfer_cu_attn_score(float dot, float scale, float softcap)
{
    float s = dot * scale;
    return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

/* The first position a query at pos sees: (pos - window, pos], all of [0, pos] for window 0. */
CINFER_HD int cinfer_cu_attn_first(int pos, int window)
{
    return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

/* Online softmax, one score s at a time: updates the running max m and the sum l of
 * exp(score - m), and gives the weight of s's value (p) and the factor that rescales what
 * was accumulated before (corr; 0 at the first score, where m is -inf). */
CINFER_HD void cinfer_cu_softmax_step(float *m, float *l, float s, float *p, float *corr)
{
    float m_new = s > *m ? s : *m;
    *corr = expf(*m - m_new);
    *p = expf(s - m_new);
    *l = *l * *corr + *p;
    *m = m_new;
}

/* Merges n_parts partial states (m, l) and, when has_sink, a sink logit that joins the
 * denominator without a value: the common max (big) and the denominator (total). Part
 * w's accumulator then weighs expf(m[w] - big) / total. A part that saw no position has
 * l 0 and m -inf and weighs 0; some part saw the query's own position, so big is finite. */
CINFER_HD void cinfer_cu_softmax_merge(const float *m, const float *l, int n_parts, int has_sink, float sink,
                                       float *big, float *total)
{
    float b = has_sink ? sink : -INFINITY;
    for (int w = 0; w < n_parts; w++)
        b = m[w] > b ? m[w] : b;
    float sum = has_sink ? expf(sink - b) : 0.0f;
    for (int w = 0; w < n_parts; w++)
        sum += l[w] * expf(m[w] - b);
    *big = b;
    *total = sum;
}

#endif
