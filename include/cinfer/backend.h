/* cinfer/backend.h — the compute backend interface: the ops the forward pass calls,
 * and the KV page storage they read and write.
 *
 * The CPU backend (core/backend/cpu_backend.c) is built in; another backend (CUDA)
 * arrives as a loadable plugin of kind CINFER_PLUGIN_KIND_BACKEND whose descriptor
 * vtable is a const struct cinfer_backend_ops. Tests run each backend's ops against
 * the CPU backend's.
 *
 * Memory: float pointers passed to ops are backend buffers (buffer_alloc); weights
 * pass through weight_prepare once, at load, and the ops then get the prepared ones
 * (the backend may keep its own copy, in its own layout or device memory); small
 * integer arrays (tokens, positions, page tables, slots) are host memory the backend
 * copies in as it needs. */
#ifndef CINFER_BACKEND_H
#define CINFER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/communicator.h"
#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any change to struct cinfer_backend_ops or to a struct its ops take (an
 * array of them changes stride); slots and fields are only appended.
 * 2: struct cinfer_backend_matmul_out gained exact_x.
 * 3: weight_prepare and weight_release.
 * 4: embedding gives a row of zeros for an id outside [0, w.rows) (tensor parallelism's
 *    vocabulary-parallel embedding: a rank holds a slice of the rows).
 * 5: attention_windowed (sliding window, score scale, soft-capping), gelu_tanh_mul,
 *    scale and softcap (Gemma 2/3).
 * 6: struct cinfer_backend_kv_layout gained head_dim and dtype (the KV element type); enum
 *    cinfer_tensor_type gained ggml's block-quantized types and their CPU panels.
 * 7: moe_route, gather_rows, scatter_add_rows and zero (mixture of experts: Mixtral, Qwen3-MoE).
 * 8: query (usable here? priority, why not), create_on (device index, communicator),
 *    status (the first asynchronous device error since the last call) and upload (host
 *    to backend buffer: inputs of the conformance suite); the CPU's panel types left
 *    enum cinfer_tensor_type (a prepared weight's type is its backend's own).
 * 9: struct cinfer_backend_attn_options gained sinks (gpt-oss); swiglu_oai (gpt-oss's
 *    clamped gate), add_gated (Qwen2-MoE's gated shared expert), all_reduce_sum (a
 *    device backend's own all-reduce, NCCL) and memory_info (--mem-fraction-static).
 *    Every version-9 slot may be NULL; the core refuses a model that needs one the
 *    backend lacks, naming the backend and the slot.
 * 10: matmul_grouped (products that each have their own input, as one call: a decode
 *    step's expert down projections). May be NULL: the core then calls matmul once per
 *    product.
 * 11: logits_top (the most likely tokens of rows of logits and their log-sum-exp, ranked
 *    where the logits are: a device backend then sends a few numbers to the host per
 *    greedy row, not the vocabulary's logits). May be NULL: the core then downloads the
 *    rows and ranks them itself.
 * 12: sample (a token drawn from rows of logits where they are, with temperature,
 *    top-k, top-p and min-p: a device backend then sends the host a token per sampled
 *    row, not the vocabulary's logits). May be NULL: the core then downloads the rows
 *    and samples on the host.
 * 13: step_begin and step_end (a forward step's host arrays named once, before its ops:
 *    a device backend copies them in with one upload and may replay a step whose ops
 *    repeat an earlier step's, call for call, as one CUDA graph), and decode_bucket (the
 *    batch sizes a decode step is padded to, so nearby sizes are one step). May be NULL. */
#define CINFER_BACKEND_OPS_VERSION 13u
/* The oldest version the loader accepts: the core calls version 8's slots. */
#define CINFER_BACKEND_OPS_MIN_VERSION 8u

/* Element types of weights as files store them (numbered like the model's dtype enum).
 * What weight_prepare returns is the backend's own: its type and layout are opaque to
 * the core, which hands them back to the same backend's ops only. Numbers 4-6 and
 * 19-23 are taken by the CPU backend's prepared layouts (panels of 16 rows for its
 * AVX-512 kernels, core/backend/cpu_weights.h), so no stored type will take them. */
enum cinfer_tensor_type {
    CINFER_TENSOR_F32 = 0,
    CINFER_TENSOR_F16 = 1,
    CINFER_TENSOR_BF16 = 2,
    CINFER_TENSOR_Q8_0 = 3, /* blocks of 32 along a row: f16 scale d + 32 int8 q; value d*q */
    /* ggml's block-quantized types, as GGUF files store them (layouts and values in
     * kernels/quant.c; the numbers are cinfer's, not ggml's) */
    CINFER_TENSOR_Q4_0 = 7,
    CINFER_TENSOR_Q4_1 = 8,
    CINFER_TENSOR_Q5_0 = 9,
    CINFER_TENSOR_Q5_1 = 10,
    CINFER_TENSOR_Q2_K = 11,
    CINFER_TENSOR_Q3_K = 12,
    CINFER_TENSOR_Q4_K = 13,
    CINFER_TENSOR_Q5_K = 14,
    CINFER_TENSOR_Q6_K = 15,
    CINFER_TENSOR_IQ4_NL = 16,
    CINFER_TENSOR_IQ4_XS = 17,
    CINFER_TENSOR_MXFP4 = 18,
};

/* A row-major weight matrix (rows, cols) = (out_features, in_features). */
struct cinfer_backend_weight {
    uint32_t type; /* enum cinfer_tensor_type as stored; prepared: the backend's own */
    int64_t rows;
    int64_t cols;
    const void *data;
    size_t row_bytes; /* bytes from one row to the next */
};

/* Element types of the KV storage. */
enum cinfer_kv_type {
    CINFER_KV_F32 = 0,  /* exact */
    CINFER_KV_F16 = 1,  /* round to nearest even; llama.cpp's default */
    CINFER_KV_BF16 = 2, /* round to nearest even */
    CINFER_KV_Q8_0 = 3, /* per head, blocks of 32 values: f16 d = max|x| / 127, int8 round(x / d)
                         * (34 bytes; head_dim a multiple of 32) */
};

/* The KV storage: for every layer and page, K and V of page_tokens positions, each a
 * row of kv_dim = kv_heads * head_dim values of type dtype (head h's values are
 * [h * head_dim, (h + 1) * head_dim) of the row; for q8_0 its blocks). */
struct cinfer_backend_kv_layout {
    int n_layers;
    int n_pages;
    int page_tokens;
    int kv_dim;
    int head_dim;   /* (version 6) */
    uint32_t dtype; /* enum cinfer_kv_type (version 6) */
};

/* One sequence of an attention call: its rows of q/out are [row, row + n_tokens) and
 * sit at positions [start_pos, start_pos + n_tokens); K/V of positions
 * [0, start_pos + n_tokens) are in page_table's pages (page i holds positions
 * [i * page_tokens, (i + 1) * page_tokens)). */
struct cinfer_backend_attn_seq {
    int row;
    int n_tokens;
    int start_pos;
    const int32_t *page_table; /* (n_pages) */
    int n_pages;
};

/* RoPE for the tokens of a call: cos and sin of each token's angles p * inv_freq[i]
 * (scaling folded into inv_freq), computed once per call and shared by every head and
 * layer. interleaved 0: pairs (i, i + head_dim/2), Hugging Face rotate_half; 1: pairs
 * (2i, 2i + 1). */
struct cinfer_backend_rope {
    const float *cos; /* (n_tokens, head_dim / 2) host memory */
    const float *sin; /* (n_tokens, head_dim / 2) host memory */
    int interleaved;
};

/* How attention_windowed scores: a query at position p sees positions
 * (p - window, p] (all of [0, p] when window is 0); scores are q · k * scale, then
 * softcap * tanh(score / softcap) when softcap > 0 (Gemma 2), before the softmax. */
/* How one row is drawn by sample (version 12): the host sampler's rules
 * (core/scheduler/sampler.h, cinfer_sample) for a request without penalties, logit
 * bias, token bans or grammar. */
struct cinfer_backend_sample_params {
    float temperature; /* >= 1e-5; the row is multiplied by 1 / temperature (float) unless 1 */
    int32_t top_k;     /* the k most likely; 0 or >= vocab: off */
    float top_p;       /* the most likely first until their mass reaches top_p of what top-k kept; 1: off */
    float min_p;       /* only tokens weighing min_p of the most likely (it stays); 0: off */
    double uniform;    /* the request's next draw from [0, 1): the token where the kept tokens' running
                          mass, most likely first (in id order with no cut), first exceeds uniform x their mass */
};

struct cinfer_backend_attn_options {
    int window;    /* tokens; 0: no window */
    float scale;   /* 0: 1 / sqrt(head_dim) */
    float softcap; /* 0: none */
    /* (version 9) NULL, or (n_heads) one logit per query head that joins every
     * softmax without a value (gpt-oss's attention sinks: the weights then sum to
     * less than 1); a backend buffer. Read only by backends of version 9 and later. */
    const float *sinks;
};

/* One output of a matmul: y (n, w.rows) = x (n, w.cols) · wᵀ (+ bias (w.rows)). */
struct cinfer_backend_matmul_out {
    const struct cinfer_backend_weight *w;
    const float *bias; /* NULL: none */
    float *y;
    /* 1: x multiplies the weights unrounded even where the backend would round it for
     * speed (the CPU's bf16 dot products): the logits, whose near-ties decide greedy
     * tokens. 0 (default): the backend's fastest arithmetic within its error bound. */
    int exact_x;
};

/* A backend's answer to "can you run here?" (query, version 8). Not usable is not an
 * error: --device auto then takes the next one. */
struct cinfer_backend_answer {
    int usable;
    int priority;     /* higher wins under --device auto; the CPU backend says 10 */
    int device_count; /* devices usable here (the CPU backend: 1) */
    char why[256];    /* when not usable: what is missing (no driver, no device, ...) */
};

/* What create_on (version 8) gets; fields are only appended, struct_size says how many
 * the caller filled. */
struct cinfer_backend_create_options {
    uint32_t struct_size; /* sizeof(struct cinfer_backend_create_options) of the caller */
    int n_threads;        /* host threads (0: one per online core) */
    int device;           /* device index in [0, device_count) */
    /* Tensor parallelism's group, for a backend that does its all-reduce itself (NCCL);
     * NULL without tensor parallelism. The backend does not own it. */
    struct cinfer_comm *comm;
};

/* A host array a forward step's ops will get (version 13). */
struct cinfer_backend_step_array {
    const void *data;
    size_t bytes;
};

/* What step_begin names (version 13): the small host arrays the step's ops will get
 * (tokens, KV slots, RoPE's cos and sin: each op gets the same pointer and at most those
 * bytes) and the sequence lists its attention calls will get (each n_seqs long; their
 * page tables hold pages of the KV storage). All of it stays unchanged until step_end.
 * An op may also get a host array not named here (a mixture of experts' rows, which
 * depend on the router's choices): the backend then reads it as it would outside a step. */
struct cinfer_backend_step {
    uint32_t struct_size; /* sizeof(struct cinfer_backend_step) of the caller */
    int n_tokens;         /* rows of the step's activations */
    const struct cinfer_backend_step_array *arrays;
    int n_arrays;
    const struct cinfer_backend_attn_seq *const *seq_lists;
    int n_seq_lists;
    int n_seqs;
};

struct cinfer_backend_ops {
    uint32_t version;     /* CINFER_BACKEND_OPS_VERSION built with */
    uint32_t struct_size; /* sizeof(struct cinfer_backend_ops) built with */
    const char *name;     /* "cpu", "cuda" */

    /* n_threads: host threads the backend may use (0: one per online core). */
    int (*create)(int n_threads, void **state, struct cinfer_error *err);
    void (*destroy)(void *state);

    /* Activation and scratch memory (64-byte aligned); NULL when out of memory. */
    void *(*buffer_alloc)(void *state, size_t bytes);
    void (*buffer_free)(void *state, void *buffer);
    /* Backend buffer to backend buffer, and backend buffer to host. */
    void (*copy)(void *state, void *dst, const void *src, size_t bytes);
    void (*download)(void *state, void *host_dst, const void *src, size_t bytes);

    /* KV page storage. */
    int (*kv_create)(void *state, const struct cinfer_backend_kv_layout *layout, void **kv,
                     struct cinfer_error *err);
    void (*kv_destroy)(void *state, void *kv);
    /* K and V (n, kv_dim) of layer go to slots[i] = page * page_tokens + offset. */
    void (*kv_write)(void *state, void *kv, int layer, const float *k, const float *v, int n,
                     const int32_t *slots);

    /* out (n, w.cols) = rows tokens[i] of w, widened to f32; zeros where tokens[i] is
     * outside [0, w.rows). */
    void (*embedding)(void *state, const struct cinfer_backend_weight *w, const int32_t *tokens, int n,
                      float *out);
    /* Every output from the same x (n, cols) in one pass, so projections that share
     * an input (q/k/v, gate/up) are one call; every weight has cols columns. Fails
     * only when scratch for converting x (Q8_0 weights) cannot be allocated. */
    int (*matmul)(void *state, const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs,
                  struct cinfer_error *err);
    /* For each of n_rows rows of dim: y = x * rsqrt(mean(x²) + eps) * w (dim). */
    void (*rmsnorm)(void *state, float *y, const float *x, int n_rows, int dim, const float *w, float eps);
    /* x (n_tokens, n_heads * head_dim): token t's heads rotated by row t of rope. */
    void (*rope)(void *state, float *x, int n_tokens, int n_heads, int head_dim,
                 const struct cinfer_backend_rope *rope);
    /* gate (n) = silu(gate) * up */
    void (*silu_mul)(void *state, float *gate, const float *up, size_t n);
    /* y (n) += x (n) */
    void (*add)(void *state, float *y, const float *x, size_t n);
    /* Causal attention. q, out: (rows, n_heads * head_dim). For each sequence, token
     * and query head h (kv head h / (n_heads / n_kv_heads)):
     * out = softmax(q · Kᵀ / sqrt(head_dim)) V over positions [0, its position].
     * Fails only when scratch for a longer context than before cannot be allocated. */
    int (*attention)(void *state, void *kv, int layer, const float *q, float *out,
                     const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                     int head_dim, struct cinfer_error *err);

    /* The weight as this backend's ops will read it, from the weight as stored (a host
     * view of the model file): *out is either *w itself or a copy the backend made (the
     * CPU repacks 16-bit and Q8_0 weights into panels for its AVX-512 kernels; a device
     * backend uploads). Every prepared weight goes back through weight_release. Fails
     * only when the copy cannot be allocated (the error says how many bytes). */
    int (*weight_prepare)(void *state, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                          struct cinfer_error *err);
    /* Frees what weight_prepare made for w (nothing when it returned the stored weight). */
    void (*weight_release)(void *state, const struct cinfer_backend_weight *w);

    /* Since version 5. */
    /* attention with the options above; attention is this with {0, 0, 0}. */
    int (*attention_windowed)(void *state, void *kv, int layer, const float *q, float *out,
                              const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads, int n_kv_heads,
                              int head_dim, const struct cinfer_backend_attn_options *opts,
                              struct cinfer_error *err);
    /* gate (n) = gelu_tanh(gate) * up, gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))) */
    void (*gelu_tanh_mul)(void *state, float *gate, const float *up, size_t n);
    /* x (n) *= factor */
    void (*scale)(void *state, float *x, size_t n, float factor);
    /* x (n) = cap * tanh(x / cap) */
    void (*softcap)(void *state, float *x, size_t n, float cap);

    /* Since version 7: mixture of experts. The router's choices come back to the host,
     * which groups each expert's tokens; an expert then runs once on its group (gather,
     * matmuls, scatter-add), so a decode step reads only the chosen experts' weights. */
    /* For each of n rows of logits (n, n_experts): ids (n, k) the k largest logits,
     * largest first (the lower id first among equals), and weights (n, k) their
     * softmax over all n_experts, divided by their own sum when normalize is 1.
     * ids and weights are host memory. */
    void (*moe_route)(void *state, const float *logits, int n, int n_experts, int k, int normalize, int32_t *ids,
                      float *weights);
    /* out (n, dim) = rows rows[i] of x; rows is host memory */
    void (*gather_rows)(void *state, float *out, const float *x, const int32_t *rows, int n, int dim);
    /* y row rows[i] += weights[i] * x row i, for x (n, dim), in order of i (a row may
     * repeat); rows and weights are host memory */
    void (*scatter_add_rows)(void *state, float *y, const float *x, const int32_t *rows, const float *weights, int n,
                             int dim);
    /* x (n) = 0 */
    void (*zero)(void *state, float *x, size_t n);
    /* Since version 8: selection, devices, asynchronous errors. */
    /* Whether this backend can run here, without creating anything (no device memory
     * taken). Returns 0, or a negative code when it could not even ask. */
    int (*query)(struct cinfer_backend_answer *answer);
    /* create on device opts->device; create(n) is create_on({n_threads = n, device 0}). */
    int (*create_on)(const struct cinfer_backend_create_options *opts, void **state, struct cinfer_error *err);
    /* The first error the device raised since the last call (kernels run asynchronously,
     * so an op returns before its failure is known): 0 when none, else its code with err
     * naming the device and what failed. The runtime calls it after every forward step,
     * and a failed step fails the requests it carried. Waits for the ops queued so far. */
    int (*status)(void *state, struct cinfer_error *err);
    /* Host memory to a backend buffer (the reverse of download). */
    void (*upload)(void *state, void *dst, const void *host_src, size_t bytes);

    /* Since version 9; each may be NULL (see the version note). */
    /* gpt-oss's gated activation: with g = min(gate, limit) and u = clamp(up, -limit,
     * limit), gate (n) = g * sigmoid(alpha * g) * (u + 1). */
    void (*swiglu_oai)(void *state, float *gate, const float *up, size_t n, float alpha, float limit);
    /* y row i (n, dim) += sigmoid(gate[i]) * x row i; gate (n) is a backend buffer
     * (Qwen2-MoE's shared expert, scaled by its own gate). */
    void (*add_gated)(void *state, float *y, const float *x, const float *gate, int n, int dim);
    /* x (n) = the sum of x over the tensor-parallel group that create_on got, by the
     * backend itself (NCCL on device buffers). NULL: the core all-reduces through the
     * communicator, which then must be able to read the backend's buffers (the CPU's). */
    int (*all_reduce_sum)(void *state, float *x, size_t n, struct cinfer_error *err);
    /* The device memory free and in all, in bytes (the KV budget of
     * --mem-fraction-static). NULL: host memory, which the core measures itself. */
    int (*memory_info)(void *state, size_t *free_bytes, size_t *total_bytes, struct cinfer_error *err);

    /* Since version 10; may be NULL (the core then calls matmul once per output). */
    /* For each output o: outs[o].y (n, w.rows) = xs[o] (n, w.cols) · wᵀ (+ bias), every
     * product in one call, so that a decode step's independent small products (the
     * chosen experts' down projections, each on its own expert's activations) cost one
     * dispatch and one join, not one each. xs is host memory holding backend buffers. */
    int (*matmul_grouped)(void *state, const float *const *xs, int n, const struct cinfer_backend_matmul_out *outs,
                          int n_outs, struct cinfer_error *err);

    /* Since version 11; may be NULL (the core then downloads the rows and ranks them on
     * the host with the same rules). For each r < n_rows, row rows[r] of logits (a
     * backend buffer of rows of vocab values; rows is host memory): top_ids[r * k + j]
     * and top_logits[r * k + j] for j < n_top[r] are its k most likely tokens, most
     * likely first, the lower id first on equal logits, entries at -inf left out
     * (n_top[r] <= k, 1 <= k <= 64); log_sum_exp, unless NULL (greedy tokens without
     * logprobs need none), gets log(sum(exp(logit))) of each row in double (-inf when
     * every entry is). Outputs are host memory, written when
     * the call returns. The sampler's greedy choice is top_ids[r * k], and a logprob is
     * a logit minus log_sum_exp: cinfer_kernel_logits_top is the reference. */
    int (*logits_top)(void *state, const float *logits, int vocab, const int32_t *rows, int n_rows, int k,
                      int32_t *top_ids, float *top_logits, int *n_top, double *log_sum_exp, struct cinfer_error *err);

    /* Since version 12; may be NULL (the core then downloads the rows and samples on the
     * host). For each r < n_rows, row rows[r] of logits (a backend buffer of rows of vocab
     * values; rows, params, token_ids and token_logits are host memory): the row is left
     * divided by its temperature, as the host's sampler leaves it (logits_top afterwards
     * gives the logprobs OpenAI reports: after temperature, before the cuts), and
     * token_ids[r] is the token params[r] draws, token_logits[r] its logit in the divided
     * row. A row with nothing above -inf gives token 0. Outputs are written when the call
     * returns. cinfer_sample_row (kernels/cuda/sample_row.cuh) is the reference: it
     * draws the host sampler's token except where a running sum lands within rounding
     * of a cut. */
    int (*sample)(void *state, float *logits, int vocab, const int32_t *rows, int n_rows,
                  const struct cinfer_backend_sample_params *params, int32_t *token_ids, float *token_logits,
                  struct cinfer_error *err);

    /* Since version 13; both NULL or both set. step_begin opens a forward step: the ops
     * called until step_end are that step's, and get step's host arrays (above). The
     * backend may keep its ops queued until one that answers the host (download,
     * logits_top, sample, status...) or step_end, and run a queue that repeats an earlier
     * step's (the same ops with the same arguments, only the named arrays' contents
     * differ) as a replay of it; so a step's ops must not depend on host data other than
     * their arguments and the named arrays. A step_begin without step_end after the
     * previous one ends that one. Errors are those of the ops queued, as status reports. */
    int (*step_begin)(void *state, const struct cinfer_backend_step *step, struct cinfer_error *err);
    int (*step_end)(void *state, struct cinfer_error *err);
    /* May be NULL (no padding). The rows a decode step of n rows (every sequence adding
     * one token and asking for its logits) is to have: more than n, and the core pads the
     * step with rows of token 0 at position 0 of a KV page of their own, each its own
     * sequence, whose logits are computed and never read; so decode steps of any batch
     * size in a bucket are the same step, and one graph serves them (SGLang pads its
     * batches to its CUDA graphs' sizes alike). n or less: no padding. The core pads
     * steps of dense models without tensor parallelism or a sliding-window pool only. */
    int (*decode_bucket)(void *state, int n);
};

#ifdef __cplusplus
}
#endif
#endif
