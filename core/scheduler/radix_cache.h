/* A prefix cache of KV pages keyed by token ids (SGLang's RadixAttention, at page
 * granularity): each node below the root stands for one full KV page, its edge the
 * page_tokens ids that page holds, so a path from the root spells a token prefix whose
 * K/V are in the path's pages. The tree holds one reference on every page it keeps.
 *
 * Requests lock the path they use (lock_count on every node from theirs up to the
 * root); only unlocked leaves are evicted, least recently used first, and evicting one
 * drops the tree's reference so the page goes back to the free list. Edges are exactly
 * one page long (a trie of pages rather than a path-compressed radix tree): matching and
 * eviction work in whole pages anyway, and a node per page keeps both simple. */
#ifndef CINFER_SCHEDULER_RADIX_CACHE_H
#define CINFER_SCHEDULER_RADIX_CACHE_H

#include <stdint.h>

#include "cinfer/error.h"
#include "model/runtime.h"

struct cinfer_radix_cache;
struct cinfer_radix_node;

int cinfer_radix_cache_create(struct cinfer_runtime *rt, struct cinfer_radix_cache **out, struct cinfer_error *err);
/* Drops every page reference the tree holds (locks must be released first). */
void cinfer_radix_cache_destroy(struct cinfer_radix_cache **cache);

/* Longest cached prefix of tokens[0, n_tokens), in whole pages, without changing
 * anything: how many pages match. */
int cinfer_radix_cache_peek(const struct cinfer_radix_cache *cache, const int32_t *tokens, int n_tokens);

/* Finds the longest cached prefix of tokens[0, n_tokens) in whole pages, writes its
 * pages to pages_out (room for n_tokens / page_tokens), takes one page reference for
 * the caller on each, marks them used now, and locks the path. Returns the number of
 * pages; *node_out is the deepest node (the root when none matched), to unlock later. */
int cinfer_radix_cache_match(struct cinfer_radix_cache *cache, const int32_t *tokens, int n_tokens,
                             int32_t *pages_out, struct cinfer_radix_node **node_out);

/* Adds the first n_pages full pages of a sequence (tokens and their pages) to the tree.
 * Where the tree already holds a page for the same tokens, the caller's page entry is
 * swapped for the tree's (the caller's reference moves: it drops its own page and
 * takes the tree's), so equal prefixes end up sharing one page. Locks the new deepest
 * node and unlocks *node (the caller's previous lock), updating *node. Returns 0 or
 * CINFER_ERR_NOMEM (then the tree holds a shorter prefix; nothing is lost). */
int cinfer_radix_cache_insert(struct cinfer_radix_cache *cache, const int32_t *tokens, int32_t *pages, int n_pages,
                              struct cinfer_radix_node **node);

/* Releases a lock taken by match or insert (NULL is ignored). */
void cinfer_radix_cache_unlock(struct cinfer_radix_cache *cache, struct cinfer_radix_node *node);

/* Evicts unlocked leaves, least recently used first, until n_pages pages went back to
 * the runtime or none is left to evict. Returns how many pages were evicted. */
int cinfer_radix_cache_evict(struct cinfer_radix_cache *cache, int n_pages);

/* Evicts every unlocked node; returns how many pages remain (held by locked paths). */
int cinfer_radix_cache_flush(struct cinfer_radix_cache *cache);

/* Pages the tree holds now, and how many of them no request locks. */
int cinfer_radix_cache_pages(const struct cinfer_radix_cache *cache);
int cinfer_radix_cache_evictable_pages(const struct cinfer_radix_cache *cache);

#endif
