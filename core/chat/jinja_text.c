/* core/chat/jinja_text.c — the text rules of a JavaScript string that the reference
 * renderer inherits: its whitespace set, UTF-16 lengths, how invalid UTF-8 and lone
 * surrogates come out, how a number prints, and the case mapping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

bool cinfer_jbuf_append(struct jbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return false;
    if (b->limit_bytes && b->n + n > b->limit_bytes) {
        b->failed = true;
        return false;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool cinfer_jbuf_puts(struct jbuf *b, const char *s) { return cinfer_jbuf_append(b, s, strlen(s)); }
bool cinfer_jbuf_putc(struct jbuf *b, char c) { return cinfer_jbuf_append(b, &c, 1); }

void cinfer_jbuf_free(struct jbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

size_t cinfer_jinja_utf8_seq_len(const char *p, const char *end)
{
    unsigned char c = (unsigned char)*p;
    size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if ((size_t)(end - p) < n)
        return 1;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)p[i] & 0xc0) != 0x80)
            return 1;
    return n;
}

uint32_t cinfer_jinja_utf8_decode(const char **pp, const char *end)
{
    const unsigned char *p = (const unsigned char *)*pp;
    size_t n = cinfer_jinja_utf8_seq_len(*pp, end);
    uint32_t cp;
    if (n == 1)
        cp = p[0];
    else if (n == 2)
        cp = ((uint32_t)(p[0] & 0x1f) << 6) | (p[1] & 0x3f);
    else if (n == 3)
        cp = ((uint32_t)(p[0] & 0x0f) << 12) | ((uint32_t)(p[1] & 0x3f) << 6) | (p[2] & 0x3f);
    else
        cp = ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3f) << 12) | ((uint32_t)(p[2] & 0x3f) << 6) |
             (p[3] & 0x3f);
    *pp += n;
    return cp;
}

size_t cinfer_jinja_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static bool is_js_space_cp(uint32_t cp)
{
    switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20: case 0xa0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000: case 0xfeff:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

size_t cinfer_jinja_js_space_len(const char *p, const char *end)
{
    if (p >= end)
        return 0;
    unsigned char c = (unsigned char)*p;
    if (c < 0x80)
        return is_js_space_cp(c) ? 1 : 0;
    const char *q = p;
    uint32_t cp = cinfer_jinja_utf8_decode(&q, end);
    return is_js_space_cp(cp) && q - p > 1 ? (size_t)(q - p) : 0;
}

size_t cinfer_jinja_js_space_len_before(const char *start, const char *end)
{
    /* the last code point starts after at most three continuation bytes */
    const char *p = end;
    while (p > start && end - p < 4) {
        p--;
        if (((unsigned char)*p & 0xc0) != 0x80)
            break;
    }
    if (p == end)
        return 0;
    size_t l = cinfer_jinja_js_space_len(p, end);
    return l == (size_t)(end - p) ? l : 0;
}

size_t cinfer_jinja_utf16_len(struct jstr s)
{
    size_t units = 0;
    const char *p = s.p, *end = s.p + s.n;
    while (p < end) {
        size_t n = cinfer_jinja_utf8_seq_len(p, end);
        units += n == 4 ? 2 : 1;
        p += n;
    }
    return units;
}

/* The WHATWG UTF-8 decoder: the bytes that may follow a lead byte. */
static bool utf8_second_ok(unsigned char lead, unsigned char c)
{
    if (lead == 0xe0)
        return c >= 0xa0 && c <= 0xbf;
    if (lead == 0xed)
        return c >= 0x80 && c <= 0x9f;
    if (lead == 0xf0)
        return c >= 0x90 && c <= 0xbf;
    if (lead == 0xf4)
        return c >= 0x80 && c <= 0x8f;
    return c >= 0x80 && c <= 0xbf;
}

bool cinfer_jinja_utf8_sanitize(const char *src, size_t len, struct jbuf *out, size_t **map)
{
    size_t *m = malloc((len * 3 + 1) * sizeof(*m));
    if (!m)
        return false;
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 0 : (c >= 0xc2 && c <= 0xdf) ? 1 : (c >= 0xe0 && c <= 0xef) ? 2
                                                               : (c >= 0xf0 && c <= 0xf4) ? 3 : (size_t)-1;
        size_t got = 1;
        bool ok = need != (size_t)-1;
        if (ok && need > 0) {
            for (size_t k = 1; k <= need; k++) {
                if (i + k >= len || !(k == 1 ? utf8_second_ok(c, s[i + k]) : (s[i + k] & 0xc0) == 0x80)) {
                    ok = false;
                    break;
                }
                got++;
            }
        }
        size_t at = out->n;
        if (ok) {
            cinfer_jbuf_append(out, src + i, got);
        } else {
            cinfer_jbuf_append(out, "\xef\xbf\xbd", 3);
        }
        for (size_t k = at; k < out->n; k++)
            m[k] = i;
        i += got;
    }
    m[out->n] = len;
    *map = m;
    return !out->failed;
}

size_t cinfer_jinja_wtf8_to_utf8(char *s, size_t n)
{
    size_t w = 0, r = 0;
    while (r < n) {
        unsigned char c = (unsigned char)s[r];
        if (c == 0xed && r + 2 < n && ((unsigned char)s[r + 1] & 0xe0) == 0xa0) {
            const char *p = s + r;
            uint32_t hi = cinfer_jinja_utf8_decode(&p, s + n);
            if (hi >= 0xd800 && hi <= 0xdbff && r + 5 < n + 0 && (unsigned char)s[r + 3] == 0xed &&
                ((unsigned char)s[r + 4] & 0xf0) == 0xb0) {
                const char *q = s + r + 3;
                uint32_t lo = cinfer_jinja_utf8_decode(&q, s + n);
                uint32_t cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                w += cinfer_jinja_utf8_encode(cp, s + w);
                r += 6;
                continue;
            }
            memcpy(s + w, "\xef\xbf\xbd", 3);
            w += 3;
            r += 3;
            continue;
        }
        s[w++] = s[r++];
    }
    return w;
}

/* Shortest digits that read back as v (JavaScript's rule), as "d.ddde[+-]x". */
static void shortest_digits(double v, char *digits, int *exp10)
{
    char tmp[40];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp: d[.ddd]e[+-]xx */
    int k = 0;
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = 0;
    *exp10 = atoi(p + 1);
}

void cinfer_jinja_js_number(double v, char *out)
{
    if (isnan(v)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    if (v == 0) {
        strcpy(out, "0");
        return;
    }
    char *o = out;
    if (v < 0) {
        *o++ = '-';
        v = -v;
    }
    char d[24];
    int e;
    shortest_digits(v, d, &e);
    int k = (int)strlen(d), n = e + 1;
    if (k <= n && n <= 21) {
        memcpy(o, d, (size_t)k);
        o += k;
        for (int i = 0; i < n - k; i++)
            *o++ = '0';
    } else if (0 < n && n <= 21) {
        memcpy(o, d, (size_t)n);
        o += n;
        *o++ = '.';
        memcpy(o, d + n, (size_t)(k - n));
        o += k - n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -n; i++)
            *o++ = '0';
        memcpy(o, d, (size_t)k);
        o += k;
    } else {
        *o++ = d[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)(k - 1));
            o += k - 1;
        }
        o += sprintf(o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    *o = 0;
}

static struct jstr js_trim(struct jstr s)
{
    const char *p = s.p, *end = s.p + s.n;
    size_t l;
    while ((l = cinfer_jinja_js_space_len(p, end)))
        p += l;
    while (end > p && (l = cinfer_jinja_js_space_len_before(p, end)))
        end -= l;
    return (struct jstr){p, (size_t)(end - p)};
}

/* Length of a decimal literal ([+-]? digits [. digits] [e[+-]digits]) at s, 0 if none;
 * allow_exp_only_after_digits follows StrDecimalLiteral. */
static size_t decimal_prefix(const char *p, const char *end)
{
    const char *q = p;
    if (q < end && (*q == '+' || *q == '-'))
        q++;
    const char *digits = q;
    while (q < end && *q >= '0' && *q <= '9')
        q++;
    bool any = q > digits;
    if (q < end && *q == '.') {
        const char *f = q + 1;
        while (f < end && *f >= '0' && *f <= '9')
            f++;
        if (any || f > q + 1) {
            any = true;
            q = f;
        }
    }
    if (!any)
        return 0;
    if (q < end && (*q == 'e' || *q == 'E')) {
        const char *x = q + 1;
        if (x < end && (*x == '+' || *x == '-'))
            x++;
        const char *xd = x;
        while (x < end && *x >= '0' && *x <= '9')
            x++;
        if (x > xd)
            q = x;
    }
    return (size_t)(q - p);
}

static double strtod_n(const char *p, size_t n)
{
    char buf[64];
    char *tmp = n < sizeof(buf) ? buf : malloc(n + 1);
    if (!tmp)
        return NAN;
    memcpy(tmp, p, n);
    tmp[n] = 0;
    double v = strtod(tmp, NULL);
    if (tmp != buf)
        free(tmp);
    return v;
}

static size_t infinity_prefix(const char *p, const char *end, double *v)
{
    const char *q = p;
    double sign = 1;
    if (q < end && (*q == '+' || *q == '-')) {
        sign = *q == '-' ? -1 : 1;
        q++;
    }
    if ((size_t)(end - q) >= 8 && memcmp(q, "Infinity", 8) == 0) {
        *v = sign * INFINITY;
        return (size_t)(q + 8 - p);
    }
    return 0;
}

double cinfer_jinja_js_string_to_number(struct jstr s)
{
    s = js_trim(s);
    if (s.n == 0)
        return 0;
    const char *end = s.p + s.n;
    double v;
    if (infinity_prefix(s.p, end, &v) == s.n)
        return v;
    if (s.n > 2 && s.p[0] == '0' && strchr("xXoObB", s.p[1])) {
        int base = (s.p[1] == 'x' || s.p[1] == 'X') ? 16 : (s.p[1] == 'o' || s.p[1] == 'O') ? 8 : 2;
        double r = 0;
        for (const char *p = s.p + 2; p < end; p++) {
            int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                                      : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : 99;
            if (d >= base)
                return NAN;
            r = r * base + d;
        }
        return r;
    }
    if (decimal_prefix(s.p, end) != s.n)
        return NAN;
    return strtod_n(s.p, s.n);
}

double cinfer_jinja_js_parse_float(struct jstr s)
{
    const char *p = s.p, *end = s.p + s.n;
    size_t l;
    while ((l = cinfer_jinja_js_space_len(p, end)))
        p += l;
    double v;
    if (infinity_prefix(p, end, &v))
        return v;
    size_t n = decimal_prefix(p, end);
    return n ? strtod_n(p, n) : NAN;
}

double cinfer_jinja_js_parse_int(struct jstr s)
{
    const char *p = s.p, *end = s.p + s.n;
    size_t l;
    while ((l = cinfer_jinja_js_space_len(p, end)))
        p += l;
    double sign = 1;
    if (p < end && (*p == '+' || *p == '-')) {
        sign = *p == '-' ? -1 : 1;
        p++;
    }
    const char *d = p;
    double r = 0;
    while (p < end && *p >= '0' && *p <= '9')
        r = r * 10 + (*p++ - '0');
    if (p == d)
        return NAN;
    if (p - d > 15) /* beyond 2^53 the digit-by-digit sum rounds differently */
        r = strtod_n(d, (size_t)(p - d));
    return sign * r;
}

/* Simple (one-to-one) case mapping for the scripts chat messages commonly use. */
static uint32_t to_upper_cp(uint32_t c)
{
    if (c >= 'a' && c <= 'z')
        return c - 32;
    if (c < 0x80)
        return c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7))
        return c - 32;
    if (c == 0xff)
        return 0x178;
    if (c == 0xb5)
        return 0x39c;
    if (c >= 0x100 && c <= 0x17f) {
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e))
            return (c & 1) ? c : c - 1;
        if (c == 0x131)
            return 'I';
        if (c == 0x17f)
            return 'S';
        if (c == 0x138 || c == 0x149)
            return c;
        return (c & 1) ? c - 1 : c;
    }
    if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2)
        return c - 32;
    if (c == 0x3c2)
        return 0x3a3;
    if (c >= 0x3ac && c <= 0x3af)
        return c == 0x3ac ? 0x386 : c - 37;
    if (c >= 0x3cc && c <= 0x3ce)
        return c == 0x3cc ? 0x38c : c - 63;
    if (c >= 0x430 && c <= 0x44f)
        return c - 32;
    if (c >= 0x450 && c <= 0x45f)
        return c - 80;
    return c;
}

static uint32_t to_lower_cp(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c < 0x80)
        return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7)
        return c + 32;
    if (c == 0x178)
        return 0xff;
    if (c >= 0x100 && c <= 0x17f) {
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e))
            return (c & 1) ? c + 1 : c;
        if (c == 0x130)
            return 'i'; /* JavaScript gives "i̇" (two code points); close enough */
        if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17f)
            return c;
        return (c & 1) ? c : c + 1;
    }
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2)
        return c + 32;
    if (c == 0x386)
        return 0x3ac;
    if (c >= 0x388 && c <= 0x38a)
        return c + 37;
    if (c == 0x38c)
        return 0x3cc;
    if (c == 0x38e || c == 0x38f)
        return c + 63;
    if (c >= 0x410 && c <= 0x42f)
        return c + 32;
    if (c >= 0x400 && c <= 0x40f)
        return c + 80;
    return c;
}

bool cinfer_jinja_case_map(struct jstr s, bool upper, struct jbuf *out)
{
    const char *p = s.p, *end = s.p + s.n;
    while (p < end) {
        const char *start = p;
        uint32_t cp = cinfer_jinja_utf8_decode(&p, end);
        if (p - start == 1 && (unsigned char)*start >= 0x80) { /* invalid byte: keep */
            cinfer_jbuf_append(out, start, 1);
            continue;
        }
        if (upper && cp == 0xdf) {
            cinfer_jbuf_append(out, "SS", 2);
            continue;
        }
        /* Final sigma: JavaScript lowers Σ to ς at the end of a word. */
        if (!upper && cp == 0x3a3) {
            bool before_letter = start > s.p;
            bool after_letter = p < end && (((unsigned char)*p >= 'a' && (unsigned char)*p <= 'z') ||
                                            ((unsigned char)*p >= 0x80 && !cinfer_jinja_js_space_len(p, end)));
            if (before_letter && !after_letter) {
                cinfer_jbuf_append(out, "\xcf\x82", 2);
                continue;
            }
        }
        char enc[4];
        uint32_t m = upper ? to_upper_cp(cp) : to_lower_cp(cp);
        cinfer_jbuf_append(out, enc, cinfer_jinja_utf8_encode(m, enc));
    }
    return !out->failed;
}
