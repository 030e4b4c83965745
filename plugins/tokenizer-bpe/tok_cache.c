/* A cache of recent words' ids for the BPE model, shared by every thread encoding with
 * one tokenizer. Direct-mapped; each slot group has a mutex that is only ever tried,
 * never waited for: a thread that finds it taken just computes the word itself, so the
 * cache can only save work, never block or change a result. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

#define CACHE_SLOTS 16384u /* power of two */
#define CACHE_LOCKS 256u   /* slot i is guarded by lock i % CACHE_LOCKS */

struct tok_cache_entry {
    uint64_t hash;
    uint8_t key_len; /* 0 = empty */
    uint8_t n_ids;
    char key[TOK_CACHE_MAX_KEY];
    int32_t ids[TOK_CACHE_MAX_IDS];
};

struct tok_cache {
    pthread_mutex_t locks[CACHE_LOCKS];
    struct tok_cache_entry slots[CACHE_SLOTS];
};

struct tok_cache *cinfer_tok_cache_new(void)
{
    struct tok_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    for (unsigned i = 0; i < CACHE_LOCKS; i++)
        pthread_mutex_init(&c->locks[i], NULL);
    return c;
}

void cinfer_tok_cache_free(struct tok_cache *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < CACHE_LOCKS; i++)
        pthread_mutex_destroy(&c->locks[i]);
    free(c);
}

int cinfer_tok_cache_get(struct tok_cache *c, uint64_t hash, const char *key, size_t len, struct cinfer_token_ids *out)
{
    if (!c || len == 0 || len > TOK_CACHE_MAX_KEY)
        return 0;
    unsigned slot = (unsigned)hash & (CACHE_SLOTS - 1);
    pthread_mutex_t *lock = &c->locks[slot % CACHE_LOCKS];
    if (pthread_mutex_trylock(lock) != 0)
        return 0;
    const struct tok_cache_entry *e = &c->slots[slot];
    int hit = e->key_len == len && e->hash == hash && memcmp(e->key, key, len) == 0 &&
              cinfer_token_ids_reserve(out, out->len + e->n_ids) == CINFER_OK;
    if (hit) {
        memcpy(out->ids + out->len, e->ids, e->n_ids * sizeof(int32_t));
        out->len += e->n_ids;
    }
    pthread_mutex_unlock(lock);
    return hit;
}

void cinfer_tok_cache_put(struct tok_cache *c, uint64_t hash, const char *key, size_t len, const int32_t *ids, size_t n)
{
    if (!c || len == 0 || len > TOK_CACHE_MAX_KEY || n > TOK_CACHE_MAX_IDS)
        return;
    unsigned slot = (unsigned)hash & (CACHE_SLOTS - 1);
    pthread_mutex_t *lock = &c->locks[slot % CACHE_LOCKS];
    if (pthread_mutex_trylock(lock) != 0)
        return;
    struct tok_cache_entry *e = &c->slots[slot];
    e->hash = hash;
    e->key_len = (uint8_t)len;
    e->n_ids = (uint8_t)n;
    memcpy(e->key, key, len);
    memcpy(e->ids, ids, n * sizeof(int32_t));
    pthread_mutex_unlock(lock);
}
