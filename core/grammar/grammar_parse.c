/* Grammar text into expression trees (the dialect is in grammar.h). Every refusal
 * names the line and column, what was expected and what was found. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define MAX_NESTING 200

struct parser {
    const char *s, *end, *p;
    struct grammar_rules *rules;
    struct cinfer_error *err;
    int failed;
    int depth;
};

static void pos_of(const struct parser *ps, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = ps->s; q < at && q < ps->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

__attribute__((format(printf, 3, 4))) static struct gx *fail(struct parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->failed)
        return NULL;
    ps->failed = 1;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    int line, col;
    pos_of(ps, at, &line, &col);
    char found[24];
    if (at >= ps->end)
        snprintf(found, sizeof found, "the end");
    else if ((unsigned char)*at >= 0x20 && (unsigned char)*at < 0x7F)
        snprintf(found, sizeof found, "'%c'", *at);
    else
        snprintf(found, sizeof found, "byte 0x%02X", (unsigned char)*at);
    cinfer_error_set(ps->err, CINFER_ERR_PARSE, "grammar: line %d, column %d: %s, found %s", line, col, why, found);
    return NULL;
}

static struct gx *nomem(struct parser *ps)
{
    if (!ps->failed) {
        ps->failed = 1;
        cinfer_error_set(ps->err, CINFER_ERR_NOMEM, "grammar: out of memory");
    }
    return NULL;
}

void cinfer_gx_free(struct gx *x)
{
    if (!x)
        return;
    for (int i = 0; i < x->n_kids; i++)
        cinfer_gx_free(x->kids[i]);
    free(x->kids);
    free(x->bytes);
    free(x->ranges);
    free(x);
}

static struct gx *gx_new(struct parser *ps, enum gx_kind kind)
{
    struct gx *x = calloc(1, sizeof *x);
    if (!x)
        return nomem(ps);
    x->kind = kind;
    return x;
}

static int gx_push(struct gx *x, struct gx *kid)
{
    if (!kid)
        return -1;
    struct gx **k = realloc(x->kids, (size_t)(x->n_kids + 1) * sizeof *k);
    if (!k) {
        cinfer_gx_free(kid);
        return -1;
    }
    x->kids = k;
    x->kids[x->n_kids++] = kid;
    return 0;
}

/* ---- lexing --------------------------------------------------------------------- */

static void skip_space(struct parser *ps, int newlines)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else if (c == '\\' && ps->p + 1 < ps->end && ps->p[1] == '\n') {
            ps->p += 2; /* a line continued */
        } else {
            break;
        }
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

/* At a name followed by ::= (the start of the next rule)? */
static int at_rule_start(const struct parser *ps)
{
    const char *q = ps->p;
    if (q >= ps->end || !is_name_char(*q) || *q == '.')
        return 0;
    while (q < ps->end && is_name_char(*q))
        q++;
    while (q < ps->end && (*q == ' ' || *q == '\t'))
        q++;
    return ps->end - q >= 3 && memcmp(q, "::=", 3) == 0;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int decode_utf8(const char *s, const char *end, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = (size_t)(end - s);
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    int len = u[0] >= 0xF0 && u[0] < 0xF5 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC2 && u[0] < 0xE0 ? 2 : 0;
    if (!len || (size_t)len > n)
        return 0;
    uint32_t v = u[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (u[i] & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static int read_char(struct parser *ps, uint32_t *cp)
{
    const char *at = ps->p;
    if (ps->p >= ps->end) {
        fail(ps, at, "expected a character");
        return -1;
    }
    if (*ps->p != '\\') {
        int n = decode_utf8(ps->p, ps->end, cp);
        if (!n) {
            fail(ps, at, "expected UTF-8 text");
            return -1;
        }
        ps->p += n;
        return 0;
    }
    ps->p++;
    if (ps->p >= ps->end) {
        fail(ps, at, "expected an escape after '\\'");
        return -1;
    }
    char c = *ps->p++;
    int digits = 0;
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'b': *cp = '\b'; return 0;
    case '0': *cp = 0; return 0;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
        if ((unsigned char)c < 0x80 && c != '\n') {
            *cp = (unsigned char)c; /* \\ \" \' \[ \] \- \^ and the like stand for themselves */
            return 0;
        }
        fail(ps, at, "expected an escape (\\n \\t \\r \\xHH \\uHHHH \\UHHHHHHHH or a punctuation character)");
        return -1;
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = ps->p < ps->end ? hex_value(*ps->p) : -1;
        if (h < 0) {
            fail(ps, ps->p, "expected %d hex digits after \\%c", digits, c);
            return -1;
        }
        v = v * 16 + (uint32_t)h;
        ps->p++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        fail(ps, at, "expected a Unicode scalar value (not a surrogate, at most U+10FFFF) in the escape");
        return -1;
    }
    *cp = v;
    return 0;
}

static int put_utf8(uint8_t *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- terms ---------------------------------------------------------------------- */

static struct gx *parse_literal(struct parser *ps)
{
    char quote = *ps->p++;
    struct gx *x = gx_new(ps, GX_BYTES);
    if (!x)
        return NULL;
    size_t cap = 16;
    x->bytes = malloc(cap);
    if (!x->bytes) {
        cinfer_gx_free(x);
        return nomem(ps);
    }
    for (;;) {
        if (ps->p >= ps->end || *ps->p == '\n') {
            cinfer_gx_free(x);
            return fail(ps, ps->p, "expected the closing %c of the literal", quote);
        }
        if (*ps->p == quote) {
            ps->p++;
            break;
        }
        uint32_t cp;
        if (read_char(ps, &cp)) {
            cinfer_gx_free(x);
            return NULL;
        }
        if ((size_t)x->n_bytes + 4 > cap) {
            cap *= 2;
            uint8_t *b = realloc(x->bytes, cap);
            if (!b) {
                cinfer_gx_free(x);
                return nomem(ps);
            }
            x->bytes = b;
        }
        x->n_bytes += put_utf8(x->bytes + x->n_bytes, cp);
    }
    if (x->n_bytes == 0)
        x->kind = GX_EMPTY;
    return x;
}

static int by_lo(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and merges ranges[0 .. 2n) in place; returns the new count. */
static int normalize_ranges(uint32_t *r, int n)
{
    qsort(r, (size_t)n, 2 * sizeof *r, by_lo);
    int out = 0;
    for (int i = 0; i < n; i++) {
        if (out && r[2 * i] <= r[2 * (out - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (out - 1) + 1])
                r[2 * (out - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * out] = r[2 * i];
            r[2 * out + 1] = r[2 * i + 1];
            out++;
        }
    }
    return out;
}

/* The complement within the Unicode scalar values. */
static int negate_ranges(uint32_t **rp, int n)
{
    uint32_t *r = *rp;
    uint32_t *out = malloc((size_t)(2 * n + 6) * sizeof *out);
    if (!out)
        return -1;
    int k = 0;
    uint32_t next = 0;
    for (int i = 0; i <= n; i++) {
        uint32_t lo = i < n ? r[2 * i] : 0x110000;
        if (lo > next) {
            out[2 * k] = next;
            out[2 * k + 1] = lo - 1;
            k++;
        }
        if (i < n)
            next = r[2 * i + 1] + 1;
    }
    free(r);
    *rp = out;
    return k;
}

static struct gx *parse_class(struct parser *ps)
{
    const char *start = ps->p++;
    int negated = 0;
    if (ps->p < ps->end && *ps->p == '^') {
        negated = 1;
        ps->p++;
    }
    struct gx *x = gx_new(ps, GX_CLASS);
    if (!x)
        return NULL;
    int cap = 8;
    x->ranges = malloc((size_t)cap * 2 * sizeof *x->ranges);
    if (!x->ranges) {
        cinfer_gx_free(x);
        return nomem(ps);
    }
    for (;;) {
        if (ps->p >= ps->end || *ps->p == '\n') {
            cinfer_gx_free(x);
            return fail(ps, start, "expected the closing ] of this character class");
        }
        if (*ps->p == ']') {
            ps->p++;
            break;
        }
        uint32_t lo, hi;
        if (read_char(ps, &lo)) {
            cinfer_gx_free(x);
            return NULL;
        }
        hi = lo;
        if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
            ps->p++;
            const char *at = ps->p;
            if (read_char(ps, &hi)) {
                cinfer_gx_free(x);
                return NULL;
            }
            if (hi < lo) {
                cinfer_gx_free(x);
                return fail(ps, at, "expected a range whose end is not below its start (U+%04X-U+%04X)", lo, hi);
            }
        }
        if (x->n_ranges == cap) {
            cap *= 2;
            uint32_t *r = realloc(x->ranges, (size_t)cap * 2 * sizeof *r);
            if (!r) {
                cinfer_gx_free(x);
                return nomem(ps);
            }
            x->ranges = r;
        }
        x->ranges[2 * x->n_ranges] = lo;
        x->ranges[2 * x->n_ranges + 1] = hi;
        x->n_ranges++;
    }
    x->n_ranges = normalize_ranges(x->ranges, x->n_ranges);
    if (negated && (x->n_ranges = negate_ranges(&x->ranges, x->n_ranges)) < 0) {
        x->n_ranges = 0;
        cinfer_gx_free(x);
        return nomem(ps);
    }
    if (x->n_ranges == 0) {
        cinfer_gx_free(x);
        return fail(ps, start, "expected a character class that matches something");
    }
    return x;
}

static int rule_index(struct parser *ps, const char *name, size_t len, int line)
{
    struct grammar_rules *r = ps->rules;
    for (int i = 0; i < r->n; i++)
        if (strlen(r->names[i]) == len && memcmp(r->names[i], name, len) == 0)
            return i;
    char **names = realloc(r->names, (size_t)(r->n + 1) * sizeof *names);
    if (names)
        r->names = names;
    struct gx **body = realloc(r->body, (size_t)(r->n + 1) * sizeof *body);
    if (body)
        r->body = body;
    int *lines = realloc(r->line, (size_t)(r->n + 1) * sizeof *lines);
    if (lines)
        r->line = lines;
    char *copy = strndup(name, len);
    if (!names || !body || !lines || !copy) {
        free(copy);
        nomem(ps);
        return -1;
    }
    r->names[r->n] = copy;
    r->body[r->n] = NULL;
    r->line[r->n] = line;
    return r->n++;
}

static struct gx *parse_alternatives(struct parser *ps, int in_group);

static int read_count(struct parser *ps, int *out)
{
    const char *at = ps->p;
    long v = 0;
    int digits = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > CINFER_GRAMMAR_MAX_REPEAT) {
            fail(ps, at, "expected a repetition count of at most %d", CINFER_GRAMMAR_MAX_REPEAT);
            return -1;
        }
        digits++;
    }
    if (!digits) {
        fail(ps, at, "expected a repetition count");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static struct gx *parse_quantified(struct parser *ps, struct gx *x)
{
    for (;;) {
        if (ps->p >= ps->end)
            return x;
        char c = *ps->p;
        int min, max;
        if (c == '*' || c == '+' || c == '?') {
            ps->p++;
            min = c == '+' ? 1 : 0;
            max = c == '?' ? 1 : -1;
        } else if (c == '{') {
            const char *at = ps->p++;
            skip_space(ps, 0);
            if (read_count(ps, &min)) {
                cinfer_gx_free(x);
                return NULL;
            }
            skip_space(ps, 0);
            max = min;
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_space(ps, 0);
                max = -1;
                if (ps->p < ps->end && *ps->p != '}' && read_count(ps, &max)) {
                    cinfer_gx_free(x);
                    return NULL;
                }
                skip_space(ps, 0);
            }
            if (ps->p >= ps->end || *ps->p != '}') {
                cinfer_gx_free(x);
                return fail(ps, ps->p, "expected '}' closing the repetition");
            }
            ps->p++;
            if (max >= 0 && max < min) {
                cinfer_gx_free(x);
                return fail(ps, at, "expected {m,n} with m <= n (found {%d,%d})", min, max);
            }
        } else {
            return x;
        }
        struct gx *r = gx_new(ps, GX_REPEAT);
        if (!r || gx_push(r, x)) {
            cinfer_gx_free(r);
            if (r == NULL)
                cinfer_gx_free(x);
            return nomem(ps);
        }
        r->min = min;
        r->max = max;
        x = r;
    }
}

static struct gx *parse_term(struct parser *ps)
{
    char c = *ps->p;
    struct gx *x;
    if (c == '"' || c == '\'') {
        x = parse_literal(ps);
    } else if (c == '[') {
        x = parse_class(ps);
    } else if (c == '.') {
        ps->p++;
        x = gx_new(ps, GX_CLASS);
        if (x && !(x->ranges = malloc(2 * sizeof *x->ranges))) {
            cinfer_gx_free(x);
            return nomem(ps);
        }
        if (x) {
            x->ranges[0] = 0;
            x->ranges[1] = 0x10FFFF;
            x->n_ranges = 1;
        }
    } else if (c == '(') {
        const char *open = ps->p++;
        if (++ps->depth > MAX_NESTING)
            return fail(ps, open, "expected at most %d nested groups", MAX_NESTING);
        x = parse_alternatives(ps, 1);
        ps->depth--;
        if (!x)
            return NULL;
        skip_space(ps, 1);
        if (ps->p >= ps->end || *ps->p != ')') {
            cinfer_gx_free(x);
            return fail(ps, ps->p, "expected ')' closing the group opened at %s", open == ps->s ? "the start" : "'('");
        }
        ps->p++;
    } else if (is_name_char(c) && c != '.') {
        const char *name = ps->p;
        while (ps->p < ps->end && is_name_char(*ps->p))
            ps->p++;
        int line, col;
        pos_of(ps, name, &line, &col);
        int idx = rule_index(ps, name, (size_t)(ps->p - name), line);
        if (idx < 0)
            return NULL;
        x = gx_new(ps, GX_REF);
        if (x)
            x->rule = idx;
    } else {
        return fail(ps, ps->p, "expected a literal, a character class, a rule name or '('");
    }
    if (!x)
        return NULL;
    return parse_quantified(ps, x);
}

/* A sequence ends at |, ), the end, or (outside groups) the next rule. */
static struct gx *parse_sequence(struct parser *ps, int in_group)
{
    struct gx *seq = gx_new(ps, GX_SEQ);
    if (!seq)
        return NULL;
    for (;;) {
        skip_space(ps, in_group);
        if (!in_group && ps->p < ps->end && *ps->p == '\n') {
            /* a rule may go on over several lines: stop only at the next rule */
            const char *save = ps->p;
            skip_space(ps, 1);
            if (ps->p >= ps->end || at_rule_start(ps))
                break;
            (void)save;
            continue;
        }
        if (ps->p >= ps->end || *ps->p == '|' || *ps->p == ')' || (!in_group && at_rule_start(ps)))
            break;
        if (gx_push(seq, parse_term(ps))) {
            cinfer_gx_free(seq);
            return ps->failed ? NULL : nomem(ps);
        }
    }
    if (seq->n_kids == 1) {
        struct gx *only = seq->kids[0];
        seq->n_kids = 0;
        cinfer_gx_free(seq);
        return only;
    }
    if (seq->n_kids == 0)
        seq->kind = GX_EMPTY;
    return seq;
}

static struct gx *parse_alternatives(struct parser *ps, int in_group)
{
    struct gx *alt = gx_new(ps, GX_ALT);
    if (!alt)
        return NULL;
    for (;;) {
        if (gx_push(alt, parse_sequence(ps, in_group))) {
            cinfer_gx_free(alt);
            return ps->failed ? NULL : nomem(ps);
        }
        skip_space(ps, in_group);
        if (ps->p < ps->end && *ps->p == '|') {
            ps->p++;
            continue;
        }
        break;
    }
    if (alt->n_kids == 1) {
        struct gx *only = alt->kids[0];
        alt->n_kids = 0;
        cinfer_gx_free(alt);
        return only;
    }
    return alt;
}

void cinfer_grammar_rules_free(struct grammar_rules *r)
{
    for (int i = 0; i < r->n; i++) {
        if (r->names) /* the compiled grammar may have taken the names */
            free(r->names[i]);
        cinfer_gx_free(r->body[i]);
    }
    free(r->names);
    free(r->body);
    free(r->line);
    memset(r, 0, sizeof *r);
}

int cinfer_grammar_parse(const char *text, size_t len, struct grammar_rules *out, struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    if (len > CINFER_GRAMMAR_MAX_TEXT)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "grammar: %zu bytes of text, at most %u allowed", len,
                                CINFER_GRAMMAR_MAX_TEXT);
    struct parser ps = {.s = text, .end = text + len, .p = text, .rules = out, .err = err};
    for (;;) {
        skip_space(&ps, 1);
        if (ps.p >= ps.end)
            break;
        const char *name = ps.p;
        if (!is_name_char(*ps.p) || *ps.p == '.') {
            fail(&ps, ps.p, "expected a rule name");
            break;
        }
        while (ps.p < ps.end && is_name_char(*ps.p))
            ps.p++;
        size_t name_len = (size_t)(ps.p - name);
        skip_space(&ps, 0);
        if (ps.end - ps.p < 3 || memcmp(ps.p, "::=", 3) != 0) {
            fail(&ps, ps.p, "expected '::=' after the rule name '%.*s'", (int)(name_len > 64 ? 64 : name_len), name);
            break;
        }
        ps.p += 3;
        int line, col;
        pos_of(&ps, name, &line, &col);
        int idx = rule_index(&ps, name, name_len, line);
        if (idx < 0)
            break;
        if (out->body[idx]) {
            fail(&ps, name, "rule '%s' is defined twice (first at line %d)", out->names[idx], out->line[idx]);
            break;
        }
        out->line[idx] = line;
        struct gx *body = parse_alternatives(&ps, 0);
        if (!body)
            break;
        out->body[idx] = body;
    }
    if (!ps.failed) {
        int has_root = 0;
        for (int i = 0; i < out->n; i++) {
            if (!out->body[i]) {
                cinfer_error_set(err, CINFER_ERR_PARSE, "grammar: rule '%s' (used at line %d) is never defined",
                                 out->names[i], out->line[i]);
                ps.failed = 1;
                break;
            }
            if (!strcmp(out->names[i], "root"))
                has_root = 1;
        }
        if (!ps.failed && !has_root) {
            cinfer_error_set(err, CINFER_ERR_PARSE, "grammar: expected a rule named 'root' (the start rule), found %s",
                             out->n ? "none" : "no rules at all");
            ps.failed = 1;
        }
    }
    if (ps.failed) {
        int code = err->code;
        cinfer_grammar_rules_free(out);
        return code ? code : CINFER_ERR_PARSE;
    }
    return CINFER_OK;
}

/* Renames the rule `root` (its definition and every reference) in grammar text,
 * leaving literals, classes and comments alone. */
int cinfer_grammar_rename_root(const char *text, const char *new_name, char **out)
{
    size_t len = strlen(text), cap = len * 2 + strlen(new_name) * 8 + 16, n = 0;
    char *o = malloc(cap);
    if (!o)
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < len;) {
        char c = text[i];
        size_t start = i;
        if (c == '"' || c == '\'' || c == '[') {
            char close = c == '[' ? ']' : c;
            i++;
            while (i < len && text[i] != close && text[i] != '\n') {
                if (text[i] == '\\' && i + 1 < len)
                    i++;
                i++;
            }
            if (i < len && text[i] == close)
                i++;
        } else if (c == '#') {
            while (i < len && text[i] != '\n')
                i++;
        } else if (is_name_char(c) && c != '.') {
            while (i < len && is_name_char(text[i]))
                i++;
            if (i - start == 4 && memcmp(text + start, "root", 4) == 0) {
                size_t m = strlen(new_name);
                if (n + m + 1 > cap) {
                    cap = (n + m + 1) * 2;
                    char *g = realloc(o, cap);
                    if (!g) {
                        free(o);
                        return CINFER_ERR_NOMEM;
                    }
                    o = g;
                }
                memcpy(o + n, new_name, m);
                n += m;
                continue;
            }
        } else {
            i++;
        }
        if (n + (i - start) + 1 > cap) {
            cap = (n + (i - start) + 1) * 2;
            char *g = realloc(o, cap);
            if (!g) {
                free(o);
                return CINFER_ERR_NOMEM;
            }
            o = g;
        }
        memcpy(o + n, text + start, i - start);
        n += i - start;
    }
    o[n] = '\0';
    *out = o;
    return CINFER_OK;
}
