/* SentencePiece-style BPE driven by piece scores, as llama.cpp's llm_tokenizer_spm does
 * for GGUF "llama" vocabularies: start from one symbol per UTF-8 character, repeatedly
 * merge the adjacent pair whose concatenation is a piece with the highest score
 * (leftmost on ties), and spell what is left that is no piece as byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

struct spm_symbol {
    size_t start, len; /* bytes of the text; len 0 once merged into its left neighbour */
    int32_t prev, next;
    int32_t id;        /* the piece spelling it, or -1 */
};

struct bigram {
    float score;
    int32_t left, right;
    size_t len; /* left.len + right.len when queued; a mismatch marks it stale */
    int32_t id; /* the piece the pair spells */
};

static int better(const struct bigram *a, const struct bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct spm_heap {
    struct bigram *v;
    size_t n, cap;
};

static int heap_push(struct spm_heap *h, struct bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct bigram *v = realloc(h->v, cap * sizeof(*v));
        if (!v)
            return CINFER_ERR_NOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && better(&b, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = b;
    return CINFER_OK;
}

static struct bigram heap_pop(struct spm_heap *h)
{
    struct bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && better(&h->v[c + 1], &h->v[c]))
            c++;
        if (!better(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

int cinfer_tok_spm_build_pairs(struct cinfer_tokenizer *tok)
{
    if (cinfer_tok_pairmap_init(&tok->spm_pairs, tok->vocab_size * 4))
        return CINFER_ERR_NOMEM;
    for (uint32_t id = 0; id < tok->vocab_size; id++) {
        const char *p = tok->pieces[id];
        size_t n = tok->piece_len[id];
        if (!p || cinfer_tok_strmap_get(&tok->piece_ids, p, n) != (int32_t)id)
            continue; /* a duplicate: lookups never reach it */
        for (size_t k = 1; k < n; k++) {
            if (((uint8_t)p[k] & 0xC0) == 0x80)
                continue; /* symbols hold whole characters */
            int32_t a = cinfer_tok_strmap_get(&tok->piece_ids, p, k), b = cinfer_tok_strmap_get(&tok->piece_ids, p + k,
                                                                                                n - k);
            if (a >= 0 && b >= 0 && cinfer_tok_pairmap_put(&tok->spm_pairs, a, b, 0, (int32_t)id))
                return CINFER_ERR_NOMEM;
        }
    }
    return CINFER_OK;
}

/* Queues the pair if its concatenation is a piece: by ids when both sides are pieces,
 * else by the text (a character outside the vocabulary can still start a piece). */
static int try_bigram(const struct cinfer_tokenizer *tok, const char *text, const struct spm_symbol *syms,
                      int32_t left, int32_t right, struct spm_heap *h)
{
    if (left < 0 || right < 0)
        return CINFER_OK;
    size_t len = syms[left].len + syms[right].len;
    int32_t id;
    if (syms[left].id >= 0 && syms[right].id >= 0) {
        const struct tok_pair_entry *e = cinfer_tok_pairmap_get(&tok->spm_pairs, syms[left].id, syms[right].id);
        id = e ? e->merged : -1;
    } else {
        id = cinfer_tok_strmap_get(&tok->piece_ids, text + syms[left].start, len);
    }
    if (id < 0 || (uint32_t)id >= tok->vocab_size)
        return CINFER_OK;
    return heap_push(h, (struct bigram){tok->scores[id], left, right, len, id});
}

static int32_t byte_token(const struct cinfer_tokenizer *tok, uint8_t b)
{
    if (tok->fallback_ids[b] >= 0)
        return tok->fallback_ids[b];
    char c = (char)b;
    int32_t id = cinfer_tok_strmap_get(&tok->piece_ids, &c, 1);
    return id >= 0 ? id : tok->unk_id;
}

int cinfer_tok_spm_encode_text(const struct cinfer_tokenizer *tok, const char *text, size_t n,
                               struct cinfer_token_ids *out)
{
    if (n == 0)
        return CINFER_OK;
    struct spm_symbol *syms = malloc(n * sizeof(*syms));
    struct spm_heap h = {0};
    if (!syms)
        return CINFER_ERR_NOMEM;
    int32_t count = 0;
    for (size_t at = 0; at < n; count++) {
        uint32_t cp;
        size_t k = cinfer_tok_utf8_next(text + at, n - at, &cp);
        syms[count] = (struct spm_symbol){at, k, count - 1, at + k == n ? -1 : count + 1,
                                          cinfer_tok_strmap_get(&tok->piece_ids, text + at, k)};
        at += k;
    }
    int rc = CINFER_OK;
    for (int32_t i = 1; i < count && rc == CINFER_OK; i++)
        rc = try_bigram(tok, text, syms, i - 1, i, &h);
    while (rc == CINFER_OK && h.n) {
        struct bigram b = heap_pop(&h);
        struct spm_symbol *l = &syms[b.left], *r = &syms[b.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != b.len)
            continue;
        l->len += r->len;
        l->id = b.id;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            syms[r->next].prev = b.left;
        rc = try_bigram(tok, text, syms, l->prev, b.left, &h);
        if (rc == CINFER_OK)
            rc = try_bigram(tok, text, syms, b.left, l->next, &h);
    }
    for (int32_t i = 0; rc == CINFER_OK && i != -1; i = syms[i].next) {
        int32_t id = syms[i].id;
        if (id >= 0) {
            rc = cinfer_token_ids_push(out, id);
            continue;
        }
        /* merged symbols are pieces by construction: only single characters land here */
        for (size_t j = 0; j < syms[i].len && rc == CINFER_OK; j++) {
            int32_t bt = byte_token(tok, (uint8_t)text[syms[i].start + j]);
            if (bt >= 0)
                rc = cinfer_token_ids_push(out, bt);
        }
    }
    free(syms);
    free(h.v);
    return rc;
}
