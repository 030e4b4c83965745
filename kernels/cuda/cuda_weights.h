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

/* 1 when cinfer_cuda_gemv_quant, cinfer_cuda_embedding and cinfer_cuda_dequantize_bf16
 * know the stored type (enum cinfer_tensor_type): F32, F16, BF16 and the block types */
int cinfer_cuda_weight_type_known(uint32_t type);

#ifdef __cplusplus
}
#endif
#endif
