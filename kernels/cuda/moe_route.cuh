/* kernels/cuda/moe_route.cuh — one router row, in double, defined once: the CPU
 * backend's moe_route (core/backend/cpu_backend.c) and moe.cu's kernel both run it, so
 * the device's choices and weights are the CPU's. Host and device code
 * (host_device.cuh, plain C on the host); tests/test_cuda_kernels_host.c checks the
 * CPU backend's op against it. */
#ifndef CINFER_CUDA_MOE_ROUTE_CUH
#define CINFER_CUDA_MOE_ROUTE_CUH

#include <math.h>
#include <stdint.h>

#include "host_device.cuh"

/* ids (k): the k largest of logits (n), largest first, the lower id first among equals;
 * weights (k): their softmax over all n, divided by their own sum when normalize. */
CINFER_HD void cinfer_cu_route_row(const float *logits, int n, int k, int normalize, int32_t *ids, float *weights)
{
    float max = logits[0];
    for (int e = 1; e < n; e++)
        max = logits[e] > max ? logits[e] : max;
    double sum = 0.0;
    for (int e = 0; e < n; e++)
        sum += exp((double)logits[e] - max);
    int found = 0; /* insertion into the sorted ids: a later equal logit goes after */
    for (int e = 0; e < n; e++) {
        int at = found < k ? found : k;
        while (at > 0 && logits[ids[at - 1]] < logits[e])
            at--;
        if (at >= k)
            continue;
        for (int j = (found < k ? found : k - 1); j > at; j--)
            ids[j] = ids[j - 1];
        ids[at] = e;
        if (found < k)
            found++;
    }
    double kept = 0.0;
    for (int j = 0; j < k; j++)
        kept += exp((double)logits[ids[j]] - max) / sum;
    for (int j = 0; j < k; j++) {
        double p = exp((double)logits[ids[j]] - max) / sum;
        weights[j] = (float)(normalize ? p / kept : p);
    }
}

#endif
