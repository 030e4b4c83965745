/* JSON Schema into grammar text (grammar.h), covering what the peers (XGrammar,
 * llama.cpp's json-schema-to-grammar, Outlines) cover: types, properties and required,
 * additionalProperties, enum and const, arrays with item schemas, prefix items and
 * bounds, nested objects, anyOf / oneOf / allOf, $ref into the same document
 * (recursion included), string lengths, patterns and the formats a regular language
 * spells, integer and number bounds. The grammar only ever produces values the schema
 * accepts; a keyword it cannot honour that way is refused, naming the keyword and
 * where it is (a JSON pointer), never ignored. Annotations (title, description,
 * default, examples, ...) and unknown keywords are ignored, as validators do.
 *
 * Shapes: objects list their properties in the schema's order, each optional one may
 * be left out; without additionalProperties an object with properties gets no others
 * (as XGrammar's strict mode and llama.cpp do); whitespace between tokens is nothing,
 * one space, or a newline and up to 20 spaces or tabs; numbers have at most 16 integer
 * and 15 fraction digits. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "grammar/text_buf.h"

#define WS "(\" \" | \"\\n\" [ \\t]{0,20})?"
#define JCHAR "([^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))"
#define INT_DIGITS 16
#define MAX_DEPTH 64

enum common {
    C_STRING = 1, C_NUMBER = 2, C_INTEGER = 4, C_VALUE = 8, C_OBJECT = 16, C_ARRAY = 32,
};

struct ref_rule {
    char *ref;
    char *rule;
};

struct conv {
    json_t *root;
    const char *prefix;
    struct text_buf rules;
    unsigned common;
    int n_rules;
    struct ref_rule *refs;
    int n_refs;
    struct cinfer_error *err;
    int failed;
    int depth;
};

__attribute__((format(printf, 4, 5))) static int refuse(struct conv *c, int code, const char *path, const char *fmt,
                                                         ...)
{
    if (c->failed)
        return -1;
    c->failed = 1;
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    cinfer_error_set(c->err, code, "json_schema at %s: %s", path, why);
    return -1;
}

static int unsupported(struct conv *c, const char *path, const char *keyword, const char *why)
{
    return refuse(c, CINFER_ERR_UNSUPPORTED, path, "keyword '%s' is not supported for constrained decoding%s%s", keyword,
                  why ? ": " : "", why ? why : "");
}

static void new_rule_name(struct conv *c, char *buf, size_t size, const char *what)
{
    snprintf(buf, size, "%s%s%d", c->prefix, what, c->n_rules++);
}

static void use_common(struct conv *c, struct text_buf *out, unsigned which)
{
    c->common |= which;
    const char *name = which == C_STRING ? "string" : which == C_NUMBER ? "number" : which == C_INTEGER ? "integer"
                     : which == C_VALUE ? "value" : which == C_OBJECT ? "object" : "array";
    cinfer_tb_printf(out, "%s%s", c->prefix, name);
}

static void emit_common(struct conv *c)
{
    const char *p = c->prefix;
    struct text_buf *r = &c->rules;
    if (c->common & (C_VALUE | C_OBJECT | C_ARRAY))
        c->common |= C_VALUE | C_OBJECT | C_ARRAY | C_STRING | C_NUMBER;
    if (c->common & C_STRING)
        cinfer_tb_printf(r, "%sstring ::= \"\\\"\" " JCHAR "* \"\\\"\"\n", p);
    if (c->common & C_NUMBER)
        cinfer_tb_printf(r, "%snumber ::= \"-\"? (\"0\" | [1-9] [0-9]{0,%d}) (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?\n",
                         p, INT_DIGITS - 1);
    if (c->common & C_INTEGER)
        cinfer_tb_printf(r, "%sinteger ::= \"-\"? (\"0\" | [1-9] [0-9]{0,%d})\n", p, INT_DIGITS - 1);
    if (c->common & C_VALUE) {
        cinfer_tb_printf(r, "%svalue ::= %sobject | %sarray | %sstring | %snumber | \"true\" | \"false\" | \"null\"\n",
                         p, p, p, p, p);
        cinfer_tb_printf(r, "%sobject ::= \"{\" " WS " (%sstring " WS " \":\" " WS " %svalue (" WS " \",\" " WS
                            " %sstring " WS " \":\" " WS " %svalue)*)? " WS " \"}\"\n",
                         p, p, p, p, p);
        cinfer_tb_printf(r, "%sarray ::= \"[\" " WS " (%svalue (" WS " \",\" " WS " %svalue)*)? " WS " \"]\"\n", p, p,
                         p);
    }
}

/* ---- helpers over schemas ------------------------------------------------------ */

static int is_annotation(const char *k)
{
    static const char *const names[] = {
        "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "deprecated",
        "readOnly", "writeOnly", "discriminator", "xml", "externalDocs", "contentMediaType", "contentEncoding",
        "$anchor", "$vocabulary", "definitions", "$defs", "strict", "name", NULL};
    if (!strncmp(k, "x-", 2))
        return 1;
    for (int i = 0; names[i]; i++)
        if (!strcmp(k, names[i]))
            return 1;
    return 0;
}

static void child_path(char *out, size_t size, const char *path, const char *a, const char *b)
{
    snprintf(out, size, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
}

static json_t *resolve_ref(struct conv *c, const char *ref, const char *path)
{
    if (ref[0] != '#') {
        refuse(c, CINFER_ERR_UNSUPPORTED, path,
               "keyword '$ref' to another document (\"%.200s\") is not supported; only references inside the schema "
               "(\"#/...\")",
               ref);
        return NULL;
    }
    json_t *cur = c->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') {
            refuse(c, CINFER_ERR_UNSUPPORTED, path, "keyword '$ref' \"%.200s\": expected a JSON pointer (#/...)", ref);
            return NULL;
        }
        p++;
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char key[256];
        size_t k = 0;
        for (size_t i = 0; i < n && k + 1 < sizeof key; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                key[k++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else if (p[i] == '%' && i + 2 < n) {
                char hex[3] = {p[i + 1], p[i + 2], 0};
                key[k++] = (char)strtol(hex, NULL, 16);
                i += 2;
            } else {
                key[k++] = p[i];
            }
        }
        key[k] = '\0';
        if (json_is_object(cur))
            cur = json_object_get(cur, key);
        else if (json_is_array(cur))
            cur = json_array_get(cur, (size_t)strtoul(key, NULL, 10));
        else
            cur = NULL;
        if (!cur) {
            refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword '$ref' \"%.200s\" points at nothing in the schema", ref);
            return NULL;
        }
        p += n;
    }
    return cur;
}

static int gen(struct conv *c, json_t *s, const char *path, struct text_buf *out);

/* A JSON value written as its literal (enum, const). */
static int literal_value(struct conv *c, const json_t *v, struct text_buf *out)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text)
        return refuse(c, CINFER_ERR_NOMEM, "", "out of memory");
    cinfer_tb_literal(out, text, strlen(text));
    free(text);
    return 0;
}

static int type_matches(const json_t *v, const char *type)
{
    if (!strcmp(type, "string"))
        return json_is_string(v);
    if (!strcmp(type, "integer"))
        return json_is_integer(v) || (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
    if (!strcmp(type, "number"))
        return json_is_number(v);
    if (!strcmp(type, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(type, "null"))
        return json_is_null(v);
    if (!strcmp(type, "object"))
        return json_is_object(v);
    if (!strcmp(type, "array"))
        return json_is_array(v);
    return 0;
}

static int value_allowed_by_type(const json_t *s, const json_t *v)
{
    const json_t *t = json_object_get(s, "type");
    if (json_is_string(t))
        return type_matches(v, json_string_value(t));
    if (json_is_array(t)) {
        size_t i;
        const json_t *x;
        json_array_foreach(t, i, x) if (json_is_string(x) && type_matches(v, json_string_value(x))) return 1;
        return 0;
    }
    return 1;
}

static int gen_enum(struct conv *c, json_t *s, const char *path, struct text_buf *out)
{
    const json_t *cv = json_object_get(s, "const");
    const json_t *ev = json_object_get(s, "enum");
    if (ev && !json_is_array(ev))
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'enum': expected an array, found another value");
    cinfer_tb_puts(out, "(");
    int n = 0;
    if (cv) {
        if (value_allowed_by_type(s, cv)) {
            literal_value(c, cv, out);
            n++;
        }
    } else {
        size_t i;
        const json_t *v;
        json_array_foreach(ev, i, v) {
            if (!value_allowed_by_type(s, v))
                continue;
            cinfer_tb_puts(out, n++ ? " | " : "");
            literal_value(c, v, out);
        }
    }
    cinfer_tb_puts(out, ")");
    if (n == 0)
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword '%s' allows no value of the schema's type",
                      cv ? "const" : "enum");
    return c->failed ? -1 : 0;
}

/* ---- numbers ----------------------------------------------------------------------- */

#define NUM_INF (-1LL)

static int n_digits(long long v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Decimal strings lo..hi of the same length, as alternatives: the first digit where
 * they differ splits the range into lo's branch, a middle of whole digit runs, and hi's
 * branch; a branch whose tail is all 0s (lo) or all 9s (hi) joins the middle, so each
 * level recurses at most once per side and the text stays linear in the length. */
static void same_len(struct text_buf *o, const char *lo, const char *hi, int n)
{
    int i = 0;
    while (i < n && lo[i] == hi[i])
        i++;
    if (i)
        cinfer_tb_printf(o, "\"%.*s\" ", i, lo);
    if (i == n)
        return;
    int r = n - i - 1;
    char nines[24], zeros[24];
    if (r < 0 || r > 20)
        return;
    memset(nines, '9', (size_t)r);
    memset(zeros, '0', (size_t)r);
    int lo_whole = memcmp(lo + i + 1, zeros, (size_t)r) == 0;
    int hi_whole = memcmp(hi + i + 1, nines, (size_t)r) == 0;
    char a = lo_whole ? lo[i] : (char)(lo[i] + 1), b = hi_whole ? hi[i] : (char)(hi[i] - 1);
    int alts = 0;
    cinfer_tb_puts(o, "(");
    if (!lo_whole) {
        cinfer_tb_printf(o, "\"%c\" (", lo[i]);
        same_len(o, lo + i + 1, nines, r);
        cinfer_tb_puts(o, ")");
        alts++;
    }
    if (a <= b) {
        cinfer_tb_printf(o, "%s[%c-%c]", alts++ ? " | " : "", a, b);
        if (r)
            cinfer_tb_printf(o, " [0-9]{%d}", r);
    }
    if (!hi_whole) {
        cinfer_tb_printf(o, "%s\"%c\" (", alts++ ? " | " : "", hi[i]);
        same_len(o, zeros, hi + i + 1, r);
        cinfer_tb_puts(o, ")");
    }
    cinfer_tb_puts(o, ")");
}

/* Canonical decimal integers in [a, b] (0 <= a; b NUM_INF for none; the integer part
 * of any number has at most INT_DIGITS digits). */
static void int_range(struct text_buf *o, long long a, long long b)
{
    int la = n_digits(a), lb = b == NUM_INF ? INT_DIGITS : n_digits(b);
    int first = 1;
    cinfer_tb_puts(o, "(");
    for (int len = la; len <= lb; len++) {
        long long lo = len == 1 ? 0 : 1;
        for (int k = 1; k < len; k++)
            lo *= 10;
        long long hi = lo == 0 ? 9 : lo * 10 - 1;
        if (lo < a)
            lo = a;
        if (b != NUM_INF && hi > b)
            hi = b;
        if (lo > hi)
            continue;
        char ls[40], hs[40];
        snprintf(ls, sizeof ls, "%0*lld", len & 31, lo);
        snprintf(hs, sizeof hs, "%0*lld", len & 31, hi);
        cinfer_tb_puts(o, first ? "(" : " | (");
        first = 0;
        same_len(o, ls, hs, len);
        cinfer_tb_puts(o, ")");
    }
    cinfer_tb_puts(o, first ? "[^\\x00-\\U0010FFFF])" : ")"); /* nothing: a class that matches nothing is refused earlier */
}

/* Non-negative numbers m with lo <= m <= hi (either end exclusive; hi NUM_INF for
 * none), whole-number bounds. integer: no fraction. Returns 0 when the range is
 * empty (nothing written). */
static int magnitude(struct text_buf *o, long long lo, int lo_x, long long hi, int hi_x, int integer)
{
    long long a = lo_x ? lo + 1 : lo;                    /* whole numbers from a ... */
    long long b = hi == NUM_INF ? NUM_INF : hi_x ? hi - 1 : hi; /* ... to b, when integer */
    int alts = 0;
    cinfer_tb_puts(o, "(");
    if (integer) {
        if (b == NUM_INF || a <= b) {
            int_range(o, a, b);
            alts++;
        }
    } else {
        /* n.fraction for n in [a, hi - 1]: every such value is inside */
        long long top = hi == NUM_INF ? NUM_INF : hi - 1;
        if (top == NUM_INF || a <= top) {
            int_range(o, a, top);
            cinfer_tb_puts(o, " (\".\" [0-9]{1,15})?");
            alts++;
        }
        if (lo_x && (hi == NUM_INF || lo < hi)) { /* lo itself with a non-zero fraction */
            cinfer_tb_printf(o, "%s\"%lld.\" [0-9]{0,14} [1-9]", alts++ ? " | " : "", lo);
        }
        if (hi != NUM_INF && !hi_x && hi >= a && (hi > top || top == NUM_INF)) {
            cinfer_tb_printf(o, "%s\"%lld\"", alts++ ? " | " : "", hi);
        } else if (hi != NUM_INF && !hi_x && a > hi && lo == hi && !lo_x) {
            cinfer_tb_printf(o, "%s\"%lld\"", alts++ ? " | " : "", hi);
        }
    }
    cinfer_tb_puts(o, ")");
    return alts;
}

/* A bound as a whole number; 1 when it is one (or outside what can be written: then
 * *inf says the side is open), 0 when it has a fraction. */
static int whole_bound(double v, long long *out, int *inf)
{
    *inf = 0;
    if (fabs(v) >= 1e16) {
        *inf = 1;
        return 1;
    }
    if (floor(v) != v)
        return 0;
    *out = (long long)v;
    return 1;
}

static int gen_number(struct conv *c, json_t *s, const char *path, int integer, struct text_buf *out)
{
    const json_t *mo = json_object_get(s, "multipleOf");
    if (mo) {
        double m = json_number_value(mo);
        if (!(json_is_number(mo) && (m == 1 || (integer && floor(m) == m && m == 1))))
            return unsupported(c, path, "multipleOf", "only multipleOf 1 (a whole number) can be written as a grammar");
        integer = 1;
    }
    const char *fmt = json_string_value(json_object_get(s, "format"));
    double lo = -INFINITY, hi = INFINITY;
    int lo_x = 0, hi_x = 0;
    if (fmt && !strcmp(fmt, "int32")) {
        lo = -2147483648.0;
        hi = 2147483647.0;
        integer = 1;
    }
    const json_t *v;
    if ((v = json_object_get(s, "minimum")) && json_is_number(v) && json_number_value(v) > lo)
        lo = json_number_value(v);
    if ((v = json_object_get(s, "maximum")) && json_is_number(v) && json_number_value(v) < hi)
        hi = json_number_value(v);
    v = json_object_get(s, "exclusiveMinimum");
    if (json_is_true(v))
        lo_x = 1; /* draft 4: a flag on minimum */
    else if (json_is_number(v) && json_number_value(v) >= lo) {
        lo = json_number_value(v);
        lo_x = 1;
    }
    v = json_object_get(s, "exclusiveMaximum");
    if (json_is_true(v))
        hi_x = 1;
    else if (json_is_number(v) && json_number_value(v) <= hi) {
        hi = json_number_value(v);
        hi_x = 1;
    }
    if (isinf(lo) && isinf(hi)) {
        use_common(c, out, integer ? C_INTEGER : C_NUMBER);
        return 0;
    }
    if (integer) { /* whole-number bounds, inclusive */
        if (!isinf(lo)) {
            lo = lo_x ? floor(lo) + 1 : ceil(lo);
            lo_x = 0;
        }
        if (!isinf(hi)) {
            hi = hi_x ? ceil(hi) - 1 : floor(hi);
            hi_x = 0;
        }
    }
    long long a = 0, b = 0;
    int a_inf = isinf(lo), b_inf = isinf(hi), inf;
    if (!a_inf && !whole_bound(lo, &a, &inf))
        return unsupported(c, path, json_object_get(s, "minimum") ? "minimum" : "exclusiveMinimum",
                           "only whole-number bounds on a number can be written as a grammar");
    if (!a_inf && inf)
        a_inf = 1;
    if (!b_inf && !whole_bound(hi, &b, &inf))
        return unsupported(c, path, json_object_get(s, "maximum") ? "maximum" : "exclusiveMaximum",
                           "only whole-number bounds on a number can be written as a grammar");
    if (!b_inf && inf)
        b_inf = 1;
    if (!a_inf && !b_inf && (a > b || (a == b && (lo_x || hi_x))))
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "minimum %lld and maximum %lld leave no number", a, b);
    cinfer_tb_puts(out, "(");
    int alts = 0;
    /* zero and up */
    if (b_inf || b > 0 || (b == 0 && !hi_x)) {
        long long plo = a_inf || a < 0 ? 0 : a;
        int plo_x = !a_inf && a >= 0 ? lo_x : 0;
        size_t mark = out->n;
        if (magnitude(out, plo, plo_x, b_inf ? NUM_INF : b, hi_x, integer))
            alts++;
        else
            out->n = mark;
    }
    /* below zero: "-" and the magnitude */
    if (a_inf || a < 0) {
        long long mlo = !b_inf && b < 0 ? -b : 0;
        int mlo_x = !b_inf && b < 0 ? hi_x : (!b_inf && b == 0 && hi_x);
        if (mlo == 0 && !mlo_x)
            mlo_x = 1; /* "-0" adds nothing */
        size_t mark = out->n;
        cinfer_tb_puts(out, alts ? " | \"-\" " : "\"-\" ");
        if (magnitude(out, mlo, mlo_x, a_inf ? NUM_INF : -a, lo_x, integer))
            alts++;
        else
            out->n = mark;
    }
    cinfer_tb_puts(out, ")");
    if (!alts)
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "the bounds leave no %s", integer ? "integer" : "number");
    return 0;
}

/* ---- strings ---------------------------------------------------------------------- */

static const struct {
    const char *name, *regex;
} formats[] = {
    {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])$"},
    {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"date-time", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
    {"email", "^[a-z0-9]+([._-][a-z0-9]+)*@[a-z0-9]+(-[a-z0-9]+)*(\\.[a-z0-9]+(-[a-z0-9]+)*)*\\.[a-z]{2,6}$"},
    {"ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"},
    {"hostname", "^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?)*$"},
    {"uri", "^https?://[a-z0-9]+(\\.[a-z0-9]+)*(/[A-Za-z0-9._~-]*)*$"},
    {"uri-reference", "^(https?://[a-z0-9]+(\\.[a-z0-9]+)*)?(/[A-Za-z0-9._~-]*)*$"},
    {"ipv6", "^([0-9a-f]{1,4}:){7}[0-9a-f]{1,4}$"},
    {"byte", "^([A-Za-z0-9+/]{4})*$"},
};

static int gen_string(struct conv *c, json_t *s, const char *path, struct text_buf *out)
{
    const json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    const char *pattern = json_string_value(json_object_get(s, "pattern"));
    const char *fmt = json_string_value(json_object_get(s, "format"));
    const char *regex = pattern;
    if (fmt) {
        const char *fregex = NULL;
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(fmt, formats[i].name))
                fregex = formats[i].regex;
        if (!fregex && strcmp(fmt, "password") && strcmp(fmt, "binary") && strcmp(fmt, "regex"))
            return refuse(c, CINFER_ERR_UNSUPPORTED, path,
                          "keyword 'format' \"%.60s\" is not supported for constrained decoding (supported: date, time, "
                          "date-time, uuid, email, ipv4, ipv6, hostname, uri, uri-reference)",
                          fmt);
        if (fregex && pattern)
            return unsupported(c, path, "format", "format together with pattern");
        if (fregex)
            regex = fregex;
        if (fmt && !strcmp(fmt, "regex") && !pattern) /* any text is a regex to a validator that skips it */
            regex = NULL;
    }
    if (regex && (mn || mx))
        return unsupported(c, path, mn ? "minLength" : "maxLength", "a length bound together with pattern or format");
    if (regex) {
        cinfer_tb_puts(out, "(\"\\\"\" ");
        int rc = cinfer_regex_to_expr(regex, strlen(regex), 1, out, c->err);
        if (rc) {
            char why[CINFER_ERROR_MESSAGE_BYTES];
            snprintf(why, sizeof why, "%s", c->err->message);
            return refuse(c, rc, path, "keyword '%s': %s", pattern ? "pattern" : "format", why);
        }
        cinfer_tb_puts(out, " \"\\\"\")");
        return 0;
    }
    long long lo = 0, hi = -1;
    if (mn) {
        if (!json_is_integer(mn) || json_integer_value(mn) < 0)
            return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'minLength': expected a non-negative integer");
        lo = json_integer_value(mn);
    }
    if (mx) {
        if (!json_is_integer(mx) || json_integer_value(mx) < 0)
            return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'maxLength': expected a non-negative integer");
        hi = json_integer_value(mx);
    }
    if (lo > CINFER_GRAMMAR_MAX_REPEAT || hi > CINFER_GRAMMAR_MAX_REPEAT)
        return unsupported(c, path, lo > CINFER_GRAMMAR_MAX_REPEAT ? "minLength" : "maxLength",
                           "a length bound over 10000");
    if (hi >= 0 && hi < lo)
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "maxLength %lld is below minLength %lld", hi, lo);
    if (lo == 0 && hi < 0) {
        use_common(c, out, C_STRING);
        return 0;
    }
    /* a rule of its own, so its positions are shared by every use */
    char name[96];
    new_rule_name(c, name, sizeof name, "str");
    if (hi < 0)
        cinfer_tb_printf(&c->rules, "%s ::= \"\\\"\" " JCHAR "{%lld,} \"\\\"\"\n", name, lo);
    else
        cinfer_tb_printf(&c->rules, "%s ::= \"\\\"\" " JCHAR "{%lld,%lld} \"\\\"\"\n", name, lo, hi);
    cinfer_tb_puts(out, name);
    return 0;
}

/* ---- objects ---------------------------------------------------------------------- */

/* Keys of extra properties that cannot spell a declared name: [A-Za-z0-9_]+ outside
 * the set, written as a walk down the trie of the declared names. */
static void key_not_in(struct text_buf *o, const char **names, int n, int depth)
{
    /* names all share their first depth bytes */
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
    int terminal = 0;
    char kids[64];
    int n_kids = 0;
    for (int i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)names[i][depth];
        if (!ch) {
            terminal = 1;
            continue;
        }
        if (!memchr(kids, ch, (size_t)n_kids) && n_kids < 64)
            kids[n_kids++] = (char)ch;
    }
    int alts = 0;
    cinfer_tb_puts(o, "(");
    if (!terminal && depth > 0) {
        cinfer_tb_puts(o, "\"\"");
        alts++;
    }
    /* a byte no declared name has here: anything after it */
    char other[64];
    int n_other = 0;
    for (const char *a = alphabet; *a; a++)
        if (!memchr(kids, *a, (size_t)n_kids))
            other[n_other++] = *a;
    if (n_other) {
        cinfer_tb_puts(o, alts++ ? " | [" : "[");
        cinfer_tb_put(o, other, (size_t)n_other);
        cinfer_tb_puts(o, "] [0-9A-Za-z_]*");
    }
    for (int k = 0; k < n_kids; k++) {
        const char *sub[256];
        int m = 0;
        for (int i = 0; i < n && m < 256; i++)
            if (names[i][depth] == kids[k])
                sub[m++] = names[i];
        cinfer_tb_printf(o, "%s\"%c\" ", alts++ ? " | " : "", kids[k]);
        key_not_in(o, sub, m, depth + 1);
    }
    if (!alts)
        cinfer_tb_puts(o, "[^\\x00-\\U0010FFFF]"); /* cannot happen: the alphabet is larger */
    cinfer_tb_puts(o, ")");
}

/* Does JSON Schema's pattern (a search) find a match in key? 1, 0, or -1 refused. */
static int pattern_matches(struct conv *c, const char *pattern, const char *key, const char *path)
{
    static struct cinfer_token_table *none; /* matching bytes needs no vocabulary */
    struct text_buf g = {0};
    cinfer_tb_puts(&g, "root ::= \"\\\"\" ");
    int rc = cinfer_regex_to_expr(pattern, strlen(pattern), 1, &g, c->err);
    cinfer_tb_puts(&g, " \"\\\"\"\n");
    struct cinfer_grammar *gr = NULL;
    struct cinfer_grammar_masks *m = NULL;
    struct cinfer_grammar_matcher *mt = NULL;
    if (rc == CINFER_OK && !g.failed)
        rc = cinfer_grammar_compile_text(g.s, g.n, &gr, c->err);
    cinfer_tb_free(&g);
    if (rc) {
        char why[CINFER_ERROR_MESSAGE_BYTES];
        snprintf(why, sizeof why, "%s", c->err->message);
        return refuse(c, rc, path, "keyword 'patternProperties' \"%.80s\": %s", pattern, why);
    }
    struct cinfer_token_table empty = {.vocab = 1, .offset = (uint32_t[1]){0}, .len = (uint32_t[1]){0}};
    (void)none;
    int found = 0;
    if (cinfer_grammar_masks_create(gr, &empty, &m, c->err) == CINFER_OK &&
        cinfer_grammar_matcher_create(m, &mt) == CINFER_OK) {
        json_t *kj = json_string(key);
        char *enc = kj ? json_dumps(kj, JSON_ENCODE_ANY) : NULL;
        found = enc && cinfer_grammar_matcher_accept_bytes(mt, (const uint8_t *)enc, strlen(enc)) == 0 &&
                cinfer_grammar_matcher_can_end(mt);
        free(enc);
        json_decref(kj);
    }
    cinfer_grammar_matcher_free(&mt);
    cinfer_grammar_masks_unref(&m);
    return found;
}

static int key_usable_in_trie(const char *k)
{
    for (; *k; k++)
        if (!((*k >= '0' && *k <= '9') || (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
            return 0;
    return 1;
}

static int gen_object(struct conv *c, json_t *s, const char *path, struct text_buf *out)
{
    json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    const json_t *unev = json_object_get(s, "unevaluatedProperties");
    if (props && !json_is_object(props))
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'properties': expected an object");
    if (req && !json_is_array(req))
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'required': expected an array of names");
    /* patternProperties: keys matching a pattern are never written (a subset of what
     * the schema allows), so only a declared property that a pattern also governs
     * could break the value; that is refused */
    json_t *patterns = json_object_get(s, "patternProperties");
    if (patterns && !json_is_object(patterns))
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'patternProperties': expected an object");
    const char *pat;
    json_t *pat_schema;
    json_object_foreach(patterns, pat, pat_schema) {
        if (json_is_true(pat_schema) || (json_is_object(pat_schema) && json_object_size(pat_schema) == 0))
            continue;
        const char *pk;
        json_t *pv;
        json_object_foreach(props, pk, pv) {
            int m = pattern_matches(c, pat, pk, path);
            if (m < 0)
                return -1;
            if (m)
                return refuse(c, CINFER_ERR_UNSUPPORTED, path,
                              "keyword 'patternProperties': pattern \"%.80s\" also governs the declared property "
                              "\"%.80s\", whose value would have to satisfy both schemas",
                              pat, pk);
        }
    }
    if (json_object_get(s, "propertyNames"))
        return unsupported(c, path, "propertyNames", NULL);
    if (unev && !json_is_false(unev))
        return unsupported(c, path, "unevaluatedProperties", "only false");
    size_t n_props = props ? json_object_size(props) : 0;
    /* required names must be declared, else the value could not be built */
    size_t i;
    const json_t *r;
    int n_req = 0;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r))
            return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'required': item %zu is not a string", i);
        if (!props || !json_object_get(props, json_string_value(r))) {
            if (json_is_false(addl) || (props && !addl))
                return refuse(c, CINFER_ERR_UNSUPPORTED, path,
                              "keyword 'required' names \"%.80s\", which 'properties' does not declare", json_string_value(r));
            return refuse(c, CINFER_ERR_UNSUPPORTED, path,
                          "keyword 'required' names \"%.80s\" without a schema in 'properties': declare it",
                          json_string_value(r));
        }
        n_req++;
    }
    int extras = !props ? !json_is_false(addl) && !json_is_false(unev) : (addl && !json_is_false(addl));
    if (patterns)
        extras = 0; /* an extra key a pattern matches would answer to the pattern's schema */
    const json_t *mnp = json_object_get(s, "minProperties"), *mxp = json_object_get(s, "maxProperties");
    if (mnp && json_integer_value(mnp) > n_req)
        return unsupported(c, path, "minProperties", "more than the required properties");
    if (mxp && (extras || (long long)n_props > json_integer_value(mxp)))
        return unsupported(c, path, "maxProperties", "fewer than the properties that may appear");
    const char **names = calloc(n_props + 1, sizeof *names);
    char *kv_text = NULL;
    if (!names)
        return refuse(c, CINFER_ERR_NOMEM, path, "out of memory");
    struct text_buf *kv = calloc(n_props + 1, sizeof *kv);
    int *required = calloc(n_props + 1, sizeof *required);
    if (!kv || !required) {
        free(names);
        free(kv);
        free(required);
        return refuse(c, CINFER_ERR_NOMEM, path, "out of memory");
    }
    size_t k = 0;
    const char *key;
    json_t *ps;
    json_object_foreach(props, key, ps) {
        names[k] = key;
        json_array_foreach(req, i, r) if (!strcmp(json_string_value(r), key)) required[k] = 1;
        json_t *kj = json_string(key);
        literal_value(c, kj, &kv[k]);
        json_decref(kj);
        cinfer_tb_puts(&kv[k], " " WS " \":\" " WS " ");
        char sub[1024];
        child_path(sub, sizeof sub, path, "properties", key);
        if (gen(c, ps, sub, &kv[k]) < 0)
            break;
        k++;
    }
    char base[96];
    new_rule_name(c, base, sizeof base, "obj");
    int optional_any = 0;
    for (size_t j = 0; j < n_props; j++)
        optional_any |= !required[j];
    if (!c->failed && optional_any) {
        /* tail_j: the properties from j on, after at least one was written */
        for (size_t j = 0; j <= n_props; j++) {
            cinfer_tb_printf(&c->rules, "%s_t%zu ::= ", base, j);
            if (j == n_props)
                cinfer_tb_puts(&c->rules, "\"\"\n");
            else
                cinfer_tb_printf(&c->rules, "(" WS " \",\" " WS " %s)%s %s_t%zu\n", kv[j].s ? kv[j].s : "",
                                 required[j] ? "" : "?", base, j + 1);
        }
    }
    /* extra keys are spelled from [A-Za-z0-9_] so that none can spell a declared name;
     * with a declared name outside that alphabet, no extra keys are written at all */
    for (size_t j = 0; extras && j < n_props; j++)
        if (!key_usable_in_trie(names[j]))
            extras = 0;
    struct text_buf body = {0};
    if (!c->failed) {
        /* the declared part, not empty: start at the first property written */
        int alts = 0;
        cinfer_tb_puts(&body, "(");
        for (size_t j = 0; j < n_props; j++) {
            if (optional_any)
                cinfer_tb_printf(&body, "%s%s %s_t%zu", alts++ ? " | " : "", kv[j].s, base, j + 1);
            else {
                /* all required: one sequence */
                for (size_t q = 0; q < n_props; q++)
                    cinfer_tb_printf(&body, "%s%s", q ? " " WS " \",\" " WS " " : "", kv[q].s);
                alts++;
                break;
            }
            if (required[j])
                break;
        }
        cinfer_tb_puts(&body, ")");
        int declared_empty_ok = n_req == 0;
        struct text_buf extra = {0};
        if (extras) {
            cinfer_tb_puts(&extra, "(");
            if (n_props) {
                cinfer_tb_puts(&extra, "\"\\\"\" ");
                key_not_in(&extra, names, (int)n_props, 0);
                cinfer_tb_puts(&extra, " \"\\\"\"");
            } else {
                use_common(c, &extra, C_STRING);
            }
            cinfer_tb_puts(&extra, " " WS " \":\" " WS " ");
            if (!addl || json_is_true(addl)) {
                use_common(c, &extra, C_VALUE);
            } else {
                char sub[1024];
                child_path(sub, sizeof sub, path, "additionalProperties", NULL);
                gen(c, addl, sub, &extra);
            }
            cinfer_tb_puts(&extra, ")");
        }
        cinfer_tb_printf(&c->rules, "%s ::= \"{\" " WS " (", base);
        if (n_props && extras) {
            cinfer_tb_printf(&c->rules, "%s (" WS " \",\" " WS " %s)*", body.s, extra.s);
            cinfer_tb_printf(&c->rules, "%s", declared_empty_ok ? " | " : "");
            if (declared_empty_ok)
                cinfer_tb_printf(&c->rules, "%s (" WS " \",\" " WS " %s)*", extra.s, extra.s);
        } else if (n_props) {
            cinfer_tb_puts(&c->rules, body.s);
        } else if (extras) {
            cinfer_tb_printf(&c->rules, "%s (" WS " \",\" " WS " %s)*", extra.s, extra.s);
        } else {
            cinfer_tb_puts(&c->rules, "\"\"");
        }
        cinfer_tb_printf(&c->rules, ")%s " WS " \"}\"\n",
                         declared_empty_ok && (n_props || extras) ? "?" : "");
        cinfer_tb_free(&extra);
        cinfer_tb_puts(out, base);
    }
    (void)kv_text;
    cinfer_tb_free(&body);
    for (size_t j = 0; j <= n_props; j++)
        cinfer_tb_free(&kv[j]);
    free(kv);
    free(names);
    free(required);
    return c->failed ? -1 : 0;
}

/* ---- arrays ----------------------------------------------------------------------- */

static int gen_array(struct conv *c, json_t *s, const char *path, struct text_buf *out)
{
    if (json_object_get(s, "contains"))
        return unsupported(c, path, "contains", NULL);
    if (json_object_get(s, "unevaluatedItems"))
        return unsupported(c, path, "unevaluatedItems", NULL);
    const json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
    long long lo = mn ? json_integer_value(mn) : 0, hi = mx && json_is_integer(mx) ? json_integer_value(mx) : -1;
    if (json_is_true(json_object_get(s, "uniqueItems")) && !(hi >= 0 && hi <= 1))
        return unsupported(c, path, "uniqueItems", "only arrays of at most one item can be written as a grammar");
    if (lo > 1000 || hi > 1000)
        return unsupported(c, path, lo > 1000 ? "minItems" : "maxItems", "a bound over 1000");
    if (hi >= 0 && hi < lo)
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "maxItems %lld is below minItems %lld", hi, lo);
    json_t *items = json_object_get(s, "items");
    json_t *prefix = json_object_get(s, "prefixItems");
    json_t *rest = NULL;
    int rest_allowed = 1;
    if (json_is_array(items)) { /* draft 4 tuples */
        prefix = items;
        rest = json_object_get(s, "additionalItems");
    } else {
        rest = items;
    }
    if (rest && json_is_false(rest))
        rest_allowed = 0;
    size_t k = prefix ? json_array_size(prefix) : 0;
    char sub[1024];
    struct text_buf rest_expr = {0};
    if (rest_allowed) {
        if (!rest || json_is_true(rest)) {
            use_common(c, &rest_expr, C_VALUE);
        } else {
            child_path(sub, sizeof sub, path, json_is_array(items) ? "additionalItems" : "items", NULL);
            gen(c, rest, sub, &rest_expr);
        }
    }
    if (!rest_allowed && (long long)k < lo) {
        cinfer_tb_free(&rest_expr);
        return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "minItems %lld asks for more items than the %zu allowed", lo,
                      k);
    }
    /* build from the last position backwards: tail(i) follows at least one item */
    struct text_buf tail = {0};
    long long cap = rest_allowed ? hi : (hi < 0 || hi > (long long)k ? (long long)k : hi);
    /* after the prefix: more items up to the bounds */
    if (rest_allowed && cap != 0) {
        long long start = (long long)k > 1 ? (long long)k : 1; /* index of the first rest item counted here */
        long long need = lo > start ? lo - start : 0;
        if (cap < 0)
            cinfer_tb_printf(&tail, "(" WS " \",\" " WS " %s){%lld,}", rest_expr.s, need);
        else if (cap - start >= 0)
            cinfer_tb_printf(&tail, "(" WS " \",\" " WS " %s){%lld,%lld}", rest_expr.s, need, cap - start);
    }
    for (long long i = (long long)k - 1; i >= 1 && !c->failed; i--) {
        if (cap >= 0 && i >= cap)
            continue;
        struct text_buf t = {0};
        child_path(sub, sizeof sub, path, json_is_array(items) ? "items" : "prefixItems", NULL);
        snprintf(sub + strlen(sub), sizeof sub - strlen(sub), "/%lld", i);
        cinfer_tb_printf(&t, "(" WS " \",\" " WS " ");
        gen(c, json_array_get(prefix, (size_t)i), sub, &t);
        cinfer_tb_printf(&t, " %s)%s", tail.s ? tail.s : "", i >= lo ? "?" : "");
        cinfer_tb_free(&tail);
        tail = t;
    }
    struct text_buf first = {0};
    if (k > 0) {
        child_path(sub, sizeof sub, path, json_is_array(items) ? "items" : "prefixItems", "0");
        gen(c, json_array_get(prefix, 0), sub, &first);
    } else if (rest_allowed) {
        cinfer_tb_puts(&first, rest_expr.s ? rest_expr.s : "");
    }
    char name[96];
    new_rule_name(c, name, sizeof name, "arr");
    if (!c->failed) {
        if (cap == 0 || (!first.s))
            cinfer_tb_printf(&c->rules, "%s ::= \"[\" " WS " \"]\"\n", name);
        else
            cinfer_tb_printf(&c->rules, "%s ::= \"[\" " WS " (%s %s)%s " WS " \"]\"\n", name, first.s,
                             tail.s ? tail.s : "", lo == 0 ? "?" : "");
        cinfer_tb_puts(out, name);
    }
    cinfer_tb_free(&first);
    cinfer_tb_free(&tail);
    cinfer_tb_free(&rest_expr);
    return c->failed ? -1 : 0;
}

/* ---- combining -------------------------------------------------------------------- */

/* allOf (and $ref or anyOf beside other keywords) as one schema: properties and
 * required are joined, types intersected, equal keywords kept; keywords that differ
 * are refused. Returns a new reference. */
static json_t *merge(struct conv *c, json_t *a, json_t *b, const char *path)
{
    if (json_is_true(a))
        return json_incref(b);
    if (json_is_true(b))
        return json_incref(a);
    if (!json_is_object(a) || !json_is_object(b)) {
        refuse(c, CINFER_ERR_UNSUPPORTED, path, "keyword 'allOf' with a false schema allows no value");
        return NULL;
    }
    json_t *m = json_deep_copy(a);
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        json_t *mine = json_object_get(m, k);
        if (!mine || is_annotation(k)) {
            if (!mine)
                json_object_set(m, k, v);
            continue;
        }
        if (json_equal(mine, v))
            continue;
        if (!strcmp(k, "required")) {
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x) {
                size_t j;
                json_t *y;
                int seen = 0;
                json_array_foreach(mine, j, y) seen |= json_equal(x, y);
                if (!seen)
                    json_array_append(mine, x);
            }
        } else if (!strcmp(k, "properties") && json_is_object(v) && json_is_object(mine)) {
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) {
                json_t *have = json_object_get(mine, pk);
                if (!have) {
                    json_object_set(mine, pk, pv);
                } else if (!json_equal(have, pv)) {
                    json_t *both = merge(c, have, pv, path);
                    if (!both) {
                        json_decref(m);
                        return NULL;
                    }
                    json_object_set_new(mine, pk, both);
                }
            }
        } else if (!strcmp(k, "type")) {
            /* intersect: keep the types both allow */
            json_t *out = json_array();
            json_t *la = json_is_string(mine) ? json_pack("[O]", mine) : json_incref(mine);
            json_t *lb = json_is_string(v) ? json_pack("[O]", v) : json_incref(v);
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(la, i, x) json_array_foreach(lb, j, y) {
                if (json_equal(x, y) ||
                    (!strcmp(json_string_value(x) ? json_string_value(x) : "", "integer") &&
                     !strcmp(json_string_value(y) ? json_string_value(y) : "", "number")))
                    json_array_append(out, x);
                else if (!strcmp(json_string_value(x) ? json_string_value(x) : "", "number") &&
                         !strcmp(json_string_value(y) ? json_string_value(y) : "", "integer"))
                    json_array_append(out, y);
            }
            json_decref(la);
            json_decref(lb);
            if (json_array_size(out) == 0) {
                json_decref(out);
                json_decref(m);
                refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'allOf': the types of its schemas do not overlap");
                return NULL;
            }
            json_object_set_new(m, "type", out);
        } else {
            json_decref(m);
            refuse(c, CINFER_ERR_UNSUPPORTED, path,
                   "keyword 'allOf' (or a keyword beside '$ref' or 'anyOf'): two different values of '%s' cannot be "
                   "combined", k);
            return NULL;
        }
    }
    return m;
}

static const char *implied_type(const json_t *s);

/* ---- oneOf: only branches no value can satisfy twice ------------------------------- */

/* What tells a branch apart: its constants, its one type, or a required property with
 * constants (a discriminator). */
struct branch_key {
    int kind; /* 0 unknown, 1 values, 2 type, 3 discriminator */
    const json_t *values; /* kind 1, 3: an array of the allowed values */
    json_t *owned;
    const char *type;     /* kind 2 ("integer" counts as "number") */
    const char *prop;     /* kind 3 */
};

static const json_t *constants_of(const json_t *s, json_t **owned)
{
    const json_t *cv = json_object_get(s, "const");
    if (cv)
        return *owned = json_pack("[O]", cv);
    const json_t *ev = json_object_get(s, "enum");
    return json_is_array(ev) ? ev : NULL;
}

static struct branch_key branch_key(struct conv *c, json_t *b, const char *path)
{
    struct branch_key k = {0};
    const json_t *r = json_is_object(b) ? json_object_get(b, "$ref") : NULL;
    if (json_is_string(r) && !(b = resolve_ref(c, json_string_value(r), path)))
        return k;
    if (!json_is_object(b))
        return k;
    if ((k.values = constants_of(b, &k.owned))) {
        k.kind = 1;
        return k;
    }
    const json_t *t = json_object_get(b, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : implied_type(b);
    if (type && !strcmp(type, "object")) {
        const json_t *req = json_object_get(b, "required");
        const json_t *props = json_object_get(b, "properties");
        size_t i;
        const json_t *name;
        json_array_foreach(req, i, name) {
            const json_t *ps = json_object_get(props, json_string_value(name));
            json_t *owned = NULL;
            const json_t *vals = ps ? constants_of(ps, &owned) : NULL;
            if (vals) {
                k.kind = 3;
                k.values = vals;
                k.owned = owned;
                k.prop = json_string_value(name);
                return k;
            }
            json_decref(owned);
        }
    }
    if (type) {
        k.kind = 2;
        k.type = !strcmp(type, "integer") ? "number" : type;
    }
    return k;
}

static int values_overlap(const json_t *a, const json_t *b)
{
    size_t i, j;
    const json_t *x, *y;
    json_array_foreach(a, i, x) json_array_foreach(b, j, y) if (json_equal(x, y)) return 1;
    return 0;
}

static int value_has_type(const json_t *v, const char *type)
{
    return type_matches(v, type) || (!strcmp(type, "number") && json_is_number(v));
}

static int keys_disjoint(const struct branch_key *a, const struct branch_key *b)
{
    if (!a->kind || !b->kind)
        return 0;
    if (a->kind > b->kind)
        return keys_disjoint(b, a);
    if (a->kind == 1 && b->kind == 1)
        return !values_overlap(a->values, b->values);
    if (a->kind == 1 && b->kind == 2) {
        size_t i;
        const json_t *x;
        json_array_foreach(a->values, i, x) if (value_has_type(x, b->type)) return 0;
        return 1;
    }
    if (a->kind == 1 && b->kind == 3) {
        size_t i;
        const json_t *x;
        json_array_foreach(a->values, i, x) if (json_is_object(x)) return 0;
        return 1;
    }
    if (a->kind == 2 && b->kind == 2)
        return strcmp(a->type, b->type) != 0;
    if (a->kind == 2 && b->kind == 3)
        return strcmp(a->type, "object") != 0;
    return !strcmp(a->prop, b->prop) && !values_overlap(a->values, b->values);
}

/* 0 when no two branches of oneOf can hold for one value, else refused (-1). */
static int check_one_of(struct conv *c, json_t *branches, const char *path)
{
    size_t n = json_array_size(branches);
    struct branch_key *keys = calloc(n ? n : 1, sizeof *keys);
    if (!keys)
        return refuse(c, CINFER_ERR_NOMEM, path, "out of memory");
    for (size_t i = 0; i < n; i++)
        keys[i] = branch_key(c, json_array_get(branches, i), path);
    int rc = c->failed ? -1 : 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        for (size_t j = i + 1; j < n && rc == 0; j++)
            if (!keys_disjoint(&keys[i], &keys[j]))
                rc = refuse(c, CINFER_ERR_UNSUPPORTED, path,
                            "keyword 'oneOf' is not supported for constrained decoding when a value could satisfy "
                            "two branches (here %zu and %zu); supported: branches of different types, distinct "
                            "constants, or a required property with distinct constants; or use anyOf",
                            i, j);
    for (size_t i = 0; i < n; i++)
        json_decref(keys[i].owned);
    free(keys);
    return rc;
}

static const char *const refused_keywords[] = {"not", "if", "then", "else", "dependencies", "dependentRequired",
                                               "dependentSchemas", "$dynamicRef", "$recursiveRef", "minContains",
                                               "maxContains", NULL};

static int gen_ref(struct conv *c, const char *ref, const char *path, struct text_buf *out)
{
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            cinfer_tb_puts(out, c->refs[i].rule);
            return 0;
        }
    json_t *target = resolve_ref(c, ref, path);
    if (!target)
        return -1;
    struct ref_rule *g = realloc(c->refs, (size_t)(c->n_refs + 1) * sizeof *g);
    if (!g)
        return refuse(c, CINFER_ERR_NOMEM, path, "out of memory");
    c->refs = g;
    char name[96];
    new_rule_name(c, name, sizeof name, "ref");
    c->refs[c->n_refs].ref = strdup(ref);
    c->refs[c->n_refs].rule = strdup(name);
    if (!c->refs[c->n_refs].ref || !c->refs[c->n_refs].rule) {
        free(c->refs[c->n_refs].ref);
        free(c->refs[c->n_refs].rule);
        return refuse(c, CINFER_ERR_NOMEM, path, "out of memory");
    }
    c->n_refs++;
    struct text_buf body = {0};
    char where[1024];
    snprintf(where, sizeof where, "%s", ref);
    int saved_depth = c->depth;
    c->depth = 0; /* a named rule: recursion goes through the name */
    int rc = gen(c, target, where, &body);
    c->depth = saved_depth;
    if (rc == 0)
        cinfer_tb_printf(&c->rules, "%s ::= %s\n", name, body.s ? body.s : "\"\"");
    cinfer_tb_free(&body);
    if (rc == 0)
        cinfer_tb_puts(out, name);
    return rc;
}

static int gen_typed(struct conv *c, json_t *s, const char *path, const char *type, struct text_buf *out)
{
    if (!strcmp(type, "string"))
        return gen_string(c, s, path, out);
    if (!strcmp(type, "integer") || !strcmp(type, "number"))
        return gen_number(c, s, path, !strcmp(type, "integer"), out);
    if (!strcmp(type, "boolean")) {
        cinfer_tb_puts(out, "(\"true\" | \"false\")");
        return 0;
    }
    if (!strcmp(type, "null")) {
        cinfer_tb_puts(out, "\"null\"");
        return 0;
    }
    if (!strcmp(type, "object"))
        return gen_object(c, s, path, out);
    if (!strcmp(type, "array"))
        return gen_array(c, s, path, out);
    return refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'type': \"%.40s\" is not a JSON Schema type", type);
}

static int has_any(const json_t *s, const char *const *keys)
{
    for (; *keys; keys++)
        if (json_object_get(s, *keys))
            return 1;
    return 0;
}

/* Without "type": the type the other keywords speak of, or any value. */
static const char *implied_type(const json_t *s)
{
    static const char *const obj[] = {"properties", "required", "additionalProperties", "minProperties",
                                      "maxProperties", "patternProperties", NULL};
    static const char *const arr[] = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains",
                                      "additionalItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", "pattern", "format", NULL};
    static const char *const num[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};
    if (has_any(s, obj))
        return "object";
    if (has_any(s, arr))
        return "array";
    if (has_any(s, str))
        return "string";
    if (has_any(s, num))
        return "number";
    return NULL;
}

static int gen(struct conv *c, json_t *s, const char *path, struct text_buf *out)
{
    if (c->failed)
        return -1;
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return refuse(c, CINFER_ERR_RANGE, path, "nested more than %d levels deep without a $ref", MAX_DEPTH);
    }
    int rc = 0;
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
        use_common(c, out, C_VALUE);
        goto done;
    }
    if (json_is_false(s)) {
        rc = refuse(c, CINFER_ERR_UNSUPPORTED, path, "the schema false allows no value");
        goto done;
    }
    if (!json_is_object(s)) {
        rc = refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "expected a schema (an object or a boolean)");
        goto done;
    }
    for (int i = 0; refused_keywords[i]; i++)
        if (json_object_get(s, refused_keywords[i])) {
            rc = unsupported(c, path, refused_keywords[i], NULL);
            goto done;
        }
    /* $ref, allOf, anyOf/oneOf beside other keywords: fold the others in */
    const json_t *ref = json_object_get(s, "$ref");
    json_t *all = json_object_get(s, "allOf");
    json_t *any = json_object_get(s, "anyOf");
    if (!any && (any = json_object_get(s, "oneOf")) && json_is_array(any) && check_one_of(c, any, path) < 0) {
        rc = -1;
        goto done;
    }
    if (ref || all || any) {
        json_t *rest = json_deep_copy(s);
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(rest, tmp, k, v) if (is_annotation(k) || !strcmp(k, "$ref") || !strcmp(k, "allOf") ||
                                                      !strcmp(k, "anyOf") || !strcmp(k, "oneOf"))
            json_object_del(rest, k);
        int bare = json_object_size(rest) == 0;
        if (ref && !json_is_string(ref)) {
            rc = refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword '$ref': expected a string");
        } else if (ref && bare && !all && !any) {
            rc = gen_ref(c, json_string_value(ref), path, out);
        } else {
            json_t *base = rest;
            json_incref(base);
            if (ref) {
                json_t *t = resolve_ref(c, json_string_value(ref), path);
                json_t *m = t ? merge(c, t, base, path) : NULL;
                json_decref(base);
                base = m;
            }
            size_t i;
            json_t *x;
            json_array_foreach(all, i, x) {
                if (!base)
                    break;
                json_t *xs = x;
                const json_t *xr = json_is_object(x) ? json_object_get(x, "$ref") : NULL;
                if (xr && json_is_string(xr) && !(xs = resolve_ref(c, json_string_value(xr), path))) {
                    json_decref(base);
                    base = NULL;
                    break;
                }
                json_t *m = merge(c, base, xs, path);
                json_decref(base);
                base = m;
            }
            if (base && any) {
                if (!json_is_array(any) || json_array_size(any) == 0) {
                    rc = refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'anyOf'/'oneOf': expected a non-empty array");
                } else {
                    cinfer_tb_puts(out, "(");
                    json_array_foreach(any, i, x) {
                        char sub[1024];
                        snprintf(sub, sizeof sub, "%s/%s/%zu", path, json_object_get(s, "anyOf") ? "anyOf" : "oneOf", i);
                        cinfer_tb_puts(out, i ? " | " : "");
                        if (json_object_size(base) == 0) {
                            if (gen(c, x, sub, out) < 0)
                                break;
                            continue;
                        }
                        json_t *xs = x;
                        const json_t *xr = json_is_object(x) ? json_object_get(x, "$ref") : NULL;
                        if (xr && json_is_string(xr) && !(xs = resolve_ref(c, json_string_value(xr), sub)))
                            break;
                        json_t *m = merge(c, base, xs, sub);
                        if (!m || gen(c, m, sub, out) < 0) {
                            json_decref(m);
                            break;
                        }
                        json_decref(m);
                    }
                    cinfer_tb_puts(out, ")");
                    rc = c->failed ? -1 : 0;
                }
            } else if (base) {
                rc = gen(c, base, path, out);
            } else {
                rc = -1;
            }
            json_decref(base);
        }
        json_decref(rest);
        goto done;
    }
    if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        rc = gen_enum(c, s, path, out);
        goto done;
    }
    const json_t *type = json_object_get(s, "type");
    int nullable = json_is_true(json_object_get(s, "nullable")); /* OpenAPI 3.0 */
    if (json_is_array(type)) {
        cinfer_tb_puts(out, "(");
        size_t i;
        const json_t *t;
        json_array_foreach(type, i, t) {
            if (!json_is_string(t)) {
                rc = refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'type': item %zu is not a string", i);
                break;
            }
            cinfer_tb_puts(out, i ? " | " : "");
            if ((rc = gen_typed(c, s, path, json_string_value(t), out)) < 0)
                break;
        }
        if (nullable)
            cinfer_tb_puts(out, " | \"null\"");
        cinfer_tb_puts(out, ")");
        if (json_array_size(type) == 0)
            rc = refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'type': an empty list allows no value");
        goto done;
    }
    if (type && !json_is_string(type)) {
        rc = refuse(c, CINFER_ERR_INVALID_ARGUMENT, path, "keyword 'type': expected a string or a list of strings");
        goto done;
    }
    const char *t = type ? json_string_value(type) : implied_type(s);
    if (!t) {
        use_common(c, out, C_VALUE);
        goto done;
    }
    if (nullable)
        cinfer_tb_puts(out, "(");
    rc = gen_typed(c, s, path, t, out);
    if (nullable)
        cinfer_tb_puts(out, " | \"null\")");
done:
    c->depth--;
    return c->failed ? -1 : rc;
}

static void conv_free(struct conv *c)
{
    for (int i = 0; i < c->n_refs; i++) {
        free(c->refs[i].ref);
        free(c->refs[i].rule);
    }
    free(c->refs);
    cinfer_tb_free(&c->rules);
}

int cinfer_json_schema_to_rules(const void *schema_json, const char *prefix, char **rules, char **root_rule,
                                struct cinfer_error *err)
{
    *rules = NULL;
    *root_rule = NULL;
    struct conv c = {.root = (json_t *)schema_json, .prefix = prefix, .err = err};
    struct text_buf root = {0};
    int rc = gen(&c, c.root, "#", &root);
    if (rc == 0)
        emit_common(&c);
    if (rc == 0 && (c.rules.failed || root.failed))
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "json_schema: out of memory");
    if (rc) {
        conv_free(&c);
        cinfer_tb_free(&root);
        return err->code ? err->code : CINFER_ERR_UNSUPPORTED;
    }
    *rules = c.rules.s ? c.rules.s : strdup("");
    c.rules.s = NULL;
    *root_rule = root.s;
    conv_free(&c);
    if (!*rules) {
        free(*root_rule);
        *root_rule = NULL;
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "json_schema: out of memory");
    }
    return CINFER_OK;
}

int cinfer_json_schema_to_grammar(const char *schema, size_t len, char **out, struct cinfer_error *err)
{
    *out = NULL;
    json_error_t jerr;
    json_t *s = json_loadb(schema, len, JSON_DECODE_ANY, &jerr);
    if (!s)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "json_schema: not JSON: line %d, column %d: %s", jerr.line,
                                jerr.column, jerr.text);
    char *rules, *root;
    int rc = cinfer_json_schema_to_rules(s, "", &rules, &root, err);
    json_decref(s);
    if (rc)
        return rc;
    struct text_buf b = {0};
    cinfer_tb_printf(&b, "root ::= %s\n%s", root, rules);
    free(rules);
    free(root);
    if (b.failed) {
        cinfer_tb_free(&b);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "json_schema: out of memory");
    }
    *out = b.s;
    return CINFER_OK;
}
