/* The vocabulary as byte strings, sorted (grammar.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

void cinfer_token_table_free(struct cinfer_token_table **tp)
{
    if (!tp || !*tp)
        return;
    struct cinfer_token_table *t = *tp;
    free(t->sorted);
    free(t->lcp);
    free(t->offset);
    free(t->len);
    free(t->bytes);
    free(t);
    *tp = NULL;
}

static int by_bytes(const void *a, const void *b, void *ctx)
{
    const struct cinfer_token_table *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->len[x], ly = t->len[y];
    int c = memcmp(t->bytes + t->offset[x], t->bytes + t->offset[y], lx < ly ? lx : ly);
    if (c)
        return c;
    return lx < ly ? -1 : lx > ly ? 1 : (x < y ? -1 : x > y);
}

int cinfer_token_table_create(int vocab, int n_known, cinfer_token_bytes_fn get, void *ctx,
                              struct cinfer_token_table **out, struct cinfer_error *err)
{
    *out = NULL;
    if (vocab < 1 || n_known < 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "token table: vocabulary of %d ids (%d known)", vocab,
                                n_known);
    if (n_known > vocab)
        n_known = vocab;
    struct cinfer_token_table *t = calloc(1, sizeof *t);
    if (!t)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "token table: out of memory");
    t->vocab = vocab;
    t->offset = calloc((size_t)vocab, sizeof *t->offset);
    t->len = calloc((size_t)vocab, sizeof *t->len);
    t->sorted = malloc((size_t)vocab * sizeof *t->sorted);
    t->lcp = malloc((size_t)vocab * sizeof *t->lcp);
    size_t cap = 1 << 16, used = 0;
    t->bytes = malloc(cap);
    if (!t->offset || !t->len || !t->sorted || !t->lcp || !t->bytes) {
        cinfer_token_table_free(&t);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "token table: out of memory for %d tokens", vocab);
    }
    for (int32_t id = 0; id < n_known; id++) {
        const uint8_t *b = NULL;
        size_t n = 0;
        int rc = get(ctx, id, &b, &n);
        if (rc) {
            cinfer_token_table_free(&t);
            return cinfer_error_set(err, rc, "token table: reading the bytes of token %d failed", id);
        }
        if (n == 0)
            continue;
        if (n > 65535) {
            cinfer_token_table_free(&t);
            return cinfer_error_set(err, CINFER_ERR_RANGE, "token table: token %d has %zu bytes, at most 65535 allowed",
                                    id, n);
        }
        if (used + n > cap) {
            while (used + n > cap)
                cap *= 2;
            uint8_t *g = realloc(t->bytes, cap);
            if (!g) {
                cinfer_token_table_free(&t);
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "token table: out of memory");
            }
            t->bytes = g;
        }
        memcpy(t->bytes + used, b, n);
        t->offset[id] = (uint32_t)used;
        t->len[id] = (uint32_t)n;
        used += n;
        t->sorted[t->n_sorted++] = id;
        if ((int)n > t->max_len)
            t->max_len = (int)n;
    }
    qsort_r(t->sorted, (size_t)t->n_sorted, sizeof *t->sorted, by_bytes, t);
    for (int i = 0; i < t->n_sorted; i++) {
        if (i == 0) {
            t->lcp[i] = 0;
            continue;
        }
        int32_t a = t->sorted[i - 1], b = t->sorted[i];
        uint32_t n = t->len[a] < t->len[b] ? t->len[a] : t->len[b], k = 0;
        while (k < n && t->bytes[t->offset[a] + k] == t->bytes[t->offset[b] + k])
            k++;
        t->lcp[i] = (int32_t)k;
    }
    *out = t;
    return CINFER_OK;
}
