/* core/chat/jinja_lexer.c — template source to tokens, as @huggingface/jinja's lexer
 * does it: the same preprocessing (a trailing newline dropped, lstrip_blocks and
 * trim_blocks on, as its Template applies them, transformers' {% generation %} tags
 * removed) and the same tokenization rules (unary minus folded into number literals,
 * "}}" inside a dict literal, string escapes). Every token carries the line and column
 * of the original source for error messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

const char *cinfer_jinja_tok_name(enum jinja_tok t)
{
    static const char *const names[] = {
        [TK_TEXT] = "text", [TK_NUMBER] = "number", [TK_STRING] = "string", [TK_IDENT] = "identifier",
        [TK_EQUALS] = "'='", [TK_LPAREN] = "'('", [TK_RPAREN] = "')'", [TK_OPEN_STMT] = "'{%'",
        [TK_CLOSE_STMT] = "'%}'", [TK_OPEN_EXPR] = "'{{'", [TK_CLOSE_EXPR] = "'}}'", [TK_LBRACKET] = "'['",
        [TK_RBRACKET] = "']'", [TK_LBRACE] = "'{'", [TK_RBRACE] = "'}'", [TK_COMMA] = "','", [TK_DOT] = "'.'",
        [TK_COLON] = "':'", [TK_PIPE] = "'|'", [TK_ADD] = "operator", [TK_MUL] = "operator",
        [TK_POW] = "'**'", [TK_CMP] = "comparison", [TK_UNARY] = "unary operator", [TK_COMMENT] = "comment",
    };
    return t <= TK_COMMENT ? names[t] : "token";
}

/* A piece of preprocessed source: bytes and, per byte, its offset in the original. */
struct pp_text {
    struct jbuf b;
    size_t *map;
};

static bool pp_emit(struct pp_text *out, const struct pp_text *in, size_t from, size_t n)
{
    size_t at = out->b.n;
    if (!cinfer_jbuf_append(&out->b, in->b.p + from, n))
        return false;
    memcpy(out->map + at, in->map + from, n * sizeof(*out->map));
    return true;
}

static bool pp_begin(struct pp_text *out, const struct pp_text *in)
{
    memset(out, 0, sizeof(*out));
    out->map = malloc((in->b.n + 1) * sizeof(*out->map));
    return out->map != NULL;
}

static void pp_finish(struct pp_text *out, struct pp_text *in)
{
    out->map[out->b.n] = in->map[in->b.n];
    cinfer_jbuf_free(&in->b);
    free(in->map);
    *in = *out;
}

static void pp_free(struct pp_text *t)
{
    cinfer_jbuf_free(&t->b);
    free(t->map);
    t->map = NULL;
}

/* /^[ \t]*({[#%-])/gm -> "$1": spaces and tabs before a block tag at a line start. */
static bool pp_lstrip_blocks(struct pp_text *t)
{
    struct pp_text o;
    if (!pp_begin(&o, t))
        return false;
    const char *s = t->b.p;
    size_t n = t->b.n, i = 0;
    bool line_start = true;
    while (i < n) {
        if (line_start) {
            size_t j = i;
            while (j < n && (s[j] == ' ' || s[j] == '\t'))
                j++;
            if (j + 1 < n && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-'))
                i = j;
        }
        /* line terminators of JavaScript: \n \r U+2028 U+2029 */
        size_t len = 1;
        line_start = s[i] == '\n' || s[i] == '\r';
        if ((unsigned char)s[i] == 0xe2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
            ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9)) {
            len = 3;
            line_start = true;
        }
        if (!pp_emit(&o, t, i, len)) {
            pp_free(&o);
            return false;
        }
        i += len;
    }
    pp_finish(&o, t);
    return true;
}

/* /([#%-]})\n/g -> "$1": the newline after a tag. */
static bool pp_trim_blocks(struct pp_text *t)
{
    struct pp_text o;
    if (!pp_begin(&o, t))
        return false;
    const char *s = t->b.p;
    size_t n = t->b.n, i = 0;
    while (i < n) {
        if (i + 2 < n && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
            if (!pp_emit(&o, t, i, 2))
                goto fail;
            i += 3;
            continue;
        }
        if (!pp_emit(&o, t, i, 1))
            goto fail;
        i++;
    }
    pp_finish(&o, t);
    return true;
fail:
    pp_free(&o);
    return false;
}

static size_t skip_space(const char *s, size_t i, size_t n)
{
    size_t l;
    while (i < n && (l = cinfer_jinja_js_space_len(s + i, s + n)))
        i += l;
    return i;
}

/* Matches {%-? \s* (end)?generation \s* -?%} at i; returns its end or 0. */
static size_t match_generation_tag(const char *s, size_t i, size_t n, bool *lstrip, bool *rstrip)
{
    if (i + 1 >= n || s[i] != '{' || s[i + 1] != '%')
        return 0;
    i += 2;
    *lstrip = i < n && s[i] == '-';
    if (*lstrip)
        i++;
    i = skip_space(s, i, n);
    if (i + 3 <= n && memcmp(s + i, "end", 3) == 0 && !(i + 10 <= n && memcmp(s + i, "generation", 10) == 0))
        i += 3;
    if (!(i + 10 <= n && memcmp(s + i, "generation", 10) == 0))
        return 0;
    i = skip_space(s, i + 10, n);
    *rstrip = i < n && s[i] == '-';
    if (*rstrip)
        i++;
    if (!(i + 1 < n && s[i] == '%' && s[i + 1] == '}'))
        return 0;
    return i + 2;
}

/* /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs: the tag goes, and the whitespace
 * around it too where the tag says "-". */
static bool pp_generation(struct pp_text *t)
{
    if (!memmem(t->b.p ? t->b.p : "", t->b.n, "generation", 10))
        return true;
    struct pp_text o;
    if (!pp_begin(&o, t))
        return false;
    const char *s = t->b.p;
    size_t n = t->b.n, i = 0;
    while (i < n) {
        size_t ws_end = skip_space(s, i, n);
        bool l, r;
        size_t tag_end = match_generation_tag(s, ws_end, n, &l, &r);
        if (tag_end) {
            size_t after_end = skip_space(s, tag_end, n);
            if ((!l && !pp_emit(&o, t, i, ws_end - i)) || (!r && !pp_emit(&o, t, tag_end, after_end - tag_end)))
                goto fail;
            i = after_end;
            continue;
        }
        size_t upto = ws_end > i ? ws_end : i + 1;
        if (!pp_emit(&o, t, i, upto - i))
            goto fail;
        i = upto;
    }
    pp_finish(&o, t);
    return true;
fail:
    pp_free(&o);
    return false;
}

/* ---- tokenizer ------------------------------------------------------------------------ */

struct lexer {
    const char *s;
    size_t n, pos;
    const size_t *map;     /* preprocessed offset -> source offset */
    const size_t *lines;   /* source offsets of line starts */
    size_t nlines;
    const char *name;
    struct jinja_arena *arena;
    struct jinja_token *toks;
    size_t ntoks, cap;
    struct cinfer_error *err;
};

static void where(const struct lexer *lx, size_t pos, int *line, int *col)
{
    size_t off = lx->map[pos < lx->n ? pos : lx->n];
    size_t lo = 0, hi = lx->nlines;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (lx->lines[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    *line = (int)lo + 1;
    *col = (int)(off - lx->lines[lo]) + 1;
}

static int lex_fail(struct lexer *lx, size_t pos, const char *what)
{
    int line, col;
    where(lx, pos, &line, &col);
    return cinfer_error_set(lx->err, CINFER_ERR_PARSE, "%s:%d:%d: %s", lx->name, line, col, what);
}

static struct jinja_token *last_tok(struct lexer *lx) { return lx->ntoks ? &lx->toks[lx->ntoks - 1] : NULL; }

static int push(struct lexer *lx, enum jinja_tok type, const char *text, size_t len, size_t pos)
{
    if (lx->ntoks == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 64;
        struct jinja_token *t = cinfer_jinja_alloc(lx->arena, cap * sizeof(*t));
        if (!t)
            return cinfer_error_set(lx->err, CINFER_ERR_NOMEM, "%s: out of memory while tokenizing", lx->name);
        if (lx->ntoks)
            memcpy(t, lx->toks, lx->ntoks * sizeof(*t));
        lx->toks = t;
        lx->cap = cap;
    }
    char *copy = cinfer_jinja_alloc(lx->arena, len + 1);
    if (!copy)
        return cinfer_error_set(lx->err, CINFER_ERR_NOMEM, "%s: out of memory while tokenizing", lx->name);
    memcpy(copy, text, len);
    struct jinja_token *t = &lx->toks[lx->ntoks++];
    t->type = type;
    t->text = (struct jstr){copy, len};
    where(lx, pos, &t->line, &t->col);
    return 0;
}

static void strip_trailing_whitespace(struct lexer *lx)
{
    struct jinja_token *t = last_tok(lx);
    if (!t || t->type != TK_TEXT)
        return;
    size_t l;
    while (t->text.n && (l = cinfer_jinja_js_space_len_before(t->text.p, t->text.p + t->text.n)))
        t->text.n -= l;
    if (t->text.n == 0)
        lx->ntoks--;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/* consumeWhile of the reference for digits and words: running into the end of the
 * input is an error there. */
static int consume_run(struct lexer *lx, bool (*pred)(char), size_t *start)
{
    *start = lx->pos;
    while (lx->pos < lx->n && pred(lx->s[lx->pos])) {
        lx->pos++;
        if (lx->pos >= lx->n)
            return lex_fail(lx, lx->pos, "unexpected end of input");
    }
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int lex_string(struct lexer *lx)
{
    size_t open = lx->pos;
    char quote = lx->s[lx->pos++];
    struct jbuf v = {0};
    int rc = 0;
    while (true) {
        if (lx->pos >= lx->n) {
            rc = lex_fail(lx, open, "unterminated string literal");
            goto out;
        }
        char c = lx->s[lx->pos];
        if (c == quote)
            break;
        if (c == '\\') {
            lx->pos++;
            if (lx->pos >= lx->n) {
                rc = lex_fail(lx, lx->pos, "unexpected end of input after '\\'");
                goto out;
            }
            char e = lx->s[lx->pos++];
            if (e == 'x' || e == 'u') {
                size_t len = e == 'x' ? 2 : 4;
                uint32_t cp = 0;
                for (size_t k = 0; k < len; k++) {
                    int h = lx->pos + k < lx->n ? hexval(lx->s[lx->pos + k]) : -1;
                    if (h < 0) {
                        rc = lex_fail(lx, lx->pos - 2, "invalid hexadecimal escape sequence");
                        goto out;
                    }
                    cp = cp * 16 + (uint32_t)h;
                }
                lx->pos += len;
                char enc[4];
                cinfer_jbuf_append(&v, enc, cinfer_jinja_utf8_encode(cp, enc));
                continue;
            }
            const char *from = "ntrbfv'\"\\", *to = "\n\t\r\b\f\v'\"\\";
            const char *hit = strchr(from, e);
            if (!hit || !e) {
                char msg[64];
                snprintf(msg, sizeof(msg), "unexpected escaped character '%c'", e);
                rc = lex_fail(lx, lx->pos - 2, msg);
                goto out;
            }
            cinfer_jbuf_putc(&v, to[hit - from]);
            continue;
        }
        cinfer_jbuf_putc(&v, c);
        lx->pos++;
        if (lx->pos >= lx->n) {
            rc = lex_fail(lx, open, "unterminated string literal");
            goto out;
        }
    }
    lx->pos++; /* closing quote */
    if (v.failed)
        rc = cinfer_error_set(lx->err, CINFER_ERR_NOMEM, "%s: out of memory while tokenizing", lx->name);
    else
        rc = push(lx, TK_STRING, v.p ? v.p : "", v.n, open);
out:
    cinfer_jbuf_free(&v);
    return rc;
}

static int lex_number(struct lexer *lx, size_t tok_start, bool after_dot)
{
    size_t start;
    int rc = consume_run(lx, is_digit, &start);
    if (rc)
        return rc;
    if (!after_dot && lx->pos + 1 < lx->n && lx->s[lx->pos] == '.' && is_digit(lx->s[lx->pos + 1])) {
        lx->pos++;
        size_t f;
        if ((rc = consume_run(lx, is_digit, &f)))
            return rc;
    }
    return push(lx, TK_NUMBER, lx->s + tok_start, lx->pos - tok_start, tok_start);
}

struct fixed_token {
    const char *seq;
    enum jinja_tok type;
};
static const struct fixed_token fixed_tokens[] = {
    {"{%", TK_OPEN_STMT}, {"%}", TK_CLOSE_STMT}, {"{{", TK_OPEN_EXPR}, {"}}", TK_CLOSE_EXPR},
    {"(", TK_LPAREN},     {")", TK_RPAREN},      {"{", TK_LBRACE},     {"}", TK_RBRACE},
    {"[", TK_LBRACKET},   {"]", TK_RBRACKET},    {",", TK_COMMA},      {".", TK_DOT},
    {":", TK_COLON},      {"|", TK_PIPE},        {"<=", TK_CMP},       {">=", TK_CMP},
    {"==", TK_CMP},       {"!=", TK_CMP},        {"<", TK_CMP},        {">", TK_CMP},
    {"+", TK_ADD},        {"-", TK_ADD},         {"~", TK_ADD},        {"**", TK_POW},
    {"*", TK_MUL},        {"//", TK_MUL},        {"/", TK_MUL},        {"%", TK_MUL},
    {"=", TK_EQUALS},
};

static bool at(const struct lexer *lx, const char *seq)
{
    size_t l = strlen(seq);
    return lx->pos + l <= lx->n && memcmp(lx->s + lx->pos, seq, l) == 0;
}

static int tokenize(struct lexer *lx)
{
    int curly_depth = 0, rc;
    while (lx->pos < lx->n) {
        struct jinja_token *last = last_tok(lx);
        if (!last || last->type == TK_CLOSE_STMT || last->type == TK_CLOSE_EXPR || last->type == TK_COMMENT) {
            size_t start = lx->pos;
            while (lx->pos < lx->n &&
                   !(lx->s[lx->pos] == '{' && lx->pos + 1 < lx->n &&
                     (lx->s[lx->pos + 1] == '%' || lx->s[lx->pos + 1] == '{' || lx->s[lx->pos + 1] == '#')))
                lx->pos++;
            if (lx->pos > start) {
                if ((rc = push(lx, TK_TEXT, lx->s + start, lx->pos - start, start)))
                    return rc;
                continue;
            }
        }
        if (at(lx, "{#")) {
            size_t open = lx->pos;
            lx->pos += 2;
            bool strip_before = lx->pos < lx->n && lx->s[lx->pos] == '-';
            if (strip_before)
                lx->pos++;
            size_t start = lx->pos;
            while (!(lx->pos + 1 < lx->n && lx->s[lx->pos] == '#' && lx->s[lx->pos + 1] == '}')) {
                if (lx->pos + 2 >= lx->n)
                    return lex_fail(lx, open, "missing '#}' to close the comment");
                lx->pos++;
            }
            size_t len = lx->pos - start;
            bool strip_after = len > 0 && lx->s[lx->pos - 1] == '-';
            if (strip_after)
                len--;
            if (strip_before)
                strip_trailing_whitespace(lx);
            if ((rc = push(lx, TK_COMMENT, lx->s + start, len, open)))
                return rc;
            lx->pos += 2;
            if (strip_after)
                lx->pos = skip_space(lx->s, lx->pos, lx->n);
            continue;
        }
        if (at(lx, "{%-")) {
            strip_trailing_whitespace(lx);
            if ((rc = push(lx, TK_OPEN_STMT, "{%", 2, lx->pos)))
                return rc;
            lx->pos += 3;
            continue;
        }
        if (at(lx, "{{-")) {
            strip_trailing_whitespace(lx);
            if ((rc = push(lx, TK_OPEN_EXPR, "{{", 2, lx->pos)))
                return rc;
            curly_depth = 0;
            lx->pos += 3;
            continue;
        }
        /* whitespace inside a tag; running into the end is an error in the reference */
        size_t l;
        while ((l = cinfer_jinja_js_space_len(lx->s + lx->pos, lx->s + lx->n))) {
            lx->pos += l;
            if (lx->pos >= lx->n)
                return lex_fail(lx, lx->pos, "unexpected end of input inside a tag");
        }
        if (at(lx, "-%}")) {
            if ((rc = push(lx, TK_CLOSE_STMT, "%}", 2, lx->pos)))
                return rc;
            lx->pos = skip_space(lx->s, lx->pos + 3, lx->n);
            continue;
        }
        if (at(lx, "-}}")) {
            if ((rc = push(lx, TK_CLOSE_EXPR, "}}", 2, lx->pos)))
                return rc;
            lx->pos = skip_space(lx->s, lx->pos + 3, lx->n);
            continue;
        }
        char c = lx->s[lx->pos];
        if (c == '-' || c == '+') {
            last = last_tok(lx);
            if (!last || last->type == TK_TEXT)
                return lex_fail(lx, lx->pos, c == '-' ? "unexpected character '-'" : "unexpected character '+'");
            if (!(last->type == TK_IDENT || last->type == TK_NUMBER || last->type == TK_STRING ||
                  last->type == TK_RPAREN || last->type == TK_RBRACKET)) {
                size_t start = lx->pos++;
                if (lx->pos < lx->n && is_digit(lx->s[lx->pos])) {
                    if ((rc = lex_number(lx, start, false)))
                        return rc;
                } else if ((rc = push(lx, TK_UNARY, lx->s + start, 1, start))) {
                    return rc;
                }
                continue;
            }
        }
        bool matched = false;
        for (size_t k = 0; k < sizeof(fixed_tokens) / sizeof(fixed_tokens[0]); k++) {
            const struct fixed_token *f = &fixed_tokens[k];
            if (f->type == TK_CLOSE_EXPR && curly_depth > 0)
                continue;
            if (!at(lx, f->seq))
                continue;
            if ((rc = push(lx, f->type, f->seq, strlen(f->seq), lx->pos)))
                return rc;
            if (f->type == TK_OPEN_EXPR)
                curly_depth = 0;
            else if (f->type == TK_LBRACE)
                curly_depth++;
            else if (f->type == TK_RBRACE)
                curly_depth--;
            lx->pos += strlen(f->seq);
            matched = true;
            break;
        }
        if (matched)
            continue;
        if (c == '\'' || c == '"') {
            if ((rc = lex_string(lx)))
                return rc;
            continue;
        }
        if (is_digit(c)) {
            last = last_tok(lx);
            if ((rc = lex_number(lx, lx->pos, last && last->type == TK_DOT)))
                return rc;
            continue;
        }
        if (is_word(c)) {
            size_t start;
            if ((rc = consume_run(lx, is_word, &start)))
                return rc;
            if ((rc = push(lx, TK_IDENT, lx->s + start, lx->pos - start, start)))
                return rc;
            continue;
        }
        char msg[64];
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            snprintf(msg, sizeof(msg), "unexpected character '%c'", c);
        else
            snprintf(msg, sizeof(msg), "unexpected byte 0x%02x", (unsigned char)c);
        return lex_fail(lx, lx->pos, msg);
    }
    return 0;
}

int cinfer_jinja_tokenize(const char *source, size_t len, const char *name, struct jinja_arena *arena,
                          struct jinja_tokens *out, struct cinfer_error *err)
{
    struct pp_text t = {0};
    size_t *lines = NULL;
    int rc = 0;
    if (!cinfer_jinja_utf8_sanitize(source, len, &t.b, &t.map)) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory reading the template", name);
        goto out;
    }
    if (t.b.n && t.b.p[t.b.n - 1] == '\n') {
        t.b.n--;
        t.map[t.b.n] = t.map[t.b.n + 1];
    }
    if (!pp_lstrip_blocks(&t) || !pp_trim_blocks(&t) || !pp_generation(&t)) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory reading the template", name);
        goto out;
    }
    size_t nlines = 1;
    for (size_t i = 0; i < len; i++)
        nlines += source[i] == '\n';
    lines = malloc(nlines * sizeof(*lines));
    if (!lines) {
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory reading the template", name);
        goto out;
    }
    lines[0] = 0;
    for (size_t i = 0, k = 1; i < len; i++)
        if (source[i] == '\n')
            lines[k++] = i + 1;
    struct lexer lx = {.s = t.b.p ? t.b.p : "", .n = t.b.n, .map = t.map, .lines = lines, .nlines = nlines,
                       .name = name, .arena = arena, .err = err};
    rc = tokenize(&lx);
    out->items = lx.toks;
    out->n = lx.ntoks;
out:
    free(lines);
    pp_free(&t);
    return rc;
}
