/* kernels/cuda/sample.cu — sample of backend.h on the device: one block per asked row
 * runs sample_row.cuh, the row's draw as the host's sampler makes it (radix selections
 * for the top-k, top-p and min-p cuts and for the draw, with no sort of the
 * vocabulary). test_cuda_kernels_host runs the same code on the host against the
 * host's sampler; the launch itself (barriers, shared atomics) is the conformance
 * suite's, on a machine with a GPU. */
#include "cuda_kernels.h"
#include "sample_row.cuh"

static_assert(sizeof(struct cinfer_sample_row_params) == 24, "the params as backend.h lays them out");

/* logits (rows of vocab), divided in place; rows, params, token_ids, token_logits (n_rows) */
static __global__ void __launch_bounds__(CINFER_SAMPLE_THREADS)
    sample_kernel(float *logits, int vocab, const int32_t *rows, const struct cinfer_sample_row_params *params,
                  int32_t *token_ids, float *token_logits)
{
    __shared__ struct cinfer_sample_block block;
    float *row = logits + (size_t)rows[blockIdx.x] * (size_t)vocab; /* (vocab) */
    int32_t id = cinfer_sample_row(&block, row, vocab, &params[blockIdx.x]);
    if (threadIdx.x == 0) {
        token_ids[blockIdx.x] = id;
        token_logits[blockIdx.x] = row[id];
    }
}

extern "C" cudaError_t cinfer_cuda_sample(cudaStream_t stream, float *logits, int vocab, const int32_t *rows,
                                          int n_rows, const struct cinfer_sample_row_params *params,
                                          int32_t *token_ids, float *token_logits)
{
    if (n_rows <= 0 || vocab <= 0)
        return cudaSuccess;
    sample_kernel<<<(unsigned)n_rows, CINFER_SAMPLE_THREADS, 0, stream>>>(logits, vocab, rows, params, token_ids,
                                                                          token_logits);
    return cudaGetLastError();
}
