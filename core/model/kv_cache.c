/* core/model/kv_cache.c — refcounted page accounting for the paged KV cache. Free
 * pages sit on a stack so alloc and free are O(1). */
#include "model/kv_cache.h"

#include <stdio.h>
#include <stdlib.h>

#include "cinfer/backend.h"

size_t cinfer_kv_page_bytes(int n_layers, int page_tokens, int kv_dim, size_t element_bytes)
{
    return (size_t)n_layers * 2 /* K and V */ * (size_t)page_tokens * (size_t)kv_dim * element_bytes;
}

size_t cinfer_kv_row_bytes(int kv_type, int kv_dim)
{
    switch (kv_type) {
    case CINFER_KV_F32: return (size_t)kv_dim * 4;
    case CINFER_KV_F16:
    case CINFER_KV_BF16: return (size_t)kv_dim * 2;
    case CINFER_KV_Q8_0: return (size_t)(kv_dim / 32) * 34;
    }
    return 0;
}

size_t cinfer_kv_token_bytes(int n_layers, int kv_dim, int kv_type)
{
    return (size_t)n_layers * 2 /* K and V */ * cinfer_kv_row_bytes(kv_type, kv_dim);
}

int cinfer_kv_pages_for_budget(size_t budget_bytes, size_t page_bytes)
{
    if (page_bytes == 0)
        return 0;
    size_t pages = budget_bytes / page_bytes;
    return pages > (size_t)INT32_MAX ? INT32_MAX : (int)pages;
}

int cinfer_kv_pages_init(struct cinfer_kv_pages *kv, int n_pages, int page_tokens, struct cinfer_error *err)
{
    kv->n_pages = n_pages;
    kv->page_tokens = page_tokens;
    kv->refcount = calloc((size_t)n_pages + 1, sizeof *kv->refcount);
    kv->free_list = calloc((size_t)n_pages + 1, sizeof *kv->free_list);
    if (!kv->refcount || !kv->free_list) {
        cinfer_kv_pages_fini(kv);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "KV cache: out of memory for the accounting of %d pages",
                                n_pages);
    }
    /* lowest ids on top of the stack: pages come out in order 0, 1, 2, ... */
    for (int i = 0; i < n_pages; i++)
        kv->free_list[i] = n_pages - 1 - i;
    kv->n_free = n_pages;
    return 0;
}

void cinfer_kv_pages_fini(struct cinfer_kv_pages *kv)
{
    free(kv->refcount);
    free(kv->free_list);
    kv->refcount = NULL;
    kv->free_list = NULL;
    kv->n_pages = 0;
    kv->n_free = 0;
}

int cinfer_kv_pages_alloc(struct cinfer_kv_pages *kv, int32_t *page_out)
{
    if (kv->n_free == 0)
        return CINFER_ERR_NOMEM;
    int32_t page = kv->free_list[--kv->n_free];
    kv->refcount[page] = 1;
    *page_out = page;
    return 0;
}

static void check_held(const struct cinfer_kv_pages *kv, int32_t page, const char *what)
{
    if (page < 0 || page >= kv->n_pages || kv->refcount[page] <= 0) {
        fprintf(stderr, "cinfer: KV cache %s of page %d, which is %s (pages 0..%d): a caller bug\n", what, page,
                page < 0 || page >= kv->n_pages ? "out of range" : "free", kv->n_pages - 1);
        abort();
    }
}

void cinfer_kv_pages_ref(struct cinfer_kv_pages *kv, int32_t page)
{
    check_held(kv, page, "ref");
    kv->refcount[page]++;
}

void cinfer_kv_pages_unref(struct cinfer_kv_pages *kv, int32_t page)
{
    check_held(kv, page, "unref");
    if (--kv->refcount[page] == 0)
        kv->free_list[kv->n_free++] = page;
}

int cinfer_kv_pages_refcount(const struct cinfer_kv_pages *kv, int32_t page)
{
    if (page < 0 || page >= kv->n_pages)
        return -1;
    return kv->refcount[page];
}
