/* The CUDA kernels' host-and-device code, checked without a GPU: the .cuh headers of
 * kernels/cuda are written in the common subset of C and CUDA C++, and the kernels call
 * exactly these functions, so what is proved here holds for them on the device up to
 * the device's own rounding (fused multiply-adds, the order of a warp's sums).
 *   - f16 and bf16 narrowing (round to nearest even, NaN kept) give the CPU's bits on
 *     every f16 / bf16 value, every tie between neighbours and a bit either side, and
 *     random bit patterns; f16 widening on all 65536 values.
 *   - q8_0 KV blocks are the CPU backend's bytes (kernels/quant.c), ties included.
 *   - Paged attention as attention.cu runs it (KV written unit by unit as kv_cache.cu
 *     does, positions walked through shuffled page tables, 4, 8 or 16 warps of 32 lanes
 *     each with its online softmax, the lanes' dot product summed in the shuffle tree's
 *     order, then the warps merged) against the CPU backend's attention_windowed on every KV
 *     type, window, scale and soft-cap, a prefill chunk and decode steps, layer 1 of 2;
 *     with attention sinks (which the CPU backend lacks) against a float64 loop.
 *   - The router row (moe.cu's) against the CPU backend's moe_route, bit for bit.
 *   - The sample op's row (sample.cu's, sample_row.cuh run on 256 threads in turn) draws
 *     the host sampler's token given the same uniform number, and leaves the row divided
 *     by the temperature as the host does, on 1800 random rows (ties, -inf, signed
 *     zeros) under temperature, top-k, top-p and min-p; and the host's rules where a
 *     running total lands exactly on a cut.
 * What it cannot show is the launch itself (grid, barriers, shuffles on real lanes):
 * that is the conformance suite's, on a machine with a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_math.cuh"
#include "backend/cpu_backend.h"
#include "cuda_kernels.h"
#include "kernels.h"
#include "kv_format.cuh"
#include "moe_route.cuh"
#include "sample_row.cuh"
#include "scheduler/sampler.h"
#include "support/random_model.h"
#include "support/runner.h"

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static float float_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static int narrowing_checked, narrowing_wrong;

/* f32 to f16 and to bf16 here and in kernels/convert_scalar.c: the same bits (counted,
 * not asserted one by one: check's asserts write to a pipe, and there are millions) */
static void check_narrowing(float f)
{
    uint16_t h = cinfer_cu_f32_to_f16(f), h_cpu = cinfer_kernel_f32_to_f16(f);
    uint16_t b = cinfer_cu_f32_to_bf16(f), b_cpu = cinfer_kernel_f32_to_bf16(f);
    if ((h != h_cpu || b != b_cpu) && narrowing_wrong++ < 10)
        printf("%a (bits %08x): f16 %04x, cpu %04x; bf16 %04x, cpu %04x\n", (double)f, bits_of(f), h, h_cpu, b,
               b_cpu);
    narrowing_checked++;
}

START_TEST(f16_and_bf16_conversions_are_the_cpus_bits)
{
    int widening_wrong = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        widening_wrong += bits_of(cinfer_cu_f16_to_f32((uint16_t)h)) != bits_of(cinfer_kernel_f16_to_f32((uint16_t)h));
        widening_wrong +=
            bits_of(cinfer_cu_bf16_to_f32((uint16_t)h)) != bits_of(cinfer_kernel_bf16_to_f32((uint16_t)h));
    }
    ck_assert_int_eq(widening_wrong, 0);
    /* every f16 value, the tie between it and the next one up, and a step either side */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (int sign = 0; sign < 2; sign++) {
            float lo = cinfer_kernel_f16_to_f32((uint16_t)(h | (uint32_t)sign << 15));
            float hi = cinfer_kernel_f16_to_f32((uint16_t)((h + 1) | (uint32_t)sign << 15));
            float tie = (float)(((double)lo + hi) / 2); /* exact: f16 has 11 bits, f32 24 */
            check_narrowing(lo);
            check_narrowing(tie);
            check_narrowing(nextafterf(tie, 0.0f));
            check_narrowing(nextafterf(tie, sign ? -INFINITY : INFINITY));
        }
    }
    /* every bf16 value, its tie with the next (low half 0x8000), a step either side, the top */
    for (uint32_t b = 0; b < 65536; b++) {
        const uint32_t lows[] = {0, 0x7fff, 0x8000, 0x8001, 0xffff};
        for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++)
            check_narrowing(float_of(b << 16 | lows[i]));
    }
    const float specials[] = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e30f, INFINITY, -INFINITY,
                              0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-149f, -0x1p-149f, 3.4e38f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        check_narrowing(specials[i]);
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa5a5a5u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
        check_narrowing(float_of(nans[i]));
    uint64_t rng = 3;
    for (int i = 0; i < 1000000; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        check_narrowing(float_of((uint32_t)(rng >> 32)));
    }
    printf("f16/bf16 narrowing: %d values, %d not the CPU's bits\n", narrowing_checked, narrowing_wrong);
    ck_assert_int_eq(narrowing_wrong, 0);
}
END_TEST

/* One q8_0 block here and in kernels/quant.c: the same 34 bytes. */
static void check_q8_block(const float *x)
{
    uint8_t mine[CINFER_CUDA_Q8_BLOCK_BYTES], cpu[CINFER_CUDA_Q8_BLOCK_BYTES];
    cinfer_cu_quantize_q8_0_block(x, mine);
    cinfer_kernel_quantize_q8_0(x, CINFER_CUDA_Q8_BLOCK, cpu);
    if (memcmp(mine, cpu, sizeof cpu) != 0) /* one assert per block, not per byte: there are many */
        for (int i = 0; i < CINFER_CUDA_Q8_BLOCK_BYTES; i++)
            ck_assert_msg(mine[i] == cpu[i], "q8_0 byte %d: %02x, cpu %02x (x[0] %a)", i, mine[i], cpu[i],
                          (double)x[0]);
}

START_TEST(q8_0_blocks_are_the_cpus_bytes)
{
    float x[CINFER_CUDA_Q8_BLOCK];
    uint64_t rng = 7;
    int blocks = 0;
    /* scales from below f16's range (d flushes to 0) to above it (d is inf); not below
     * 1e-36, where 1 / d overflows and both sides convert inf to int8 (undefined) */
    for (int e = -34; e <= 38; e++)
        for (int r = 0; r < 200; r++, blocks++) {
            for (int i = 0; i < CINFER_CUDA_Q8_BLOCK; i++)
                x[i] = (float)pow(10.0, e) * random_uniform(&rng);
            check_q8_block(x);
        }
    /* ties: max 127 gives d 1, so x + 0.5 rounds away from zero, as roundf does */
    for (int i = 0; i < CINFER_CUDA_Q8_BLOCK; i++)
        x[i] = (float)(i - 16) + 0.5f;
    x[31] = 127.0f;
    check_q8_block(x);
    for (int i = 0; i < CINFER_CUDA_Q8_BLOCK; i++)
        x[i] = i % 2 ? -0.0f : 0.0f; /* d 0: every q 0 */
    check_q8_block(x);
    for (int i = 0; i < CINFER_CUDA_Q8_BLOCK; i++)
        x[i] = (float)(i % 3 - 1) * 0x1p-120f; /* d a subnormal float, stored as f16 0, q still ±127 */
    check_q8_block(x);
    /* whole rows through the unit encoder, as kv_cache.cu writes them */
    enum { KV_DIM = 4 * 64 };
    float row[KV_DIM];
    uint8_t mine[KV_DIM / 32 * 34], cpu[KV_DIM / 32 * 34];
    for (int r = 0; r < 100; r++) {
        for (int i = 0; i < KV_DIM; i++)
            row[i] = (float)(r + 1) * random_uniform(&rng);
        for (int u = 0; u < cinfer_cu_kv_row_units(CINFER_CUDA_KV_Q8_0, KV_DIM); u++)
            cinfer_cu_kv_encode_unit(row, mine, CINFER_CUDA_KV_Q8_0, u);
        cinfer_kernel_quantize_q8_0(row, KV_DIM, cpu);
        ck_assert_mem_eq(mine, cpu, sizeof cpu);
    }
    ck_assert_uint_eq(cinfer_cu_kv_row_bytes(CINFER_CUDA_KV_Q8_0, KV_DIM), sizeof cpu);
    printf("q8_0: %d random blocks, ties, zeros, a subnormal d and 100 rows: the CPU's bytes\n", blocks);
}
END_TEST

/* The attention case: three sequences (a prefill chunk after cached positions, a decode
 * step, a longer chunk whose window starts pages in), each with its own shuffled pages. */
#define AT_PAGE 16
#define AT_PAGES 24
#define AT_LAYERS 2
#define AT_SEQS 3
#define AT_MAX_HD 128
static const int at_starts[AT_SEQS] = {21, 40, 150}, at_lens[AT_SEQS] = {9, 1, 7};

struct at_shape {
    int n_heads, n_kv_heads, head_dim;
};

/* The device's KV pages in host memory, written as kv_write_kernel writes them: one
 * item per (token, K or V, unit), each encoding its unit into the slot's row. */
static void host_kv_write(const struct cinfer_cuda_kv *kv, int layer, const float *k, const float *v, int n,
                          const int32_t *slots)
{
    int units = cinfer_cu_kv_row_units(kv->dtype, kv->kv_dim);
    for (size_t item = 0; item < (size_t)n * 2 * (size_t)units; item++) {
        int u = (int)(item % (size_t)units);
        size_t token_which = item / (size_t)units;
        int which = (int)(token_which % 2);
        size_t i = token_which / 2;
        size_t at = cinfer_cu_kv_row_at(kv->n_pages, kv->page_tokens, kv->row_bytes, layer, slots[i] / kv->page_tokens,
                                        slots[i] % kv->page_tokens);
        cinfer_cu_kv_encode_unit((which ? v : k) + i * (size_t)kv->kv_dim, (uint8_t *)(which ? kv->v : kv->k) + at,
                                 kv->dtype, u);
    }
}

enum { MAX_WARPS = 16, LANES = 32 };

/* One (sequence, token, head) block of attention_kernel<warps>, lane by lane: out (head_dim). */
static void host_attention_block(int warps, const struct cinfer_cuda_kv *kv, int layer, const float *qh,
                                 const int32_t *pages, int pos, int kv_head, int head_dim, int window, float scale,
                                 float softcap, const float *sink, float *out)
{
    static float acc[MAX_WARPS][AT_MAX_HD];
    float m[MAX_WARPS], l[MAX_WARPS];
    int head_first = kv_head * head_dim;
    for (int w = 0; w < warps; w++) {
        m[w] = -INFINITY;
        l[w] = 0.0f;
        memset(acc[w], 0, sizeof acc[w]);
        for (int p = cinfer_cu_attn_first(pos, window) + w; p <= pos; p += warps) {
            int page, offset;
            cinfer_cu_kv_position(pages, kv->page_tokens, p, &page, &offset);
            size_t at = cinfer_cu_kv_row_at(kv->n_pages, kv->page_tokens, kv->row_bytes, layer, page, offset);
            const uint8_t *krow = (const uint8_t *)kv->k + at, *vrow = (const uint8_t *)kv->v + at;
            float lane_dot[LANES], next[LANES];
            for (int lane = 0; lane < LANES; lane++) {
                lane_dot[lane] = 0.0f;
                for (int d = lane; d < head_dim; d += LANES)
                    lane_dot[lane] += qh[d] * cinfer_cu_kv_value(krow, kv->dtype, head_first + d);
            }
            for (int o = LANES / 2; o > 0; o /= 2) { /* __shfl_xor_sync's butterfly */
                for (int lane = 0; lane < LANES; lane++)
                    next[lane] = lane_dot[lane] + lane_dot[lane ^ o];
                memcpy(lane_dot, next, sizeof next);
            }
            float weight, corr;
            cinfer_cu_softmax_step(&m[w], &l[w], cinfer_cu_attn_score(lane_dot[0], scale, softcap), &weight, &corr);
            for (int d = 0; d < head_dim; d++)
                acc[w][d] = acc[w][d] * corr + weight * cinfer_cu_kv_value(vrow, kv->dtype, head_first + d);
        }
    }
    float big, total;
    cinfer_cu_softmax_merge(m, l, warps, sink != NULL, sink ? *sink : 0.0f, &big, &total);
    for (int d = 0; d < head_dim; d++) {
        float o = 0.0f;
        for (int w = 0; w < warps; w++)
            o += acc[w][d] * expf(m[w] - big);
        out[d] = o / total;
    }
}

/* K or V (n, kv_dim) as the KV type stores it, widened back: by the CPU's own kernels */
static void kv_rounded(uint32_t dtype, const float *x, int n, int kv_dim, double *out)
{
    float row[4 * AT_MAX_HD];
    uint8_t q8[4 * AT_MAX_HD / 32 * 34];
    for (int i = 0; i < n; i++) {
        const float *src = x + (size_t)i * kv_dim;
        if (dtype == CINFER_CUDA_KV_Q8_0) {
            cinfer_kernel_quantize_q8_0(src, kv_dim, q8);
            cinfer_kernel_dequantize_row(CINFER_KW_Q8_0, q8, kv_dim, row);
        }
        for (int d = 0; d < kv_dim; d++)
            out[(size_t)i * kv_dim + d] =
                dtype == CINFER_CUDA_KV_F16    ? cinfer_kernel_f16_to_f32(cinfer_kernel_f32_to_f16(src[d]))
                : dtype == CINFER_CUDA_KV_BF16 ? cinfer_kernel_bf16_to_f32(cinfer_kernel_f32_to_bf16(src[d]))
                : dtype == CINFER_CUDA_KV_Q8_0 ? row[d]
                                               : src[d];
    }
}

/* One query's attention in float64 over positions' rounded K and V (n_ctx, kv_dim), with a sink */
static void attention_f64(const float *qh, const double *k, const double *v, int pos, int kv_dim, int kv_head,
                          int head_dim, int window, float scale, float softcap, const float *sink, double *out)
{
    static double score[AT_PAGE * AT_PAGES];
    int lo = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    double max = sink ? *sink : -INFINITY, sum = 0;
    for (int p = lo; p <= pos; p++) {
        double dot = 0;
        for (int d = 0; d < head_dim; d++)
            dot += (double)qh[d] * k[(size_t)p * kv_dim + kv_head * head_dim + d];
        dot *= scale;
        if (softcap > 0.0f)
            dot = softcap * tanh(dot / softcap);
        score[p] = dot;
        max = dot > max ? dot : max;
    }
    for (int p = lo; p <= pos; p++)
        sum += score[p] = exp(score[p] - max);
    if (sink)
        sum += exp(*sink - max);
    for (int d = 0; d < head_dim; d++) {
        double acc = 0;
        for (int p = lo; p <= pos; p++)
            acc += score[p] / sum * v[(size_t)p * kv_dim + kv_head * head_dim + d];
        out[d] = acc;
    }
}

static double worst_relative(const float *got, const double *want, size_t n)
{
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        diff = d > diff || isnan(d) ? (isnan(d) ? INFINITY : d) : diff;
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    }
    return diff / scale;
}

START_TEST(paged_attention_steps_match_the_cpu_backend)
{
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(ops->create(2, &be, &err), 0);
    const struct at_shape shapes[] = {{8, 2, 64}, {4, 4, 96}, {4, 1, 128}};
    const struct cinfer_backend_attn_options opts[] = {{0, 0.0f, 0.0f, NULL}, {8, 0.0f, 0.0f, NULL},
                                                       {0, 0.05f, 30.0f, NULL}, {1, 0.0f, 0.0f, NULL},
                                                       {20, 0.2f, 1.5f, NULL}};
    const double tols[] = {1e-5, 1e-4, 1e-4, 1e-4}; /* the conformance suite's, by KV type */
    const char *const type_names[] = {"f32", "f16", "bf16", "q8_0"};
    uint64_t rng = 19;
    int32_t pages[AT_PAGES]; /* sequence s's page table: pages + first_page[s] */
    for (int i = 0; i < AT_PAGES; i++)
        pages[i] = (i * 7 + 3) % AT_PAGES; /* shuffled: 7 is prime to 24 */
    int first_page[AT_SEQS], rows = 0;
    for (int s = 0, at = 0; s < AT_SEQS; s++) {
        first_page[s] = at;
        at += (at_starts[s] + at_lens[s] + AT_PAGE - 1) / AT_PAGE;
        ck_assert_int_le(at, AT_PAGES);
        rows += at_lens[s];
    }
    double worst_cpu[4] = {0}, worst_f64[4] = {0};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (uint32_t dtype = 0; dtype < 4; dtype++) {
            struct at_shape a = shapes[sh];
            int kv_dim = a.n_kv_heads * a.head_dim, q_dim = a.n_heads * a.head_dim, group = a.n_heads / a.n_kv_heads;
            size_t row_bytes = cinfer_cu_kv_row_bytes(dtype, kv_dim);
            size_t kv_bytes = (size_t)AT_LAYERS * AT_PAGES * AT_PAGE * row_bytes;
            struct cinfer_cuda_kv dev = {calloc(1, kv_bytes), calloc(1, kv_bytes), AT_LAYERS, AT_PAGES, AT_PAGE,
                                         kv_dim, a.head_dim, dtype, row_bytes};
            struct cinfer_backend_kv_layout layout = {AT_LAYERS, AT_PAGES, AT_PAGE, kv_dim, a.head_dim, dtype};
            void *cpu_kv = NULL;
            ck_assert_int_eq(ops->kv_create(be, &layout, &cpu_kv, &err), 0);
            float *q = malloc(sizeof(float) * (size_t)rows * q_dim);           /* (rows, q_dim) */
            float *got = malloc(sizeof(float) * (size_t)rows * q_dim);         /* (rows, q_dim) */
            float *cpu = malloc(sizeof(float) * (size_t)rows * q_dim);         /* (rows, q_dim) */
            double *want = malloc(sizeof(double) * (size_t)rows * q_dim);      /* (rows, q_dim) */
            float *sinks = malloc(sizeof(float) * (size_t)a.n_heads);          /* (n_heads) */
            int max_ctx = AT_PAGE * AT_PAGES;
            float *k = malloc(sizeof(float) * (size_t)max_ctx * kv_dim), *v = malloc(sizeof(float) * max_ctx * kv_dim);
            double *kr = malloc(sizeof(double) * (size_t)AT_SEQS * max_ctx * kv_dim); /* (seq, pos, kv_dim) */
            double *vr = malloc(sizeof(double) * (size_t)AT_SEQS * max_ctx * kv_dim);
            int32_t slots[AT_PAGE * AT_PAGES];
            /* layer 0 gets other values: a wrong layer offset reads them */
            for (int layer = 0; layer < AT_LAYERS; layer++)
                for (int s = 0; s < AT_SEQS; s++) {
                    int n_ctx = at_starts[s] + at_lens[s];
                    for (int i = 0; i < n_ctx * kv_dim; i++) {
                        k[i] = random_uniform(&rng);
                        v[i] = random_uniform(&rng);
                    }
                    for (int p = 0; p < n_ctx; p++)
                        slots[p] = pages[first_page[s] + p / AT_PAGE] * AT_PAGE + p % AT_PAGE;
                    ops->kv_write(be, cpu_kv, layer, k, v, n_ctx, slots);
                    host_kv_write(&dev, layer, k, v, n_ctx, slots);
                    kv_rounded(dtype, k, n_ctx, kv_dim, kr + (size_t)s * max_ctx * kv_dim);
                    kv_rounded(dtype, v, n_ctx, kv_dim, vr + (size_t)s * max_ctx * kv_dim);
                }
            for (int i = 0; i < rows * q_dim; i++)
                q[i] = random_uniform(&rng);
            for (int h = 0; h < a.n_heads; h++)
                sinks[h] = 2.0f * random_uniform(&rng);
            struct cinfer_backend_attn_seq seqs[AT_SEQS];
            for (int s = 0, row = 0; s < AT_SEQS; row += at_lens[s], s++)
                seqs[s] = (struct cinfer_backend_attn_seq){row, at_lens[s], at_starts[s], pages + first_page[s],
                                                           (at_starts[s] + at_lens[s] + AT_PAGE - 1) / AT_PAGE};
            for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++)
                for (int with_sinks = 0; with_sinks < 2; with_sinks++) {
                    float scale = opts[o].scale > 0.0f ? opts[o].scale : 1.0f / sqrtf((float)a.head_dim);
                    /* the kernel's three block sizes, each on many cases */
                    int warps = 4 << (sh + dtype + o + (size_t)with_sinks) % 3;
                    for (int s = 0; s < AT_SEQS; s++)
                        for (int t = 0; t < at_lens[s]; t++)
                            for (int h = 0; h < a.n_heads; h++) {
                                size_t at = (size_t)(seqs[s].row + t) * q_dim + (size_t)h * a.head_dim;
                                const float *sink = with_sinks ? &sinks[h] : NULL;
                                host_attention_block(warps, &dev, 1, q + at, seqs[s].page_table, at_starts[s] + t,
                                                     h / group, a.head_dim, opts[o].window, scale, opts[o].softcap,
                                                     sink, got + at);
                                attention_f64(q + at, kr + (size_t)s * max_ctx * kv_dim,
                                              vr + (size_t)s * max_ctx * kv_dim, at_starts[s] + t, kv_dim, h / group,
                                              a.head_dim, opts[o].window, scale, opts[o].softcap, sink, want + at);
                            }
                    double rel = worst_relative(got, want, (size_t)rows * q_dim);
                    ck_assert_msg(rel <= tols[dtype], "heads %d/%d x %d, kv %s, window %d scale %g softcap %g%s: "
                                  "max rel err %.2e against float64 (tol %.0e)", a.n_heads, a.n_kv_heads, a.head_dim,
                                  type_names[dtype], opts[o].window, (double)opts[o].scale, (double)opts[o].softcap,
                                  with_sinks ? " sinks" : "", rel, tols[dtype]);
                    worst_f64[dtype] = rel > worst_f64[dtype] ? rel : worst_f64[dtype];
                    if (with_sinks)
                        continue; /* the CPU backend has no sinks */
                    ck_assert_int_eq(ops->attention_windowed(be, cpu_kv, 1, q, cpu, seqs, AT_SEQS, a.n_heads,
                                                             a.n_kv_heads, a.head_dim, &opts[o], &err), 0);
                    for (int i = 0; i < rows * q_dim; i++)
                        want[i] = cpu[i];
                    rel = worst_relative(got, want, (size_t)rows * q_dim);
                    ck_assert_msg(rel <= tols[dtype], "heads %d/%d x %d, kv %s, window %d scale %g softcap %g: "
                                  "max rel err %.2e against the CPU backend (tol %.0e)", a.n_heads, a.n_kv_heads,
                                  a.head_dim, type_names[dtype], opts[o].window, (double)opts[o].scale,
                                  (double)opts[o].softcap, rel, tols[dtype]);
                    worst_cpu[dtype] = rel > worst_cpu[dtype] ? rel : worst_cpu[dtype];
                }
            ops->kv_destroy(be, cpu_kv);
            free(dev.k);
            free(dev.v);
            free(q);
            free(got);
            free(cpu);
            free(want);
            free(sinks);
            free(k);
            free(v);
            free(kr);
            free(vr);
        }
    for (int t = 0; t < 4; t++)
        printf("paged attention, kv %-4s: max rel err %.2e vs the CPU backend, %.2e vs float64 (sinks too)\n",
               type_names[t], worst_cpu[t], worst_f64[t]);
    ops->destroy(be);
}
END_TEST

START_TEST(router_rows_are_the_cpu_backends)
{
    const struct cinfer_backend_ops *ops = cinfer_cpu_backend_ops();
    void *be = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(ops->create(2, &be, &err), 0);
    const int shapes[][3] = {{37, 16, 4}, {64, 128, 8}, {5, 8, 2}, {9, 32, 1}}; /* rows, experts, k */
    uint64_t rng = 23;
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        for (int normalize = 0; normalize <= 1; normalize++) {
            int n = shapes[c][0], e = shapes[c][1], k = shapes[c][2];
            float *logits = malloc(sizeof(float) * (size_t)n * e);                          /* (n, e) */
            float *w_mine = malloc(sizeof(float) * (size_t)n * k), *w_cpu = malloc(sizeof(float) * (size_t)n * k);
            int32_t *ids_mine = malloc(sizeof(int32_t) * (size_t)n * k);                    /* (n, k) */
            int32_t *ids_cpu = malloc(sizeof(int32_t) * (size_t)n * k);
            for (int i = 0; i < n * e; i++)
                logits[i] = 4.0f * random_uniform(&rng);
            logits[e + 1] = logits[e + 3] = logits[e + e - 1] = 9.0f; /* ties: the lower id first */
            for (int i = 0; i < e; i++)
                logits[2 * e + i] = (float)(i % 3); /* many ties */
            for (int r = 0; r < n; r++)
                cinfer_cu_route_row(logits + (size_t)r * e, e, k, normalize, ids_mine + (size_t)r * k,
                                    w_mine + (size_t)r * k);
            ops->moe_route(be, logits, n, e, k, normalize, ids_cpu, w_cpu);
            ck_assert_mem_eq(ids_mine, ids_cpu, sizeof(int32_t) * (size_t)n * k);
            ck_assert_mem_eq(w_mine, w_cpu, sizeof(float) * (size_t)n * k);
            ck_assert_int_eq(ids_mine[k], 1);
            free(logits);
            free(w_mine);
            free(w_cpu);
            free(ids_mine);
            free(ids_cpu);
        }
    ops->destroy(be);
}
END_TEST

/* ---- the sample op's rows (sample_row.cuh) against the host's sampler -------------- */

/* A row of vocab logits of one of five kinds: spread out, peaked, with many equal
 * values (ties ranked by id), with banned (-inf) entries, and with zeros of both signs. */
static void sample_test_row(float *row, int vocab, int kind, uint64_t *rng)
{
    for (int i = 0; i < vocab; i++) {
        float r = 0.5f * (random_uniform(rng) + 1.0f); /* [0, 1) */
        switch (kind) {
        case 0: row[i] = 6.0f * r; break;
        case 1: row[i] = 25.0f * r * r * r; break;
        case 2: row[i] = (float)(int)(8.0f * r); break; /* 0 .. 7 */
        case 3: row[i] = i % 3 == 1 ? -INFINITY : 3.0f * r; break;
        default: row[i] = i % 4 == 0 ? 0.0f : i % 4 == 1 ? -0.0f : 0.5f * r; break;
        }
    }
}

START_TEST(sample_rows_draw_the_host_samplers_tokens)
{
    static struct cinfer_sample_block block; /* the device's shared memory */
    const int vocabs[] = {5, 300, 3001};
    const float temperatures[] = {0.3f, 0.7f, 1.0f, 1.7f};
    const float top_ps[] = {1.0f, 0.95f, 0.5f, 0.1f};
    const float min_ps[] = {0.0f, 0.05f, 0.4f};
    uint64_t rng = 20261204;
    int draws = 0, in_id_order = 0, cut = 0;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        int vocab = vocabs[v];
        const int top_ks[] = {0, 1, 2, 40, vocab, vocab + 3};
        struct cinfer_sampler sampler;
        ck_assert_int_eq(cinfer_sampler_init(&sampler, vocab), 0);
        float *row = malloc(sizeof(float) * (size_t)vocab), *host = malloc(sizeof(float) * (size_t)vocab);
        float *mine = malloc(sizeof(float) * (size_t)vocab);
        for (int trial = 0; trial < 600; trial++) {
            int kind = trial % 5;
            sample_test_row(row, vocab, kind, &rng);
            struct cinfer_sampling_params p = {0};
            p.temperature = temperatures[trial / 5 % 4];
            p.top_k = top_ks[trial / 20 % 6];
            p.top_p = top_ps[trial / 3 % 4];
            p.min_p = min_ps[trial / 7 % 3];
            p.repetition_penalty = 1.0f;
            struct cinfer_rng draw;
            cinfer_rng_seed(&draw, (uint64_t)trial * 7919u + (uint64_t)vocab);
            struct cinfer_rng peek = draw; /* the one draw the host's sampler will make */
            struct cinfer_sample_row_params rp = {p.temperature, p.top_k, p.top_p, p.min_p,
                                                  cinfer_rng_uniform(&peek)};
            memcpy(host, row, sizeof(float) * (size_t)vocab);
            memcpy(mine, row, sizeof(float) * (size_t)vocab);
            struct cinfer_sample_context none = {0};
            int32_t want = cinfer_sample(&sampler, host, &p, &none, &draw, NULL);
            int32_t got = cinfer_sample_row(&block, mine, vocab, &rp);
            if (got != want)
                ck_abort_msg("vocab %d, row kind %d, temperature %g, top_k %d, top_p %g, min_p %g, u %.17g: "
                             "sample_row drew %d, the host's sampler %d",
                             vocab, kind, (double)p.temperature, p.top_k, (double)p.top_p, (double)p.min_p,
                             rp.uniform, got, want);
            ck_assert_mem_eq(mine, host, sizeof(float) * (size_t)vocab); /* left divided by the temperature */
            draws++;
            int top_k_on = p.top_k > 0 && p.top_k < vocab;
            in_id_order += !top_k_on && !(p.top_p < 1.0f) && !(p.min_p > 0.0f);
            cut += top_k_on || p.top_p < 1.0f || p.min_p > 0.0f;
        }
        free(row);
        free(host);
        free(mine);
        cinfer_sampler_free(&sampler);
    }
    /* Where u x mass lands exactly on a running total (measure zero for random u), the
     * host's rules by hand: a draw takes the first token whose running total is above it
     * (u < cum), a top-p cut the first whose total reaches top_p of the mass. Four equal
     * logits weigh 1 each. */
    float equal[4] = {1.5f, 1.5f, 1.5f, 1.5f};
    struct cinfer_sample_row_params plain = {1.0f, 0, 1.0f, 0.0f, 0.5}; /* 0.5 x 4 = 2: ids 0 and 1 reach it */
    ck_assert_int_eq(cinfer_sample_row(&block, equal, 4, &plain), 2);
    struct cinfer_sample_row_params half = {1.0f, 0, 0.5f, 0.0f, 0.5}; /* keeps ids 0 and 1; 0.5 x 2 = 1 */
    ck_assert_int_eq(cinfer_sample_row(&block, equal, 4, &half), 1);
    printf("sample_row: %d draws equal to the host sampler's (%d from the plain softmax in id order, %d after "
           "top-k, top-p or min-p cuts)\n", draws, in_id_order, cut);
}
END_TEST

static Suite *suite_cuda_kernels_host(void)
{
    Suite *s = suite_create("cuda_kernels_host");
    TCase *tc = tcase_create("host_device_code");
    tcase_add_test(tc, f16_and_bf16_conversions_are_the_cpus_bits);
    tcase_add_test(tc, q8_0_blocks_are_the_cpus_bytes);
    tcase_add_test(tc, paged_attention_steps_match_the_cpu_backend);
    tcase_add_test(tc, router_rows_are_the_cpu_backends);
    tcase_add_test(tc, sample_rows_draw_the_host_samplers_tokens);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_cuda_kernels_host)
