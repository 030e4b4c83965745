/* kernels/cuda/kv_cache.cu — K and V rows into the device's KV pages: one thread per
 * unit of a row (a value for f32, f16 and bf16; a block of 32 values for q8_0), with the
 * encoders of kv_format.cuh, which repeat the CPU backend's step by step: a row the
 * device writes holds the bytes the CPU backend writes for the same input. */
#include "cuda_kernels.h"
#include "kv_format.cuh"
#include "launch.cuh"

/* k, v (n, kv_dim) f32 -> rows slots[i] of layer; one item per (token, K or V, unit) */
static __global__ void kv_write_kernel(struct cinfer_cuda_kv kv, int layer, const float *k, const float *v,
                                       const int32_t *slots, int units, size_t n_items)
{
    CINFER_CUDA_FOR_EACH(item, n_items) {
        int u = (int)(item % (size_t)units);
        size_t token_which = item / (size_t)units;
        int which = (int)(token_which % 2); /* 0: K, 1: V */
        size_t i = token_which / 2;
        int32_t slot = slots[i];
        size_t at = cinfer_cu_kv_row_at(kv.n_pages, kv.page_tokens, kv.row_bytes, layer, slot / kv.page_tokens,
                                        slot % kv.page_tokens);
        uint8_t *dst = (uint8_t *)(which ? kv.v : kv.k) + at;
        const float *src = (which ? v : k) + i * (size_t)kv.kv_dim; /* (kv_dim) */
        cinfer_cu_kv_encode_unit(src, dst, kv.dtype, u);
    }
}

/* kv is host memory (the plugin's description of its device pages), passed by value */
extern "C" cudaError_t cinfer_cuda_kv_write(cudaStream_t stream, const struct cinfer_cuda_kv *kv, int layer,
                                            const float *k, const float *v, int n, const int32_t *slots)
{
    if (n <= 0 || kv->kv_dim <= 0)
        return cudaSuccess;
    int units = cinfer_cu_kv_row_units(kv->dtype, kv->kv_dim);
    if (units <= 0)
        return cudaSuccess;
    size_t items = (size_t)n * 2 * (size_t)units;
    kv_write_kernel<<<cinfer_cuda_blocks(items), CINFER_CUDA_THREADS, 0, stream>>>(*kv, layer, k, v, slots, units,
                                                                                  items);
    return cudaGetLastError();
}
