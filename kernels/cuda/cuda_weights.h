/* kernels/cuda/cuda_weights.h — what the CUDA backend's weight kernels (dequant.cu,
 * gemv_quant.cu) offer beyond the contract of cuda_kernels.h. Plain C declarations. */
#ifndef CINFER_CUDA_WEIGHTS_H
#define CINFER_CUDA_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x (n) f32 to f16 (round to nearest even) for cuBLAS's products with f16 weights */
cudaError_t cinfer_cuda_f32_to_f16(cudaStream_t stream, uint16_t *dst, const float *x, size_t n);

/* The bytes of a row of cols values of the stored type (enum cinfer_tensor_type: F32,
 * F16, BF16 and the block types the weight kernels know), packed; 0 for a type they do
 * not know or cols that are not whole blocks of it. */
size_t cinfer_cuda_packed_row_bytes(uint32_t type, int64_t cols);

#ifdef __cplusplus
}
#endif
#endif
