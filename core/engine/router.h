/* Where a request goes among data-parallel replicas: SGLang's cache-aware routing.
 * Each replica's prompts are remembered as hashes of their 16-token blocks (each hash
 * covers every token before it, so a hit is a whole prefix), at most a fixed number of
 * blocks per replica, least recently used forgotten first. A request goes to the
 * replica holding the longest prefix of its prompt when that covers more than half of
 * it and the replicas' loads are not far apart; otherwise to the least loaded (equal
 * loads take turns, so idle replicas share sequential traffic). Like
 * SGLang's router it is approximate: it remembers what was sent, not what each
 * replica's cache still holds. Not thread-safe: the engine calls it under its lock. */
#ifndef CINFER_ENGINE_ROUTER_H
#define CINFER_ENGINE_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#define CINFER_ROUTER_BLOCK_TOKENS 16

struct engine_router;

/* NULL when out of memory. max_blocks: blocks remembered per replica. */
struct engine_router *cinfer_router_new(int n_replicas, size_t max_blocks);
void cinfer_router_free(struct engine_router **r);

/* The chosen replica among those with up[i] != 0 (-1 when none is), given each one's
 * load (requests in flight); *matched_tokens says how much of the prompt the chosen one
 * is believed to hold. Remembers the prompt's blocks there. */
int cinfer_router_choose(struct engine_router *r, const int32_t *ids, size_t n_ids, const int *up, const int *load,
                         size_t *matched_tokens);
/* Forgets everything of one replica (it restarted with an empty cache). */
void cinfer_router_forget(struct engine_router *r, int replica);

#endif
