/* A growing text buffer for writing grammar text; a failed allocation sticks, so a
 * writer checks once at the end. */
#ifndef CINFER_GRAMMAR_TEXT_BUF_H
#define CINFER_GRAMMAR_TEXT_BUF_H

#include <stddef.h>
#include <stdint.h>

struct text_buf {
    char *s;
    size_t n, cap;
    int failed;
};
void cinfer_tb_put(struct text_buf *b, const char *s, size_t n);
void cinfer_tb_puts(struct text_buf *b, const char *s);
__attribute__((format(printf, 2, 3))) void cinfer_tb_printf(struct text_buf *b, const char *fmt, ...);
/* A code point inside a "literal" or a [class] of grammar text, escaped as needed. */
void cinfer_tb_char(struct text_buf *b, uint32_t cp, int in_class);
/* bytes[0..n) (UTF-8) as a "literal". */
void cinfer_tb_literal(struct text_buf *b, const char *s, size_t n);
/* A set of code points (sorted, disjoint [lo, hi] pairs) as grammar text: a [class]
 * when json is 0; when json is 1, as the characters of a JSON string that spell them:
 * raw where JSON allows, escaped (\" \\ \n \u001f ...) where it must. */
void cinfer_tb_charset(struct text_buf *b, const uint32_t *ranges, int n_ranges, int json);
void cinfer_tb_free(struct text_buf *b);

#endif
