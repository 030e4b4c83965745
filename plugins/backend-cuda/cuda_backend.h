/* plugins/backend-cuda/cuda_backend.h — the CUDA backend's state and the helpers its
 * files share. One backend is one device, one stream (every op is queued on it in
 * order) and one cuBLAS handle on that stream. An op's CUDA error is kept (the first
 * one) and reported by status(), which the runtime calls after every forward step: the
 * void ops of backend.h cannot return it. */
#ifndef CINFER_CUDA_BACKEND_H
#define CINFER_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "cinfer/backend.h"
#include "cuda_kernels.h"
#include "cuda_step_log.h"

#define CINFER_CUDA_PLUGIN_NAME "backend-cuda"

/* Growing device scratch (freed and allocated again, larger, when too small). */
struct cuda_scratch {
    void *data;
    size_t bytes;
};

/* A forward step (cuda_step.c): its named host arrays, copied to the device in one
 * upload at step_begin, and its ops queued until one answers the host. */
/* Steps of more rows than this run op by op, never captured: a prefill chunk's shape
 * seldom repeats, and its kernels are long enough that launching them costs little. */
#define CUDA_GRAPH_MAX_TOKENS 256

struct cuda_step {
    struct step_names names; /* what step_begin named (open between step_begin and step_end) */
    void *array_dev[STEP_MAX_ARRAYS]; /* the device copy of names.arrays[i] */
    struct cinfer_cuda_attn_seq *list_dev[STEP_MAX_SEQ_LISTS]; /* of names.lists[l], n_seqs each */
    int32_t *tables_dev;     /* every list's page tables, end to end */
    int queueing;       /* ops go to log instead of launching */
    int running_log;    /* the queue is launching: its ops launch */
    int capturing;      /* ... into a graph being captured */
    int capture_broken; /* something a graph cannot hold happened while capturing */
    struct cuda_scratch dev; /* the staged arrays and sequence lists, one buffer */
    struct step_log log;
    struct step_graph_cache graphs;
    int graphs_off; /* CINFER_CUDA_GRAPHS=0 in the environment */
};

/* cuBLAS's workspace: NVIDIA's recommended size for Hopper (32 MiB; 4 MiB suffices before) */
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

struct cuda_backend {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    void *cublas_workspace; /* CUBLAS_WORKSPACE_BYTES, cuBLAS's (cublasSetWorkspace) */
    /* pinned host ring the small host arrays (tokens, slots, page tables, cos/sin) go
     * through on their way to the device, so the copy is asynchronous; ring_at is where
     * the next one goes (the ring waits for the stream when it wraps) */
    uint8_t *ring;
    size_t ring_bytes;
    size_t ring_at;
    struct cuda_scratch packed;   /* the device side of the ring's copies (one op at a time) */
    struct cuda_scratch x16;      /* x as bf16 / f16 for cuBLAS */
    struct cuda_scratch w16;      /* a quantized weight dequantized to bf16 (prefill) */
    struct cuda_scratch moe;      /* moe_route's ids and weights before they go to the host */
    struct cuda_scratch top;      /* logits_top's answers before they go to the host */
    int failed;                   /* first_error holds an error status() has not reported */
    struct cinfer_error first_error;
    void *nccl;                   /* ncclComm_t when tensor parallel (cuda_nccl.c) */
    int tp_size;
    uint64_t errors;              /* errors noted so far (a capture checks none came) */
    /* bumped whenever a device buffer that a captured graph may point into is freed or
     * moved (scratch growth, buffer_free, kv_destroy, weight_release): graphs of an older
     * generation are dropped, never launched */
    uint64_t generation;
    struct cuda_step step;
};

/* A KV storage (kv_create). */
struct cuda_kv_storage {
    struct cinfer_cuda_kv d; /* k and v (n_layers, n_pages, page_tokens, row_bytes) device */
};

/* Keeps the first error: "cuda device D: CALL failed: NAME (words)". Returns 1 when rc
 * is an error (and clears CUDA's last-error slot so a later launch check does not
 * report it again), 0 otherwise. */
int cuda_note(struct cuda_backend *be, cudaError_t rc, const char *call);
int cuda_note_cublas(struct cuda_backend *be, cublasStatus_t rc, const char *call);
/* Like cuda_note, then fills err with the same words and returns its code (0 when rc
 * is not an error). For the ops that return an error. */
int cuda_fail(struct cuda_backend *be, cudaError_t rc, const char *call, struct cinfer_error *err);
/* Keeps a non-CUDA failure (a size beyond what the kernels take, ...) as the first error. */
void cuda_note_message(struct cuda_backend *be, int code, const char *message);

/* Makes be's device current for the calling thread (the runtime may call ops from
 * another thread than the one that created the backend); 0 or 1 as cuda_note. */
int cuda_enter(struct cuda_backend *be);

/* scratch at least bytes long; NULL (error noted) when it cannot be allocated. */
void *cuda_scratch_get(struct cuda_backend *be, struct cuda_scratch *s, size_t bytes, const char *what);
void cuda_scratch_free(struct cuda_scratch *s);

/* Copies n_parts host arrays to device memory, each at a 16-byte aligned offset of one
 * device buffer, through the pinned ring (asynchronous: the host arrays may be reused
 * at once). dev[i] gets part i's device address. Returns 0, or 1 with the error noted.
 * The device copies live until the next call (ops use them at once). */
struct cuda_host_part {
    const void *data;
    size_t bytes;
};
int cuda_stage_parts(struct cuda_backend *be, const struct cuda_host_part *parts, int n_parts, void **dev);
/* The same into the device buffer `to` (grown as needed; what names it in errors). */
int cuda_stage_parts_to(struct cuda_backend *be, struct cuda_scratch *to, const char *what,
                        const struct cuda_host_part *parts, int n_parts, void **dev);
int cuda_staging_init(struct cuda_backend *be, struct cinfer_error *err);
void cuda_staging_free(struct cuda_backend *be);

/* cuda_step.c: forward steps (backend.h's step_begin and step_end). */
int cuda_step_begin(void *state, const struct cinfer_backend_step *step, struct cinfer_error *err);
int cuda_step_end(void *state, struct cinfer_error *err);
int cuda_decode_bucket(void *state, int n);
void cuda_step_init(struct cuda_backend *be);
void cuda_step_free(struct cuda_backend *be);
/* Launches what the step has queued (every op that cannot be queued calls this first, so
 * the stream runs the ops in the order the core called them). */
void cuda_step_flush(struct cuda_backend *be);
/* 1 when op went to the queue (the caller then returns), 0 when the caller launches it. */
int cuda_step_queue(struct cuda_backend *be, const struct step_op *op);
/* cuda_step_queue(op) when queueable (every host array it reads is one the step named),
 * else cuda_step_flush first (an op that reads other host memory launches at once, after
 * what was queued) and 0. */
int cuda_step_take(struct cuda_backend *be, const struct step_op *op, int queueable);
/* The device copy of a host array the step named (host the same pointer, bytes at most
 * the named ones), or NULL. */
void *cuda_step_device(struct cuda_backend *be, const void *host, size_t bytes);
/* 1 with the staged copy of a sequence list the step named (its packed sequences and the
 * page tables they index), else 0. */
int cuda_step_seq_list(struct cuda_backend *be, const struct cinfer_backend_attn_seq *seqs, int n_seqs,
                       void **dev_seqs, void **dev_tables);

/* cuda_nccl.c: the tensor-parallel group on NCCL (a no-op without a group or NCCL). */
int cuda_nccl_init(struct cuda_backend *be, struct cinfer_comm *comm, struct cinfer_error *err);
void cuda_nccl_free(struct cuda_backend *be);
int cuda_all_reduce_sum(void *state, float *x, size_t n, struct cinfer_error *err);

/* The ops, by file; cuda_backend_ops() is their table (cuda_component.c). */
const struct cinfer_backend_ops *cuda_backend_ops(void);
int cuda_query(struct cinfer_backend_answer *answer);
int cuda_create_on(const struct cinfer_backend_create_options *opts, void **state, struct cinfer_error *err);
int cuda_create(int n_threads, void **state, struct cinfer_error *err);
void cuda_destroy(void *state);
int cuda_status(void *state, struct cinfer_error *err);
void *cuda_buffer_alloc(void *state, size_t bytes);
void cuda_buffer_free(void *state, void *buffer);
void cuda_copy(void *state, void *dst, const void *src, size_t bytes);
void cuda_download(void *state, void *host_dst, const void *src, size_t bytes);
void cuda_upload(void *state, void *dst, const void *host_src, size_t bytes);
int cuda_memory_info(void *state, size_t *free_bytes, size_t *total_bytes, struct cinfer_error *err);

int cuda_weight_prepare(void *state, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                        struct cinfer_error *err);
void cuda_weight_release(void *state, const struct cinfer_backend_weight *w);
void cuda_embedding(void *state, const struct cinfer_backend_weight *w, const int32_t *tokens, int n, float *out);
int cuda_matmul(void *state, const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs,
                struct cinfer_error *err);
int cuda_matmul_grouped(void *state, const float *const *xs, int n, const struct cinfer_backend_matmul_out *outs,
                        int n_outs, struct cinfer_error *err);

void cuda_rmsnorm(void *state, float *y, const float *x, int n_rows, int dim, const float *w, float eps);
void cuda_rope(void *state, float *x, int n_tokens, int n_heads, int head_dim, const struct cinfer_backend_rope *rope);
void cuda_silu_mul(void *state, float *gate, const float *up, size_t n);
void cuda_gelu_tanh_mul(void *state, float *gate, const float *up, size_t n);
void cuda_swiglu_oai(void *state, float *gate, const float *up, size_t n, float alpha, float limit);
void cuda_add(void *state, float *y, const float *x, size_t n);
void cuda_scale(void *state, float *x, size_t n, float factor);
void cuda_softcap(void *state, float *x, size_t n, float cap);
void cuda_add_gated(void *state, float *y, const float *x, const float *gate, int n, int dim);
void cuda_zero(void *state, float *x, size_t n);
void cuda_moe_route(void *state, const float *logits, int n, int n_experts, int k, int normalize, int32_t *ids,
                    float *weights);
int cuda_logits_top(void *state, const float *logits, int vocab, const int32_t *rows, int n_rows, int k,
                    int32_t *top_ids, float *top_logits, int *n_top, double *log_sum_exp, struct cinfer_error *err);
int cuda_sample(void *state, float *logits, int vocab, const int32_t *rows, int n_rows,
                const struct cinfer_backend_sample_params *params, int32_t *token_ids, float *token_logits,
                struct cinfer_error *err);
void cuda_gather_rows(void *state, float *out, const float *x, const int32_t *rows, int n, int dim);
void cuda_scatter_add_rows(void *state, float *y, const float *x, const int32_t *rows, const float *weights, int n,
                           int dim);

/* Sequence lists packed as the attention kernel reads them: struct cinfer_cuda_attn_seq
 * per sequence of each list (*packed: n_lists x n_seqs), then every list's page tables end
 * to end in one array (*tables, *n_entries of them), which page_table_at indexes. Both
 * malloc'd (the caller frees them, also on failure); -1 when out of memory. */
int cuda_pack_seq_lists(const struct cinfer_backend_attn_seq *const *lists, int n_lists, int n_seqs,
                        struct cinfer_cuda_attn_seq **packed, int32_t **tables, size_t *n_entries);
int cuda_kv_create(void *state, const struct cinfer_backend_kv_layout *layout, void **kv, struct cinfer_error *err);
void cuda_kv_destroy(void *state, void *kv);
void cuda_kv_write(void *state, void *kv, int layer, const float *k, const float *v, int n, const int32_t *slots);
int cuda_attention(void *state, void *kv, int layer, const float *q, float *out,
                   const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads, int head_dim,
                   struct cinfer_error *err);
int cuda_attention_windowed(void *state, void *kv, int layer, const float *q, float *out,
                            const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                            int head_dim, const struct cinfer_backend_attn_options *opts, struct cinfer_error *err);

#endif
