/* kernels/elementwise_scalar.c — SwiGLU gate (and gpt-oss's clamped one), residual add,
 * softmax (and with an attention sink) and RoPE. Add and
 * RoPE are memory-bound next to the matmuls, so one plain version serves every CPU;
 * the SwiGLU gate and softmax (libm's expf per value) also have SIMD versions
 * (activation_avx2.c, activation_avx512.c), these are the scalar level's. */
#include <math.h>

#include "kernels_impl.h"

void cinfer_silu_mul_scalar(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void cinfer_kernel_add(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

void cinfer_softmax_scalar(float *x, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

void cinfer_kernel_softmax_sink(float *x, int n, float sink)
{
    float max = sink;
    for (int i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    float sum = expf(sink - max); /* the sink's share, which no value receives */
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

void cinfer_kernel_swiglu_oai(float *gate, const float *up, size_t n, float alpha, float limit)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i] < limit ? gate[i] : limit;
        float u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

void cinfer_kernel_rope_angles(int pos, const double *inv_freq, int head_dim, float *cos_out, float *sin_out)
{
    for (int i = 0; i < head_dim / 2; i++) {
        double angle = (double)pos * inv_freq[i];
        cos_out[i] = (float)cos(angle);
        sin_out[i] = (float)sin(angle);
    }
}

void cinfer_kernel_rope(float *x, int head_dim, const float *cos_table, const float *sin_table, int interleaved)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float c = cos_table[i];
        float s = sin_table[i];
        int a = interleaved ? 2 * i : i;
        int b = interleaved ? 2 * i + 1 : i + half;
        float x0 = x[a];
        float x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x1 * c + x0 * s;
    }
}
