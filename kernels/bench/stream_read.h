/* kernels/bench/stream_read.h — the plain read that bench_matmul and bench_model set a
 * decode kernel's stream against: the sum of a buffer's 64-bit words, with AVX2 where the
 * CPU has it (4 loads of 32 bytes a step), else 8 scalar sums. Both benchmarks read with
 * the same loop, so their "% of the read" mean the same thing; on the Zen 3 machine the
 * scalar loop read 13 % slower than the AVX2 one (15.4-15.9 against 17.7-18.1 GB/s on
 * one thread), which had made bench_matmul's percentages read high. */
#ifndef CINFER_BENCH_STREAM_READ_H
#define CINFER_BENCH_STREAM_READ_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

__attribute__((target("avx2"))) static inline uint64_t stream_read_avx2(const uint8_t *p, size_t bytes)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

static inline uint64_t stream_read_scalar(const uint8_t *p, size_t bytes)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 8 <= bytes / 8; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += w[i + k];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

/* The sum of the whole 128-byte steps of [p, p + bytes), as the CPU reads fastest. */
static inline uint64_t stream_read(const uint8_t *p, size_t bytes)
{
    return __builtin_cpu_supports("avx2") ? stream_read_avx2(p, bytes) : stream_read_scalar(p, bytes);
}

#endif
