/* The prefix cache of KV pages (radix_cache.h). */
#include "scheduler/radix_cache.h"

#include <stdlib.h>
#include <string.h>

struct cinfer_radix_node {
    struct cinfer_radix_node *parent;
    struct cinfer_radix_node **children; /* (n_children) */
    int n_children, cap_children;
    int32_t *key;        /* (page_tokens) the token ids this page holds; NULL at the root */
    int32_t page;        /* -1 at the root */
    int lock_count;      /* requests whose locked path passes here */
    uint64_t last_used;  /* the cache's logical clock at the last match or insert */
    int index;           /* position in cache->nodes */
};

struct cinfer_radix_cache {
    struct cinfer_runtime *rt;
    int page_tokens;
    struct cinfer_radix_node root;
    struct cinfer_radix_node **nodes; /* (n_nodes) every node but the root, for eviction */
    int n_nodes, cap_nodes;
    int n_locked;        /* nodes with lock_count > 0 */
    uint64_t clock;
};

int cinfer_radix_cache_create(struct cinfer_runtime *rt, struct cinfer_radix_cache **out, struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_radix_cache *c = calloc(1, sizeof *c);
    if (!c)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "prefix cache: out of memory");
    c->rt = rt;
    c->page_tokens = cinfer_runtime_kv_page_tokens(rt);
    c->root.page = -1;
    c->root.index = -1;
    *out = c;
    return CINFER_OK;
}

static void node_free(struct cinfer_radix_node *n)
{
    free(n->children);
    free(n->key);
    free(n);
}

/* Unlinks a leaf from its parent and the node list, dropping the tree's page reference. */
static void remove_leaf(struct cinfer_radix_cache *c, struct cinfer_radix_node *n)
{
    struct cinfer_radix_node *p = n->parent;
    for (int i = 0; i < p->n_children; i++)
        if (p->children[i] == n) {
            p->children[i] = p->children[--p->n_children];
            break;
        }
    struct cinfer_radix_node *last = c->nodes[--c->n_nodes];
    c->nodes[n->index] = last;
    last->index = n->index;
    cinfer_runtime_kv_page_unref(c->rt, n->page);
    node_free(n);
}

void cinfer_radix_cache_destroy(struct cinfer_radix_cache **cp)
{
    if (!cp || !*cp)
        return;
    struct cinfer_radix_cache *c = *cp;
    for (int i = 0; i < c->n_nodes; i++) {
        cinfer_runtime_kv_page_unref(c->rt, c->nodes[i]->page);
        node_free(c->nodes[i]);
    }
    free(c->nodes);
    free(c->root.children);
    free(c);
    *cp = NULL;
}

static struct cinfer_radix_node *child_for(const struct cinfer_radix_cache *c, const struct cinfer_radix_node *n,
                                           const int32_t *page_ids)
{
    for (int i = 0; i < n->n_children; i++) {
        struct cinfer_radix_node *ch = n->children[i];
        if (ch->key[0] == page_ids[0] && !memcmp(ch->key, page_ids, (size_t)c->page_tokens * sizeof *page_ids))
            return ch;
    }
    return NULL;
}

int cinfer_radix_cache_peek(const struct cinfer_radix_cache *c, const int32_t *tokens, int n_tokens)
{
    const struct cinfer_radix_node *n = &c->root;
    int matched = 0;
    while ((matched + 1) * c->page_tokens <= n_tokens &&
           (n = child_for(c, n, tokens + (size_t)matched * (size_t)c->page_tokens)) != NULL)
        matched++;
    return matched;
}

static void lock_path(struct cinfer_radix_cache *c, struct cinfer_radix_node *n)
{
    for (; n && n != &c->root; n = n->parent)
        if (n->lock_count++ == 0)
            c->n_locked++;
}

void cinfer_radix_cache_unlock(struct cinfer_radix_cache *c, struct cinfer_radix_node *n)
{
    for (; n && n != &c->root; n = n->parent)
        if (--n->lock_count == 0)
            c->n_locked--;
}

int cinfer_radix_cache_match(struct cinfer_radix_cache *c, const int32_t *tokens, int n_tokens, int32_t *pages_out,
                             struct cinfer_radix_node **node_out)
{
    struct cinfer_radix_node *n = &c->root;
    int matched = 0;
    uint64_t now = ++c->clock;
    for (;;) {
        if ((matched + 1) * c->page_tokens > n_tokens)
            break;
        struct cinfer_radix_node *next = child_for(c, n, tokens + (size_t)matched * (size_t)c->page_tokens);
        if (!next)
            break;
        n = next;
        n->last_used = now;
        cinfer_runtime_kv_page_ref(c->rt, n->page);
        pages_out[matched++] = n->page;
    }
    lock_path(c, n);
    *node_out = n;
    return matched;
}

static struct cinfer_radix_node *add_child(struct cinfer_radix_cache *c, struct cinfer_radix_node *parent,
                                           const int32_t *page_ids, int32_t page)
{
    if (parent->n_children == parent->cap_children) {
        int cap = parent->cap_children ? parent->cap_children * 2 : 2;
        struct cinfer_radix_node **grown = realloc(parent->children, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        parent->children = grown;
        parent->cap_children = cap;
    }
    if (c->n_nodes == c->cap_nodes) {
        int cap = c->cap_nodes ? c->cap_nodes * 2 : 64;
        struct cinfer_radix_node **grown = realloc(c->nodes, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        c->nodes = grown;
        c->cap_nodes = cap;
    }
    struct cinfer_radix_node *n = calloc(1, sizeof *n);
    if (n)
        n->key = malloc((size_t)c->page_tokens * sizeof *n->key);
    if (!n || !n->key) {
        free(n);
        return NULL;
    }
    memcpy(n->key, page_ids, (size_t)c->page_tokens * sizeof *page_ids);
    n->parent = parent;
    n->page = page;
    n->index = c->n_nodes;
    cinfer_runtime_kv_page_ref(c->rt, page);
    c->nodes[c->n_nodes++] = n;
    parent->children[parent->n_children++] = n;
    return n;
}

int cinfer_radix_cache_insert(struct cinfer_radix_cache *c, const int32_t *tokens, int32_t *pages, int n_pages,
                              struct cinfer_radix_node **node)
{
    struct cinfer_radix_node *n = &c->root;
    uint64_t now = ++c->clock;
    int rc = CINFER_OK;
    for (int i = 0; i < n_pages; i++) {
        const int32_t *ids = tokens + (size_t)i * (size_t)c->page_tokens;
        struct cinfer_radix_node *next = child_for(c, n, ids);
        if (next && next->page != pages[i] && !cinfer_runtime_kv_page_has_window(c->rt, next->page) &&
            cinfer_runtime_kv_page_has_window(c->rt, pages[i])) {
            /* The same K/V, but only the caller's page still has its sliding layers' part
             * (kv_window.c), which the caller may still attend to: the tree takes it. */
            cinfer_runtime_kv_page_ref(c->rt, pages[i]);
            cinfer_runtime_kv_page_unref(c->rt, next->page);
            next->page = pages[i];
        } else if (next && next->page != pages[i]) {
            /* Same tokens at the same positions: the same K/V. Share the tree's page. */
            cinfer_runtime_kv_page_ref(c->rt, next->page);
            cinfer_runtime_kv_page_unref(c->rt, pages[i]);
            pages[i] = next->page;
        } else if (!next && !(next = add_child(c, n, ids, pages[i]))) {
            rc = CINFER_ERR_NOMEM;
            break;
        }
        n = next;
        n->last_used = now;
    }
    /* Lock the new path before unlocking the old one, so shared nodes never reach 0. */
    lock_path(c, n);
    cinfer_radix_cache_unlock(c, *node);
    *node = n;
    return rc;
}

static int by_last_used(const void *a, const void *b)
{
    const struct cinfer_radix_node *x = *(struct cinfer_radix_node *const *)a;
    const struct cinfer_radix_node *y = *(struct cinfer_radix_node *const *)b;
    return x->last_used < y->last_used ? -1 : x->last_used > y->last_used;
}

int cinfer_radix_cache_evict(struct cinfer_radix_cache *c, int n_pages)
{
    int evicted = 0;
    /* Rounds: take the unlocked leaves oldest first; parents left childless become
     * leaves for the next round. */
    while (evicted < n_pages) {
        struct cinfer_radix_node **leaves = malloc((size_t)(c->n_nodes + 1) * sizeof *leaves);
        if (!leaves)
            break;
        int n_leaves = 0;
        for (int i = 0; i < c->n_nodes; i++)
            if (c->nodes[i]->n_children == 0 && c->nodes[i]->lock_count == 0)
                leaves[n_leaves++] = c->nodes[i];
        qsort(leaves, (size_t)n_leaves, sizeof *leaves, by_last_used);
        for (int i = 0; i < n_leaves && evicted < n_pages; i++, evicted++)
            remove_leaf(c, leaves[i]);
        free(leaves);
        if (n_leaves == 0)
            break;
    }
    return evicted;
}

int cinfer_radix_cache_flush(struct cinfer_radix_cache *c)
{
    cinfer_radix_cache_evict(c, c->n_nodes);
    return c->n_nodes;
}

int cinfer_radix_cache_pages(const struct cinfer_radix_cache *c) { return c->n_nodes; }
int cinfer_radix_cache_evictable_pages(const struct cinfer_radix_cache *c) { return c->n_nodes - c->n_locked; }
