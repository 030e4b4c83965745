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

#include "cinfer/config.h"
#include "cinfer/error.h"
#include "model/model.h"

struct cinfer_runtime; /* a model bound to a compute backend, a paged KV cache and scratch */

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
};

/* Bytes one token's K and V take in every layer of model config c with KV type kv_dtype
 * (AUTO: f16), for sizing budgets; 0 for a type the model cannot use (q8_0 with a
 * head_dim that is not a multiple of 32). */
size_t cinfer_runtime_kv_token_bytes(const struct cinfer_model_config *c, enum cinfer_kv_cache_dtype kv_dtype);
/* "f32", "f16", "bf16" or "q8_0": the type rt's KV pages hold. */
const char *cinfer_runtime_kv_dtype_name(const struct cinfer_runtime *rt);

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
};

/* Runs every chunk of the batch in one pass (weights read once per call, not once per
 * sequence) and writes the asked logits. */
int cinfer_runtime_forward(struct cinfer_runtime *rt, const struct cinfer_seq_chunk *seqs, int n_seqs,
                           struct cinfer_error *err);

#endif
