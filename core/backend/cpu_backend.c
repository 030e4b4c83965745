/* core/backend/cpu_backend.c — the compute backend on host memory: kernels from
 * kernels/ (dispatched on CPU features) split across a thread pool. Matmuls split
 * output rows across threads; attention hands out (sequence, head) pairs dynamically
 * because sequences differ in length. Every output element is computed by one thread
 * in a fixed order, so results do not depend on the thread count or the batch. */
#include "backend/cpu_backend.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_weights.h"
#include "cuda/moe_route.cuh" /* one router row, host and device alike */
#include "kernels.h"
#include "scheduler/sampler.h" /* sample draws with the host's sampler */
#include "util/thread_pool.h"

_Static_assert((int)CINFER_TENSOR_Q8_0 == (int)CINFER_KW_Q8_0 && (int)CINFER_TENSOR_BF16 == (int)CINFER_KW_BF16 &&
                   (int)CINFER_TENSOR_F16 == (int)CINFER_KW_F16 && (int)CINFER_TENSOR_F32 == (int)CINFER_KW_F32 &&
                   (int)CINFER_TENSOR_Q4_0 == (int)CINFER_KW_Q4_0 && (int)CINFER_TENSOR_Q4_1 == (int)CINFER_KW_Q4_1 &&
                   (int)CINFER_TENSOR_Q5_0 == (int)CINFER_KW_Q5_0 && (int)CINFER_TENSOR_Q5_1 == (int)CINFER_KW_Q5_1 &&
                   (int)CINFER_TENSOR_Q2_K == (int)CINFER_KW_Q2_K && (int)CINFER_TENSOR_Q3_K == (int)CINFER_KW_Q3_K &&
                   (int)CINFER_TENSOR_Q4_K == (int)CINFER_KW_Q4_K && (int)CINFER_TENSOR_Q5_K == (int)CINFER_KW_Q5_K &&
                   (int)CINFER_TENSOR_Q6_K == (int)CINFER_KW_Q6_K &&
                   (int)CINFER_TENSOR_IQ4_NL == (int)CINFER_KW_IQ4_NL &&
                   (int)CINFER_TENSOR_IQ4_XS == (int)CINFER_KW_IQ4_XS &&
                   (int)CINFER_TENSOR_MXFP4 == (int)CINFER_KW_MXFP4,
               "stored tensor types and kernel weight types are numbered alike (the panel types, this "
               "backend's own, take the numbers the public enum leaves out)");

#define BUFFER_ALIGN_BYTES 64

struct cpu_backend {
    struct cinfer_thread_pool *pool;
    struct cpu_weight_store weights; /* copies of weights in the kernels' layout */
    void *prepared;         /* activations prepared for the weight type (Q8 blocks) */
    size_t prepared_bytes;
    float *attn_scratch;    /* (n_threads, attn_floats_per_thread) see attention_part */
    size_t attn_floats_per_thread;
    int *attn_first_item; /* (attn_item_seqs + 1): each sequence's first attention work item */
    size_t *attn_kv_wide_at; /* (attn_item_seqs): where each prefill sequence's part of attn_kv_wide starts */
    int attn_item_seqs;
    float *attn_kv_wide; /* (attn_kv_wide_floats) V and K widened, per prefill sequence and KV head */
    size_t attn_kv_wide_floats;
    struct matmul_region *matmul_regions; /* (MATMUL_MAX_REGIONS) the current matmul's regions */
    struct matmul_chunk *matmul_chunks;   /* (matmul_chunks_cap) the current matmul's chunks */
    size_t matmul_chunks_cap;
    struct cinfer_sampler *samplers; /* (pool size) sample's scratch per thread, for the vocabulary of its last call */
};

struct cpu_kv {
    struct cinfer_backend_kv_layout layout;
    enum cinfer_kernel_wtype wtype; /* the element type as the kernels name it (F32, F16, BF16, Q8_0) */
    size_t row_bytes;               /* one token's K (or V): kv_dim values */
    size_t head_bytes;              /* one head's part of a row */
    uint8_t *data; /* (n_layers, n_pages, 2, page_tokens, row_bytes): K then V of each page */
};

static inline uint8_t *kv_row(const struct cpu_kv *kv, int layer, int page, int which, int offset)
{
    const struct cinfer_backend_kv_layout *l = &kv->layout;
    size_t index = (((size_t)layer * l->n_pages + (size_t)page) * 2 + (size_t)which) * l->page_tokens + offset;
    return kv->data + index * kv->row_bytes;
}

/* One head's values of a K or V row, widened to f32 (head_dim of them). */
static inline void kv_head_to_f32(const struct cpu_kv *kv, const uint8_t *row, int kv_head, float *out)
{
    cinfer_kernel_row_to_f32(row + (size_t)kv_head * kv->head_bytes, kv->wtype, kv->layout.head_dim, out);
}

static struct matmul_region *matmul_regions_new(void);

static int cpu_create(int n_threads, void **state, struct cinfer_error *err)
{
    struct cpu_backend *be = calloc(1, sizeof *be);
    if (!be)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cpu backend: out of memory");
    be->matmul_regions = matmul_regions_new();
    if (!be->matmul_regions) {
        free(be);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cpu backend: out of memory");
    }
    int rc = cinfer_thread_pool_create(n_threads, &be->pool, err);
    if (rc < 0) {
        free(be->matmul_regions);
        free(be);
        return rc;
    }
    *state = be;
    return 0;
}

/* The host always has its CPU: usable, at the lowest priority, so --device auto
 * prefers any usable accelerator. */
static int cpu_query(struct cinfer_backend_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    answer->usable = 1;
    answer->priority = 10;
    answer->device_count = 1;
    return 0;
}

static int cpu_create_on(const struct cinfer_backend_create_options *opts, void **state, struct cinfer_error *err)
{
    if (opts->device != 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "cpu backend: device index %d requested, but the CPU is device 0 only", opts->device);
    return cpu_create(opts->n_threads, state, err);
}

/* Every CPU op has finished and reported when it returns: nothing is pending. */
static int cpu_status(void *state, struct cinfer_error *err)
{
    (void)state;
    (void)err;
    return 0;
}

static void free_samplers(struct cpu_backend *be)
{
    for (int t = 0; be->samplers && t < cinfer_thread_pool_size(be->pool); t++)
        cinfer_sampler_free(&be->samplers[t]);
    free(be->samplers);
    be->samplers = NULL;
}

static void cpu_destroy(void *state)
{
    struct cpu_backend *be = state;
    if (!be)
        return;
    free_samplers(be); /* counts the pool's threads */
    cinfer_thread_pool_destroy(&be->pool);
    cinfer_cpu_weights_free_all(&be->weights);
    free(be->matmul_regions);
    free(be->attn_scratch);
    free(be->attn_first_item);
    free(be->attn_kv_wide_at);
    free(be->attn_kv_wide);
    free(be->matmul_chunks);
    free(be->prepared);
    free(be);
}

static void *cpu_buffer_alloc(void *state, size_t bytes)
{
    size_t rounded = (bytes + BUFFER_ALIGN_BYTES - 1) / BUFFER_ALIGN_BYTES * BUFFER_ALIGN_BYTES;
    return aligned_alloc(BUFFER_ALIGN_BYTES, rounded ? rounded : BUFFER_ALIGN_BYTES);
}

static void cpu_buffer_free(void *state, void *buffer)
{
    free(buffer);
}

static void cpu_copy(void *state, void *dst, const void *src, size_t bytes)
{
    memmove(dst, src, bytes);
}

static int cpu_kv_create(void *state, const struct cinfer_backend_kv_layout *layout, void **out,
                         struct cinfer_error *err)
{
    static const enum cinfer_kernel_wtype wtypes[] = {[CINFER_KV_F32] = CINFER_KW_F32, [CINFER_KV_F16] = CINFER_KW_F16,
                                                      [CINFER_KV_BF16] = CINFER_KW_BF16,
                                                      [CINFER_KV_Q8_0] = CINFER_KW_Q8_0};
    if (layout->dtype > CINFER_KV_Q8_0 || layout->head_dim <= 0 || layout->kv_dim % layout->head_dim != 0 ||
        (layout->dtype == CINFER_KV_Q8_0 && layout->head_dim % CINFER_KERNEL_Q8_BLOCK != 0))
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "cpu backend: KV layout of type %u, kv_dim %d and head_dim %d: expected type 0..3, "
                                "kv_dim a multiple of head_dim (and head_dim of 32 for q8_0)",
                                layout->dtype, layout->kv_dim, layout->head_dim);
    struct cpu_kv *kv = calloc(1, sizeof *kv);
    if (!kv)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cpu backend: out of memory");
    kv->layout = *layout;
    kv->wtype = wtypes[layout->dtype];
    kv->row_bytes = cinfer_kernel_row_bytes(kv->wtype, layout->kv_dim);
    kv->head_bytes = cinfer_kernel_row_bytes(kv->wtype, layout->head_dim);
    size_t bytes = (size_t)layout->n_layers * layout->n_pages * 2 * layout->page_tokens * kv->row_bytes;
    kv->data = cpu_buffer_alloc(state, bytes);
    if (!kv->data) {
        free(kv);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cpu backend: cannot allocate the KV cache (%zu bytes)",
                                bytes);
    }
    *out = kv;
    return 0;
}

static void cpu_kv_destroy(void *state, void *kv_)
{
    struct cpu_kv *kv = kv_;
    if (!kv)
        return;
    free(kv->data);
    free(kv);
}

static void cpu_kv_write(void *state, void *kv_, int layer, const float *k, const float *v, int n,
                         const int32_t *slots)
{
    struct cpu_kv *kv = kv_;
    int pt = kv->layout.page_tokens, kv_dim = kv->layout.kv_dim;
    for (int i = 0; i < n; i++) {
        int page = slots[i] / pt, offset = slots[i] % pt;
        for (int which = 0; which < 2; which++) {
            const float *src = (which ? v : k) + (size_t)i * kv_dim; /* (kv_dim) */
            uint8_t *dst = kv_row(kv, layer, page, which, offset);
            switch (kv->layout.dtype) {
            case CINFER_KV_F32: memcpy(dst, src, (size_t)kv_dim * sizeof(float)); break;
            case CINFER_KV_F16:
            case CINFER_KV_BF16: /* rows are 2-byte aligned: row_bytes is 2 * kv_dim */
                cinfer_kernel_row_from_f32(src, kv->layout.dtype == CINFER_KV_BF16, kv_dim, (uint16_t *)(void *)dst);
                break;
            case CINFER_KV_Q8_0: cinfer_kernel_quantize_q8_0(src, kv_dim, dst); break;
            }
        }
    }
}

/* Element-wise work split in contiguous row ranges across the pool. Each op is cheap
 * next to the matmuls, but a prefill batch has enough rows that one thread would show. */
enum rows_op { ROWS_EMBEDDING, ROWS_RMSNORM, ROWS_ROPE, ROWS_SILU_MUL, ROWS_ADD, ROWS_GELU_TANH_MUL, ROWS_SCALE,
               ROWS_SOFTCAP, ROWS_MOE_ROUTE, ROWS_GATHER, ROWS_SCATTER_ADD, ROWS_ZERO, ROWS_ADD_GATED,
               ROWS_SWIGLU_OAI };

struct rows_job {
    enum rows_op op;
    int n_rows;
    size_t row_len; /* floats per row */
    float *y;
    const float *x;
    const float *w;
    float eps;          /* rmsnorm's epsilon; scale's factor; softcap's cap; swiglu_oai's alpha */
    float limit;        /* swiglu_oai's clamp */
    const struct cinfer_backend_weight *table;
    const int32_t *ids; /* tokens */
    int n_heads, head_dim;
    const struct cinfer_backend_rope *rope;
    /* moe_route: top_k choices per row into ids_out/weights_out; gather/scatter: rows
     * of the other matrix (ids) and the scatter's weights */
    int top_k, normalize;
    int32_t *ids_out;
    float *weights_out;
    const float *row_weights;
    int n_parts;
};

/* Floats of work below which splitting costs more than it saves. */
#define MIN_FLOATS_PER_THREAD 4096

/* Parts per thread of an element-wise job (a few, so a busy core can be worked around). */
#define ROWS_PARTS_PER_THREAD 4

static void rows_part(void *arg, int part, int thread)
{
    const struct rows_job *job = arg;
    int r0, r1; /* flat arrays come as rows of 1: keep their parts a cache line apart */
    cinfer_split_range(job->n_rows, job->row_len == 1 ? 16 : 1, part, job->n_parts, &r0, &r1);
    size_t len = job->row_len;
    switch (job->op) {
    case ROWS_EMBEDDING:
        for (int r = r0; r < r1; r++) {
            if (job->ids[r] < 0 || job->ids[r] >= job->table->rows) /* another rank's row */
                memset(job->y + r * len, 0, len * sizeof(float));
            else
                cinfer_kernel_weight_row_to_f32(job->table->data, (enum cinfer_kernel_wtype)job->table->type,
                                                job->table->row_bytes, job->ids[r], (int)len, job->y + r * len);
        }
        break;
    case ROWS_RMSNORM:
        for (int r = r0; r < r1; r++)
            cinfer_kernel_rmsnorm(job->y + r * len, job->x + r * len, job->w, (int)len, job->eps);
        break;
    case ROWS_ROPE:
        for (int r = r0; r < r1; r++)
            for (int h = 0; h < job->n_heads; h++)
                cinfer_kernel_rope(job->y + r * len + (size_t)h * job->head_dim, job->head_dim,
                                   job->rope->cos + (size_t)r * (job->head_dim / 2),
                                   job->rope->sin + (size_t)r * (job->head_dim / 2), job->rope->interleaved);
        break;
    case ROWS_SILU_MUL:
        cinfer_kernel_silu_mul(job->y + r0 * len, job->x + r0 * len, (size_t)(r1 - r0) * len);
        break;
    case ROWS_ADD:
        cinfer_kernel_add(job->y + r0 * len, job->x + r0 * len, (size_t)(r1 - r0) * len);
        break;
    case ROWS_GELU_TANH_MUL:
        for (size_t i = (size_t)r0 * len; i < (size_t)r1 * len; i++) {
            float g = job->y[i];
            job->y[i] = 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g))) * job->x[i];
        }
        break;
    case ROWS_SWIGLU_OAI:
        cinfer_kernel_swiglu_oai(job->y + r0 * len, job->x + r0 * len, (size_t)(r1 - r0) * len, job->eps,
                                 job->limit);
        break;
    case ROWS_SCALE:
        for (size_t i = (size_t)r0 * len; i < (size_t)r1 * len; i++)
            job->y[i] *= job->eps;
        break;
    case ROWS_SOFTCAP:
        for (size_t i = (size_t)r0 * len; i < (size_t)r1 * len; i++)
            job->y[i] = job->eps * tanhf(job->y[i] / job->eps);
        break;
    case ROWS_MOE_ROUTE: /* x (n_rows, row_len) logits */
        for (int r = r0; r < r1; r++)
            cinfer_cu_route_row(job->x + r * len, (int)len, job->top_k, job->normalize,
                                job->ids_out + (size_t)r * job->top_k, job->weights_out + (size_t)r * job->top_k);
        break;
    case ROWS_GATHER:
        for (int r = r0; r < r1; r++)
            memcpy(job->y + r * len, job->x + (size_t)job->ids[r] * len, len * sizeof(float));
        break;
    case ROWS_SCATTER_ADD: /* parts are column ranges [r0, r1) of rows n_rows long: rows may repeat */
        for (int i = 0; i < job->top_k; i++) {
            float *y = job->y + (size_t)job->ids[i] * (size_t)job->n_rows, wr = job->row_weights[i];
            const float *x = job->x + (size_t)i * (size_t)job->n_rows;
            for (int c = r0; c < r1; c++)
                y[c] += wr * x[c];
        }
        break;
    case ROWS_ZERO:
        memset(job->y + r0 * len, 0, (size_t)(r1 - r0) * len * sizeof(float));
        break;
    case ROWS_ADD_GATED: /* w (n_rows) one gate logit per row */
        for (int r = r0; r < r1; r++)
            cinfer_kernel_axpy(job->y + r * len, 1.0f / (1.0f + expf(-job->w[r])), job->x + r * len, (int)len);
        break;
    }
}

static void run_rows(struct cpu_backend *be, struct rows_job *job)
{
    size_t floats = (size_t)job->n_rows * job->row_len;
    int parts = ROWS_PARTS_PER_THREAD * cinfer_thread_pool_size(be->pool);
    if ((size_t)parts > floats / MIN_FLOATS_PER_THREAD)
        parts = (int)(floats / MIN_FLOATS_PER_THREAD);
    job->n_parts = parts < 1 ? 1 : parts > job->n_rows ? job->n_rows : parts;
    cinfer_thread_pool_run_chunks(be->pool, rows_part, job, job->n_parts);
}

static void cpu_embedding(void *state, const struct cinfer_backend_weight *w, const int32_t *tokens, int n,
                          float *out)
{
    struct rows_job job = {.op = ROWS_EMBEDDING, .n_rows = n, .row_len = (size_t)w->cols, .y = out, .table = w,
                           .ids = tokens};
    run_rows(state, &job);
}

/* Matmul work is handed out in chunks of weight rows, not in fixed shares: on a machine
 * whose cores are also busy with other work, a fixed half would make every call wait
 * for the slowest core. The rows are cut into one contiguous region per thread; a
 * thread takes its own region's chunks from the front and, when it is done, other
 * regions' chunks from the back. So in the usual case each thread streams one run of
 * consecutive weight rows (what the hardware and software prefetchers need: chunks
 * claimed in turn from one counter interleave the threads every chunk and cost a
 * quarter of decode's bandwidth), and a descheduled thread's share is still taken.
 *
 * Batched calls cut each region into chunks of one size. Decode calls (n <= 2: one
 * pass over the weights, bound by memory) cut it into shrinking chunks, a quarter of
 * what is left each time down to 16 rows: the owner's stream is the same run of rows
 * either way, but the chunks at a region's back, the ones left when the threads meet,
 * are small, so the thread that finishes first waits a fraction of a chunk rather than
 * a whole one. A decode step joins the pool about 5 times per layer: with even chunks
 * the threads' spinning at the joins was about 7% of an f16 step's samples under perf,
 * with shrinking ones about 3.5%. */
#define MATMUL_CHUNKS_PER_THREAD 8
#define MATMUL_MAX_OUTS 32 /* a MoE decode step's gate and up of 8 experts and a shared expert's 3 */
#define MATMUL_MAX_REGIONS 64
#define MATMUL_GROUP_ROWS 16 /* chunks are whole groups of rows (the kernels' tiles) */
#define MATMUL_SHRINK_DIVISOR 4 /* a decode chunk is this fraction of its region's rest */

/* A region's unclaimed chunks [front, back), one cache line each. */
struct matmul_region {
    _Alignas(64) _Atomic uint64_t span; /* back << 32 | front */
};

/* Every region a matmul can have, cache-line aligned: a fixed 4 KiB, made with the
 * backend rather than checked for at every call. */
static struct matmul_region *matmul_regions_new(void)
{
    return aligned_alloc(64, sizeof(struct matmul_region) * MATMUL_MAX_REGIONS);
}

/* Rows [j0, j1) of output `out`. */
struct matmul_chunk {
    int out, j0, j1;
};

struct matmul_job {
    const float *x;         /* (n, k) every output's input, or NULL when xs is set */
    const float *const *xs; /* (n_outs) each output's own input (n, k) (matmul_grouped), or NULL */
    /* the inputs as the weights want them (cinfer_kernel_prepare_rows), or NULL: input i's at
     * i * prepared_stride bytes (one input: stride 0) */
    const void *prepared;
    size_t prepared_stride;
    enum cinfer_kernel_wtype wtype; /* of every output's weight */
    int n, k;
    const struct cinfer_backend_matmul_out *outs;
    int n_outs;
    int n_prepare_parts;
    int n_regions;
    /* The regions live in the backend, not in the job on the caller's stack: 64 of them,
     * a cache line each, made the job 4 KiB that every call cleared (about 400 of a decode
     * call's 1,500 cycles before its threads start, timed with rdtsc). */
    struct matmul_region *regions; /* (MATMUL_MAX_REGIONS) the backend's, reused from call to call */
    struct matmul_chunk *chunks;   /* (max_chunks) the backend's, reused from call to call */
};

static void matmul_chunk(const struct matmul_job *job, int chunk)
{
    const struct matmul_chunk *c = &job->chunks[chunk];
    const struct cinfer_backend_matmul_out *out = &job->outs[c->out];
    int m = (int)out->w->rows;
    const float *x = job->xs ? job->xs[c->out] : job->x;
    const void *prepared =
        job->prepared ? (const uint8_t *)job->prepared + (size_t)c->out * job->prepared_stride : NULL;
    cinfer_kernel_matmul(x, prepared, job->n, job->k, out->w->data, (enum cinfer_kernel_wtype)out->w->type,
                         out->w->row_bytes, c->j0, c->j1, out->y, m);
    if (out->bias)
        for (int i = 0; i < job->n; i++)
            cinfer_kernel_add(out->y + (size_t)i * m + c->j0, out->bias + c->j0, (size_t)(c->j1 - c->j0));
}

/* Claims a chunk of region r from its front (owner) or back (thief); -1 when empty. */
static int region_claim(struct matmul_region *r, int from_back)
{
    uint64_t span = atomic_load_explicit(&r->span, memory_order_relaxed);
    for (;;) {
        uint32_t front = (uint32_t)span, back = (uint32_t)(span >> 32);
        if (front >= back)
            return -1;
        uint64_t claimed = from_back ? ((uint64_t)(back - 1) << 32 | front) : ((uint64_t)back << 32 | (front + 1));
        if (atomic_compare_exchange_weak_explicit(&r->span, &span, claimed, memory_order_relaxed,
                                                  memory_order_relaxed))
            return (int)(from_back ? back - 1 : front);
    }
}

/* One pool chunk per region: its own region first, then the others' leftovers. */
static void matmul_part(void *arg, int region, int thread)
{
    struct matmul_job *job = arg;
    (void)thread;
    int chunk;
    while ((chunk = region_claim(&job->regions[region], 0)) >= 0)
        matmul_chunk(job, chunk);
    for (int i = 1; i < job->n_regions; i++) {
        struct matmul_region *r = &job->regions[(region + i) % job->n_regions];
        while ((chunk = region_claim(r, 1)) >= 0)
            matmul_chunk(job, chunk);
    }
}

/* At most this many chunks for `total` rows: every chunk is a whole group of rows
 * except the last of each region and of each output. */
static size_t max_chunks(int total, int n_regions, int n_outs)
{
    return (size_t)total / MATMUL_GROUP_ROWS + (size_t)n_regions + (size_t)n_outs;
}

/* Cuts the outputs' rows, laid end to end, into job->n_regions regions of whole groups
 * and each region into chunks (at most max_chunks of them): of chunk_rows rows, or
 * (chunk_rows 0) shrinking ones. A chunk never crosses from one output into the next. */
static void plan_chunks(struct matmul_job *job, int chunk_rows, struct matmul_chunk *chunks)
{
    int first_row[MATMUL_MAX_OUTS + 1] = {0};
    for (int o = 0; o < job->n_outs; o++)
        first_row[o + 1] = first_row[o] + (int)job->outs[o].w->rows;
    int total = first_row[job->n_outs];
    int n_chunks = 0, o = 0;
    for (int r = 0; r < job->n_regions; r++) {
        int g0, g1;
        cinfer_split_range(total, MATMUL_GROUP_ROWS, r, job->n_regions, &g0, &g1);
        int first = n_chunks;
        for (int g = g0; g < g1;) {
            while (g >= first_row[o + 1])
                o++;
            int rest = g1 - g, size = chunk_rows;
            if (size == 0) {
                size = (rest / MATMUL_SHRINK_DIVISOR + MATMUL_GROUP_ROWS - 1) / MATMUL_GROUP_ROWS * MATMUL_GROUP_ROWS;
                if (size < MATMUL_GROUP_ROWS)
                    size = MATMUL_GROUP_ROWS;
            }
            if (size > rest)
                size = rest;
            if (size > first_row[o + 1] - g)
                size = first_row[o + 1] - g;
            chunks[n_chunks++] = (struct matmul_chunk){o, g - first_row[o], g - first_row[o] + size};
            g += size;
        }
        atomic_init(&job->regions[r].span, (uint64_t)n_chunks << 32 | (uint32_t)first);
    }
}

/* Part `part` of n_prepare_parts: rows of one input (n_prepare_parts / inputs parts each). */
static void prepare_part(void *arg, int part, int thread)
{
    const struct matmul_job *job = arg;
    (void)thread;
    int inputs = job->xs ? job->n_outs : 1, per_input = job->n_prepare_parts / inputs;
    int input = part / per_input, i0, i1;
    cinfer_split_range(job->n, 1, part % per_input, per_input, &i0, &i1);
    cinfer_kernel_prepare_rows(job->wtype, job->xs ? job->xs[input] : job->x, job->k, i0, i1,
                               (uint8_t *)job->prepared + (size_t)input * job->prepared_stride);
}

/* outs from x (n, k), or each out o from its own xs[o] (xs non-NULL), in one job. */
static int matmul_outs(struct cpu_backend *be, const float *x, const float *const *xs, int n,
                       const struct cinfer_backend_matmul_out *outs, int n_outs, struct cinfer_error *err)
{
    int n_threads = cinfer_thread_pool_size(be->pool);
    struct matmul_job job = {.x = x, .xs = xs, .n = n, .k = (int)outs[0].w->cols, .outs = outs, .n_outs = n_outs};
    int total_rows = 0;
    for (int o = 0; o < n_outs; o++)
        total_rows += (int)outs[o].w->rows;
    job.wtype = (enum cinfer_kernel_wtype)outs[0].w->type;
    /* batched: chunks of whole groups, about MATMUL_CHUNKS_PER_THREAD per thread; fewer
     * for Q8_0 weights, whose tile transposes all of x at every call (kernels/q8_avx512.c):
     * at 8 chunks that was 5% of prefill */
    int chunk_rows = 0;
    if (n > 2) {
        int per_thread = job.wtype == CINFER_KW_Q8_0 ? MATMUL_CHUNKS_PER_THREAD / 4 : MATMUL_CHUNKS_PER_THREAD;
        int rows = total_rows / (n_threads * per_thread);
        chunk_rows = rows < MATMUL_GROUP_ROWS
                         ? MATMUL_GROUP_ROWS
                         : (rows + MATMUL_GROUP_ROWS - 1) / MATMUL_GROUP_ROWS * MATMUL_GROUP_ROWS;
    }
    /* BF16 weights without prepared x take the widening path: x unrounded */
    size_t bytes =
        outs[0].exact_x && (job.wtype == CINFER_KW_BF16 || job.wtype == CINFER_KW_BF16_PANELS)
            ? 0
            : cinfer_kernel_prepared_bytes(job.wtype, n, job.k);
    if (bytes > 0) {
        int inputs = xs ? n_outs : 1;
        job.prepared_stride = xs ? (bytes + BUFFER_ALIGN_BYTES - 1) / BUFFER_ALIGN_BYTES * BUFFER_ALIGN_BYTES : 0;
        size_t all = xs ? job.prepared_stride * (size_t)inputs : bytes;
        if (all > be->prepared_bytes) {
            void *grown = realloc(be->prepared, all);
            if (!grown)
                return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                        "cpu backend: cannot allocate %zu bytes of prepared activations", all);
            be->prepared = grown;
            be->prepared_bytes = all;
        }
        job.prepared = be->prepared;
        /* a few rows (decode) are prepared here: a pool job's join costs more than their work */
        int per_input = n >= 4 * n_threads ? 4 * n_threads : 1;
        job.n_prepare_parts = inputs * per_input;
        if (per_input == 1)
            for (int part = 0; part < job.n_prepare_parts; part++)
                prepare_part(&job, part, 0);
        else
            cinfer_thread_pool_run_chunks(be->pool, prepare_part, &job, job.n_prepare_parts);
    }
    /* a region per thread, as long as there are groups of rows for it */
    int groups = (total_rows + MATMUL_GROUP_ROWS - 1) / MATMUL_GROUP_ROWS;
    job.n_regions = n_threads < groups ? n_threads : groups;
    if (job.n_regions > MATMUL_MAX_REGIONS)
        job.n_regions = MATMUL_MAX_REGIONS;
    size_t most = max_chunks(total_rows, job.n_regions, n_outs);
    if (most > be->matmul_chunks_cap) {
        struct matmul_chunk *grown = realloc(be->matmul_chunks, sizeof *grown * most);
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "cpu backend: cannot allocate %zu matmul chunks", most);
        be->matmul_chunks = grown;
        be->matmul_chunks_cap = most;
    }
    job.regions = be->matmul_regions;
    job.chunks = be->matmul_chunks;
    plan_chunks(&job, chunk_rows, job.chunks);
    cinfer_thread_pool_run_chunks(be->pool, matmul_part, &job, job.n_regions);
    return 0;
}

/* One job per run of outputs with the same weight type, columns and exact_x: they share
 * the preparation of their inputs' layout. */
static int matmul_runs(struct cpu_backend *be, const float *x, const float *const *xs, int n,
                       const struct cinfer_backend_matmul_out *outs, int n_outs, struct cinfer_error *err)
{
    for (int first = 0, count; first < n_outs; first += count) {
        const struct cinfer_backend_matmul_out *o = outs + first;
        count = 1;
        while (first + count < n_outs && count < MATMUL_MAX_OUTS && o[count].w->type == o[0].w->type &&
               o[count].w->cols == o[0].w->cols && o[count].exact_x == o[0].exact_x)
            count++;
        int rc = matmul_outs(be, x, xs ? xs + first : NULL, n, o, count, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int cpu_matmul(void *state, const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs,
                      struct cinfer_error *err)
{
    return matmul_runs(state, x, NULL, n, outs, n_outs, err);
}

static int cpu_matmul_grouped(void *state, const float *const *xs, int n, const struct cinfer_backend_matmul_out *outs,
                              int n_outs, struct cinfer_error *err)
{
    return matmul_runs(state, NULL, xs, n, outs, n_outs, err);
}

static int cpu_logits_top(void *state, const float *logits, int vocab, const int32_t *rows, int n_rows, int k,
                          int32_t *top_ids, float *top_logits, int *n_top, double *log_sum_exp,
                          struct cinfer_error *err)
{
    (void)state;
    (void)err;
    for (int r = 0; r < n_rows; r++) {
        const float *row = logits + (size_t)rows[r] * (size_t)vocab; /* (vocab) */
        n_top[r] = cinfer_kernel_logits_top(row, vocab, k, top_ids + (size_t)r * k, top_logits + (size_t)r * k);
        if (log_sum_exp)
            log_sum_exp[r] = cinfer_kernel_log_sum_exp(row, vocab);
    }
    return 0;
}

struct sample_job {
    float *logits; /* (rows, vocab) */
    int vocab;
    const int32_t *rows;
    const struct cinfer_backend_sample_params *params;
    int32_t *token_ids;
    float *token_logits;
    struct cinfer_sampler *samplers; /* one per thread */
};

static void sample_part(void *arg, int r, int thread)
{
    const struct sample_job *job = arg;
    float *row = job->logits + (size_t)job->rows[r] * (size_t)job->vocab; /* (vocab) */
    job->token_ids[r] = cinfer_sampler_draw(&job->samplers[thread], row, &job->params[r]);
    job->token_logits[r] = row[job->token_ids[r]];
}

/* The host's sampler itself (cinfer_sampler_draw): the CPU backend's tokens are the ones
 * the scheduler would draw from the downloaded row. Rows are independent (each brings its
 * uniform number), so the pool's threads take one each: a row of Qwen3's 151,936 logits
 * under top-p costs about a millisecond and a half. */
static int cpu_sample(void *state, float *logits, int vocab, const int32_t *rows, int n_rows,
                      const struct cinfer_backend_sample_params *params, int32_t *token_ids, float *token_logits,
                      struct cinfer_error *err)
{
    struct cpu_backend *be = state;
    if (n_rows <= 0)
        return 0;
    int n_threads = cinfer_thread_pool_size(be->pool);
    if (!be->samplers || be->samplers[0].vocab != vocab) {
        free_samplers(be);
        be->samplers = calloc((size_t)n_threads, sizeof *be->samplers);
        for (int t = 0; be->samplers && t < n_threads; t++)
            if (cinfer_sampler_init(&be->samplers[t], vocab) != CINFER_OK) {
                free_samplers(be);
                break;
            }
        if (!be->samplers)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "cpu backend: cannot allocate %d samplers for %d tokens",
                                    n_threads, vocab);
    }
    struct sample_job job = {logits, vocab, rows, params, token_ids, token_logits, be->samplers};
    cinfer_thread_pool_run_chunks(be->pool, sample_part, &job, n_rows);
    return 0;
}

static void cpu_rmsnorm(void *state, float *y, const float *x, int n_rows, int dim, const float *w, float eps)
{
    struct rows_job job = {.op = ROWS_RMSNORM, .n_rows = n_rows, .row_len = (size_t)dim, .y = y, .x = x, .w = w,
                           .eps = eps};
    run_rows(state, &job);
}

static void cpu_rope(void *state, float *x, int n_tokens, int n_heads, int head_dim,
                     const struct cinfer_backend_rope *rope)
{
    struct rows_job job = {.op = ROWS_ROPE, .n_rows = n_tokens, .row_len = (size_t)n_heads * head_dim, .y = x,
                           .n_heads = n_heads, .head_dim = head_dim, .rope = rope};
    run_rows(state, &job);
}

static void cpu_silu_mul(void *state, float *gate, const float *up, size_t n)
{
    struct rows_job job = {.op = ROWS_SILU_MUL, .n_rows = (int)n, .row_len = 1, .y = gate, .x = up};
    run_rows(state, &job);
}

static void cpu_gelu_tanh_mul(void *state, float *gate, const float *up, size_t n)
{
    struct rows_job job = {.op = ROWS_GELU_TANH_MUL, .n_rows = (int)n, .row_len = 1, .y = gate, .x = up};
    run_rows(state, &job);
}

/* alpha rides in the job's eps field */
static void cpu_swiglu_oai(void *state, float *gate, const float *up, size_t n, float alpha, float limit)
{
    struct rows_job job = {.op = ROWS_SWIGLU_OAI, .n_rows = (int)n, .row_len = 1, .y = gate, .x = up, .eps = alpha,
                           .limit = limit};
    run_rows(state, &job);
}

/* factor rides in the job's eps field */
static void cpu_scale(void *state, float *x, size_t n, float factor)
{
    struct rows_job job = {.op = ROWS_SCALE, .n_rows = (int)n, .row_len = 1, .y = x, .eps = factor};
    run_rows(state, &job);
}

static void cpu_softcap(void *state, float *x, size_t n, float cap)
{
    struct rows_job job = {.op = ROWS_SOFTCAP, .n_rows = (int)n, .row_len = 1, .y = x, .eps = cap};
    run_rows(state, &job);
}

static void cpu_add(void *state, float *y, const float *x, size_t n)
{
    struct rows_job job = {.op = ROWS_ADD, .n_rows = (int)n, .row_len = 1, .y = y, .x = x};
    run_rows(state, &job);
}

static void cpu_moe_route(void *state, const float *logits, int n, int n_experts, int k, int normalize, int32_t *ids,
                          float *weights)
{
    struct rows_job job = {.op = ROWS_MOE_ROUTE, .n_rows = n, .row_len = (size_t)n_experts, .x = logits,
                           .top_k = k, .normalize = normalize, .ids_out = ids, .weights_out = weights};
    run_rows(state, &job);
}

static void cpu_gather_rows(void *state, float *out, const float *x, const int32_t *rows, int n, int dim)
{
    struct rows_job job = {.op = ROWS_GATHER, .n_rows = n, .row_len = (size_t)dim, .y = out, .x = x, .ids = rows};
    run_rows(state, &job);
}

static void cpu_scatter_add_rows(void *state, float *y, const float *x, const int32_t *rows, const float *weights,
                                 int n, int dim)
{
    /* split by columns (n_rows counts them, top_k the rows to add): a row added twice
     * is added in order by one thread */
    struct rows_job job = {.op = ROWS_SCATTER_ADD, .n_rows = dim, .row_len = (size_t)n, .y = y, .x = x, .ids = rows,
                           .row_weights = weights, .top_k = n};
    if (n < 1)
        return;
    run_rows(state, &job);
}

static void cpu_zero(void *state, float *x, size_t n)
{
    struct rows_job job = {.op = ROWS_ZERO, .n_rows = (int)n, .row_len = 1, .y = x};
    run_rows(state, &job);
}

static void cpu_add_gated(void *state, float *y, const float *x, const float *gate, int n, int dim)
{
    struct rows_job job = {.op = ROWS_ADD_GATED, .n_rows = n, .row_len = (size_t)dim, .y = y, .x = x, .w = gate};
    run_rows(state, &job);
}

struct attention_job {
    struct cpu_backend *be;
    const struct cpu_kv *kv;
    int layer;
    const float *q;
    float *out;
    const struct cinfer_backend_attn_seq *seqs;
    int n_seqs, n_heads, n_kv_heads, head_dim;
    struct cinfer_backend_attn_options opts; /* window, scale, softcap and sinks, resolved */
    const int *first_item; /* (n_seqs + 1) */
    float *kv_wide; /* sequence s's V of KV head h at kv_wide_at[s] + h * head_dim * context, then its K */
    const size_t *kv_wide_at;
};

/* Query rows one block of attention takes at a time: bounds the scores scratch at
 * ATTN_QUERY_BLOCK x context, and is the unit of work handed to threads. */
#define ATTN_QUERY_BLOCK 32
/* Floats of scratch holding a block of query rows as Q8_0 keys want them (int16 blocks). */
#define ATTN_QP_FLOATS(hd) \
    (((size_t)ATTN_QUERY_BLOCK * ((hd) / CINFER_KERNEL_Q8_BLOCK) * sizeof(struct cinfer_kernel_xblock) + 63) / 64 * 16)

/* Query rows of a sequence's KV-head group: row r is token r / group, query head
 * kv_head * group + r % group. */
static int attention_rows(const struct attention_job *job, const struct cinfer_backend_attn_seq *seq)
{
    return seq->n_tokens * (job->n_heads / job->n_kv_heads);
}

static int attention_blocks(const struct attention_job *job, const struct cinfer_backend_attn_seq *seq)
{
    return (attention_rows(job, seq) + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;
}

/* V widened to f32 of one (prefill sequence, KV head): (context, head_dim). */
static float *values_widened(const struct attention_job *job, const struct cinfer_backend_attn_seq *seq,
                             int kv_head)
{
    size_t n_ctx = (size_t)(seq->start_pos + seq->n_tokens);
    return job->kv_wide + job->kv_wide_at[seq - job->seqs] + (size_t)kv_head * job->head_dim * n_ctx;
}

/* Whether a prefill reads K widened (keys_widened) rather than page by page: every KV
 * type but Q8_0, whose keys multiply q in int16 blocks (exact products), not in f32. */
static int keys_widen(const struct cpu_kv *kv)
{
    return kv->wtype != CINFER_KW_Q8_0;
}

/* K widened to f32 of one (prefill sequence, KV head), after every KV head's V:
 * (context, head_dim). */
static float *keys_widened(const struct attention_job *job, const struct cinfer_backend_attn_seq *seq, int kv_head)
{
    return values_widened(job, seq, job->n_kv_heads + kv_head); /* the same size as a head's V */
}

/* One block of query rows [r0, r0 + ATTN_QUERY_BLOCK) of one KV head's group: every
 * query head of the group shares the block, so K and V are read once per group rather
 * than once per query head. scores = Q Kᵀ as a matmul: for a prefill chunk against K
 * widened once per sequence and KV head (keys_widened: one call over the context, each
 * K value converted once rather than once per pair of query rows), for a decode step or
 * Q8_0 keys read page by page from the cache (a page's K rows of one head are evenly
 * strided, which the matmul takes as a weight); the tile widens f16 and bf16 exactly and
 * its sums do not depend on where an output falls, so both give the same bits. Then
 * softmax, and out = P V in outer-product form (cinfer_kernel_accumulate_rows): against
 * V widened once per sequence and KV head for a prefill chunk, page by page for a decode
 * step (one token: the widening would cost as much as the product), the same FMA steps
 * either way. Masked positions get probability exactly 0. Blocks are separate work items
 * so that a single sequence's prefill spreads over every thread (3 KV heads on 2 threads
 * left one idle a third of the time). */
static void attend_block(const struct attention_job *job, const struct cinfer_backend_attn_seq *seq, int kv_head,
                         int r0, float *scratch)
{
    int hd = job->head_dim;
    int q_dim = job->n_heads * hd;
    int group = job->n_heads / job->n_kv_heads;
    int kv_dim = job->kv->layout.kv_dim;
    int pt = job->kv->layout.page_tokens;
    float scale = job->opts.scale, softcap = job->opts.softcap;
    int window = job->opts.window;
    int n_rows = attention_rows(job, seq);
    int nb = n_rows - r0 < ATTN_QUERY_BLOCK ? n_rows - r0 : ATTN_QUERY_BLOCK;
    int block_ctx = seq->start_pos + (r0 + nb - 1) / group + 1; /* the last row's positions [0, pos] */
    float *qb = scratch;                                  /* (ATTN_QUERY_BLOCK, head_dim) */
    float *ob = qb + (size_t)ATTN_QUERY_BLOCK * hd;       /* (ATTN_QUERY_BLOCK, head_dim) */
    float *vrows = ob + (size_t)ATTN_QUERY_BLOCK * hd;    /* (page_tokens, head_dim) a page's V, widened */
    void *qprep = vrows + (size_t)pt * hd;                /* q as Q8_0 K wants it (ATTN_QP_FLOATS) */
    float *scores = (float *)qprep + ATTN_QP_FLOATS(hd);  /* (ATTN_QUERY_BLOCK, block_ctx) */
    const struct cpu_kv *kv = job->kv;
    int decode = seq->n_tokens == 1;
    for (int r = 0; r < nb; r++) {
        int t = (r0 + r) / group, h = kv_head * group + (r0 + r) % group;
        memcpy(qb + (size_t)r * hd, job->q + (size_t)(seq->row + t) * q_dim + (size_t)h * hd,
               (size_t)hd * sizeof(float));
    }
    /* a sliding window: the block's first row sees nothing before first_seen, so pages
     * wholly before it are neither read nor scored */
    int first_seen = window > 0 ? seq->start_pos + r0 / group - window + 1 : 0;
    int first_page = first_seen > 0 ? first_seen / pt : 0;
    if (kv->wtype == CINFER_KW_Q8_0) /* q in int16 blocks against the int8 K blocks (exact products) */
        cinfer_kernel_prepare_rows(CINFER_KW_Q8_0, qb, hd, 0, nb, qprep);
    if (!decode && keys_widen(kv)) {
        int p0 = first_page * pt;
        cinfer_kernel_matmul(qb, NULL, nb, hd, keys_widened(job, seq, kv_head) + (size_t)p0 * hd, CINFER_KW_F32,
                             (size_t)hd * sizeof(float), 0, block_ctx - p0, scores + p0, block_ctx);
    } else {
        for (int page = first_page; page * pt < block_ctx; page++) {
            int p0 = page * pt, p1 = p0 + pt < block_ctx ? p0 + pt : block_ctx;
            /* a page's K rows of one head are row_bytes apart: a weight matrix of that stride */
            const uint8_t *k =
                kv_row(kv, job->layer, seq->page_table[page], 0, 0) + (size_t)kv_head * kv->head_bytes;
            cinfer_kernel_matmul(qb, kv->wtype == CINFER_KW_Q8_0 ? qprep : NULL, nb, hd, k, kv->wtype,
                                 kv->row_bytes, 0, p1 - p0, scores + p0, block_ctx); /* (nb, block_ctx) */
        }
    }
    for (int r = 0; r < nb; r++) {
        float *row = scores + (size_t)r * block_ctx;
        int valid = seq->start_pos + (r0 + r) / group + 1;
        int lo = window > 0 && valid > window ? valid - window : 0; /* (pos - window, pos] */
        for (int p = lo; p < valid; p++)
            row[p] *= scale;
        if (softcap > 0.0f)
            for (int p = lo; p < valid; p++)
                row[p] = softcap * tanhf(row[p] / softcap);
        if (job->opts.sinks) /* gpt-oss: query head h's sink joins the denominator */
            cinfer_kernel_softmax_sink(row + lo, valid - lo, job->opts.sinks[kv_head * group + (r0 + r) % group]);
        else
            cinfer_kernel_softmax(row + lo, valid - lo);
        memset(row, 0, (size_t)lo * sizeof(float));
        memset(row + valid, 0, (size_t)(block_ctx - valid) * sizeof(float));
    }
    memset(ob, 0, (size_t)nb * hd * sizeof(float));
    if (!decode) {
        int p0 = first_page * pt;
        cinfer_kernel_accumulate_rows(ob, nb, hd, hd, scores + p0, block_ctx,
                                      values_widened(job, seq, kv_head) + (size_t)p0 * hd, (size_t)hd,
                                      block_ctx - p0);
    }
    for (int page = first_page; decode && page * pt < block_ctx; page++) {
        int p0 = page * pt, p1 = p0 + pt < block_ctx ? p0 + pt : block_ctx;
        const uint8_t *page_v = kv_row(kv, job->layer, seq->page_table[page], 1, 0);
        if (kv->wtype == CINFER_KW_F32) { /* a page's V rows are kv_dim floats apart */
            const float *v = (const float *)(const void *)page_v + (size_t)kv_head * hd;
            cinfer_kernel_accumulate_rows(ob, nb, hd, hd, scores + p0, block_ctx, v, (size_t)kv_dim, p1 - p0);
            continue;
        }
        for (int p = 0; p < p1 - p0; p++) /* widened first, then the same accumulation */
            kv_head_to_f32(kv, page_v + (size_t)p * kv->row_bytes, kv_head, vrows + (size_t)p * hd);
        cinfer_kernel_accumulate_rows(ob, nb, hd, hd, scores + p0, block_ctx, vrows, (size_t)hd, p1 - p0);
    }
    for (int r = 0; r < nb; r++) {
        int t = (r0 + r) / group, h = kv_head * group + (r0 + r) % group;
        memcpy(job->out + (size_t)(seq->row + t) * q_dim + (size_t)h * hd, ob + (size_t)r * hd,
               (size_t)hd * sizeof(float));
    }
}

/* Before the blocks of a prefill chunk: V of one (sequence, KV head) widened and (where
 * keys_widen) its K, for all of that pair's blocks to share: from the first page any
 * block reads (attend_block's first_page; a sliding window's chunk reads none before its
 * first query's window) to the end of the context. */
static void widen_context(void *arg, int item, int thread)
{
    const struct attention_job *job = arg;
    (void)thread;
    const struct cinfer_backend_attn_seq *seq = &job->seqs[item / job->n_kv_heads];
    if (seq->n_tokens == 1)
        return;
    const struct cpu_kv *kv = job->kv;
    int kv_head = item % job->n_kv_heads, hd = job->head_dim, pt = kv->layout.page_tokens;
    int n_ctx = seq->start_pos + seq->n_tokens;
    int first = job->opts.window > 0 && seq->start_pos - job->opts.window + 1 > 0
                    ? seq->start_pos - job->opts.window + 1 : 0;
    float *v = values_widened(job, seq, kv_head);                          /* (n_ctx, hd) */
    float *k = keys_widen(kv) ? keys_widened(job, seq, kv_head) : NULL; /* (n_ctx, hd) */
    for (int p = first / pt * pt; p < n_ctx; p++) {
        int page = seq->page_table[p / pt];
        kv_head_to_f32(kv, kv_row(kv, job->layer, page, 1, p % pt), kv_head, v + (size_t)p * hd);
        if (k)
            kv_head_to_f32(kv, kv_row(kv, job->layer, page, 0, p % pt), kv_head, k + (size_t)p * hd);
    }
}

/* Work items are (sequence, KV head, block of query rows), handed out as threads ask
 * (blocks differ in cost: later ones see more context). Sequence s owns items
 * [first_item[s], first_item[s + 1]), KV head by KV head. */
static void attention_part(void *arg, int item, int thread)
{
    struct attention_job *job = arg;
    float *scratch = job->be->attn_scratch + (size_t)thread * job->be->attn_floats_per_thread;
    int lo = 0, hi = job->n_seqs - 1; /* the last sequence whose first item is <= item */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (job->first_item[mid] <= item)
            lo = mid;
        else
            hi = mid - 1;
    }
    const struct cinfer_backend_attn_seq *seq = &job->seqs[lo];
    int within = item - job->first_item[lo], blocks = attention_blocks(job, seq);
    attend_block(job, seq, within / blocks, (within % blocks) * ATTN_QUERY_BLOCK, scratch);
}

static int cpu_attention_windowed(void *state, void *kv, int layer, const float *q, float *out,
                                  const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads,
                                  int n_kv_heads, int head_dim, const struct cinfer_backend_attn_options *opts,
                                  struct cinfer_error *err)
{
    struct cpu_backend *be = state;
    size_t max_ctx = 1;
    for (int s = 0; s < n_seqs; s++)
        if ((size_t)(seqs[s].start_pos + seqs[s].n_tokens) > max_ctx)
            max_ctx = (size_t)(seqs[s].start_pos + seqs[s].n_tokens);
    /* attend_block's scratch */
    const struct cpu_kv *kvs = kv;
    size_t floats = max_ctx * ATTN_QUERY_BLOCK + 2 * (size_t)ATTN_QUERY_BLOCK * head_dim +
                    (size_t)kvs->layout.page_tokens * head_dim + ATTN_QP_FLOATS(head_dim);
    if (floats > be->attn_floats_per_thread) {
        /* grows to the longest context seen so far */
        size_t bytes = floats * (size_t)cinfer_thread_pool_size(be->pool) * sizeof(float);
        float *grown = realloc(be->attn_scratch, bytes);
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                    "cpu backend: cannot allocate attention scratch for a %zu-token context "
                                    "(%zu bytes)",
                                    max_ctx, bytes);
        be->attn_scratch = grown;
        be->attn_floats_per_thread = floats;
    }
    if (n_seqs > be->attn_item_seqs) {
        int *first = realloc(be->attn_first_item, sizeof(int) * ((size_t)n_seqs + 1));
        if (first)
            be->attn_first_item = first;
        size_t *at = realloc(be->attn_kv_wide_at, sizeof(size_t) * (size_t)n_seqs);
        if (at)
            be->attn_kv_wide_at = at;
        if (!first || !at)
            return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                    "cpu backend: cannot allocate attention work for %d sequences",
                                    n_seqs);
        be->attn_item_seqs = n_seqs;
    }
    size_t wide_floats = 0;
    for (int s = 0; s < n_seqs; s++) {
        be->attn_kv_wide_at[s] = wide_floats;
        if (seqs[s].n_tokens > 1) /* V widened, and K where keys_widen */
            wide_floats += (keys_widen(kvs) ? 2 : 1) * (size_t)n_kv_heads * head_dim *
                         (size_t)(seqs[s].start_pos + seqs[s].n_tokens);
    }
    if (wide_floats > be->attn_kv_wide_floats) {
        float *grown = realloc(be->attn_kv_wide, wide_floats * sizeof(float));
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                    "cpu backend: cannot allocate %zu bytes for the prefill's keys and values widened",
                                    wide_floats * sizeof(float));
        be->attn_kv_wide = grown;
        be->attn_kv_wide_floats = wide_floats;
    }
    struct cinfer_backend_attn_options resolved = *opts;
    if (!(resolved.scale > 0.0f))
        resolved.scale = 1.0f / sqrtf((float)head_dim);
    if (resolved.window < 0)
        resolved.window = 0;
    struct attention_job job = {be, kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, resolved,
                                be->attn_first_item, be->attn_kv_wide, be->attn_kv_wide_at};
    int items = 0;
    for (int s = 0; s < n_seqs; s++) {
        be->attn_first_item[s] = items;
        items += n_kv_heads * attention_blocks(&job, &seqs[s]);
    }
    be->attn_first_item[n_seqs] = items;
    if (wide_floats > 0)
        cinfer_thread_pool_run_chunks(be->pool, widen_context, &job, n_seqs * n_kv_heads);
    cinfer_thread_pool_run_chunks(be->pool, attention_part, &job, items);
    return 0;
}

static int cpu_attention(void *state, void *kv, int layer, const float *q, float *out,
                         const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                         int head_dim, struct cinfer_error *err)
{
    struct cinfer_backend_attn_options plain = {0, 0.0f, 0.0f, NULL};
    return cpu_attention_windowed(state, kv, layer, q, out, seqs, n_seqs, n_heads, n_kv_heads, head_dim, &plain,
                                  err);
}

static int cpu_weight_prepare(void *state, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                              struct cinfer_error *err)
{
    struct cpu_backend *be = state;
    return cinfer_cpu_weights_prepare(&be->weights, be->pool, w, out, err);
}

static void cpu_weight_release(void *state, const struct cinfer_backend_weight *w)
{
    struct cpu_backend *be = state;
    cinfer_cpu_weights_release(&be->weights, w);
}

static const struct cinfer_backend_ops cpu_ops = {
    .version = CINFER_BACKEND_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_backend_ops),
    .name = CINFER_CPU_BACKEND_NAME,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .copy = cpu_copy,
    .download = cpu_copy,
    .kv_create = cpu_kv_create,
    .kv_destroy = cpu_kv_destroy,
    .kv_write = cpu_kv_write,
    .embedding = cpu_embedding,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .silu_mul = cpu_silu_mul,
    .add = cpu_add,
    .attention = cpu_attention,
    .weight_prepare = cpu_weight_prepare,
    .weight_release = cpu_weight_release,
    .attention_windowed = cpu_attention_windowed,
    .gelu_tanh_mul = cpu_gelu_tanh_mul,
    .scale = cpu_scale,
    .softcap = cpu_softcap,
    .moe_route = cpu_moe_route,
    .gather_rows = cpu_gather_rows,
    .scatter_add_rows = cpu_scatter_add_rows,
    .zero = cpu_zero,
    .query = cpu_query,
    .create_on = cpu_create_on,
    .status = cpu_status,
    .upload = cpu_copy,
    .add_gated = cpu_add_gated,
    .swiglu_oai = cpu_swiglu_oai,
    .matmul_grouped = cpu_matmul_grouped,
    .logits_top = cpu_logits_top,
    .sample = cpu_sample,
};

const struct cinfer_backend_ops *cinfer_cpu_backend_ops(void)
{
    return &cpu_ops;
}

/* The CPU backend's plugin descriptor: listed and opened by the loader like a loadable
 * plugin's, but part of the core (not exported). */
static const struct cinfer_plugin_descriptor cpu_descriptor = {
    CINFER_PLUGIN_ABI_VERSION, sizeof(struct cinfer_plugin_descriptor), CINFER_PLUGIN_KIND_BACKEND,
    CINFER_CPU_BACKEND_NAME, CINFER_VERSION, &cpu_ops};

const struct cinfer_plugin_descriptor *cinfer_cpu_backend_descriptor(void)
{
    return &cpu_descriptor;
}
