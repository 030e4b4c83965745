/* kernels/cuda/attention.cu — causal attention over the device's KV pages, for decode
 * steps and prefill chunks alike, every KV type, grouped-query heads, a sliding window,
 * a score scale, soft-capping and attention sinks (attention_windowed of
 * include/cinfer/backend.h).
 *
 * One block per (query head, query token, sequence). Its warps take the positions the
 * query sees in turn (warp w: first + w, first + w + WARPS, ...); a warp holds the
 * query and its output accumulator spread over its lanes (dimension lane + 32 j) and
 * keeps its own online softmax (running max m, sum l): per position one dot product
 * reduced by shuffles, one rescale. The warps' states then merge through shared memory,
 * with the sink's logit joining the denominator only. Everything is f32; nothing is kept
 * per position, so a context of any length needs no scratch. Positions are read through
 * the sequence's page table with kv_format.cuh's functions; the softmax steps are
 * attention_math.cuh's. tests/test_cuda_kernels_host.c runs both, in this kernel's
 * order, against the CPU backend. */
#include "attention_math.cuh"
#include "cuda_kernels.h"
#include "kv_format.cuh"

#define WARP 32
#define ATTN_MAX_HEAD_DIM 256
#define ATTN_DIMS_PER_LANE (ATTN_MAX_HEAD_DIM / WARP)
#define ATTN_MAX_GRID_YZ 65535 /* gridDim.y and gridDim.z limits: more tokens or sequences loop */

/* WARPS per block: few for short contexts (a prefill chunk has blocks enough), more for
 * long ones, where a decode step's few blocks would otherwise walk the context alone */
template <int WARPS>
static __global__ void __launch_bounds__(WARPS * WARP)
    attention_kernel(struct cinfer_cuda_kv kv, int layer, const float *q, float *out,
                     const struct cinfer_cuda_attn_seq *seqs, const int32_t *page_tables, int n_seqs, int n_heads,
                     int n_kv_heads, int head_dim, int window, float scale, float softcap, const float *sinks)
{
    __shared__ float part_acc[WARPS][ATTN_MAX_HEAD_DIM]; /* each warp's unnormalised output */
    __shared__ float part_m[WARPS], part_l[WARPS];       /* and its softmax max and sum */
    int h = blockIdx.x;
    int kv_head = h / (n_heads / n_kv_heads);
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    size_t q_dim = (size_t)n_heads * (size_t)head_dim;
    int head_first = kv_head * head_dim; /* the KV head's first value in a K or V row */
    const uint8_t *k_base = (const uint8_t *)kv.k, *v_base = (const uint8_t *)kv.v;
    for (int s = blockIdx.z; s < n_seqs; s += gridDim.z) {
        struct cinfer_cuda_attn_seq seq = seqs[s];
        const int32_t *page_table = page_tables + seq.page_table_at; /* (seq.n_pages) */
        for (int t = blockIdx.y; t < seq.n_tokens; t += gridDim.y) {
            int pos = seq.start_pos + t;
            size_t row = (size_t)(seq.row + t);
            const float *qh = q + row * q_dim + (size_t)h * head_dim; /* (head_dim) */
            float qr[ATTN_DIMS_PER_LANE], acc[ATTN_DIMS_PER_LANE];
#pragma unroll
            for (int j = 0; j < ATTN_DIMS_PER_LANE; j++) {
                int d = lane + WARP * j;
                qr[j] = d < head_dim ? qh[d] : 0.0f;
                acc[j] = 0.0f;
            }
            float m = -INFINITY, l = 0.0f;
            for (int p = cinfer_cu_attn_first(pos, window) + warp; p <= pos; p += WARPS) {
                int page, offset;
                cinfer_cu_kv_position(page_table, kv.page_tokens, p, &page, &offset);
                size_t at = cinfer_cu_kv_row_at(kv.n_pages, kv.page_tokens, kv.row_bytes, layer, page, offset);
                float dot = 0.0f;
#pragma unroll
                for (int j = 0; j < ATTN_DIMS_PER_LANE; j++) {
                    int d = lane + WARP * j;
                    if (d < head_dim)
                        dot += qr[j] * cinfer_cu_kv_value(k_base + at, kv.dtype, head_first + d);
                }
                for (int o = WARP / 2; o > 0; o /= 2)
                    dot += __shfl_xor_sync(0xffffffffu, dot, o);
                float weight, corr;
                cinfer_cu_softmax_step(&m, &l, cinfer_cu_attn_score(dot, scale, softcap), &weight, &corr);
#pragma unroll
                for (int j = 0; j < ATTN_DIMS_PER_LANE; j++) {
                    int d = lane + WARP * j;
                    if (d < head_dim)
                        acc[j] = acc[j] * corr + weight * cinfer_cu_kv_value(v_base + at, kv.dtype, head_first + d);
                }
            }
#pragma unroll
            for (int j = 0; j < ATTN_DIMS_PER_LANE; j++) {
                int d = lane + WARP * j;
                if (d < head_dim)
                    part_acc[warp][d] = acc[j];
            }
            if (lane == 0) {
                part_m[warp] = m;
                part_l[warp] = l;
            }
            __syncthreads();
            float big, total; /* every thread merges alike, in the same order */
            cinfer_cu_softmax_merge(part_m, part_l, WARPS, sinks != NULL, sinks ? sinks[h] : 0.0f, &big, &total);
            float *oh = out + row * q_dim + (size_t)h * head_dim; /* (head_dim) */
            for (int d = threadIdx.x; d < head_dim; d += WARPS * WARP) {
                float o = 0.0f;
                for (int w = 0; w < WARPS; w++)
                    o += part_acc[w][d] * expf(part_m[w] - big);
                oh[d] = o / total;
            }
            __syncthreads(); /* the shared state is the next token's */
        }
    }
}

template <int WARPS>
static void launch_attention(cudaStream_t stream, dim3 grid, const struct cinfer_cuda_kv *kv, int layer,
                             const float *q, float *out, const struct cinfer_cuda_attn_seq *seqs,
                             const int32_t *page_tables, int n_seqs, int n_heads, int n_kv_heads, int head_dim,
                             int window, float scale, float softcap, const float *sinks)
{
    attention_kernel<WARPS><<<grid, WARPS * WARP, 0, stream>>>(*kv, layer, q, out, seqs, page_tables, n_seqs, n_heads,
                                                               n_kv_heads, head_dim, window, scale, softcap, sinks);
}

/* kv is host memory (the plugin's description of its device pages), passed by value */
extern "C" cudaError_t cinfer_cuda_attention(cudaStream_t stream, const struct cinfer_cuda_kv *kv, int layer,
                                             const float *q, float *out, const struct cinfer_cuda_attn_seq *seqs,
                                             const int32_t *page_tables, int n_seqs, int max_tokens, int max_context,
                                             int n_heads, int n_kv_heads, int head_dim, int window, float scale,
                                             float softcap, const float *sinks)
{
    if (n_seqs <= 0 || max_tokens <= 0 || n_heads <= 0)
        return cudaSuccess;
    if (head_dim <= 0 || head_dim > ATTN_MAX_HEAD_DIM || n_kv_heads <= 0 || n_heads % n_kv_heads != 0)
        return cudaErrorInvalidValue; /* the plugin checks these at load and names them */
    dim3 grid((unsigned)n_heads, (unsigned)(max_tokens < ATTN_MAX_GRID_YZ ? max_tokens : ATTN_MAX_GRID_YZ),
              (unsigned)(n_seqs < ATTN_MAX_GRID_YZ ? n_seqs : ATTN_MAX_GRID_YZ));
    window = window > 0 ? window : 0;
    /* the positions a query sees at most: its window, or the whole context */
    int seen = window > 0 && window < max_context ? window : max_context;
    if (seen >= 512)
        launch_attention<16>(stream, grid, kv, layer, q, out, seqs, page_tables, n_seqs, n_heads, n_kv_heads,
                             head_dim, window, scale, softcap, sinks);
    else if (seen >= 128)
        launch_attention<8>(stream, grid, kv, layer, q, out, seqs, page_tables, n_seqs, n_heads, n_kv_heads, head_dim,
                            window, scale, softcap, sinks);
    else
        launch_attention<4>(stream, grid, kv, layer, q, out, seqs, page_tables, n_seqs, n_heads, n_kv_heads, head_dim,
                            window, scale, softcap, sinks);
    return cudaGetLastError();
}
