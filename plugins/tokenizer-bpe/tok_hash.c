/* Hash maps for vocabulary lookups: byte string -> id, and (left, right) id pair ->
 * merge rank and merged id. Open addressing, power-of-two tables, read-only after
 * loading so any number of threads may look up at once. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

uint64_t cinfer_tok_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mix64(h ^ w);
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return mix64(h ^ w ^ ((uint64_t)n << 59));
}

static int strmap_grow(struct tok_strmap *m)
{
    uint32_t slots_n = m->mask ? (m->mask + 1) * 2 : 64;
    uint64_t *slots = calloc(slots_n, sizeof(*slots));
    if (!slots)
        return CINFER_ERR_NOMEM;
    for (uint32_t e = 0; e < m->n; e++) {
        const struct tok_strmap_entry *en = &m->entries[e];
        uint64_t h = cinfer_tok_hash_bytes(m->keys.data + en->key_off, en->key_len);
        uint32_t i = (uint32_t)h & (slots_n - 1);
        while (slots[i])
            i = (i + 1) & (slots_n - 1);
        slots[i] = (h & 0xFFFFFFFF00000000ull) | (e + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->mask = slots_n - 1;
    return CINFER_OK;
}

static int64_t strmap_find(const struct tok_strmap *m, const char *key, size_t len, uint64_t h)
{
    if (!m->mask)
        return -1;
    uint32_t i = (uint32_t)h & m->mask;
    for (;;) {
        uint64_t s = m->slots[i];
        if (!s)
            return -1;
        if ((s & 0xFFFFFFFF00000000ull) == (h & 0xFFFFFFFF00000000ull)) {
            uint32_t e = (uint32_t)s - 1;
            const struct tok_strmap_entry *en = &m->entries[e];
            if (en->key_len == len && memcmp(m->keys.data + en->key_off, key, len) == 0)
                return e;
        }
        i = (i + 1) & m->mask;
    }
}

int cinfer_tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t value)
{
    uint64_t h = cinfer_tok_hash_bytes(key, len);
    int64_t e = strmap_find(m, key, len, h);
    if (e >= 0) {
        m->entries[e].value = value;
        return CINFER_OK;
    }
    if ((uint64_t)(m->n + 1) * 4 >= (uint64_t)(m->mask + 1) * 3 && strmap_grow(m) != CINFER_OK)
        return CINFER_ERR_NOMEM;
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        struct tok_strmap_entry *entries = realloc(m->entries, cap * sizeof(*entries));
        if (!entries)
            return CINFER_ERR_NOMEM;
        m->entries = entries;
        m->cap = cap;
    }
    size_t off = m->keys.len;
    if (len > UINT32_MAX || off > UINT32_MAX || cinfer_tok_buf_append(&m->keys, key, len) != CINFER_OK)
        return CINFER_ERR_NOMEM;
    m->entries[m->n] = (struct tok_strmap_entry){(uint32_t)off, (uint32_t)len, value};
    uint32_t i = (uint32_t)h & m->mask;
    while (m->slots[i])
        i = (i + 1) & m->mask;
    m->slots[i] = (h & 0xFFFFFFFF00000000ull) | (m->n + 1);
    m->n++;
    return CINFER_OK;
}

int32_t cinfer_tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len)
{
    int64_t e = strmap_find(m, key, len, cinfer_tok_hash_bytes(key, len));
    return e < 0 ? -1 : m->entries[e].value;
}

void cinfer_tok_strmap_free(struct tok_strmap *m)
{
    free(m->slots);
    free(m->entries);
    cinfer_tok_buf_free(&m->keys);
    memset(m, 0, sizeof(*m));
}

int cinfer_tok_pairmap_init(struct tok_pairmap *m, size_t expected)
{
    uint64_t n = 64;
    while (n < expected * 2)
        n *= 2;
    m->slots = malloc(n * sizeof(*m->slots));
    if (!m->slots)
        return CINFER_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++)
        m->slots[i].key = UINT64_MAX;
    m->mask = n - 1;
    m->n = 0;
    return CINFER_OK;
}

static uint64_t pair_key(int32_t left, int32_t right)
{
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

int cinfer_tok_pairmap_put(struct tok_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged)
{
    if ((m->n + 1) * 2 > m->mask + 1) {
        struct tok_pairmap bigger;
        if (cinfer_tok_pairmap_init(&bigger, (m->mask + 1)) != CINFER_OK)
            return CINFER_ERR_NOMEM;
        for (uint64_t i = 0; i <= m->mask; i++)
            if (m->slots[i].key != UINT64_MAX)
                cinfer_tok_pairmap_put(&bigger, (int32_t)(m->slots[i].key >> 32), (int32_t)(uint32_t)m->slots[i].key,
                                       m->slots[i].rank, m->slots[i].merged);
        free(m->slots);
        *m = bigger;
    }
    uint64_t key = pair_key(left, right);
    uint64_t i = mix64(key) & m->mask;
    while (m->slots[i].key != UINT64_MAX && m->slots[i].key != key)
        i = (i + 1) & m->mask;
    if (m->slots[i].key == UINT64_MAX)
        m->n++;
    m->slots[i] = (struct tok_pair_entry){key, rank, merged};
    return CINFER_OK;
}

const struct tok_pair_entry *cinfer_tok_pairmap_get(const struct tok_pairmap *m, int32_t left, int32_t right)
{
    if (!m->slots)
        return NULL;
    uint64_t key = pair_key(left, right);
    uint64_t i = mix64(key) & m->mask;
    for (;;) {
        const struct tok_pair_entry *e = &m->slots[i];
        if (e->key == key)
            return e;
        if (e->key == UINT64_MAX)
            return NULL;
        i = (i + 1) & m->mask;
    }
}

void cinfer_tok_pairmap_free(struct tok_pairmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}
