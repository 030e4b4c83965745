/* core/model/tp_plan.h — the plan of one forward call as tensor-parallel rank 0 sends
 * it to the other ranks: what each sequence chunk carries (tokens, start position, page
 * table, logits mode), nothing the followers do not need (no logits_out).
 *
 * Encoding, version 3, every field little-endian:
 *   header (48 bytes):
 *     magic "CTPP" | u32 version | u32 total bytes | u32 n_seqs | u64 step |
 *     u32 n_tokens (all sequences') | u32 kv_pages | u32 page_tokens | u32 vocab |
 *     u32 window_pages (the sliding layers' own pool, kv_window.c; 0: none) |
 *     u32 ep_size (1: every expert's width split; tp_size: whole experts per rank)
 *   then per sequence (16 bytes + 4 * (n_tokens + n_pages), + 4 * n_pages with a window pool):
 *     u32 n_tokens | u32 start_pos | u32 n_pages | u32 logits mode (0 none, 1 last, 2 all) |
 *     i32 tokens[n_tokens] | i32 pages[n_pages] | i32 window_of[n_pages] (with a window pool)
 * A sequence carries exactly the pages its positions [0, start_pos + n_tokens) use, and
 * with a window pool the window page of each (-1: released), so a follower maps them as
 * rank 0's scheduler did. kv_pages, page_tokens, vocab, window_pages and ep_size are the
 * sender's: a rank whose cache or vocabulary differs refuses the plan rather than reading
 * other pages, and one that splits the experts otherwise refuses it rather than summing
 * a mix of whole experts and slices. step numbers the plans, so a lost or repeated one is noticed. */
#ifndef CINFER_MODEL_TP_PLAN_H
#define CINFER_MODEL_TP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"
#include "model/runtime.h"

#define CINFER_TP_PLAN_VERSION 3u
#define CINFER_TP_PLAN_HEADER_BYTES 48u
#define CINFER_TP_PLAN_SEQ_BYTES 16u

/* What the plan must agree with: the receiving rank's cache, vocabulary, batch size and
 * expert split. */
struct cinfer_tp_plan_limits {
    int vocab;
    int kv_pages;
    int page_tokens;
    int max_batch_tokens;
    int window_pages; /* of the sliding layers' pool; 0: the rank has none */
    int ep_size;      /* 0 or 1: experts split by width; else whole experts over ep_size ranks */
};

/* Bytes of the plan of seqs (already checked by the forward pass). */
size_t cinfer_tp_plan_bytes(const struct cinfer_seq_chunk *seqs, int n_seqs, const struct cinfer_tp_plan_limits *lim);
/* Writes it to out (cinfer_tp_plan_bytes of room); window_of (kv_pages: each page's
 * window page or -1) when lim->window_pages > 0, else NULL. */
void cinfer_tp_plan_encode(uint64_t step, const struct cinfer_tp_plan_limits *lim, const struct cinfer_seq_chunk *seqs,
                           int n_seqs, const int32_t *window_of, uint8_t *out);

/* A decoded plan. Its arrays grow as plans need and are reused from call to call. */
struct cinfer_tp_plan {
    uint64_t step;
    int n_seqs;
    int n_tokens;
    struct cinfer_seq_chunk *seqs; /* (n_seqs) tokens and page tables point into ints */
    const int32_t **window_of;     /* (n_seqs) each page's window page (n_pages), into ints; NULL: no pool */
    int32_t *ints;                 /* every sequence's tokens, then its pages (and window pages) */
    size_t seqs_cap, ints_cap;
};

/* Decodes and checks every field against lim; errors name the field and the numbers
 * ("plan: sequence 2 token 5 is id 70000, outside the vocabulary [0, 32000)"). */
int cinfer_tp_plan_decode(const void *plan, size_t plan_bytes, const struct cinfer_tp_plan_limits *lim,
                          struct cinfer_tp_plan *out, struct cinfer_error *err);
void cinfer_tp_plan_free(struct cinfer_tp_plan *p);

#endif
