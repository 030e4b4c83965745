/* The byte-pair merge engine of Hugging Face's BPE model: start from one symbol per
 * character (per byte for byte-level vocabularies), then merge the adjacent pair with
 * the lowest merge rank, leftmost first, until no adjacent pair has a merge. A binary
 * heap of candidate merges keeps a piece of n symbols at O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

struct symbol {
    int32_t id;
    int32_t prev, next; /* neighbours in the live chain, -1 at the ends */
    int alive;
};

struct candidate {
    int32_t rank;
    int32_t pos;    /* left symbol */
    int32_t merged; /* id the pair becomes; a stale candidate no longer matches */
};

struct tok_bpe_work {
    struct symbol *syms;
    size_t n_syms, cap_syms;
    struct candidate *heap;
    size_t n_heap, cap_heap;
};

struct tok_bpe_work *cinfer_tok_bpe_work_new(void)
{
    return calloc(1, sizeof(struct tok_bpe_work));
}

void cinfer_tok_bpe_work_free(struct tok_bpe_work *w)
{
    if (!w)
        return;
    free(w->syms);
    free(w->heap);
    free(w);
}

static int add_symbol(struct tok_bpe_work *w, int32_t id)
{
    if (w->n_syms == w->cap_syms) {
        size_t cap = w->cap_syms ? w->cap_syms * 2 : 64;
        struct symbol *s = realloc(w->syms, cap * sizeof(*s));
        if (!s)
            return CINFER_ERR_NOMEM;
        w->syms = s;
        w->cap_syms = cap;
    }
    int32_t i = (int32_t)w->n_syms++;
    w->syms[i] = (struct symbol){id, i - 1, -1, 1};
    if (i > 0)
        w->syms[i - 1].next = i;
    return CINFER_OK;
}

static int before(const struct candidate *a, const struct candidate *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(struct tok_bpe_work *w, struct candidate c)
{
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        struct candidate *h = realloc(w->heap, cap * sizeof(*h));
        if (!h)
            return CINFER_ERR_NOMEM;
        w->heap = h;
        w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&c, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = c;
    return CINFER_OK;
}

static struct candidate heap_pop(struct tok_bpe_work *w)
{
    struct candidate top = w->heap[0];
    struct candidate last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(&w->heap[child + 1], &w->heap[child]))
            child++;
        if (!before(&w->heap[child], &last))
            break;
        w->heap[i] = w->heap[child];
        i = child;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

static int consider(const struct cinfer_tokenizer *tok, struct tok_bpe_work *w, int32_t left)
{
    if (left < 0 || w->syms[left].next < 0)
        return CINFER_OK;
    const struct tok_pair_entry *e =
        cinfer_tok_pairmap_get(&tok->merges, w->syms[left].id, w->syms[w->syms[left].next].id);
    if (!e)
        return CINFER_OK;
    return heap_push(w, (struct candidate){e->rank, left, e->merged});
}

/* Initial symbols: one per byte (byte-level) or per character, with byte fallback and
 * unknown-token handling as BPE::merge_word. */
static int initial_symbols(const struct cinfer_tokenizer *tok, const char *s, size_t n,
                           struct tok_bpe_work *w)
{
    int pending_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t k = 1;
        int32_t id;
        if (tok->byte_level) {
            id = tok->byte_ids[(uint8_t)s[i]];
        } else {
            uint32_t cp;
            k = cinfer_tok_utf8_next(s + i, n - i, &cp);
            id = cinfer_tok_strmap_get(&tok->model_ids, s + i, k);
        }
        if (id >= 0) {
            if (pending_unk && add_symbol(w, tok->unk_id))
                return CINFER_ERR_NOMEM;
            pending_unk = 0;
            if (add_symbol(w, id))
                return CINFER_ERR_NOMEM;
            i += k;
            continue;
        }
        if (tok->byte_fallback) {
            int all = 1;
            for (size_t b = 0; b < k; b++)
                all &= tok->fallback_ids[(uint8_t)s[i + b]] >= 0;
            if (all) {
                if (pending_unk && add_symbol(w, tok->unk_id))
                    return CINFER_ERR_NOMEM;
                pending_unk = 0;
                for (size_t b = 0; b < k; b++)
                    if (add_symbol(w, tok->fallback_ids[(uint8_t)s[i + b]]))
                        return CINFER_ERR_NOMEM;
                i += k;
                continue;
            }
        }
        if (tok->unk_id >= 0) {
            if (pending_unk && !tok->fuse_unk && add_symbol(w, tok->unk_id))
                return CINFER_ERR_NOMEM;
            pending_unk = 1;
        }
        i += k;
    }
    if (pending_unk && add_symbol(w, tok->unk_id))
        return CINFER_ERR_NOMEM;
    return CINFER_OK;
}

int cinfer_tok_bpe_encode_piece(const struct cinfer_tokenizer *tok, const char *s, size_t n,
                                struct tok_bpe_work *w, struct cinfer_token_ids *out)
{
    if (n == 0)
        return CINFER_OK;
    if (tok->ignore_merges) {
        int32_t whole = cinfer_tok_strmap_get(&tok->model_ids, s, n);
        if (whole >= 0)
            return cinfer_token_ids_push(out, whole);
    }
    uint64_t hash = cinfer_tok_hash_bytes(s, n);
    if (cinfer_tok_cache_get(tok->cache, hash, s, n, out))
        return CINFER_OK;
    w->n_syms = 0;
    w->n_heap = 0;
    int rc = initial_symbols(tok, s, n, w);
    for (int32_t i = 0; rc == CINFER_OK && i + 1 < (int32_t)w->n_syms; i++)
        rc = consider(tok, w, i);
    while (rc == CINFER_OK && w->n_heap) {
        struct candidate c = heap_pop(w);
        struct symbol *left = &w->syms[c.pos];
        if (!left->alive || left->next < 0)
            continue;
        struct symbol *right = &w->syms[left->next];
        const struct tok_pair_entry *e = cinfer_tok_pairmap_get(&tok->merges, left->id, right->id);
        if (!e || e->merged != c.merged)
            continue; /* stale: a neighbour changed since this candidate was queued */
        left->id = c.merged;
        right->alive = 0;
        left->next = right->next;
        if (right->next >= 0)
            w->syms[right->next].prev = c.pos;
        rc = consider(tok, w, left->prev);
        if (rc == CINFER_OK)
            rc = consider(tok, w, c.pos);
    }
    if (rc)
        return rc;
    if (cinfer_token_ids_reserve(out, out->len + w->n_syms))
        return CINFER_ERR_NOMEM;
    size_t first = out->len;
    for (int32_t i = w->n_syms ? 0 : -1; i >= 0; i = w->syms[i].next)
        out->ids[out->len++] = w->syms[i].id;
    if (out->len > first) /* an empty piece has nothing worth caching (and out->ids may be NULL) */
        cinfer_tok_cache_put(tok->cache, hash, s, n, out->ids + first, out->len - first);
    return CINFER_OK;
}
