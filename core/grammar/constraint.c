/* Constraints into grammar text, and the compiled-grammar cache (constraint.h). */
#include "grammar/constraint.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/tokenizer.h"

int cinfer_constraint_grammar(const struct cinfer_sampling_params *p, int check, char **out, struct cinfer_error *err)
{
    *out = NULL;
    const char *names[3] = {"json_schema", "regex", "ebnf"};
    const char *given[3] = {p->json_schema, p->regex, p->ebnf};
    int which = -1;
    for (int i = 0; i < 3; i++) {
        if (!given[i])
            continue;
        if (which >= 0)
            return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                    "%s and %s were both given; constrained decoding takes at most one of json_schema, "
                                    "regex and ebnf",
                                    names[which], names[i]);
        which = i;
    }
    if (which < 0)
        return CINFER_OK;
    int rc;
    char *text = NULL;
    size_t len = strlen(given[which]);
    if (which == 0)
        rc = cinfer_json_schema_to_grammar(given[0], len, &text, err);
    else if (which == 1)
        rc = cinfer_regex_to_grammar(given[1], len, &text, err);
    else
        rc = (text = strdup(given[2])) ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "ebnf: out of memory");
    if (rc == CINFER_OK && check) {
        struct cinfer_grammar *g = NULL;
        rc = cinfer_grammar_compile_text(text, strlen(text), &g, err);
        cinfer_grammar_free(&g);
        if (rc && which == 2) { /* say whose text it is */
            char why[CINFER_ERROR_MESSAGE_BYTES];
            memcpy(why, err->message, sizeof why);
            cinfer_error_set(err, rc, "ebnf: %s", why);
        }
    }
    if (rc) {
        free(text);
        return rc;
    }
    *out = text;
    return CINFER_OK;
}

struct cache_entry {
    char *text;
    struct cinfer_grammar_masks *masks;
    uint64_t used;
};

struct cinfer_grammar_cache {
    const struct cinfer_token_table *tt;
    struct cache_entry *e;
    int n, max;
    uint64_t clock;
    int64_t lookups, hits;
};

int cinfer_grammar_cache_create(const struct cinfer_token_table *tt, int max_entries,
                                struct cinfer_grammar_cache **out)
{
    *out = NULL;
    struct cinfer_grammar_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->e = calloc((size_t)(max_entries > 0 ? max_entries : 1), sizeof *c->e))) {
        free(c);
        return CINFER_ERR_NOMEM;
    }
    c->tt = tt;
    c->max = max_entries > 0 ? max_entries : 1;
    *out = c;
    return CINFER_OK;
}

void cinfer_grammar_cache_free(struct cinfer_grammar_cache **cp)
{
    if (!cp || !*cp)
        return;
    struct cinfer_grammar_cache *c = *cp;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].text);
        cinfer_grammar_masks_unref(&c->e[i].masks);
    }
    free(c->e);
    free(c);
    *cp = NULL;
}

int cinfer_grammar_cache_get(struct cinfer_grammar_cache *c, const char *text, struct cinfer_grammar_masks **out,
                             struct cinfer_error *err)
{
    *out = NULL;
    c->lookups++;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].text, text)) {
            c->hits++;
            c->e[i].used = ++c->clock;
            cinfer_grammar_masks_ref(c->e[i].masks);
            *out = c->e[i].masks;
            return CINFER_OK;
        }
    struct cinfer_grammar *g = NULL;
    int rc = cinfer_grammar_compile_text(text, strlen(text), &g, err);
    if (rc)
        return rc;
    struct cinfer_grammar_masks *m = NULL;
    rc = cinfer_grammar_masks_create(g, c->tt, &m, err);
    if (rc)
        return rc;
    char *copy = strdup(text);
    if (!copy) {
        cinfer_grammar_masks_unref(&m);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar cache: out of memory");
    }
    int slot = c->n;
    if (c->n == c->max) { /* drop the least recently used; requests using it keep their reference */
        slot = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[slot].used)
                slot = i;
        free(c->e[slot].text);
        cinfer_grammar_masks_unref(&c->e[slot].masks);
    } else {
        c->n++;
    }
    c->e[slot] = (struct cache_entry){.text = copy, .masks = m, .used = ++c->clock};
    cinfer_grammar_masks_ref(m);
    *out = m;
    return CINFER_OK;
}

void cinfer_grammar_cache_stats(const struct cinfer_grammar_cache *c, int64_t *lookups, int64_t *hits)
{
    *lookups = c->lookups;
    *hits = c->hits;
}

struct tok_source {
    const struct cinfer_tokenizer_ctx *tok;
    int has_token_bytes;
    char buf[4096];
    char *decoded;
};

static int tok_bytes(void *ctx, int32_t id, const uint8_t **bytes, size_t *len)
{
    struct tok_source *src = ctx;
    const struct cinfer_tokenizer_ops *ops = src->tok->ops;
    *len = 0;
    if (src->has_token_bytes) {
        int rc = ops->token_bytes(src->tok->tok, id, src->buf, sizeof src->buf, len);
        if (rc == CINFER_ERR_RANGE) { /* a token longer than the buffer: it never matches */
            *len = 0;
            return CINFER_OK;
        }
        *bytes = (const uint8_t *)src->buf;
        return rc;
    }
    if (ops->is_special(src->tok->tok, id))
        return CINFER_OK;
    free(src->decoded);
    src->decoded = NULL;
    struct cinfer_error err = {0};
    if (ops->decode(src->tok->tok, &id, 1, 1, &src->decoded, len, &err) != CINFER_OK) {
        *len = 0;
        return CINFER_OK;
    }
    *bytes = (const uint8_t *)src->decoded;
    return CINFER_OK;
}

int cinfer_token_table_from_tokenizer(const struct cinfer_tokenizer_ctx *tok, int vocab,
                                      struct cinfer_token_table **out, struct cinfer_error *err)
{
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    struct tok_source src = {.tok = tok};
    src.has_token_bytes = tok->ops->version >= 2 &&
                          tok->ops->struct_size >= offsetof(struct cinfer_tokenizer_ops, token_bytes) +
                                                       sizeof tok->ops->token_bytes &&
                          tok->ops->token_bytes;
    int known = (int)info.vocab_size < vocab ? (int)info.vocab_size : vocab;
    int rc = cinfer_token_table_create(vocab, known, tok_bytes, &src, out, err);
    free(src.decoded);
    return rc;
}
