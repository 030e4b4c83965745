/* backend-cuda: the device, its stream and cuBLAS handle, memory, copies, and the
 * first-error record that status() reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "cuda_backend.h"

static void keep_first(struct cuda_backend *be, int code, const char *message)
{
    be->errors++;
    if (be->failed)
        return;
    be->failed = 1;
    be->first_error.code = code;
    snprintf(be->first_error.message, sizeof be->first_error.message, "%s", message);
}

int cuda_note(struct cuda_backend *be, cudaError_t rc, const char *call)
{
    if (rc == cudaSuccess)
        return 0;
    cudaGetLastError(); /* clears a non-sticky error so the next launch check is about that launch */
    char message[512];
    snprintf(message, sizeof message, "cuda device %d: %s failed: %s (%s)", be->device, call, cudaGetErrorName(rc),
             cudaGetErrorString(rc));
    keep_first(be, rc == cudaErrorMemoryAllocation ? CINFER_ERR_NOMEM : CINFER_ERR_INTERNAL, message);
    return 1;
}

int cuda_note_cublas(struct cuda_backend *be, cublasStatus_t rc, const char *call)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return 0;
    char message[512];
    snprintf(message, sizeof message, "cuda device %d: %s failed: %s (%s)", be->device, call,
             cublasGetStatusName(rc), cublasGetStatusString(rc));
    keep_first(be, rc == CUBLAS_STATUS_ALLOC_FAILED ? CINFER_ERR_NOMEM : CINFER_ERR_INTERNAL, message);
    return 1;
}

void cuda_note_message(struct cuda_backend *be, int code, const char *message)
{
    keep_first(be, code, message);
}

int cuda_fail(struct cuda_backend *be, cudaError_t rc, const char *call, struct cinfer_error *err)
{
    if (!cuda_note(be, rc, call))
        return 0;
    /* reported here, so status() does not report it again */
    be->failed = 0;
    return cinfer_error_set(err, rc == cudaErrorMemoryAllocation ? CINFER_ERR_NOMEM : CINFER_ERR_INTERNAL,
                            "cuda device %d: %s failed: %s (%s)", be->device, call, cudaGetErrorName(rc),
                            cudaGetErrorString(rc));
}

int cuda_enter(struct cuda_backend *be)
{
    if (be->step.running_log) /* the flush that runs the queue made the device current */
        return 0;
    return cuda_note(be, cudaSetDevice(be->device), "cudaSetDevice");
}

void *cuda_scratch_get(struct cuda_backend *be, struct cuda_scratch *s, size_t bytes, const char *what)
{
    if (s->bytes >= bytes && s->data)
        return s->data;
    size_t grown = s->bytes * 2 > bytes ? s->bytes * 2 : bytes;
    if (be->step.capturing) { /* cudaFree and cudaMalloc have no place in a graph */
        be->step.capture_broken = 1;
        return NULL;
    }
    be->generation++; /* graphs that point into the old scratch must not run again */
    /* cudaFree waits for the device, so the old scratch is no longer read */
    if (s->data && cuda_note(be, cudaFree(s->data), "cudaFree"))
        return NULL;
    s->data = NULL;
    s->bytes = 0;
    char call[160];
    snprintf(call, sizeof call, "cudaMalloc of %zu bytes for %s", grown, what);
    if (cuda_note(be, cudaMalloc(&s->data, grown), call)) {
        s->data = NULL;
        return NULL;
    }
    s->bytes = grown;
    return s->data;
}

void cuda_scratch_free(struct cuda_scratch *s)
{
    if (s->data)
        cudaFree(s->data);
    s->data = NULL;
    s->bytes = 0;
}

void cuda_destroy(void *state)
{
    struct cuda_backend *be = state;
    if (!be)
        return;
    cudaSetDevice(be->device);
    if (be->stream)
        cudaStreamSynchronize(be->stream);
    cuda_step_free(be); /* queued ops of an unfinished step are dropped with it */
    cuda_nccl_free(be);
    cuda_scratch_free(&be->packed);
    cuda_scratch_free(&be->x16);
    cuda_scratch_free(&be->w16);
    cuda_scratch_free(&be->moe);
    cuda_scratch_free(&be->top);
    cuda_staging_free(be);
    if (be->cublas)
        cublasDestroy(be->cublas);
    if (be->cublas_workspace)
        cudaFree(be->cublas_workspace);
    if (be->stream)
        cudaStreamDestroy(be->stream);
    cudaGetLastError();
    free(be);
}

static int create_failed(struct cuda_backend *be, struct cinfer_error *err)
{
    int rc = cinfer_error_set(err, be->first_error.code, "%s", be->first_error.message);
    cuda_destroy(be);
    return rc;
}

int cuda_create_on(const struct cinfer_backend_create_options *opts, void **state, struct cinfer_error *err)
{
    *state = NULL;
    struct cinfer_backend_answer answer;
    cuda_query(&answer);
    if (!answer.usable)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "cuda backend: not usable here: %s", answer.why);
    int count = 0;
    cudaError_t crc = cudaGetDeviceCount(&count);
    if (crc != cudaSuccess || opts->device < 0 || opts->device >= count)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "cuda backend: device index %d requested, but this machine has %d CUDA device(s)",
                                opts->device, count);
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, opts->device);
    if (major < 8)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "cuda backend: device %d has compute capability %d.x; 8.0 or newer is needed",
                                opts->device, major);
    struct cuda_backend *be = calloc(1, sizeof *be);
    if (!be)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cuda backend: out of memory");
    be->device = opts->device;
    cuda_step_init(be);
    if (cuda_enter(be) || cuda_note(be, cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking),
                                    "cudaStreamCreateWithFlags"))
        return create_failed(be, err);
    if (cuda_note_cublas(be, cublasCreate(&be->cublas), "cublasCreate") ||
        cuda_note_cublas(be, cublasSetStream(be->cublas, be->stream), "cublasSetStream") ||
        /* no TF32 for f32 products: exact_x's promise holds, and results stay IEEE f32 */
        cuda_note_cublas(be, cublasSetMathMode(be->cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"))
        return create_failed(be, err);
    /* a workspace of our own: cuBLAS then allocates nothing while a step is captured */
    if (cuda_note(be, cudaMalloc(&be->cublas_workspace, CUBLAS_WORKSPACE_BYTES), "cudaMalloc (cuBLAS workspace)") ||
        cuda_note_cublas(be, cublasSetWorkspace(be->cublas, be->cublas_workspace, CUBLAS_WORKSPACE_BYTES),
                         "cublasSetWorkspace"))
        return create_failed(be, err);
    int rc = cuda_staging_init(be, err);
    if (rc < 0) {
        cuda_destroy(be);
        return rc;
    }
    struct cinfer_comm *comm = opts->struct_size >= offsetof(struct cinfer_backend_create_options, comm) +
                                                        sizeof opts->comm
                                   ? opts->comm
                                   : NULL;
    rc = cuda_nccl_init(be, comm, err);
    if (rc < 0) {
        cuda_destroy(be);
        return rc;
    }
    *state = be;
    return 0;
}

int cuda_create(int n_threads, void **state, struct cinfer_error *err)
{
    struct cinfer_backend_create_options opts = {sizeof opts, n_threads, 0, NULL};
    return cuda_create_on(&opts, state, err);
}

int cuda_status(void *state, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (!cuda_enter(be))
        cuda_note(be, cudaStreamSynchronize(be->stream), "a queued kernel (seen at cudaStreamSynchronize)");
    if (!be->failed)
        return 0;
    be->failed = 0;
    return cinfer_error_set(err, be->first_error.code, "%s", be->first_error.message);
}

void *cuda_buffer_alloc(void *state, size_t bytes)
{
    struct cuda_backend *be = state;
    void *p = NULL;
    cuda_step_flush(be);
    if (cuda_enter(be))
        return NULL;
    /* cudaMalloc's alignment (256 bytes) covers the 64 backend.h promises */
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is the caller's to report, not a device error */
        return NULL;
    }
    return p;
}

void cuda_buffer_free(void *state, void *buffer)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    be->generation++; /* no graph may write into it again */
    if (buffer && !cuda_enter(be))
        cuda_note(be, cudaFree(buffer), "cudaFree");
}

void cuda_copy(void *state, void *dst, const void *src, size_t bytes)
{
    struct cuda_backend *be = state;
    struct step_op op = step_record_copy(dst, src, bytes);
    if (cuda_step_queue(be, &op))
        return;
    if (bytes && !cuda_enter(be))
        cuda_note(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, be->stream),
                  "cudaMemcpyAsync (device to device)");
}

void cuda_download(void *state, void *host_dst, const void *src, size_t bytes)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (!bytes || cuda_enter(be))
        return;
    if (!cuda_note(be, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, be->stream),
                   "cudaMemcpyAsync (device to host)"))
        cuda_note(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (after a download)");
}

void cuda_upload(void *state, void *dst, const void *host_src, size_t bytes)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    if (!bytes || cuda_enter(be))
        return;
    /* waits: the caller may reuse host_src once this returns */
    if (!cuda_note(be, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, be->stream),
                   "cudaMemcpyAsync (host to device)"))
        cuda_note(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (after an upload)");
}

int cuda_memory_info(void *state, size_t *free_bytes, size_t *total_bytes, struct cinfer_error *err)
{
    struct cuda_backend *be = state;
    cuda_step_flush(be);
    cudaError_t rc = cudaSetDevice(be->device);
    if (rc == cudaSuccess)
        rc = cudaMemGetInfo(free_bytes, total_bytes);
    return cuda_fail(be, rc, "cudaMemGetInfo", err);
}
