/* core/model/runtime.h — a loaded model bound to a compute backend, a paged KV cache
 * and scratch buffers: the one entry point the scheduler calls to run a batch.
 *
 * A batch is a list of sequence chunks (prefill chunks and decode steps mixed). All
 * their tokens are concatenated into one activation matrix so each weight is read once
 * per call; attention then runs per sequence through that sequence's page table.
 * K/V pages are stored in f32 (exact; twice the memory of f16). */
#ifndef CINFER_MODEL_RUNTIME_H
#define CINFER_MODEL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/backend.h"
#include "cinfer/communicator.h"
#include "cinfer/config.h"
#include "cinfer/error.h"
#include "model/model.h"

struct cinfer_runtime; /* a model bound to a compute backend, a paged KV cache and scratch */

/* Rank 0 of a tensor-parallel group hands each forward call's plan to this before it
 * computes (see cinfer_runtime_forward_plan): plan (plan_bytes) is valid during the call
 * only. Nonzero (a negative status, err filled): the forward fails, and the group is
 * aborted, since some followers may have the plan already. */
typedef int (*cinfer_runtime_publish_plan_fn)(void *ctx, const void *plan, size_t plan_bytes,
                                              struct cinfer_error *err);

struct cinfer_runtime_options {
    size_t kv_cache_bytes; /* memory budget of the KV cache in bytes */
    int kv_page_tokens;    /* tokens per KV page (default 16 when 0) */
    int n_threads;         /* 0: one per online core */
    int max_batch_tokens;  /* most tokens one forward call may carry (scratch sizing); 0: 2048 */
    /* 1: the backend reads the matrices as the model file stores them (the CPU backend,
     * the only one yet: no repacking into panels, so the mapped file's pages stay shared
     * with other processes). 0: each goes through the backend's weight_prepare. */
    int keep_stored_weights;
    /* The KV cache's element type (AUTO: f16); the budget counts its bytes. q8_0 needs a
     * head_dim that is a multiple of 32. */
    enum cinfer_kv_cache_dtype kv_dtype;
    /* The longest sequence served (0: the model's max_position_embeddings): dynamic NTK
     * and LongRoPE fix their frequencies by it. */
    int context_length;

    /* Tensor parallelism (tp_size 0 or 1 and comm NULL: none, the runtime as before).
     * This runtime is rank tp_rank of tp_size and keeps only its shard of the weights:
     * its attention heads and KV heads (a KV head is kept by several ranks where tp_size
     * exceeds the KV heads), its columns of the MLP and its rows of the vocabulary
     * (embedding and lm_head). Its KV cache holds only its KV heads, so kv_cache_bytes
     * holds tp_size times the tokens (fewer where KV heads are replicated); every rank
     * gets the same page count. comm (comm->rank == tp_rank, comm->size == tp_size)
     * carries the all-reduces after wo and w_down and the gathers of embedding and
     * logits; the runtime does not own it. Rank 0 runs cinfer_runtime_forward, which
     * first hands the call's plan to publish_plan (required on rank 0); ranks > 0 run
     * cinfer_runtime_forward_plan on those plans, in the same order. Shapes that do not
     * split are refused (cinfer_runtime_tp_check). Load the model with no_prefault so a
     * rank never reads the other ranks' weights. */
    int tp_rank;
    int tp_size;
    /* Expert parallelism (SGLang's --ep-size): 0 or 1, none (every expert's width split
     * over the tp ranks); tp_size, each rank holds and runs whole experts (its
     * contiguous share of them), the router whole on every rank, the all-reduce after the
     * MLP summing the ranks' experts; attention, dense layers and a shared expert keep the
     * tensor-parallel split. Any other value is refused. */
    int ep_size;
    struct cinfer_comm *comm;
    cinfer_runtime_publish_plan_fn publish_plan;
    void *publish_ctx;

    /* The compute backend (cinfer_backend_select's plugin's vtable, version 8 or newer)
     * and its device index; NULL: the built-in CPU backend. The runtime does not own it:
     * the plugin stays open while the runtime lives. */
    const struct cinfer_backend_ops *backend;
    int device;

    /* 1: sliding layers keep their K/V for the whole context, as full layers do. 0
     * (default): a model with sliding layers keeps those layers' pages in their own pool
     * and the scheduler releases what no window reaches any more (kv_window.c). */
    int keep_window_pages;
    /* --mem-fraction-static on a device: > 0 and a backend with memory_info, the KV
     * budget is fraction x total - (total - free after the weights are on the device),
     * as SGLang sizes it, capped by kv_cache_bytes (what every running request at full
     * context needs); under tensor parallelism the smallest budget of the ranks. 0, or a
     * backend without memory_info (the CPU): kv_cache_bytes as given. */
    double mem_fraction_static;
};

/* Bytes one token's K and V take in every layer of model config c with KV type kv_dtype
 * (AUTO: f16), for sizing budgets; 0 for a type the model cannot use (q8_0 with a
 * head_dim that is not a multiple of 32). */
size_t cinfer_runtime_kv_token_bytes(const struct cinfer_model_config *c, enum cinfer_kv_cache_dtype kv_dtype);
/* "f32", "f16", "bf16" or "q8_0": the type rt's KV pages hold. */
const char *cinfer_runtime_kv_dtype_name(const struct cinfer_runtime *rt);

/* Whether model m splits over tp_size ranks: attention heads divide by tp_size, KV
 * heads divide by it or it by them, a block-typed wo split by columns gets whole blocks
 * of its type per rank (32 values for Q8_0, Q4_0 and the like, 256 for the K-quants and
 * IQ4_XS), and every rank gets MLP columns and vocabulary rows. The MLP's intermediate
 * size need not divide: ranks get shares as even as whole columns (whole blocks of
 * w_down's type) allow; so does the vocabulary (ceil(vocab / tp_size) rows each, the
 * last rank fewer). The refusal gives the numbers ("32 attention heads do not split
 * over tp_size 3"). */
int cinfer_runtime_tp_check(const struct cinfer_model *m, int tp_size, struct cinfer_error *err);
/* The same with expert parallelism: ep_size 1 is cinfer_runtime_tp_check; ep_size ==
 * tp_size gives each rank whole experts (any expert width then splits), refused where the
 * model has fewer experts than ep_size; any other ep_size is refused naming both. A dense
 * model takes any valid ep_size (it has no experts to split). */
int cinfer_runtime_parallel_check(const struct cinfer_model *m, int tp_size, int ep_size, struct cinfer_error *err);

int cinfer_runtime_create(const struct cinfer_model *m, const struct cinfer_runtime_options *o,
                          struct cinfer_runtime **out, struct cinfer_error *err);
void cinfer_runtime_destroy(struct cinfer_runtime **rt);

/* Paged KV cache: pages are refcounted so sequences may share a prefix's pages. A page
 * that a forward call writes (positions >= start_pos) must not be shared with another
 * sequence that holds different tokens there: copying a partly filled shared page is
 * the caller's job. ref / unref of a page that is free or out of range is a caller bug
 * and aborts with a message. */
int cinfer_runtime_kv_pages_total(const struct cinfer_runtime *rt);
int cinfer_runtime_kv_pages_free(const struct cinfer_runtime *rt);
int cinfer_runtime_kv_page_tokens(const struct cinfer_runtime *rt);
/* CINFER_ERR_NOMEM when none is free; a new page has refcount 1. */
int cinfer_runtime_kv_page_alloc(struct cinfer_runtime *rt, int32_t *page_out);
void cinfer_runtime_kv_page_ref(struct cinfer_runtime *rt, int32_t page);
void cinfer_runtime_kv_page_unref(struct cinfer_runtime *rt, int32_t page); /* freed at 0 */

/* Sliding-window pages (kv_window.c). With a window pool a page also has a part for the
 * sliding layers, allocated with it; pages_free counts a page free only where both
 * pools have one. window_tokens: the window, or 0 without a window pool (then every
 * page always has its window part). A sequence resuming at position q attends through
 * the window to positions from q - window + 1: pages wholly before that no running
 * sequence needs may drop their window part, which is then gone for good (a prefix
 * cache hit is usable only up to window_usable_pages). */
int cinfer_runtime_kv_window_tokens(const struct cinfer_runtime *rt);
int cinfer_runtime_kv_page_has_window(const struct cinfer_runtime *rt, int32_t page);
void cinfer_runtime_kv_page_drop_window(struct cinfer_runtime *rt, int32_t page);
/* The longest m <= n_pages such that a sequence holding pages[0..m) can resume at
 * position m * page_tokens: its last window of positions still has its window parts. */
int cinfer_runtime_kv_window_usable_pages(const struct cinfer_runtime *rt, const int32_t *pages, int n_pages);
void cinfer_runtime_kv_window_usage(const struct cinfer_runtime *rt, int *pages_total, int *pages_used);

enum cinfer_logits_mode { CINFER_LOGITS_NONE = 0, CINFER_LOGITS_LAST = 1, CINFER_LOGITS_ALL = 2 };

/* One sequence's part of a batch: n_tokens new tokens at positions
 * [start_pos, start_pos + n_tokens); the KV of [0, start_pos) is already in its pages.
 * page_table covers [0, start_pos + n_tokens) (page i holds positions
 * [i*page_tokens, (i+1)*page_tokens)). A prefill chunk has n_tokens > 1, a decode step 1. */
struct cinfer_seq_chunk {
    const int32_t *tokens; /* (n_tokens) */
    int n_tokens;
    int start_pos;
    const int32_t *page_table; /* (n_pages) */
    int n_pages;
    enum cinfer_logits_mode logits;
    float *logits_out; /* (1, vocab) for LAST, (n_tokens, vocab) for ALL; caller-owned */
    /* LAST only: 0 (the whole row to logits_out), or how many of the row's most likely
     * tokens top_out gets instead; logits_out is then not written and may be NULL. A
     * greedy choice needs no more, and a backend that ranks where its logits are
     * (logits_top, a device) then sends these few numbers instead of the vocabulary's. */
    int top_k;                          /* 0, or 1..CINFER_LOGITS_TOP_MAX */
    int top_log_sum_exp;                /* 1: top_out->log_sum_exp too (for logprobs) */
    struct cinfer_logits_top *top_out;  /* caller-owned */
    /* LAST only, where cinfer_runtime_samples(): NULL, or how the row's next token is
     * drawn where the logits are (backend.h's sample); sampled_out then gets it, and
     * logits_out is not written (may be NULL). The row is divided by the temperature
     * first, so top_k's tokens and log-sum-exp (logprobs) are those of the divided row. */
    const struct cinfer_backend_sample_params *sample;
    struct cinfer_sampled *sampled_out; /* caller-owned */
};

/* A token drawn by the backend, with its logit in the row divided by the temperature. */
struct cinfer_sampled {
    int32_t id;
    float logit;
};

/* A row's most likely tokens (cinfer_kernel_logits_top's order and rules: the larger
 * logit first, the lower id on equal logits, -inf and NaN left out). */
#define CINFER_LOGITS_TOP_MAX 20
struct cinfer_logits_top {
    int n;                                /* <= the chunk's top_k */
    int32_t ids[CINFER_LOGITS_TOP_MAX];
    float logits[CINFER_LOGITS_TOP_MAX];
    double log_sum_exp;                   /* when asked: log(sum(exp(logit))) over the row */
};

/* Runs every chunk of the batch in one pass (weights read once per call, not once per
 * sequence) and writes the asked logits. In a tensor-parallel group this is rank 0's
 * call: the batch is checked, its plan published, then computed with the other ranks;
 * every rank ends up with the full logits, and rank 0 writes them to logits_out.
 * A failure after the plan was published aborts the group (comm's abort): the other
 * ranks' calls fail too, and the group should be torn down. */
int cinfer_runtime_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                           struct cinfer_error *err);

/* 1 when chunks may ask for a token drawn where the logits are (the chunk's sample):
 * the backend has sample (ops version 12) and the logits are whole on it (no tensor
 * parallelism, whose rows are gathered on the host). */
int cinfer_runtime_samples(const struct cinfer_runtime *rt);

/* A follower's (tp_rank > 0) forward: the plan rank 0's publish_plan was given, decoded
 * (a malformed plan is refused naming the field: "plan: sequence 1 page 3 is 99, outside
 * the cache's [0, 64)") and run with the other ranks; logits are computed for the
 * gather and not kept. Plans must come in the order they were published (each carries
 * its step number). Followers do no page bookkeeping: page ids are rank 0's, checked
 * only to lie in the cache. A refused plan, or a failure, aborts the group. */
int cinfer_runtime_forward_plan(struct cinfer_runtime *rt, const void *plan, size_t plan_bytes,
                                struct cinfer_error *err);

/* What the runtime holds for the weights, in bytes. copies: its own memory (this rank's
 * slices, 1-D weights widened to f32, the backend's repacked panels); in_place: read
 * where the model holds them (views of the file mapping, whose pages count in the
 * process's resident set only as far as they are read). */
struct cinfer_runtime_memory {
    size_t weight_copy_bytes;
    size_t weight_in_place_bytes;
    size_t kv_cache_bytes;
};
void cinfer_runtime_memory(const struct cinfer_runtime *rt, struct cinfer_runtime_memory *out);

#endif
