/* core/model/kv_cache.h — page accounting of the paged KV cache: which pages are free
 * and how many sequences hold each one. The pages' contents live in the backend's KV
 * storage; this is only the bookkeeping, so it can be tested alone. */
#ifndef CINFER_MODEL_KV_CACHE_H
#define CINFER_MODEL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

struct cinfer_kv_pages {
    int n_pages;
    int page_tokens;
    int32_t *refcount;  /* (n_pages) 0 when free */
    int32_t *free_list; /* (n_pages) stack of free page ids, n_free of them */
    int n_free;
};

/* Bytes one page takes in storage: K and V of page_tokens positions in every layer. */
size_t cinfer_kv_page_bytes(int n_layers, int page_tokens, int kv_dim, size_t element_bytes);
/* Bytes of one row of kv_dim values of KV type t (enum cinfer_kv_type: 4 / 2 / 2 bytes a
 * value, q8_0 34 bytes per 32), and of one token's K and V in every layer. */
size_t cinfer_kv_row_bytes(int kv_type, int kv_dim);
size_t cinfer_kv_token_bytes(int n_layers, int kv_dim, int kv_type);
/* How many whole pages fit in budget_bytes (0 when not even one). */
int cinfer_kv_pages_for_budget(size_t budget_bytes, size_t page_bytes);

int cinfer_kv_pages_init(struct cinfer_kv_pages *kv, int n_pages, int page_tokens, struct cinfer_error *err);
void cinfer_kv_pages_fini(struct cinfer_kv_pages *kv);

/* CINFER_ERR_NOMEM when no page is free; the new page has refcount 1. */
int cinfer_kv_pages_alloc(struct cinfer_kv_pages *kv, int32_t *page_out);
/* ref/unref of a page that is out of range or free is a caller bug: it aborts with a
 * message rather than corrupting another sequence's cache. */
void cinfer_kv_pages_ref(struct cinfer_kv_pages *kv, int32_t page);
void cinfer_kv_pages_unref(struct cinfer_kv_pages *kv, int32_t page); /* freed at 0 */
int cinfer_kv_pages_refcount(const struct cinfer_kv_pages *kv, int32_t page);

#endif
