/* kernels/vector_scalar.c — dot, axpy, RMSNorm and argmax in plain C. */
#include <math.h>

#include "kernels_impl.h"

float cinfer_dot_scalar(const float *a, const float *b, int n)
{
    float acc = 0.0f;
    for (int i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

void cinfer_axpy_scalar(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

void cinfer_rmsnorm_scalar(float *y, const float *x, const float *w, int n, float eps)
{
    float sum_sq = 0.0f;
    for (int i = 0; i < n; i++)
        sum_sq += x[i] * x[i];
    float inv_rms = 1.0f / sqrtf(sum_sq / (float)n + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * inv_rms * w[i];
}

int cinfer_argmax_scalar(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}
