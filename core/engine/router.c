#include "engine/router.h"

#include <stdlib.h>
#include <string.h>

/* SGLang's router defaults: cache-aware above half the prompt, unless the loads differ
 * by more than 32 requests and by any relative margin. */
#define CACHE_THRESHOLD 0.5
#define BALANCE_ABS_THRESHOLD 32

struct block {
    uint64_t hash;
    struct block *chain;      /* next in its hash bucket */
    struct block *newer, *older; /* recency list */
};

struct replica_blocks {
    struct block **buckets;   /* (n_buckets) */
    size_t n_buckets;
    struct block *newest, *oldest;
    size_t n;
};

struct engine_router {
    int n_replicas;
    int next_tie;             /* where the search for the least loaded starts: ties take turns */
    size_t max_blocks;
    struct replica_blocks *replicas; /* (n_replicas) */
};

/* FNV-1a over the block's tokens, chained from the previous block's hash. */
static uint64_t block_hash(uint64_t previous, const int32_t *ids)
{
    uint64_t h = previous ^ 0xcbf29ce484222325ull;
    for (int i = 0; i < CINFER_ROUTER_BLOCK_TOKENS; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h ? h : 1;
}

static struct block **bucket_of(struct replica_blocks *rb, uint64_t hash)
{
    return &rb->buckets[hash % rb->n_buckets];
}

static struct block *find(struct replica_blocks *rb, uint64_t hash)
{
    for (struct block *b = *bucket_of(rb, hash); b; b = b->chain)
        if (b->hash == hash)
            return b;
    return NULL;
}

static void unlink_recency(struct replica_blocks *rb, struct block *b)
{
    if (b->newer)
        b->newer->older = b->older;
    else
        rb->newest = b->older;
    if (b->older)
        b->older->newer = b->newer;
    else
        rb->oldest = b->newer;
    b->newer = b->older = NULL;
}

static void push_newest(struct replica_blocks *rb, struct block *b)
{
    b->older = rb->newest;
    b->newer = NULL;
    if (rb->newest)
        rb->newest->newer = b;
    rb->newest = b;
    if (!rb->oldest)
        rb->oldest = b;
}

static void drop(struct replica_blocks *rb, struct block *b)
{
    for (struct block **p = bucket_of(rb, b->hash); *p; p = &(*p)->chain)
        if (*p == b) {
            *p = b->chain;
            break;
        }
    unlink_recency(rb, b);
    free(b);
    rb->n--;
}

struct engine_router *cinfer_router_new(int n_replicas, size_t max_blocks)
{
    struct engine_router *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->n_replicas = n_replicas;
    r->max_blocks = max_blocks ? max_blocks : 1;
    r->replicas = calloc((size_t)n_replicas, sizeof *r->replicas);
    for (int i = 0; r->replicas && i < n_replicas; i++) {
        r->replicas[i].n_buckets = r->max_blocks;
        r->replicas[i].buckets = calloc(r->max_blocks, sizeof *r->replicas[i].buckets);
        if (!r->replicas[i].buckets) {
            cinfer_router_free(&r);
            return NULL;
        }
    }
    if (!r->replicas)
        cinfer_router_free(&r);
    return r;
}

void cinfer_router_forget(struct engine_router *r, int replica)
{
    struct replica_blocks *rb = &r->replicas[replica];
    while (rb->oldest)
        drop(rb, rb->oldest);
}

void cinfer_router_free(struct engine_router **rp)
{
    struct engine_router *r = *rp;
    if (!r)
        return;
    for (int i = 0; r->replicas && i < r->n_replicas; i++) {
        if (r->replicas[i].buckets)
            cinfer_router_forget(r, i);
        free(r->replicas[i].buckets);
    }
    free(r->replicas);
    free(r);
    *rp = NULL;
}

/* Blocks of the prompt this replica holds, from the first on. */
static size_t matched_blocks(struct replica_blocks *rb, const uint64_t *hashes, size_t n_blocks)
{
    size_t k = 0;
    while (k < n_blocks && find(rb, hashes[k]))
        k++;
    return k;
}

static void remember(struct engine_router *r, struct replica_blocks *rb, const uint64_t *hashes, size_t n_blocks)
{
    for (size_t k = 0; k < n_blocks; k++) {
        struct block *b = find(rb, hashes[k]);
        if (b) {
            unlink_recency(rb, b);
            push_newest(rb, b);
            continue;
        }
        if (rb->n >= r->max_blocks)
            drop(rb, rb->oldest);
        b = calloc(1, sizeof *b);
        if (!b)
            return; /* forgetting is always allowed */
        b->hash = hashes[k];
        b->chain = *bucket_of(rb, b->hash);
        *bucket_of(rb, b->hash) = b;
        push_newest(rb, b);
        rb->n++;
    }
}

int cinfer_router_choose(struct engine_router *r, const int32_t *ids, size_t n_ids, const int *up, const int *load,
                         size_t *matched_tokens)
{
    *matched_tokens = 0;
    int least = -1, most_load = 0;
    for (int k = 0; k < r->n_replicas; k++) {
        int i = (r->next_tie + k) % r->n_replicas;
        if (!up[i])
            continue;
        if (least < 0 || load[i] < load[least])
            least = i;
        if (load[i] > most_load)
            most_load = load[i];
    }
    if (least < 0)
        return -1;
    size_t n_blocks = n_ids / CINFER_ROUTER_BLOCK_TOKENS;
    uint64_t *hashes = n_blocks ? malloc(n_blocks * sizeof *hashes) : NULL;
    if (n_blocks && !hashes)
        return least;
    uint64_t h = 0;
    for (size_t k = 0; k < n_blocks; k++)
        hashes[k] = h = block_hash(h, ids + k * CINFER_ROUTER_BLOCK_TOKENS);

    int chosen = least;
    int imbalanced = most_load - load[least] > BALANCE_ABS_THRESHOLD && most_load > load[least];
    if (!imbalanced && n_blocks) {
        int best = -1;
        size_t best_blocks = 0;
        for (int i = 0; i < r->n_replicas; i++) {
            if (!up[i])
                continue;
            size_t k = matched_blocks(&r->replicas[i], hashes, n_blocks);
            if (k > best_blocks || (k == best_blocks && k > 0 && load[i] < load[best])) {
                best = i;
                best_blocks = k;
            }
        }
        size_t tokens = best_blocks * CINFER_ROUTER_BLOCK_TOKENS;
        if (best >= 0 && (double)tokens > CACHE_THRESHOLD * (double)n_ids)
            chosen = best;
    }
    if (chosen == least)
        r->next_tie = (least + 1) % r->n_replicas;
    *matched_tokens = matched_blocks(&r->replicas[chosen], hashes, n_blocks) * CINFER_ROUTER_BLOCK_TOKENS;
    remember(r, &r->replicas[chosen], hashes, n_blocks);
    free(hashes);
    return chosen;
}
