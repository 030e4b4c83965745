/* The decoder chain, run as a stream so that incremental decoding costs O(new ids):
 * tokens pass one by one through the per-token steps (Replace, Metaspace, Strip,
 * ByteFallback) up to the first joining step (ByteLevel or Fuse); after it the text is
 * one stream that later steps (Strip, Replace, ...) edit as it flows. Output bytes are
 * released only as complete UTF-8. decode() runs the same stream once, so the deltas
 * always add up to decode(). The semantics are the Hugging Face library's decoders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

int cinfer_tok_decoder_chain_check(const struct tok_decoder_chain *dc, const char *where, struct cinfer_error *err)
{
    int fallbacks = 0, whole_strips = 0;
    for (size_t i = 0; i < dc->n; i++) {
        enum tok_dec_kind k = dc->steps[i].kind;
        if (k == TOK_DEC_BYTE_FALLBACK && (i > dc->join_at || ++fallbacks > 1))
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: decoder step %zu: expected at most one ByteFallback, before any "
                                    "ByteLevel or Fuse step, found one %s", where, i,
                                    fallbacks > 1 ? "more" : "after the join");
        if (k == TOK_DEC_STRIP && i > dc->join_at && ++whole_strips > 1)
            return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                    "%s: decoder step %zu: expected at most one Strip after Fuse/ByteLevel, "
                                    "found a second", where, i);
    }
    return CINFER_OK;
}

void cinfer_tok_decoder_chain_free(struct tok_decoder_chain *dc)
{
    for (size_t i = 0; i < dc->n; i++) {
        free(dc->steps[i].pattern);
        free(dc->steps[i].content);
    }
    free(dc->steps);
    memset(dc, 0, sizeof(*dc));
}

int cinfer_tok_stream_init(struct cinfer_token_decoder *d, const struct cinfer_tokenizer *tok, int skip_special)
{
    memset(d, 0, sizeof(*d));
    d->tok = tok;
    d->skip_special = skip_special;
    d->step_index = calloc(tok->decoder.n + 1, sizeof(*d->step_index));
    return d->step_index ? CINFER_OK : CINFER_ERR_NOMEM;
}

void cinfer_tok_stream_release(struct cinfer_token_decoder *d)
{
    free(d->step_index);
    cinfer_tok_buf_free(&d->byte_run);
    cinfer_tok_buf_free(&d->pending);
    cinfer_tok_buf_free(&d->out);
    cinfer_tok_buf_free(&d->scratch);
}

/* The last step: bytes become output, complete characters only. */
static int sink(struct cinfer_token_decoder *d, const char *s, size_t n)
{
    if (cinfer_tok_buf_append(&d->pending, s, n))
        return CINFER_ERR_NOMEM;
    int nomem;
    size_t used = cinfer_tok_utf8_append_replacing(&d->out, d->pending.data, d->pending.len, 1, &nomem);
    if (nomem)
        return CINFER_ERR_NOMEM;
    memmove(d->pending.data, d->pending.data + used, d->pending.len - used);
    d->pending.len -= used;
    return CINFER_OK;
}

static int replace_literal(const char *s, size_t n, const char *pat, size_t pat_len, const char *with,
                           size_t with_len, struct tok_buf *out)
{
    size_t i = 0;
    while (pat_len && i < n) {
        const char *hit = memmem(s + i, n - i, pat, pat_len);
        if (!hit)
            break;
        if (cinfer_tok_buf_append(out, s + i, (size_t)(hit - s) - i) || cinfer_tok_buf_append(out, with, with_len))
            return CINFER_ERR_NOMEM;
        i = (size_t)(hit - s) + pat_len;
    }
    return cinfer_tok_buf_append(out, s + i, n - i);
}

/* Metaspace decoding: the replacement becomes a space, except in the first token
 * (unless prepend_scheme is "never"), where it is dropped. */
static int metaspace(const struct tok_dec_step *st, size_t index, const char *s, size_t n, struct tok_buf *out)
{
    int drop = index == 0 && !st->prepend_never;
    return replace_literal(s, n, st->replacement, st->replacement_len, drop ? "" : " ", drop ? 0 : 1, out);
}

static int byte_level(const char *s, size_t n, struct tok_buf *out)
{
    size_t mark = out->len;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += cinfer_tok_utf8_next(s + i, n - i, &cp);
        int b = cinfer_tok_cp_to_byte(cp);
        if (b < 0) { /* not of the byte alphabet (an added token): its own bytes */
            out->len = mark;
            return cinfer_tok_buf_append(out, s, n);
        }
        char c = (char)b;
        if (cinfer_tok_buf_append(out, &c, 1))
            return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

/* Strip on one token: up to strip_start leading and strip_stop trailing copies of the
 * character. */
static void strip_token(const struct tok_dec_step *st, const char **s, size_t *n)
{
    size_t c = st->content_len;
    for (size_t k = 0; k < st->strip_start && c && *n >= c && memcmp(*s, st->content, c) == 0; k++) {
        *s += c;
        *n -= c;
    }
    for (size_t k = 0; k < st->strip_stop && c && *n >= c && memcmp(*s + *n - c, st->content, c) == 0; k++)
        *n -= c;
}

/* Steps after the join see one growing text. */
static int whole_stream(struct cinfer_token_decoder *d, size_t step, const char *s, size_t n)
{
    const struct tok_decoder_chain *dc = &d->tok->decoder;
    if (step >= dc->n)
        return sink(d, s, n);
    const struct tok_dec_step *st = &dc->steps[step];
    struct tok_buf t = {0};
    int rc = CINFER_OK;
    switch (st->kind) {
    case TOK_DEC_REPLACE:
        rc = replace_literal(s, n, st->pattern, st->pattern_len, st->content, st->content_len, &t);
        break;
    case TOK_DEC_METASPACE: rc = metaspace(st, 0, s, n, &t); break;
    case TOK_DEC_BYTE_LEVEL: rc = byte_level(s, n, &t); break;
    case TOK_DEC_FUSE:
    case TOK_DEC_BYTE_FALLBACK: rc = cinfer_tok_buf_append(&t, s, n); break;
    case TOK_DEC_STRIP: {
        size_t c = st->content_len;
        /* leading: only at the very start of the text */
        while (!d->strip_started && n && d->strip_left_done < st->strip_start) {
            if (n >= c && memcmp(s, st->content, c) == 0) {
                s += c;
                n -= c;
                d->strip_left_done++;
            } else {
                d->strip_started = 1;
            }
        }
        if (n)
            d->strip_started = 1;
        /* trailing: hold back up to strip_stop copies until more text or the end */
        size_t trailing = 0;
        while (trailing < st->strip_stop && c && n >= (trailing + 1) * c &&
               memcmp(s + n - (trailing + 1) * c, st->content, c) == 0)
            trailing++;
        if (trailing == n / (c ? c : 1) && trailing) {
            /* the chunk is all strip characters: add to what is held */
            size_t total = d->strip_held + trailing;
            size_t release = total > st->strip_stop ? total - st->strip_stop : 0;
            for (size_t k = 0; k < release && rc == CINFER_OK; k++)
                rc = cinfer_tok_buf_append(&t, st->content, c);
            d->strip_held = total - release;
        } else if (n) {
            for (size_t k = 0; k < d->strip_held && rc == CINFER_OK; k++)
                rc = cinfer_tok_buf_append(&t, st->content, c);
            if (rc == CINFER_OK)
                rc = cinfer_tok_buf_append(&t, s, n - trailing * c);
            d->strip_held = trailing;
        }
        break;
    }
    }
    if (rc == CINFER_OK && t.len)
        rc = whole_stream(d, step + 1, t.data, t.len);
    cinfer_tok_buf_free(&t);
    return rc;
}

static int per_token(struct cinfer_token_decoder *d, size_t step, const char *s, size_t n);

/* Ends a run of byte tokens: valid UTF-8 goes on as one token, anything else as one
 * U+FFFD token per byte (the HF ByteFallback rule). */
static int flush_byte_run(struct cinfer_token_decoder *d)
{
    if (!d->byte_run.len)
        return CINFER_OK;
    struct tok_buf run = d->byte_run;
    d->byte_run = (struct tok_buf){0};
    int rc = CINFER_OK;
    if (cinfer_tok_utf8_valid_prefix(run.data, run.len) == run.len)
        rc = per_token(d, d->byte_run_step + 1, run.data, run.len);
    else
        for (size_t i = 0; i < run.len && rc == CINFER_OK; i++)
            rc = per_token(d, d->byte_run_step + 1, "\xEF\xBF\xBD", 3);
    cinfer_tok_buf_free(&run);
    return rc;
}

static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int x = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (x < 0)
            return -1;
        v = v * 16 + x;
    }
    return v;
}

static int per_token(struct cinfer_token_decoder *d, size_t step, const char *s, size_t n)
{
    const struct tok_decoder_chain *dc = &d->tok->decoder;
    if (step >= dc->join_at) {
        if (step < dc->n && dc->steps[step].kind == TOK_DEC_BYTE_LEVEL) {
            struct tok_buf t = {0};
            int rc = byte_level(s, n, &t);
            if (rc == CINFER_OK)
                rc = whole_stream(d, step + 1, t.data, t.len);
            cinfer_tok_buf_free(&t);
            return rc;
        }
        return whole_stream(d, step, s, n); /* Fuse, or the final join of the tokens */
    }
    const struct tok_dec_step *st = &dc->steps[step];
    size_t index = st->kind == TOK_DEC_METASPACE ? d->step_index[step]++ : 0; /* Metaspace needs it */
    struct tok_buf t = {0};
    int rc = CINFER_OK;
    switch (st->kind) {
    case TOK_DEC_REPLACE:
        rc = replace_literal(s, n, st->pattern, st->pattern_len, st->content, st->content_len, &t);
        break;
    case TOK_DEC_METASPACE: rc = metaspace(st, index, s, n, &t); break;
    case TOK_DEC_STRIP:
        strip_token(st, &s, &n);
        rc = cinfer_tok_buf_append(&t, s, n);
        break;
    case TOK_DEC_BYTE_FALLBACK: {
        int v = byte_token_value(s, n);
        if (v >= 0) {
            char c = (char)v;
            d->byte_run_step = step;
            return cinfer_tok_buf_append(&d->byte_run, &c, 1);
        }
        rc = flush_byte_run(d);
        if (rc == CINFER_OK)
            rc = cinfer_tok_buf_append(&t, s, n);
        break;
    }
    case TOK_DEC_BYTE_LEVEL:
    case TOK_DEC_FUSE:
        break; /* joins are handled above */
    }
    if (rc == CINFER_OK)
        rc = per_token(d, step + 1, t.data ? t.data : "", t.len);
    cinfer_tok_buf_free(&t);
    return rc;
}

int cinfer_tok_stream_push(struct cinfer_token_decoder *d, const int32_t *ids, size_t n, struct cinfer_error *err)
{
    const struct cinfer_tokenizer *tok = d->tok;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (uint32_t)id >= tok->vocab_size || !tok->pieces[id])
            return cinfer_error_set(err, CINFER_ERR_RANGE,
                                    "%s: token id %d at position %zu: expected an id of the vocabulary "
                                    "(0..%u)%s", tok->source_path, id, i, tok->vocab_size - 1,
                                    id >= 0 && (uint32_t)id < tok->vocab_size ? ", found an unused id" : "");
        if (d->skip_special && (tok->attr[id] & TOK_ATTR_SPECIAL))
            continue;
        int rc = CINFER_OK;
        if (tok->decoder.join_with_space && d->tokens_seen)
            rc = per_token(d, 0, " ", 1);
        d->tokens_seen++;
        if (rc == CINFER_OK)
            rc = per_token(d, 0, tok->pieces[id], tok->piece_len[id]);
        if (rc)
            return cinfer_error_set(err, rc, "%s: decoding token %d: out of memory", tok->source_path, id);
    }
    return CINFER_OK;
}

int cinfer_tok_stream_flush(struct cinfer_token_decoder *d)
{
    int rc = flush_byte_run(d);
    d->strip_held = 0; /* trailing strip characters at the very end are dropped */
    if (rc == CINFER_OK && d->pending.len) {
        int nomem;
        cinfer_tok_utf8_append_replacing(&d->out, d->pending.data, d->pending.len, 0, &nomem);
        d->pending.len = 0;
        if (nomem)
            rc = CINFER_ERR_NOMEM;
    }
    return rc;
}

/* One token's bytes in the middle of a text: the per-token steps as the stream runs
 * them for a token that is not the first (Metaspace's replacement is a space), byte
 * tokens as their byte, byte-level pieces mapped back; the whole-text Strip only
 * touches the text's ends, so it is left out. */
int cinfer_tok_token_bytes(const struct cinfer_tokenizer *tok, int32_t id, struct tok_buf *out)
{
    if (id < 0 || (uint32_t)id >= tok->vocab_size)
        return CINFER_ERR_RANGE;
    if (!tok->pieces[id] || (tok->attr[id] & (TOK_ATTR_SPECIAL | TOK_ATTR_UNUSED)))
        return CINFER_OK;
    const struct tok_decoder_chain *dc = &tok->decoder;
    struct tok_buf cur = {0}, next = {0};
    int rc = CINFER_OK;
    if (tok->decoder.join_with_space)
        rc = cinfer_tok_buf_append(&cur, " ", 1);
    if (rc == CINFER_OK)
        rc = cinfer_tok_buf_append(&cur, tok->pieces[id], tok->piece_len[id]);
    for (size_t step = 0; step < dc->n && rc == CINFER_OK; step++) {
        const struct tok_dec_step *st = &dc->steps[step];
        next.len = 0;
        const char *s = cur.data ? cur.data : "";
        size_t n = cur.len;
        switch (st->kind) {
        case TOK_DEC_REPLACE:
            rc = replace_literal(s, n, st->pattern, st->pattern_len, st->content, st->content_len, &next);
            break;
        case TOK_DEC_METASPACE: rc = metaspace(st, 1, s, n, &next); break;
        case TOK_DEC_BYTE_LEVEL: rc = byte_level(s, n, &next); break;
        case TOK_DEC_STRIP:
            if (step < dc->join_at)
                strip_token(st, &s, &n);
            rc = cinfer_tok_buf_append(&next, s, n);
            break;
        case TOK_DEC_BYTE_FALLBACK: {
            int v = byte_token_value(s, n);
            char c = (char)v;
            rc = v >= 0 ? cinfer_tok_buf_append(&next, &c, 1) : cinfer_tok_buf_append(&next, s, n);
            break;
        }
        case TOK_DEC_FUSE: rc = cinfer_tok_buf_append(&next, s, n); break;
        }
        struct tok_buf t = cur;
        cur = next;
        next = t;
    }
    if (rc == CINFER_OK && cur.len)
        rc = cinfer_tok_buf_append(out, cur.data, cur.len);
    cinfer_tok_buf_free(&cur);
    cinfer_tok_buf_free(&next);
    return rc;
}
