/* Regular expressions into grammar expressions (regex.c). */
#ifndef CINFER_GRAMMAR_REGEX_H
#define CINFER_GRAMMAR_REGEX_H

#include <stddef.h>

#include "cinfer/error.h"
#include "grammar/text_buf.h"

/* Appends a grammar expression matching re[0..len) to out. json 0: the whole text
 * matches (anchors are implied). json 1: the text is a JSON string's contents, its
 * characters written as JSON spells them; a side without its anchor (^ or $) may have
 * any characters there, as JSON Schema's pattern searches. CINFER_ERR_UNSUPPORTED
 * names what the subset leaves out. */
int cinfer_regex_to_expr(const char *re, size_t len, int json, struct text_buf *out, struct cinfer_error *err);

#endif
