/* kernels/cuda/launch.cuh — launch shapes shared by the CUDA kernels: flat element-wise
 * work runs as grid-stride loops over a bounded grid, so any n (size_t) fits. */
#ifndef CINFER_CUDA_LAUNCH_CUH
#define CINFER_CUDA_LAUNCH_CUH

#include <stddef.h>

#define CINFER_CUDA_THREADS 256      /* threads of a flat element-wise block */
#define CINFER_CUDA_MAX_BLOCKS 65536 /* enough to fill any device; more work loops */

/* Blocks for n items of a grid-stride loop (n > 0). */
static inline unsigned cinfer_cuda_blocks(size_t n)
{
    size_t blocks = (n + CINFER_CUDA_THREADS - 1) / CINFER_CUDA_THREADS;
    return (unsigned)(blocks < CINFER_CUDA_MAX_BLOCKS ? blocks : CINFER_CUDA_MAX_BLOCKS);
}

/* This thread's first item and the stride of a grid-stride loop. */
#define CINFER_CUDA_FOR_EACH(i, n)                                                                   \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#endif
