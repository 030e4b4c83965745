/* kernels/cuda/logits_top.cu — logits_top of backend.h on the device: one block per asked
 * row. Each of the k rounds is one pass over the row in which every thread keeps the
 * best entry ranking after the previous round's pick (logits_rank.cuh's order), then a
 * tree in shared memory picks the block's best; so ties and -inf/NaN entries are
 * treated as kernels/logits_rank.c treats them. The log-sum-exp is summed in double as
 * on the CPU, but in another order: it may differ from the CPU's in its last bits. */
#include "cuda_kernels.h"
#include "logits_rank.cuh"

#define TOP_THREADS 256

struct ranked {
    float logit;
    int32_t id; /* -1: none */
};

/* 1 when a ranks before b; "none" ranks after everything */
static __device__ int before(struct ranked a, struct ranked b)
{
    if (a.id < 0)
        return 0;
    if (b.id < 0)
        return 1;
    return cinfer_logit_ranks_before(a.logit, a.id, b.logit, b.id);
}

/* The block's best of every thread's mine, returned to every thread. */
static __device__ struct ranked block_best(struct ranked mine, float *s_logit, int32_t *s_id)
{
    s_logit[threadIdx.x] = mine.logit;
    s_id[threadIdx.x] = mine.id;
    __syncthreads();
    for (int half = TOP_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            struct ranked a = {s_logit[threadIdx.x], s_id[threadIdx.x]};
            struct ranked b = {s_logit[threadIdx.x + half], s_id[threadIdx.x + half]};
            if (before(b, a)) {
                s_logit[threadIdx.x] = b.logit;
                s_id[threadIdx.x] = b.id;
            }
        }
        __syncthreads();
    }
    struct ranked best = {s_logit[0], s_id[0]};
    __syncthreads(); /* the next round may write the arrays again */
    return best;
}

/* The block's sum of every thread's part, returned to every thread. */
static __device__ double block_sum(double part, double *s_sum)
{
    s_sum[threadIdx.x] = part;
    __syncthreads();
    for (int half = TOP_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            s_sum[threadIdx.x] += s_sum[threadIdx.x + half];
        __syncthreads();
    }
    double sum = s_sum[0];
    __syncthreads();
    return sum;
}

/* logits (rows of vocab); rows (n_rows); top_ids, top_logits (n_rows, k); n_top (n_rows);
 * log_sum_exp (n_rows) or NULL. Block b ranks row rows[b]. */
static __global__ void logits_top_kernel(const float *logits, int vocab, const int32_t *rows, int k,
                                         int32_t *top_ids, float *top_logits, int *n_top, double *log_sum_exp)
{
    __shared__ float s_logit[TOP_THREADS];
    __shared__ int32_t s_id[TOP_THREADS];
    __shared__ double s_sum[TOP_THREADS];
    const float *row = logits + (size_t)rows[blockIdx.x] * (size_t)vocab; /* (vocab) */
    size_t out = (size_t)blockIdx.x * (size_t)k;
    struct ranked prev = {0.0f, -1}, first = {0.0f, -1};
    int n = 0;
    for (; n < k; n++) {
        struct ranked mine = {0.0f, -1};
        for (int i = threadIdx.x; i < vocab; i += TOP_THREADS) {
            struct ranked c = {row[i], i};
            if (cinfer_logit_rankable(c.logit) && (prev.id < 0 || before(prev, c)) && before(c, mine))
                mine = c;
        }
        struct ranked best = block_best(mine, s_logit, s_id);
        if (best.id < 0) /* the same answer in every thread: they leave together */
            break;
        if (threadIdx.x == 0) {
            top_ids[out + n] = best.id;
            top_logits[out + n] = best.logit;
        }
        if (n == 0)
            first = best;
        prev = best;
    }
    if (threadIdx.x == 0)
        n_top[blockIdx.x] = n;
    if (!log_sum_exp)
        return;
    /* the CPU shifts by row[argmax]: NaN when row[0] is NaN, else the best non-NaN
     * value, -inf when nothing is above it */
    double max = isnan(row[0]) ? (double)row[0] : first.id >= 0 ? (double)first.logit : -INFINITY;
    if (isinf(max)) {
        if (threadIdx.x == 0)
            log_sum_exp[blockIdx.x] = max;
        return;
    }
    double part = 0.0;
    for (int i = threadIdx.x; i < vocab; i += TOP_THREADS)
        part += exp((double)row[i] - max);
    double sum = block_sum(part, s_sum);
    if (threadIdx.x == 0)
        log_sum_exp[blockIdx.x] = max + log(sum);
}

extern "C" cudaError_t cinfer_cuda_logits_top(cudaStream_t stream, const float *logits, int vocab,
                                              const int32_t *rows, int n_rows, int k, int32_t *top_ids,
                                              float *top_logits, int *n_top, double *log_sum_exp)
{
    if (n_rows <= 0 || vocab <= 0 || k <= 0)
        return cudaSuccess;
    logits_top_kernel<<<(unsigned)n_rows, TOP_THREADS, 0, stream>>>(logits, vocab, rows, k, top_ids, top_logits,
                                                                    n_top, log_sum_exp);
    return cudaGetLastError();
}
