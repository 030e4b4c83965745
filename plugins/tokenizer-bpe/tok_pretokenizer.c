/* Pre-tokenizers: Split (regex or literal, five behaviors, invert), ByteLevel,
 * Metaspace, WhitespaceSplit and Digits, run in sequence over a list of pieces. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

/* The split regexes llama.cpp picks by tokenizer.ggml.pre, as in the models' own
 * tokenizer.json files. */
const char cinfer_tok_regex_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char cinfer_tok_regex_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char cinfer_tok_regex_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int cinfer_tok_regex_compile(const char *pattern, size_t len, pcre2_code **out, const char *where,
                             struct cinfer_error *err)
{
    /* Oniguruma's \s is Unicode White_Space (it has U+0085); PCRE2's lacks U+0085. */
    struct tok_buf p = {0};
    for (size_t i = 0; i < len; i++) {
        int rc = CINFER_OK;
        if (pattern[i] == '\\' && i + 1 < len) {
            char c = pattern[i + 1];
            if (c == 's')
                rc = cinfer_tok_buf_append(&p, "\\p{White_Space}", 15);
            else if (c == 'S')
                rc = cinfer_tok_buf_append(&p, "\\P{White_Space}", 15);
            else
                rc = cinfer_tok_buf_append(&p, pattern + i, 2);
            i++;
        } else {
            rc = cinfer_tok_buf_append(&p, pattern + i, 1);
        }
        if (rc) {
            cinfer_tok_buf_free(&p);
            return CINFER_ERR_NOMEM;
        }
    }
    int code;
    PCRE2_SIZE offset;
    *out = pcre2_compile((PCRE2_SPTR)(p.data ? p.data : ""), p.len, PCRE2_UTF | PCRE2_UCP, &code, &offset, NULL);
    cinfer_tok_buf_free(&p);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: expected a regular expression PCRE2 can compile, found \"%.*s\" "
                                "(%s near byte %zu)", where, (int)len, pattern, (char *)msg, (size_t)offset);
    }
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* without JIT the interpreter still works */
    return CINFER_OK;
}

/* A match of the split pattern inside a piece. */
struct hit {
    size_t start, end;
};
struct hits {
    struct hit *v;
    size_t n, cap;
};

static int hits_push(struct hits *h, size_t start, size_t end)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 32;
        struct hit *v = realloc(h->v, cap * sizeof(*v));
        if (!v)
            return CINFER_ERR_NOMEM;
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = (struct hit){start, end};
    return CINFER_OK;
}

static int regex_next(const pcre2_code *re, const char *s, size_t n, size_t from, pcre2_match_data *md,
                      size_t *start, size_t *end, struct cinfer_error *err)
{
    /* the input is valid UTF-8 already: skipping PCRE2's check keeps this linear */
    int m = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
    if (m == PCRE2_ERROR_JIT_STACKLIMIT)
        m = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    if (m == PCRE2_ERROR_NOMATCH)
        return 0;
    if (m < 0 && m != 0) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(m, msg, sizeof(msg));
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "tokenizer pre-tokenizer: regex match failed: %s",
                                (char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *start = ov[0];
    *end = ov[1];
    return 1;
}

static int find_hits(const struct tok_pretok_step *st, const char *s, size_t n, pcre2_match_data *md,
                     struct hits *h, struct cinfer_error *err)
{
    h->n = 0;
    size_t from = 0;
    while (from < n) {
        size_t a = 0, b = 0;
        if (st->regex) {
            int rc = regex_next(st->regex, s, n, from, md, &a, &b, err);
            if (rc <= 0)
                return rc;
        } else {
            if (!st->literal_len)
                return 0;
            const char *at = memmem(s + from, n - from, st->literal, st->literal_len);
            if (!at)
                return 0;
            a = (size_t)(at - s);
            b = a + st->literal_len;
        }
        if (b == a) { /* an empty match splits nothing; step over one character */
            uint32_t cp;
            from = a + (a < n ? cinfer_tok_utf8_next(s + a, n - a, &cp) : 1);
            continue;
        }
        if (hits_push(h, a, b))
            return CINFER_ERR_NOMEM;
        from = b;
    }
    return 0;
}

/* Cuts s by hits the way NormalizedString::split does for behavior (and invert). */
static int split_by_hits(const char *s, size_t n, size_t orig, const struct hits *h,
                         enum tok_split_behavior behavior, int invert, struct tok_pieces *out)
{
    /* the whole piece as alternating (span, is_match) */
    size_t k = 0, prev = 0;
    struct { size_t a, b; int m; } cur = {0, 0, -1};
    int prev_match = 0;
    size_t count = h->n * 2 + 1;
    for (size_t idx = 0; idx < count; idx++) {
        size_t a, b;
        int m;
        if (idx % 2 == 0) { /* the gap before hit k (or the tail) */
            a = prev;
            b = k < h->n ? h->v[k].start : n;
            m = 0;
        } else {
            a = h->v[k].start;
            b = h->v[k].end;
            m = 1;
            prev = b;
            k++;
        }
        if (a == b)
            continue;
        if (invert)
            m = !m;
        /* decide whether this span extends cur or starts a new one */
        int extend = 0;
        switch (behavior) {
        case TOK_SPLIT_CONTIGUOUS: extend = cur.m >= 0 && m == prev_match; break;
        case TOK_SPLIT_MERGED_WITH_PREVIOUS: extend = cur.m >= 0 && m && !prev_match; break;
        case TOK_SPLIT_MERGED_WITH_NEXT: extend = cur.m >= 0 && !m && prev_match; break;
        default: break;
        }
        /* MergedWithNext: a match joins the text after it; a match following a match
         * stands alone (the HF fold walks backwards: a match merges into the next
         * non-match when the span after it is a non-match) */
        if (extend) {
            cur.b = b;
            if (behavior == TOK_SPLIT_MERGED_WITH_NEXT)
                cur.m = 0;
        } else {
            if (cur.m >= 0 && !(behavior == TOK_SPLIT_REMOVED && cur.m == 1))
                if (cinfer_tok_pieces_push(out, s + cur.a, cur.b - cur.a, orig + cur.a))
                    return CINFER_ERR_NOMEM;
            cur.a = a;
            cur.b = b;
            cur.m = m;
        }
        prev_match = m;
    }
    if (cur.m >= 0 && !(behavior == TOK_SPLIT_REMOVED && cur.m == 1))
        if (cinfer_tok_pieces_push(out, s + cur.a, cur.b - cur.a, orig + cur.a))
            return CINFER_ERR_NOMEM;
    return CINFER_OK;
}

static int metaspace(const struct tok_pretok_step *st, const char *s, size_t n, size_t orig,
                     struct tok_buf *tmp, struct tok_pieces *out)
{
    tmp->len = 0;
    /* HF replaces spaces first, then asks whether the text starts with the replacement */
    int starts_with = (n && s[0] == ' ') ||
                      (n >= st->replacement_len && memcmp(s, st->replacement, st->replacement_len) == 0);
    int prepend = !starts_with && (st->prepend_scheme == TOK_PREPEND_ALWAYS ||
                                   (st->prepend_scheme == TOK_PREPEND_FIRST && orig == 0));
    if (prepend && cinfer_tok_buf_append(tmp, st->replacement, st->replacement_len))
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        int rc = s[i] == ' ' ? cinfer_tok_buf_append(tmp, st->replacement, st->replacement_len)
                             : cinfer_tok_buf_append(tmp, s + i, 1);
        if (rc)
            return CINFER_ERR_NOMEM;
    }
    if (!st->split)
        return cinfer_tok_pieces_push(out, tmp->data, tmp->len, orig);
    /* MergedWithNext on the replacement: each piece starts at a replacement */
    size_t a = 0;
    for (size_t i = 0; i <= tmp->len; i++) {
        int at_mark = i < tmp->len && i + st->replacement_len <= tmp->len &&
                      memcmp(tmp->data + i, st->replacement, st->replacement_len) == 0;
        if ((at_mark || i == tmp->len) && i > a) {
            if (cinfer_tok_pieces_push(out, tmp->data + a, i - a, orig + a))
                return CINFER_ERR_NOMEM;
            a = i;
        }
        if (at_mark)
            i += st->replacement_len - 1;
    }
    return CINFER_OK;
}

static int whitespace_split(const char *s, size_t n, size_t orig, struct tok_pieces *out)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = cinfer_tok_utf8_next(s + i, n - i, &cp);
        if (cinfer_tok_is_whitespace(cp)) {
            i += k;
            continue;
        }
        size_t a = i;
        while (i < n) {
            k = cinfer_tok_utf8_next(s + i, n - i, &cp);
            if (cinfer_tok_is_whitespace(cp))
                break;
            i += k;
        }
        if (cinfer_tok_pieces_push(out, s + a, i - a, orig + a))
            return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

/* Digits: char::is_numeric (Unicode Nd, Nl, No), each alone or in runs. */
static int digits(const struct tok_pretok_step *st, const char *s, size_t n, size_t orig,
                  struct hits *h, struct tok_pieces *out)
{
    h->n = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = cinfer_tok_utf8_next(s + i, n - i, &cp);
        if (cinfer_tok_is_numeric(cp) && hits_push(h, i, i + k))
            return CINFER_ERR_NOMEM;
        i += k;
    }
    return split_by_hits(s, n, orig, h, st->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS, 0, out);
}

static int run_step(const struct tok_pretok_step *st, const struct tok_pieces *in, struct tok_pieces *out,
                    pcre2_match_data *md, struct hits *h, struct tok_buf *tmp, struct cinfer_error *err)
{
    for (size_t i = 0; i < in->n; i++) {
        const char *s = in->text.data + in->spans[i].start;
        size_t n = in->spans[i].len, orig = in->spans[i].orig_start;
        int rc = CINFER_OK;
        switch (st->kind) {
        case TOK_PRE_SPLIT:
            rc = find_hits(st, s, n, md, h, err);
            if (rc == 0)
                rc = split_by_hits(s, n, orig, h, st->behavior, st->invert, out);
            break;
        case TOK_PRE_BYTE_LEVEL:
            if (st->add_prefix_space && (n == 0 || s[0] != ' ')) {
                tmp->len = 0;
                if (cinfer_tok_buf_append(tmp, " ", 1) || cinfer_tok_buf_append(tmp, s, n))
                    return CINFER_ERR_NOMEM;
                s = tmp->data;
                n = tmp->len;
            }
            if (!st->regex) {
                rc = cinfer_tok_pieces_push(out, s, n, orig);
                break;
            }
            rc = find_hits(st, s, n, md, h, err);
            if (rc == 0)
                rc = split_by_hits(s, n, orig, h, TOK_SPLIT_ISOLATED, 0, out);
            break;
        case TOK_PRE_METASPACE: rc = metaspace(st, s, n, orig, tmp, out); break;
        case TOK_PRE_WHITESPACE_SPLIT: rc = whitespace_split(s, n, orig, out); break;
        case TOK_PRE_DIGITS: rc = digits(st, s, n, orig, h, out); break;
        }
        if (rc < 0)
            return rc;
    }
    return CINFER_OK;
}

int cinfer_tok_pretokenize(const struct tok_pretokenizer *pt, const char *s, size_t n, size_t orig_start,
                           struct tok_pieces *out, struct tok_pieces *work, pcre2_match_data *md,
                           struct cinfer_error *err)
{
    cinfer_tok_pieces_clear(out);
    if (cinfer_tok_pieces_push(out, s, n, orig_start))
        return CINFER_ERR_NOMEM;
    struct hits h = {0};
    struct tok_buf tmp = {0};
    int rc = CINFER_OK;
    for (size_t i = 0; i < pt->n && rc == CINFER_OK; i++) {
        cinfer_tok_pieces_clear(work);
        rc = run_step(&pt->steps[i], out, work, md, &h, &tmp, err);
        struct tok_pieces t = *out;
        *out = *work;
        *work = t;
    }
    free(h.v);
    cinfer_tok_buf_free(&tmp);
    return rc;
}

void cinfer_tok_pretokenizer_free(struct tok_pretokenizer *pt)
{
    for (size_t i = 0; i < pt->n; i++) {
        if (pt->steps[i].regex)
            pcre2_code_free(pt->steps[i].regex);
        free(pt->steps[i].literal);
    }
    free(pt->steps);
    pt->steps = NULL;
    pt->n = 0;
}
