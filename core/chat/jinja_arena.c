/* core/chat/jinja_arena.c — bump allocation for the interpreter: a compiled template
 * keeps its tokens and tree in one arena, a render keeps its values in another, so
 * nothing is freed piecemeal and a hostile template cannot leak. The render arena has a
 * byte limit: a template that builds huge values fails instead of exhausting memory. */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

struct jinja_arena_block {
    struct jinja_arena_block *next;
    size_t used, size;
    max_align_t data[];
};

#define JINJA_ARENA_BLOCK_BYTES (64u * 1024u)

void *cinfer_jinja_alloc(struct jinja_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0)
        n = sizeof(max_align_t);
    struct jinja_arena_block *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > JINJA_ARENA_BLOCK_BYTES / 4 ? n : JINJA_ARENA_BLOCK_BYTES;
        if (a->limit_bytes && a->used_bytes + size > a->limit_bytes)
            return NULL;
        b = malloc(sizeof(*b) + size);
        if (!b)
            return NULL;
        b->used = 0;
        b->size = size;
        a->used_bytes += size;
        if (size > JINJA_ARENA_BLOCK_BYTES && a->head) {
            /* a big block goes behind the current one, which keeps its free space */
            b->next = a->head->next;
            a->head->next = b;
            b->used = n;
            memset(b->data, 0, n);
            return b->data;
        }
        b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void cinfer_jinja_arena_free(struct jinja_arena *a)
{
    struct jinja_arena_block *b = a->head;
    while (b) {
        struct jinja_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}
