/* core/model/kv_window.c — the sliding layers' own KV pages, so that their memory is
 * bounded by the window rather than the context.
 *
 * A page id (what the scheduler, the prefix cache and page tables deal in) stands for
 * one page_tokens run of positions in every layer. With a window pool the page's full
 * attention layers live in the main storage under that id, and its sliding layers in
 * a page of the window storage, window_of[id]. Once no running sequence can attend to
 * the page through a window any more, the scheduler drops the window part
 * (cinfer_runtime_kv_page_drop_window): the full layers keep the page, for the prefix
 * cache and for the sequence's own global layers, while the window page goes back to
 * its pool. A cached prefix is then reusable only up to where the window parts of its
 * last window of positions still exist (cinfer_runtime_kv_window_usable_pages).
 * SGLang's SWA memory pool works the same way (a full pool, a window pool and a
 * mapping between them). */
#include <stdlib.h>
#include <string.h>

#include "model/runtime_internal.h"

/* Window pages per main page when both kinds of layers exist: sequences usually run
 * longer than the window, and cached prefixes keep only their tails' window parts. */
#define WINDOW_PAGES_PER_PAGE 0.5

static int count_sliding(const struct cinfer_model_config *c)
{
    int n = 0;
    for (int l = 0; l < c->num_layers; l++)
        n += cinfer_model_layer_slides(c, l);
    return n;
}

int cinfer_kv_window_plan(struct cinfer_runtime *rt, size_t budget, int page_tokens, int keep_window_pages,
                          int *n_pages, int *n_window_pages)
{
    const struct cinfer_model_config *c = &rt->model->config;
    struct runtime_kv_window *w = &rt->window;
    int sliding = count_sliding(c);
    w->active = 0;
    w->n_layers = 0;
    *n_window_pages = 0;
    /* Under tensor parallelism every rank sizes the pools alike (same budget, same shard
     * of KV heads) and a follower maps pages as rank 0's plan says (tp_plan.h). */
    if (keep_window_pages || sliding == 0) {
        size_t page_bytes = cinfer_kv_token_bytes(c->num_layers, rt->kv_dim, rt->kv_type) * (size_t)page_tokens;
        *n_pages = cinfer_kv_pages_for_budget(budget, page_bytes);
        return 0;
    }
    int full = c->num_layers - sliding;
    size_t full_bytes = cinfer_kv_token_bytes(full, rt->kv_dim, rt->kv_type) * (size_t)page_tokens;
    size_t window_bytes = cinfer_kv_token_bytes(sliding, rt->kv_dim, rt->kv_type) * (size_t)page_tokens;
    /* One sequence's chunk needs the window behind its first query, the chunk itself and
     * a partly filled page at each end. */
    int per_sequence = (c->sliding_window + rt->max_batch_tokens + page_tokens - 1) / page_tokens + 2;
    double pair = (double)full_bytes + WINDOW_PAGES_PER_PAGE * (double)window_bytes;
    size_t pages = (size_t)((double)budget / pair);
    size_t window_pages = (size_t)(WINDOW_PAGES_PER_PAGE * (double)pages);
    if (window_pages < (size_t)per_sequence) {
        window_pages = (size_t)per_sequence;
        size_t taken = window_pages * window_bytes;
        pages = taken < budget && full_bytes > 0 ? (budget - taken) / full_bytes : 0;
        if (full_bytes == 0) /* every layer slides: page ids cost nothing but accounting */
            pages = window_pages * 4;
    }
    if (pages < 1 || window_pages * window_bytes + pages * full_bytes > budget) {
        /* too small a budget to split: one pool, as without a window */
        size_t page_bytes = full_bytes + window_bytes;
        *n_pages = cinfer_kv_pages_for_budget(budget, page_bytes);
        return 0;
    }
    *n_pages = pages > (size_t)INT32_MAX ? INT32_MAX : (int)pages;
    *n_window_pages = window_pages > (size_t)INT32_MAX ? INT32_MAX : (int)window_pages;
    w->active = 1;
    w->tokens = c->sliding_window;
    w->n_layers = sliding;
    return 0;
}

size_t cinfer_kv_window_bytes(const struct cinfer_runtime *rt, int n_pages, int n_window_pages, int page_tokens)
{
    const struct cinfer_model_config *c = &rt->model->config;
    int sliding = rt->window.active ? rt->window.n_layers : 0;
    return cinfer_kv_token_bytes(c->num_layers - sliding, rt->kv_dim, rt->kv_type) * (size_t)page_tokens *
               (size_t)n_pages +
           cinfer_kv_token_bytes(sliding, rt->kv_dim, rt->kv_type) * (size_t)page_tokens * (size_t)n_window_pages;
}

int cinfer_kv_window_init(struct cinfer_runtime *rt, int n_pages, int n_window_pages, struct cinfer_error *err)
{
    const struct cinfer_model_config *c = &rt->model->config;
    struct runtime_kv_window *w = &rt->window;
    w->layer_at = malloc((size_t)c->num_layers * sizeof *w->layer_at);
    if (!w->layer_at)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory for the KV layer map");
    int full = 0, sliding = 0;
    for (int l = 0; l < c->num_layers; l++)
        w->layer_at[l] = w->active && cinfer_model_layer_slides(c, l) ? sliding++ : full++;
    if (!w->active)
        return 0;
    int rc = cinfer_kv_pages_init(&w->pages, n_window_pages, rt->pages.page_tokens, err);
    if (rc < 0)
        return rc;
    w->of = malloc((size_t)n_pages * sizeof *w->of);
    w->slots = malloc((size_t)rt->max_batch_tokens * sizeof *w->slots);
    w->seqs = malloc((size_t)rt->max_batch_tokens * sizeof *w->seqs);
    if (!w->of || !w->slots || !w->seqs)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory for the sliding-window page map");
    for (int i = 0; i < n_pages; i++)
        w->of[i] = -1;
    return 0;
}

void cinfer_kv_window_fini(struct cinfer_runtime *rt)
{
    struct runtime_kv_window *w = &rt->window;
    if (w->storage)
        rt->ops->kv_destroy(rt->backend, w->storage);
    if (w->pages.refcount)
        cinfer_kv_pages_fini(&w->pages);
    free(w->of);
    free(w->layer_at);
    free(w->slots);
    free(w->seqs);
    free(w->tables);
    memset(w, 0, sizeof *w);
}

/* The window storage's page tables for a call: each sequence's ids mapped to window
 * pages; a page whose window part is gone maps to window page 0, which attention never
 * reads (it starts at the page of the chunk's first query's window). */
int cinfer_kv_window_plan_seq(struct cinfer_runtime *rt, int s, const struct cinfer_seq_chunk *c, int row,
                              int pages_used, size_t *tables_used, struct cinfer_error *err)
{
    struct runtime_kv_window *w = &rt->window;
    int pt = rt->pages.page_tokens;
    if (*tables_used + (size_t)pages_used > w->tables_cap) {
        size_t cap = (*tables_used + (size_t)pages_used) * 2;
        int32_t *grown = realloc(w->tables, cap * sizeof *grown);
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "runtime: out of memory for sliding-window page tables");
        w->tables = grown;
        w->tables_cap = cap;
    }
    int32_t *table = w->tables + *tables_used;
    int first_seen = c->start_pos - w->tokens + 1; /* the chunk's first query's window starts here */
    for (int p = 0; p < pages_used; p++) {
        int32_t wp = w->of[c->page_table[p]];
        if (wp < 0 && (p + 1) * pt > first_seen)
            return cinfer_error_set(err, CINFER_ERR_INTERNAL,
                                    "forward: sequence %d page table entry %d (positions %d..%d) is page %d, whose "
                                    "sliding-window part was released, but its chunk from position %d still "
                                    "attends to position %d",
                                    s, p, p * pt, (p + 1) * pt - 1, c->page_table[p], c->start_pos,
                                    first_seen > 0 ? first_seen : 0);
        table[p] = wp < 0 ? 0 : wp;
    }
    for (int t = 0; t < c->n_tokens; t++) {
        int pos = c->start_pos + t;
        w->slots[row + t] = table[pos / pt] * pt + pos % pt;
    }
    /* the table pointer is set once every sequence's table is in (tables may move) */
    w->seqs[s] = (struct cinfer_backend_attn_seq){row, c->n_tokens, c->start_pos, NULL, pages_used};
    *tables_used += (size_t)pages_used;
    return 0;
}

void cinfer_kv_window_plan_done(struct cinfer_runtime *rt, int n_seqs)
{
    size_t at = 0;
    for (int s = 0; s < n_seqs; s++) {
        rt->window.seqs[s].page_table = rt->window.tables + at;
        at += (size_t)rt->window.seqs[s].n_pages;
    }
}

int cinfer_runtime_kv_window_tokens(const struct cinfer_runtime *rt)
{
    return rt->window.active ? rt->window.tokens : 0;
}

int cinfer_runtime_kv_page_has_window(const struct cinfer_runtime *rt, int32_t page)
{
    return !rt->window.active || rt->window.of[page] >= 0;
}

void cinfer_runtime_kv_page_drop_window(struct cinfer_runtime *rt, int32_t page)
{
    struct runtime_kv_window *w = &rt->window;
    if (!w->active || w->of[page] < 0)
        return;
    cinfer_kv_pages_unref(&w->pages, w->of[page]);
    w->of[page] = -1;
}

void cinfer_runtime_kv_window_usage(const struct cinfer_runtime *rt, int *pages_total, int *pages_used)
{
    *pages_total = rt->window.active ? rt->window.pages.n_pages : 0;
    *pages_used = rt->window.active ? rt->window.pages.n_pages - rt->window.pages.n_free : 0;
}

int cinfer_runtime_kv_window_usable_pages(const struct cinfer_runtime *rt, const int32_t *pages, int n_pages)
{
    const struct runtime_kv_window *w = &rt->window;
    if (!w->active)
        return n_pages;
    int pt = rt->pages.page_tokens;
    for (int m = n_pages; m > 0; m--) {
        /* a sequence resuming at position m * pt first attends to m * pt - window + 1 */
        int first_seen = m * pt - w->tokens + 1;
        int ok = 1;
        for (int p = first_seen > 0 ? first_seen / pt : 0; p < m && ok; p++)
            ok = w->of[pages[p]] >= 0;
        if (ok)
            return m;
    }
    return 0;
}
