/* backend-cuda: the plugin descriptor, the ops table and query (can it run here?).
 * query creates nothing on a device: cudaGetDeviceCount and attribute reads only. */
#include <stdio.h>
#include <string.h>

#include "cinfer/plugin.h"
#include "cuda_backend.h"

/* Ampere and later: bf16 tensor cores, and the oldest machine code the build carries. */
#define MIN_MAJOR 8

int cuda_query(struct cinfer_backend_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    answer->priority = 100; /* above the CPU's 10: --device auto takes a usable GPU */
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc == cudaErrorInsufficientDriver) {
        snprintf(answer->why, sizeof answer->why,
                 "no NVIDIA driver, or one older than the CUDA %d.%d runtime this plugin was built with "
                 "(cudaGetDeviceCount: %s)",
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, cudaGetErrorName(rc));
    } else if (rc == cudaErrorNoDevice || (rc == cudaSuccess && count == 0)) {
        snprintf(answer->why, sizeof answer->why, "no CUDA device (cudaGetDeviceCount found none)");
    } else if (rc != cudaSuccess) {
        snprintf(answer->why, sizeof answer->why, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
    }
    if (rc != cudaSuccess || count == 0) {
        cudaGetLastError();
        return 0;
    }
    size_t at = 0;
    for (int d = 0; d < count; d++) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        if (major >= MIN_MAJOR) {
            answer->device_count++;
        } else if (at < sizeof answer->why) {
            int wrote = snprintf(answer->why + at, sizeof answer->why - at, "%sdevice %d has compute capability %d.%d",
                                 at ? ", " : "", d, major, minor);
            at += wrote > 0 ? (size_t)wrote : 0;
        }
    }
    if (answer->device_count > 0) {
        answer->usable = 1;
        answer->why[0] = '\0';
    } else if (at < sizeof answer->why) {
        snprintf(answer->why + at, sizeof answer->why - at, "%sno device of compute capability %d.0 or newer",
                 at ? ": " : "", MIN_MAJOR);
    }
    return 0;
}

static const struct cinfer_backend_ops cuda_ops;

const struct cinfer_backend_ops *cuda_backend_ops(void)
{
    return &cuda_ops;
}

static const struct cinfer_backend_ops cuda_ops = {
    .version = CINFER_BACKEND_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_backend_ops),
    .name = "cuda",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .copy = cuda_copy,
    .download = cuda_download,
    .kv_create = cuda_kv_create,
    .kv_destroy = cuda_kv_destroy,
    .kv_write = cuda_kv_write,
    .embedding = cuda_embedding,
    .matmul = cuda_matmul,
    .rmsnorm = cuda_rmsnorm,
    .rope = cuda_rope,
    .silu_mul = cuda_silu_mul,
    .add = cuda_add,
    .attention = cuda_attention,
    .weight_prepare = cuda_weight_prepare,
    .weight_release = cuda_weight_release,
    .attention_windowed = cuda_attention_windowed,
    .gelu_tanh_mul = cuda_gelu_tanh_mul,
    .scale = cuda_scale,
    .softcap = cuda_softcap,
    .moe_route = cuda_moe_route,
    .gather_rows = cuda_gather_rows,
    .scatter_add_rows = cuda_scatter_add_rows,
    .zero = cuda_zero,
    .query = cuda_query,
    .create_on = cuda_create_on,
    .status = cuda_status,
    .upload = cuda_upload,
    .swiglu_oai = cuda_swiglu_oai,
    .add_gated = cuda_add_gated,
#ifdef CINFER_CUDA_NCCL
    .all_reduce_sum = cuda_all_reduce_sum,
#else
    .all_reduce_sum = NULL, /* built without NCCL: create_on refuses a tensor-parallel group */
#endif
    .memory_info = cuda_memory_info,
    .matmul_grouped = cuda_matmul_grouped,
    .logits_top = cuda_logits_top,
    .sample = cuda_sample,
    .step_begin = cuda_step_begin,
    .step_end = cuda_step_end,
    .decode_bucket = cuda_decode_bucket,
};

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_BACKEND, CINFER_CUDA_PLUGIN_NAME, "1.0.0", &cuda_ops);
