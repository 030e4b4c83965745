/* Growable byte buffers and lists of text pieces. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

int cinfer_tok_buf_reserve(struct tok_buf *b, size_t need_bytes)
{
    if (need_bytes <= b->cap)
        return CINFER_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need_bytes)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data)
        return CINFER_ERR_NOMEM;
    b->data = data;
    b->cap = cap;
    return CINFER_OK;
}

int cinfer_tok_buf_append(struct tok_buf *b, const void *data, size_t len)
{
    /* +1 keeps room for a terminating NUL that callers may add */
    if (cinfer_tok_buf_reserve(b, b->len + len + 1) != CINFER_OK)
        return CINFER_ERR_NOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    return CINFER_OK;
}

void cinfer_tok_buf_free(struct tok_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int cinfer_tok_pieces_push(struct tok_pieces *p, const char *s, size_t len, size_t orig_start)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        struct tok_span *spans = realloc(p->spans, cap * sizeof(*spans));
        if (!spans)
            return CINFER_ERR_NOMEM;
        p->spans = spans;
        p->cap = cap;
    }
    size_t start = p->text.len;
    if (cinfer_tok_buf_append(&p->text, s, len) != CINFER_OK)
        return CINFER_ERR_NOMEM;
    p->spans[p->n++] = (struct tok_span){start, len, orig_start};
    return CINFER_OK;
}

void cinfer_tok_pieces_clear(struct tok_pieces *p)
{
    p->n = 0;
    p->text.len = 0;
}

void cinfer_tok_pieces_free(struct tok_pieces *p)
{
    cinfer_tok_buf_free(&p->text);
    free(p->spans);
    p->spans = NULL;
    p->n = p->cap = 0;
}
