/* Regular expressions (the ECMAScript subset grammar.h lists) into grammar text. Used
 * for SGLang's `regex` parameter (the whole output matches) and for JSON Schema's
 * `pattern` and `format` (the match is a JSON string's value, so the characters are
 * written as JSON spells them, and an unanchored pattern may have anything around
 * it). What the subset leaves out (backreferences, lookaround, word boundaries, anchors
 * inside) is refused by name. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/regex.h"

struct rx {
    const char *s, *p, *end;
    int json;
    struct text_buf *out;
    struct cinfer_error *err;
    int failed;
    int depth;
};

static int rx_fail(struct rx *r, const char *what)
{
    if (!r->failed) {
        r->failed = 1;
        cinfer_error_set(r->err, CINFER_ERR_UNSUPPORTED, "regex at offset %d: %s", (int)(r->p - r->s), what);
    }
    return -1;
}

static uint32_t rx_utf8(struct rx *r)
{
    const unsigned char *u = (const unsigned char *)r->p;
    unsigned char c = u[0];
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (!len || r->p + len > r->end) {
        rx_fail(r, "expected UTF-8 text");
        return 0;
    }
    uint32_t v = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
    for (int k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) {
            rx_fail(r, "expected UTF-8 text");
            return 0;
        }
        v = (v << 6) | (u[k] & 0x3F);
    }
    r->p += len;
    return v;
}

/* ---- character sets ---------------------------------------------------------------- */

struct cset {
    uint32_t *r; /* pairs */
    int n, cap;
};

static int cs_add(struct cset *c, uint32_t lo, uint32_t hi)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        uint32_t *g = realloc(c->r, (size_t)cap * 2 * sizeof *g);
        if (!g)
            return -1;
        c->r = g;
        c->cap = cap;
    }
    c->r[2 * c->n] = lo;
    c->r[2 * c->n + 1] = hi;
    c->n++;
    return 0;
}

static int by_lo(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cs_normalize(struct cset *c)
{
    if (c->n)
        qsort(c->r, (size_t)c->n, 2 * sizeof *c->r, by_lo);
    int out = 0;
    for (int i = 0; i < c->n; i++) {
        if (out && c->r[2 * i] <= c->r[2 * (out - 1) + 1] + 1) {
            if (c->r[2 * i + 1] > c->r[2 * (out - 1) + 1])
                c->r[2 * (out - 1) + 1] = c->r[2 * i + 1];
        } else {
            c->r[2 * out] = c->r[2 * i];
            c->r[2 * out + 1] = c->r[2 * i + 1];
            out++;
        }
    }
    c->n = out;
}

static int cs_negate(struct cset *c)
{
    cs_normalize(c);
    struct cset o = {0};
    uint32_t next = 0;
    for (int i = 0; i <= c->n; i++) {
        uint32_t lo = i < c->n ? c->r[2 * i] : 0x110000;
        if (lo > next && cs_add(&o, next, lo - 1))
            return -1;
        if (i < c->n)
            next = c->r[2 * i + 1] + 1;
    }
    free(c->r);
    *c = o;
    return 0;
}

static const uint32_t space_ranges[] = {0x09, 0x0D, 0x20, 0x20, 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A,
                                        0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000,
                                        0xFEFF, 0xFEFF};

/* \d \w \s and their negations into c; 1 if it was one, 0 if not. */
static int class_escape(struct rx *r, char e, struct cset *c)
{
    struct cset t = {0};
    int neg = e == 'D' || e == 'W' || e == 'S';
    switch (e) {
    case 'd': case 'D':
        cs_add(&t, '0', '9');
        break;
    case 'w': case 'W':
        cs_add(&t, '0', '9');
        cs_add(&t, 'A', 'Z');
        cs_add(&t, '_', '_');
        cs_add(&t, 'a', 'z');
        break;
    case 's': case 'S':
        for (size_t i = 0; i < sizeof space_ranges / sizeof space_ranges[0]; i += 2)
            cs_add(&t, space_ranges[i], space_ranges[i + 1]);
        break;
    default:
        return 0;
    }
    if (neg && cs_negate(&t)) {
        free(t.r);
        return rx_fail(r, "out of memory"), 1;
    }
    for (int i = 0; i < t.n; i++)
        cs_add(c, t.r[2 * i], t.r[2 * i + 1]);
    free(t.r);
    return 1;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One escaped character after '\' (not a class escape): its code point, or -1. */
static int64_t char_escape(struct rx *r, int in_class)
{
    if (r->p >= r->end)
        return rx_fail(r, "expected a character after '\\'");
    char e = *r->p++;
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'b':
        if (in_class)
            return '\b';
        return rx_fail(r, "word boundaries (\\b) are not supported");
    case 'B': return rx_fail(r, "word boundaries (\\B) are not supported");
    case 'x': case 'u': {
        uint32_t v = 0;
        int n = e == 'x' ? 2 : 4;
        if (e == 'u' && r->p < r->end && *r->p == '{') {
            r->p++;
            int digits = 0;
            while (r->p < r->end && hexval(*r->p) >= 0 && digits < 6) {
                v = v * 16 + (uint32_t)hexval(*r->p++);
                digits++;
            }
            if (!digits || r->p >= r->end || *r->p != '}')
                return rx_fail(r, "expected \\u{HEX}");
            r->p++;
        } else {
            for (int i = 0; i < n; i++) {
                if (r->p >= r->end || hexval(*r->p) < 0)
                    return rx_fail(r, e == 'x' ? "expected two hex digits after \\x" : "expected four hex digits after \\u");
                v = v * 16 + (uint32_t)hexval(*r->p++);
            }
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return rx_fail(r, "expected a Unicode scalar value in the escape (surrogates are not supported)");
        return v;
    }
    case 'c': return rx_fail(r, "control escapes (\\cX) are not supported");
    case 'k': return rx_fail(r, "named backreferences (\\k) are not supported");
    case 'p': case 'P': return rx_fail(r, "Unicode property escapes (\\p, \\P) are not supported");
    default:
        if (e >= '1' && e <= '9')
            return rx_fail(r, "backreferences (\\1 ...) are not supported");
        if ((unsigned char)e >= 0x80) {
            r->p--;
            return rx_utf8(r);
        }
        return (unsigned char)e;
    }
}

static void emit_set(struct rx *r, struct cset *c)
{
    cs_normalize(c);
    if (c->n == 0) {
        rx_fail(r, "a character class that matches nothing");
        return;
    }
    cinfer_tb_charset(r->out, c->r, c->n, r->json);
}

static int parse_class(struct rx *r)
{
    r->p++; /* [ */
    int neg = 0;
    if (r->p < r->end && *r->p == '^') {
        neg = 1;
        r->p++;
    }
    struct cset c = {0};
    int first = 1;
    while (!r->failed) {
        if (r->p >= r->end) {
            rx_fail(r, "expected ']' closing the character class");
            break;
        }
        if (*r->p == ']' && !first) {
            r->p++;
            break;
        }
        first = 0;
        int64_t lo;
        if (*r->p == '\\') {
            r->p++;
            if (r->p < r->end && class_escape(r, *r->p, &c)) {
                r->p++;
                continue;
            }
            lo = char_escape(r, 1);
        } else if (*r->p == ']') {
            r->p++;
            break;
        } else {
            lo = rx_utf8(r);
        }
        if (r->failed || lo < 0)
            break;
        int64_t hi = lo;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                hi = char_escape(r, 1);
            } else {
                hi = rx_utf8(r);
            }
            if (r->failed || hi < 0)
                break;
            if (hi < lo) {
                rx_fail(r, "a character range whose end is below its start");
                break;
            }
        }
        if (cs_add(&c, (uint32_t)lo, (uint32_t)hi))
            rx_fail(r, "out of memory");
    }
    if (!r->failed && neg && cs_negate(&c))
        rx_fail(r, "out of memory");
    if (!r->failed)
        emit_set(r, &c);
    free(c.r);
    return r->failed ? -1 : 0;
}

static int parse_alt(struct rx *r, int top, int *anchored_start, int *anchored_end);

static void any_char(struct rx *r)
{
    struct cset c = {0};
    /* ECMAScript's . : anything but line terminators */
    cs_add(&c, '\n', '\n');
    cs_add(&c, '\r', '\r');
    cs_add(&c, 0x2028, 0x2029);
    if (cs_negate(&c))
        rx_fail(r, "out of memory");
    else
        emit_set(r, &c);
    free(c.r);
}

static int parse_atom(struct rx *r)
{
    char ch = *r->p;
    if (ch == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            if (r->p + 1 < r->end && r->p[1] == ':') {
                r->p += 2;
            } else if (r->p + 1 < r->end && r->p[1] == '<' && r->p + 2 < r->end && r->p[2] != '=' && r->p[2] != '!') {
                const char *close = memchr(r->p, '>', (size_t)(r->end - r->p));
                if (!close)
                    return rx_fail(r, "expected '>' ending the group name");
                r->p = close + 1; /* a named group is a group */
            } else {
                return rx_fail(r, "lookaround assertions ((?=, (?!, (?<=, (?<!) are not supported");
            }
        }
        if (++r->depth > 100)
            return rx_fail(r, "groups nested more than 100 deep");
        cinfer_tb_puts(r->out, "(");
        if (parse_alt(r, 0, NULL, NULL))
            return -1;
        r->depth--;
        if (r->p >= r->end || *r->p != ')')
            return rx_fail(r, "expected ')' closing the group");
        r->p++;
        cinfer_tb_puts(r->out, ")");
        return 0;
    }
    if (ch == '[')
        return parse_class(r);
    if (ch == '.') {
        r->p++;
        any_char(r);
        return r->failed ? -1 : 0;
    }
    if (ch == '^' || ch == '$')
        return rx_fail(r, "anchors (^ $) are supported only at the start and the end of the pattern");
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{')
        return rx_fail(r, "a quantifier with nothing to repeat");
    int64_t cp;
    struct cset c = {0};
    if (ch == '\\') {
        r->p++;
        if (r->p < r->end && class_escape(r, *r->p, &c)) {
            r->p++;
            emit_set(r, &c);
            free(c.r);
            return r->failed ? -1 : 0;
        }
        cp = char_escape(r, 0);
    } else {
        cp = rx_utf8(r);
    }
    if (r->failed || cp < 0) {
        free(c.r);
        return -1;
    }
    cs_add(&c, (uint32_t)cp, (uint32_t)cp);
    emit_set(r, &c);
    free(c.r);
    return r->failed ? -1 : 0;
}

static int read_int(struct rx *r, int *out)
{
    long v = 0;
    int digits = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        v = v * 10 + (*r->p++ - '0');
        if (v > CINFER_GRAMMAR_MAX_REPEAT)
            return rx_fail(r, "a repetition count over 10000");
        digits++;
    }
    *out = (int)v;
    return digits ? 0 : -1;
}

static int parse_quant(struct rx *r)
{
    if (r->p >= r->end)
        return 0;
    char c = *r->p;
    if (c == '*' || c == '+' || c == '?') {
        r->p++;
        char q[2] = {c, 0};
        cinfer_tb_puts(r->out, q);
    } else if (c == '{') {
        const char *save = r->p;
        r->p++;
        int m, n = -1;
        if (read_int(r, &m)) {
            if (r->failed)
                return -1;
            r->p = save; /* a literal '{' (ECMAScript's annex B) is not supported */
            return rx_fail(r, "expected a repetition {m}, {m,} or {m,n}");
        }
        int comma = 0;
        if (r->p < r->end && *r->p == ',') {
            comma = 1;
            r->p++;
            if (r->p < r->end && *r->p != '}' && read_int(r, &n))
                return r->failed ? -1 : rx_fail(r, "expected a repetition {m}, {m,} or {m,n}");
        }
        if (r->p >= r->end || *r->p != '}')
            return rx_fail(r, "expected '}' closing the repetition");
        r->p++;
        if (comma && n >= 0 && n < m)
            return rx_fail(r, "a repetition {m,n} with n below m");
        if (!comma)
            cinfer_tb_printf(r->out, "{%d}", m);
        else if (n < 0)
            cinfer_tb_printf(r->out, "{%d,}", m);
        else
            cinfer_tb_printf(r->out, "{%d,%d}", m, n);
    } else {
        return 0;
    }
    if (r->p < r->end && *r->p == '?')
        r->p++; /* lazy: the same language */
    if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '{'))
        return rx_fail(r, "a quantifier after a quantifier");
    return 0;
}

static int parse_seq(struct rx *r, int top, int *anchored_start, int *anchored_end)
{
    if (top && r->p < r->end && *r->p == '^') {
        r->p++;
        *anchored_start = 1;
    }
    int any = 0;
    while (r->p < r->end && *r->p != '|' && *r->p != ')' && !r->failed) {
        if (top && *r->p == '$' && (r->p + 1 == r->end || r->p[1] == '|')) {
            r->p++;
            *anchored_end = 1;
            break;
        }
        cinfer_tb_puts(r->out, any++ ? " (" : "(");
        if (parse_atom(r))
            return -1;
        cinfer_tb_puts(r->out, ")");
        if (parse_quant(r))
            return -1;
    }
    if (!any)
        cinfer_tb_puts(r->out, "\"\"");
    return r->failed ? -1 : 0;
}

/* The padding of an unanchored side in JSON mode: any JSON string characters. */
static void json_any(struct rx *r)
{
    uint32_t all[2] = {0, 0x10FFFF};
    cinfer_tb_puts(r->out, "(");
    cinfer_tb_charset(r->out, all, 1, 1);
    cinfer_tb_puts(r->out, ")*");
}

static int parse_alt(struct rx *r, int top, int *anchored_start, int *anchored_end)
{
    int first = 1;
    for (;;) {
        int as = 0, ae = 0;
        cinfer_tb_puts(r->out, first ? "(" : " | (");
        first = 0;
        size_t mark = r->out->n;
        if (parse_seq(r, top, &as, &ae))
            return -1;
        if (top && r->json) {
            /* unanchored sides may have anything around them */
            if (!ae) {
                cinfer_tb_puts(r->out, " ");
                json_any(r);
            }
            if (!as) {
                struct text_buf pad = {0};
                struct text_buf *keep = r->out;
                r->out = &pad;
                json_any(r);
                cinfer_tb_puts(&pad, " ");
                r->out = keep;
                if (pad.failed || keep->failed) {
                    cinfer_tb_free(&pad);
                    return rx_fail(r, "out of memory");
                }
                /* insert the padding before this alternative */
                size_t tail = keep->n - mark;
                cinfer_tb_put(keep, pad.s, pad.n);
                if (!keep->failed) {
                    memmove(keep->s + mark + pad.n, keep->s + mark, tail);
                    memcpy(keep->s + mark, pad.s, pad.n);
                }
                cinfer_tb_free(&pad);
            }
        }
        if (anchored_start)
            *anchored_start |= as;
        if (anchored_end)
            *anchored_end |= ae;
        cinfer_tb_puts(r->out, ")");
        if (r->p < r->end && *r->p == '|') {
            r->p++;
            continue;
        }
        return 0;
    }
}

int cinfer_regex_to_expr(const char *re, size_t len, int json, struct text_buf *out, struct cinfer_error *err)
{
    struct rx r = {.s = re, .p = re, .end = re + len, .json = json, .out = out, .err = err};
    int as = 0, ae = 0;
    cinfer_tb_puts(out, "(");
    if (parse_alt(&r, 1, &as, &ae))
        return err->code ? err->code : CINFER_ERR_UNSUPPORTED;
    if (r.p < r.end)
        return rx_fail(&r, "unbalanced ')'"), CINFER_ERR_UNSUPPORTED;
    cinfer_tb_puts(out, ")");
    if (out->failed)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "regex: out of memory");
    return CINFER_OK;
}

int cinfer_regex_to_grammar(const char *regex, size_t len, char **out, struct cinfer_error *err)
{
    *out = NULL;
    struct text_buf b = {0};
    cinfer_tb_puts(&b, "root ::= ");
    int rc = cinfer_regex_to_expr(regex, len, 0, &b, err);
    cinfer_tb_puts(&b, "\n");
    if (rc == CINFER_OK && b.failed)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "regex: out of memory");
    if (rc) {
        cinfer_tb_free(&b);
        return rc;
    }
    *out = b.s;
    return CINFER_OK;
}
