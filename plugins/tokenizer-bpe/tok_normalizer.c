/* Normalizers: Unicode forms (utf8proc), Lowercase, Prepend, Replace and Strip, each
 * as the Hugging Face library applies them to a piece of text. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok.h"

static int unicode_form(const char *s, size_t n, utf8proc_option_t options, struct tok_buf *out,
                        struct cinfer_error *err)
{
    out->len = 0;
    if (n == 0)
        return cinfer_tok_buf_reserve(out, 1);
    utf8proc_uint8_t *mapped = NULL;
    utf8proc_ssize_t got = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &mapped,
                                        options | UTF8PROC_STABLE);
    if (got < 0)
        return cinfer_error_set(err, got == UTF8PROC_ERROR_NOMEM ? CINFER_ERR_NOMEM : CINFER_ERR_INTERNAL,
                                "tokenizer normalizer: utf8proc could not normalize %zu bytes: %s", n,
                                utf8proc_errmsg(got));
    int rc = cinfer_tok_buf_append(out, mapped, (size_t)got);
    free(mapped);
    return rc;
}

static int lowercase(const char *s, size_t n, struct tok_buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += cinfer_tok_utf8_next(s + i, n - i, &cp);
        char enc[4];
        size_t k;
        if (cp == 0x130) { /* the one unconditional multi-character lowercase (Rust's char::to_lowercase) */
            if (cinfer_tok_buf_append(out, "i\xCC\x87", 3) != CINFER_OK)
                return CINFER_ERR_NOMEM;
            continue;
        }
        k = cinfer_tok_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), enc);
        if (cinfer_tok_buf_append(out, enc, k) != CINFER_OK)
            return CINFER_ERR_NOMEM;
    }
    return cinfer_tok_buf_reserve(out, out->len + 1);
}

static int replace_literal(const char *s, size_t n, const struct tok_norm_step *st, struct tok_buf *out)
{
    out->len = 0;
    size_t i = 0;
    while (st->text_len && i < n) {
        const char *hit = memmem(s + i, n - i, st->text, st->text_len);
        if (!hit)
            break;
        size_t at = (size_t)(hit - s);
        if (cinfer_tok_buf_append(out, s + i, at - i) || cinfer_tok_buf_append(out, st->content, st->content_len))
            return CINFER_ERR_NOMEM;
        i = at + st->text_len;
    }
    return cinfer_tok_buf_append(out, s + i, n - i);
}

static int replace_regex(const char *s, size_t n, const struct tok_norm_step *st, struct tok_buf *out,
                         struct cinfer_error *err)
{
    out->len = 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(st->regex, NULL);
    if (!md)
        return CINFER_ERR_NOMEM;
    size_t i = 0;
    int rc = CINFER_OK;
    while (i <= n) {
        int m = pcre2_match(st->regex, (PCRE2_SPTR)s, n, i, 0, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH)
            break;
        if (m < 0) {
            rc = cinfer_error_set(err, CINFER_ERR_INTERNAL, "tokenizer normalizer Replace: regex match failed (%d)", m);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (cinfer_tok_buf_append(out, s + i, ov[0] - i) || cinfer_tok_buf_append(out, st->content, st->content_len)) {
            rc = CINFER_ERR_NOMEM;
            break;
        }
        if (ov[1] == ov[0]) { /* empty match: copy one character and move on */
            if (ov[0] >= n)
                { i = n + 1; break; }
            uint32_t cp;
            size_t k = cinfer_tok_utf8_next(s + ov[0], n - ov[0], &cp);
            if (cinfer_tok_buf_append(out, s + ov[0], k)) { rc = CINFER_ERR_NOMEM; break; }
            i = ov[0] + k;
        } else {
            i = ov[1];
        }
    }
    pcre2_match_data_free(md);
    if (rc == CINFER_OK && i < n)
        rc = cinfer_tok_buf_append(out, s + i, n - i);
    return rc == CINFER_OK ? cinfer_tok_buf_reserve(out, out->len + 1) : rc;
}

static int strip(const char *s, size_t n, const struct tok_norm_step *st, struct tok_buf *out)
{
    size_t a = 0, b = n;
    while (st->strip_left && a < b) {
        uint32_t cp;
        size_t k = cinfer_tok_utf8_next(s + a, b - a, &cp);
        if (!cinfer_tok_is_whitespace(cp))
            break;
        a += k;
    }
    while (st->strip_right && b > a) {
        size_t k = 1;
        while (k < b - a && ((uint8_t)s[b - k] & 0xC0) == 0x80)
            k++;
        uint32_t cp;
        cinfer_tok_utf8_next(s + b - k, k, &cp);
        if (!cinfer_tok_is_whitespace(cp))
            break;
        b -= k;
    }
    out->len = 0;
    return cinfer_tok_buf_append(out, s + a, b - a);
}

static int apply(const struct tok_norm_step *st, const char *s, size_t n, struct tok_buf *out,
                 struct cinfer_error *err)
{
    switch (st->kind) {
    case TOK_NORM_NFC: return unicode_form(s, n, UTF8PROC_COMPOSE, out, err);
    case TOK_NORM_NFKC: return unicode_form(s, n, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out, err);
    case TOK_NORM_NFD: return unicode_form(s, n, UTF8PROC_DECOMPOSE, out, err);
    case TOK_NORM_NFKD: return unicode_form(s, n, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out, err);
    case TOK_NORM_LOWERCASE: return lowercase(s, n, out);
    case TOK_NORM_PREPEND:
        out->len = 0;
        if (n && cinfer_tok_buf_append(out, st->text, st->text_len))
            return CINFER_ERR_NOMEM;
        return cinfer_tok_buf_append(out, s, n);
    case TOK_NORM_REPLACE:
        return st->regex ? replace_regex(s, n, st, out, err) : replace_literal(s, n, st, out);
    case TOK_NORM_STRIP: return strip(s, n, st, out);
    }
    return cinfer_error_set(err, CINFER_ERR_INTERNAL, "tokenizer normalizer: unknown step %d", (int)st->kind);
}

int cinfer_tok_normalize(const struct tok_normalizer *nz, const char *s, size_t n, struct tok_buf *out,
                         struct tok_buf *scratch, struct cinfer_error *err)
{
    out->len = 0;
    if (cinfer_tok_buf_append(out, s, n) != CINFER_OK)
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < nz->n; i++) {
        int rc = apply(&nz->steps[i], out->data, out->len, scratch, err);
        if (rc < 0)
            return rc;
        struct tok_buf t = *out;
        *out = *scratch;
        *scratch = t;
    }
    return CINFER_OK;
}

void cinfer_tok_normalizer_free(struct tok_normalizer *nz)
{
    for (size_t i = 0; i < nz->n; i++) {
        free(nz->steps[i].text);
        free(nz->steps[i].content);
        if (nz->steps[i].regex)
            pcre2_code_free(nz->steps[i].regex);
    }
    free(nz->steps);
    nz->steps = NULL;
    nz->n = 0;
}
