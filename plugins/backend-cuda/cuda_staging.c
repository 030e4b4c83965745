/* backend-cuda: the pinned ring through which the ops' small host arrays (tokens, KV
 * slots, page tables, RoPE's cos/sin, expert rows) reach the device without making the
 * host wait for the stream. A region of the ring is written by the host, then copied
 * by the stream; the ring wraps after a full lap, once the stream has caught up (a
 * stream synchronize every ring_bytes of uploads, rare at these sizes). */
#include <stdio.h>
#include <string.h>

#include "cuda_backend.h"

#define RING_BYTES_INITIAL ((size_t)4 << 20)
#define PART_ALIGN 16

static size_t align_up(size_t x)
{
    return (x + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
}

int cuda_staging_init(struct cuda_backend *be, struct cinfer_error *err)
{
    cudaError_t rc = cudaMallocHost((void **)&be->ring, RING_BYTES_INITIAL);
    if (rc != cudaSuccess) {
        be->ring = NULL;
        cudaGetLastError();
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cuda device %d: cudaMallocHost of %zu bytes failed: %s (%s)",
                                be->device, RING_BYTES_INITIAL, cudaGetErrorName(rc), cudaGetErrorString(rc));
    }
    be->ring_bytes = RING_BYTES_INITIAL;
    be->ring_at = 0;
    return 0;
}

void cuda_staging_free(struct cuda_backend *be)
{
    if (be->ring)
        cudaFreeHost(be->ring);
    be->ring = NULL;
    be->ring_bytes = be->ring_at = 0;
}

/* A ring region of bytes the host may write now. */
static uint8_t *ring_take(struct cuda_backend *be, size_t bytes)
{
    if (be->ring_at + bytes <= be->ring_bytes) {
        uint8_t *p = be->ring + be->ring_at;
        be->ring_at += align_up(bytes);
        return p;
    }
    /* a lap is done: the stream must have copied every region before they are reused */
    if (cuda_note(be, cudaStreamSynchronize(be->stream), "cudaStreamSynchronize (staging ring wrap)"))
        return NULL;
    be->ring_at = 0;
    if (bytes > be->ring_bytes) {
        size_t grown = bytes > 2 * be->ring_bytes ? bytes : 2 * be->ring_bytes;
        uint8_t *ring = NULL;
        char call[96];
        snprintf(call, sizeof call, "cudaMallocHost of %zu bytes (staging ring)", grown);
        if (cuda_note(be, cudaMallocHost((void **)&ring, grown), call))
            return NULL;
        cudaFreeHost(be->ring);
        be->ring = ring;
        be->ring_bytes = grown;
    }
    be->ring_at = align_up(bytes);
    return be->ring;
}

int cuda_stage_parts_to(struct cuda_backend *be, struct cuda_scratch *to, const char *what,
                        const struct cuda_host_part *parts, int n_parts, void **dev)
{
    if (be->step.capturing) { /* a graph would copy from a ring region the next step rewrites */
        be->step.capture_broken = 1;
        return 1;
    }
    size_t total = 0;
    for (int i = 0; i < n_parts; i++)
        total += align_up(parts[i].bytes);
    if (total == 0)
        total = PART_ALIGN;
    uint8_t *device = cuda_scratch_get(be, to, total, what);
    if (!device)
        return 1;
    uint8_t *host = ring_take(be, total);
    if (!host)
        return 1;
    size_t at = 0;
    for (int i = 0; i < n_parts; i++) {
        if (parts[i].bytes)
            memcpy(host + at, parts[i].data, parts[i].bytes);
        dev[i] = device + at;
        at += align_up(parts[i].bytes);
    }
    return cuda_note(be, cudaMemcpyAsync(device, host, total, cudaMemcpyHostToDevice, be->stream),
                     "cudaMemcpyAsync (staged host arrays)");
}

int cuda_stage_parts(struct cuda_backend *be, const struct cuda_host_part *parts, int n_parts, void **dev)
{
    return cuda_stage_parts_to(be, &be->packed, "the ops' host arrays", parts, n_parts, dev);
}
