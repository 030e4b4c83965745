/* Added tokens: found in the text before the model runs, leftmost-longest as the
 * Hugging Face library's Aho-Corasick matcher does, with single_word, lstrip and
 * rstrip applied to each match. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

static int longer_first(const void *a, const void *b)
{
    const struct tok_added_token *x = *(struct tok_added_token *const *)a;
    const struct tok_added_token *y = *(struct tok_added_token *const *)b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

int cinfer_tok_added_set_build(struct tok_added_set *set, struct tok_added_token *tokens, size_t n, int normalized)
{
    size_t counts[256] = {0};
    for (size_t i = 0; i < n; i++)
        if (tokens[i].len && !!tokens[i].normalized == !!normalized)
            counts[(uint8_t)tokens[i].content[0]]++;
    for (int b = 0; b < 256; b++) {
        if (!counts[b])
            continue;
        set->by_first_byte[b] = calloc(counts[b] + 1, sizeof(*set->by_first_byte[b]));
        if (!set->by_first_byte[b])
            return CINFER_ERR_NOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (tokens[i].len && !!tokens[i].normalized == !!normalized &&
                (uint8_t)tokens[i].content[0] == b)
                set->by_first_byte[b][k++] = &tokens[i];
        qsort(set->by_first_byte[b], k, sizeof(*set->by_first_byte[b]), longer_first);
        set->count += k;
    }
    return CINFER_OK;
}

void cinfer_tok_added_set_free(struct tok_added_set *set)
{
    for (int b = 0; b < 256; b++)
        free(set->by_first_byte[b]);
    memset(set, 0, sizeof(*set));
}

static int segments_push(struct tok_segments *out, size_t start, size_t len, int32_t id)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        struct tok_segment *v = realloc(out->v, cap * sizeof(*v));
        if (!v)
            return CINFER_ERR_NOMEM;
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n++] = (struct tok_segment){start, len, id};
    return CINFER_OK;
}

static uint32_t last_cp(const char *s, size_t n, size_t *cp_len)
{
    size_t k = 1;
    while (k < n && ((uint8_t)s[n - k] & 0xC0) == 0x80)
        k++;
    uint32_t cp;
    cinfer_tok_utf8_next(s + n - k, k, &cp);
    *cp_len = k;
    return cp;
}

static int is_word_char(uint32_t cp)
{
    return cinfer_tok_is_alnum(cp) || cp == '_';
}

int cinfer_tok_added_split(const struct tok_added_set *set, const char *s, size_t n, struct tok_segments *out)
{
    out->n = 0;
    size_t text_start = 0;
    for (size_t i = 0; set->count && i < n;) {
        struct tok_added_token *const *cands = set->by_first_byte[(uint8_t)s[i]];
        const struct tok_added_token *hit = NULL;
        for (size_t c = 0; cands && cands[c]; c++)
            if (cands[c]->len <= n - i && memcmp(s + i, cands[c]->content, cands[c]->len) == 0) {
                hit = cands[c];
                break;
            }
        if (!hit) {
            i++;
            continue;
        }
        size_t start = i, stop = i + hit->len, k;
        if (hit->single_word) {
            uint32_t cp;
            int left_ok = start == 0 || !is_word_char(last_cp(s, start, &k));
            int right_ok = stop == n || (cinfer_tok_utf8_next(s + stop, n - stop, &cp), !is_word_char(cp));
            if (!left_ok || !right_ok) {
                i = stop; /* the matcher moves past a match it rejects */
                continue;
            }
        }
        if (hit->lstrip)
            while (start > text_start && cinfer_tok_is_whitespace(last_cp(s, start, &k)))
                start -= k;
        if (hit->rstrip) {
            uint32_t cp;
            while (stop < n && (k = cinfer_tok_utf8_next(s + stop, n - stop, &cp), cinfer_tok_is_whitespace(cp)))
                stop += k;
        }
        if (start > text_start && segments_push(out, text_start, start - text_start, -1))
            return CINFER_ERR_NOMEM;
        if (segments_push(out, start, stop - start, hit->id))
            return CINFER_ERR_NOMEM;
        text_start = i = stop;
    }
    if (text_start < n || n == 0)
        if (segments_push(out, text_start, n - text_start, -1))
            return CINFER_ERR_NOMEM;
    return CINFER_OK;
}
