/* Writing grammar text (text_buf.h). */
#include "grammar/text_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct text_buf *b, size_t more)
{
    if (b->failed)
        return -1;
    if (b->n + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = 1;
        return -1;
    }
    b->s = s;
    b->cap = cap;
    return 0;
}

void cinfer_tb_put(struct text_buf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void cinfer_tb_puts(struct text_buf *b, const char *s) { cinfer_tb_put(b, s, strlen(s)); }

void cinfer_tb_printf(struct text_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void cinfer_tb_char(struct text_buf *b, uint32_t cp, int in_class)
{
    if (cp == '\\' || cp == '"' || (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^'))) {
        char e[2] = {'\\', (char)cp};
        cinfer_tb_put(b, e, 2);
    } else if (cp >= 0x20 && cp < 0x7F) {
        char c = (char)cp;
        cinfer_tb_put(b, &c, 1);
    } else if (cp <= 0xFFFF) {
        cinfer_tb_printf(b, "\\u%04X", cp);
    } else {
        cinfer_tb_printf(b, "\\U%08X", cp);
    }
}

static uint32_t next_cp(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char c = s[*i];
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (*i + (size_t)len > n)
        len = 1;
    uint32_t v = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
    for (int k = 1; k < len; k++)
        v = (v << 6) | (s[*i + (size_t)k] & 0x3F);
    *i += (size_t)len;
    return v;
}

void cinfer_tb_literal(struct text_buf *b, const char *s, size_t n)
{
    cinfer_tb_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t start = i;
            uint32_t cp = next_cp((const unsigned char *)s, n, &i);
            if (i - start > 1 && cp >= 0x80) { /* well-formed enough: copy the bytes */
                cinfer_tb_put(b, s + start, i - start);
                continue;
            }
            cinfer_tb_printf(b, "\\x%02X", c); /* a lone byte */
            i = start + 1;
            continue;
        }
        cinfer_tb_char(b, c, 0);
        i++;
    }
    cinfer_tb_put(b, "\"", 1);
}

static void class_ranges(struct text_buf *b, const uint32_t *r, int n)
{
    cinfer_tb_put(b, "[", 1);
    for (int i = 0; i < n; i++) {
        cinfer_tb_char(b, r[2 * i], 1);
        if (r[2 * i + 1] != r[2 * i]) {
            cinfer_tb_put(b, "-", 1);
            cinfer_tb_char(b, r[2 * i + 1], 1);
        }
    }
    cinfer_tb_put(b, "]", 1);
}

void cinfer_tb_charset(struct text_buf *b, const uint32_t *ranges, int n_ranges, int json)
{
    if (!json) {
        class_ranges(b, ranges, n_ranges);
        return;
    }
    /* raw: everything but '"', '\' and the controls */
    uint32_t *raw = malloc(((size_t)n_ranges * 3 + 2) * 2 * sizeof *raw);
    if (!raw) {
        b->failed = 1;
        return;
    }
    int n_raw = 0;
    static const uint32_t holes[][2] = {{0, 0x1F}, {0x22, 0x22}, {0x5C, 0x5C}};
    for (int i = 0; i < n_ranges; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        for (int h = 0; h < 3 && lo <= hi; h++) {
            if (hi < holes[h][0] || lo > holes[h][1])
                continue;
            if (lo < holes[h][0]) {
                raw[2 * n_raw] = lo;
                raw[2 * n_raw + 1] = holes[h][0] - 1;
                n_raw++;
            }
            lo = holes[h][1] + 1;
        }
        if (lo <= hi) {
            raw[2 * n_raw] = lo;
            raw[2 * n_raw + 1] = hi;
            n_raw++;
        }
    }
    int alts = n_raw > 0;
    cinfer_tb_put(b, "(", 1);
    if (n_raw)
        class_ranges(b, raw, n_raw);
    free(raw);
    static const char *const short_escapes[32] = {
        ['\b'] = "b", ['\f'] = "f", ['\n'] = "n", ['\r'] = "r", ['\t'] = "t"};
    for (int i = 0; i < n_ranges; i++)
        for (uint32_t c = ranges[2 * i]; c <= ranges[2 * i + 1] && c <= 0x5C; c++) {
            if (c != 0x22 && c != 0x5C && c > 0x1F)
                continue;
            cinfer_tb_puts(b, alts++ ? " | " : "");
            if (c == 0x22)
                cinfer_tb_puts(b, "\"\\\\\\\"\"");
            else if (c == 0x5C)
                cinfer_tb_puts(b, "\"\\\\\\\\\"");
            else if (short_escapes[c])
                cinfer_tb_printf(b, "\"\\\\%s\"", short_escapes[c]);
            else
                cinfer_tb_printf(b, "\"\\\\u00%02X\"", c);
        }
    cinfer_tb_put(b, ")", 1);
}

void cinfer_tb_free(struct text_buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}
