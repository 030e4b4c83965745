/* core/chat/jinja_value.c — runtime values as the reference renderer has them: the JSON
 * context converted the way JSON.parse and its convertToRuntimeValues do (integral
 * numbers are integers, object keys in JavaScript's order), how values print, tojson,
 * and JavaScript's == and === on them. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

int cinfer_jinja_fail(struct jinja_rt *rt, const struct jinja_node *at, int code, const char *fmt, ...)
{
    char msg[CINFER_ERROR_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at)
        return cinfer_error_set(rt->err, code, "%s:%d:%d: %s", rt->name, at->line, at->col, msg);
    return cinfer_error_set(rt->err, code, "%s: %s", rt->name, msg);
}

int cinfer_jinja_nomem(struct jinja_rt *rt, const struct jinja_node *at)
{
    return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "the render needs more than %zu MiB of memory",
                             rt->arena.limit_bytes >> 20);
}

const char *cinfer_jv_type_name(struct jv v)
{
    switch (v.kind) {
    case JV_UNDEFINED:
        return "UndefinedValue";
    case JV_NULL:
        return "NullValue";
    case JV_BOOL:
        return "BooleanValue";
    case JV_INT:
        return "IntegerValue";
    case JV_FLOAT:
        return "FloatValue";
    case JV_STRING:
        return "StringValue";
    case JV_ARRAY:
        return "ArrayValue";
    case JV_TUPLE:
        return "TupleValue";
    case JV_OBJECT:
        return "ObjectValue";
    case JV_KWARGS:
        return "KeywordArgumentsValue";
    case JV_NAMESPACE:
        return "NamespaceValue";
    case JV_FUNCTION:
        return "FunctionValue";
    }
    return "Value";
}

bool cinfer_jv_truthy(struct jv v)
{
    switch (v.kind) {
    case JV_UNDEFINED:
    case JV_NULL:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
    case JV_FLOAT:
        return v.u.num != 0 && !isnan(v.u.num);
    case JV_STRING:
        return v.u.s.n > 0;
    case JV_ARRAY:
    case JV_TUPLE:
        return v.u.a->n > 0;
    case JV_OBJECT:
    case JV_KWARGS:
        return v.u.o->n > 0;
    case JV_NAMESPACE: /* !!new Map() is true in JavaScript */
    case JV_FUNCTION:
        return true;
    }
    return false;
}

struct jv_array *cinfer_jv_array_new(struct jinja_rt *rt, size_t n)
{
    if (n > (size_t)1 << 28)
        return NULL;
    struct jv_array *a = cinfer_jinja_alloc(&rt->arena, sizeof(*a));
    if (!a)
        return NULL;
    a->n = n;
    if (n) {
        a->items = cinfer_jinja_alloc(&rt->arena, n * sizeof(*a->items));
        if (!a->items)
            return NULL;
    }
    return a;
}

struct jv_object *cinfer_jv_object_new(struct jinja_rt *rt, size_t cap)
{
    struct jv_object *o = cinfer_jinja_alloc(&rt->arena, sizeof(*o));
    if (!o)
        return NULL;
    if (cap) {
        o->keys = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*o->keys));
        o->vals = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*o->vals));
        if (!o->keys || !o->vals)
            return NULL;
        o->cap = cap;
    }
    return o;
}

struct jv *cinfer_jv_object_get(const struct jv_object *o, struct jstr key)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->keys[i].n == key.n && memcmp(o->keys[i].p, key.p, key.n) == 0)
            return &o->vals[i];
    return NULL;
}

bool cinfer_jv_object_set(struct jinja_rt *rt, struct jv_object *o, struct jstr key, struct jv val)
{
    struct jv *have = cinfer_jv_object_get(o, key);
    if (have) {
        *have = val;
        return true;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        struct jstr *keys = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*keys));
        struct jv *vals = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*vals));
        if (!keys || !vals)
            return false;
        if (o->n) {
            memcpy(keys, o->keys, o->n * sizeof(*keys));
            memcpy(vals, o->vals, o->n * sizeof(*vals));
        }
        o->keys = keys;
        o->vals = vals;
        o->cap = cap;
    }
    o->keys[o->n] = key;
    o->vals[o->n] = val;
    o->n++;
    return true;
}

bool cinfer_jv_strdup(struct jinja_rt *rt, const char *p, size_t n, struct jstr *out)
{
    char *c = cinfer_jinja_alloc(&rt->arena, n + 1);
    if (!c)
        return false;
    if (n)
        memcpy(c, p, n);
    *out = (struct jstr){c, n};
    return true;
}

bool cinfer_jv_from_buf(struct jinja_rt *rt, const struct jbuf *b, struct jv *out)
{
    struct jstr s;
    if (b->failed || !cinfer_jv_strdup(rt, b->p ? b->p : "", b->n, &s))
        return false;
    *out = jv_str(s);
    return true;
}

/* ---- JSON context --------------------------------------------------------------------- */

/* A canonical array index ("0", "17"; not "01", not beyond 2^32 - 2) comes first in a
 * JavaScript object's key order, in numeric order. */
static bool array_index(const char *k, size_t n, double *idx)
{
    if (n == 0 || n > 10 || (n > 1 && k[0] == '0'))
        return false;
    double v = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9')
            return false;
        v = v * 10 + (k[i] - '0');
    }
    if (v > 4294967294.0)
        return false;
    *idx = v;
    return true;
}

static int from_json(struct jinja_rt *rt, json_t *j, struct jv *out, int depth)
{
    if (depth > 512)
        return cinfer_jinja_fail(rt, NULL, CINFER_ERR_RANGE, "context: JSON nested deeper than 512 levels");
    switch (json_typeof(j)) {
    case JSON_NULL:
        *out = jv_null();
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        *out = jv_bool(json_is_true(j));
        return 0;
    case JSON_INTEGER:
    case JSON_REAL: {
        double v = json_number_value(j);
        *out = (isfinite(v) && floor(v) == v) ? jv_int(v) : jv_float(v);
        return 0;
    }
    case JSON_STRING: {
        struct jstr s;
        if (!cinfer_jv_strdup(rt, json_string_value(j), json_string_length(j), &s))
            return cinfer_jinja_nomem(rt, NULL);
        *out = jv_str(s);
        return 0;
    }
    case JSON_ARRAY: {
        struct jv_array *a = cinfer_jv_array_new(rt, json_array_size(j));
        if (!a)
            return cinfer_jinja_nomem(rt, NULL);
        for (size_t i = 0; i < a->n; i++) {
            int rc = from_json(rt, json_array_get(j, i), &a->items[i], depth + 1);
            if (rc)
                return rc;
        }
        *out = (struct jv){.kind = JV_ARRAY, .u.a = a};
        return 0;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(j);
        struct jv_object *o = cinfer_jv_object_new(rt, n);
        if (!o)
            return cinfer_jinja_nomem(rt, NULL);
        /* integer-like keys first, ascending, then the rest in insertion order */
        const char *key;
        size_t klen;
        json_t *val;
        for (int pass = 0; pass < 2; pass++) {
            json_object_keylen_foreach(j, key, klen, val)
            {
                double idx;
                bool is_idx = array_index(key, klen, &idx);
                if (is_idx != (pass == 0))
                    continue;
                struct jv v;
                int rc = from_json(rt, val, &v, depth + 1);
                if (rc)
                    return rc;
                struct jstr k;
                if (!cinfer_jv_strdup(rt, key, klen, &k))
                    return cinfer_jinja_nomem(rt, NULL);
                size_t at = o->n;
                if (is_idx) { /* insertion sort among the index keys */
                    while (at > 0) {
                        double prev = 0;
                        array_index(o->keys[at - 1].p, o->keys[at - 1].n, &prev);
                        if (prev < idx)
                            break;
                        o->keys[at] = o->keys[at - 1];
                        o->vals[at] = o->vals[at - 1];
                        at--;
                    }
                }
                o->keys[at] = k;
                o->vals[at] = v;
                o->n++;
            }
        }
        *out = (struct jv){.kind = JV_OBJECT, .u.o = o};
        return 0;
    }
    }
    *out = jv_undefined();
    return 0;
}

int cinfer_jv_from_json(struct jinja_rt *rt, const char *json, size_t len, struct jv *out)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &jerr);
    if (!root)
        return cinfer_error_set(rt->err, CINFER_ERR_PARSE, "%s: context JSON: line %d column %d: %s", rt->name,
                                jerr.line, jerr.column, jerr.text);
    int rc = 0;
    if (!json_is_object(root))
        rc = cinfer_error_set(rt->err, CINFER_ERR_INVALID_ARGUMENT, "%s: context JSON: expected an object, found %s",
                              rt->name,
                              json_is_array(root) ? "an array" : json_is_string(root) ? "a string" : "a scalar");
    else
        rc = from_json(rt, root, out, 0);
    json_decref(root);
    return rc;
}

/* ---- printing ------------------------------------------------------------------------- */

static int out_fail(struct jinja_rt *rt, const struct jinja_node *at, struct jbuf *out)
{
    if (out->limit_bytes && out->n + 1 >= out->limit_bytes)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "the output would exceed %zu bytes", out->limit_bytes);
    return cinfer_jinja_fail(rt, at, CINFER_ERR_NOMEM, "out of memory while rendering");
}

static bool put_number(struct jbuf *out, double v)
{
    char num[40];
    cinfer_jinja_js_number(v, num);
    return cinfer_jbuf_puts(out, num);
}

int cinfer_jv_print(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jbuf *out)
{
    bool ok = true;
    switch (v.kind) {
    case JV_UNDEFINED:
        ok = cinfer_jbuf_puts(out, "undefined");
        break;
    case JV_NULL:
        ok = cinfer_jbuf_puts(out, "null");
        break;
    case JV_BOOL:
        ok = cinfer_jbuf_puts(out, v.u.b ? "true" : "false");
        break;
    case JV_INT:
        ok = put_number(out, v.u.num);
        break;
    case JV_FLOAT:
        if (v.u.num == 0 && signbit(v.u.num)) {
            ok = cinfer_jbuf_puts(out, "-0.0");
        } else if (isfinite(v.u.num) && floor(v.u.num) == v.u.num) {
            /* toFixed(1): exact digits below 1e21, exponential form above */
            if (fabs(v.u.num) >= 1e21) {
                ok = put_number(out, v.u.num);
            } else {
                char num[400];
                snprintf(num, sizeof(num), "%.1f", v.u.num);
                ok = cinfer_jbuf_puts(out, num);
            }
        } else {
            ok = put_number(out, v.u.num);
        }
        break;
    case JV_STRING:
        ok = cinfer_jbuf_append(out, v.u.s.p, v.u.s.n);
        break;
    case JV_ARRAY:
    case JV_TUPLE:
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NAMESPACE: {
        struct jinja_json_opts o = {0};
        return cinfer_jv_to_json(rt, at, v, &o, 0, out);
    }
    case JV_FUNCTION:
        return cinfer_jinja_fail(rt, at, CINFER_ERR_UNSUPPORTED, "cannot print a function");
    }
    return ok ? 0 : out_fail(rt, at, out);
}

int cinfer_jv_js_string(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jbuf *out)
{
    switch (v.kind) {
    case JV_UNDEFINED:
    case JV_NULL:
    case JV_BOOL:
    case JV_STRING:
        return cinfer_jv_print(rt, at, v, out);
    case JV_INT:
    case JV_FLOAT:
        return put_number(out, v.u.num) ? 0 : out_fail(rt, at, out);
    case JV_ARRAY:
    case JV_TUPLE: /* Array.prototype.toString: the elements' own toString, joined by "," */
        for (size_t i = 0; i < v.u.a->n; i++) {
            if (i && !cinfer_jbuf_putc(out, ','))
                return out_fail(rt, at, out);
            int rc = cinfer_jv_print(rt, at, v.u.a->items[i], out);
            if (rc)
                return rc;
        }
        return 0;
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NAMESPACE:
        return cinfer_jbuf_puts(out, "[object Map]") ? 0 : out_fail(rt, at, out);
    case JV_FUNCTION:
        return cinfer_jinja_fail(rt, at, CINFER_ERR_UNSUPPORTED, "cannot convert a function to a string");
    }
    return 0;
}

/* JSON.stringify of a string, optionally with non-ASCII escaped (ensure_ascii). */
static bool put_json_string(struct jstr s, bool ascii, struct jbuf *out)
{
    cinfer_jbuf_putc(out, '"');
    const char *p = s.p, *end = s.p + s.n;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        char esc[16];
        if (c < 0x80) {
            p++;
            switch (c) {
            case '"':
                cinfer_jbuf_puts(out, "\\\"");
                break;
            case '\\':
                cinfer_jbuf_puts(out, "\\\\");
                break;
            case '\b':
                cinfer_jbuf_puts(out, "\\b");
                break;
            case '\f':
                cinfer_jbuf_puts(out, "\\f");
                break;
            case '\n':
                cinfer_jbuf_puts(out, "\\n");
                break;
            case '\r':
                cinfer_jbuf_puts(out, "\\r");
                break;
            case '\t':
                cinfer_jbuf_puts(out, "\\t");
                break;
            default:
                if (c < 0x20) {
                    snprintf(esc, sizeof(esc), "\\u%04x", c);
                    cinfer_jbuf_puts(out, esc);
                } else if (c == 0x7f && ascii) {
                    cinfer_jbuf_puts(out, "\\u007f");
                } else {
                    cinfer_jbuf_putc(out, (char)c);
                }
            }
            continue;
        }
        const char *start = p;
        uint32_t cp = cinfer_jinja_utf8_decode(&p, end);
        bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
        if (surrogate) {
            /* a high surrogate followed by a low one is a pair: JSON.stringify keeps it */
            bool paired = false;
            if (cp <= 0xdbff && p < end) {
                const char *q = p;
                uint32_t lo = cinfer_jinja_utf8_decode(&q, end);
                if (lo >= 0xdc00 && lo <= 0xdfff) {
                    paired = true;
                    if (ascii) {
                        snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", cp, lo);
                        cinfer_jbuf_puts(out, esc);
                    } else {
                        cinfer_jbuf_append(out, start, (size_t)(q - start));
                    }
                    p = q;
                }
            }
            if (!paired) {
                snprintf(esc, sizeof(esc), "\\u%04x", cp);
                cinfer_jbuf_puts(out, esc);
            }
            continue;
        }
        if (!ascii) {
            cinfer_jbuf_append(out, start, (size_t)(p - start));
        } else if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
            cinfer_jbuf_puts(out, esc);
        } else {
            snprintf(esc, sizeof(esc), "\\u%04x", cp);
            cinfer_jbuf_puts(out, esc);
        }
    }
    return cinfer_jbuf_putc(out, '"');
}

/* localeCompare for sort_keys: case-insensitive first, lower case before upper. */
static int locale_cmp(struct jstr a, struct jstr b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    for (size_t i = 0; i < n; i++) {
        int x = (unsigned char)a.p[i], y = (unsigned char)b.p[i];
        int lx = x >= 'A' && x <= 'Z' ? x + 32 : x, ly = y >= 'A' && y <= 'Z' ? y + 32 : y;
        if (lx != ly)
            return lx < ly ? -1 : 1;
    }
    if (a.n != b.n)
        return a.n < b.n ? -1 : 1;
    for (size_t i = 0; i < n; i++) {
        int x = (unsigned char)a.p[i], y = (unsigned char)b.p[i];
        if (x != y)
            return x > y ? -1 : 1; /* 'a' (0x61) sorts before 'A' (0x41) */
    }
    return 0;
}

static bool put_padding(struct jbuf *out, int indent, int depth)
{
    cinfer_jbuf_putc(out, '\n');
    for (long i = 0; i < (long)indent * depth; i++)
        cinfer_jbuf_putc(out, ' ');
    return !out->failed;
}

int cinfer_jv_to_json(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, const struct jinja_json_opts *opts,
                      int depth, struct jbuf *out)
{
    if (depth > 512)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "tojson: value nested deeper than 512 levels");
    const char *item_sep = opts->item_sep ? opts->item_sep : opts->indent ? "," : ", ";
    const char *key_sep = opts->key_sep ? opts->key_sep : ": ";
    bool ok = true;
    switch (v.kind) {
    case JV_NULL:
        ok = cinfer_jbuf_puts(out, "null");
        break;
    case JV_UNDEFINED:
        ok = cinfer_jbuf_puts(out, opts->undefined_as_null ? "null" : "undefined");
        break;
    case JV_INT:
    case JV_FLOAT:
        if (!isfinite(v.u.num))
            ok = cinfer_jbuf_puts(out, "null");
        else
            ok = put_number(out, v.u.num);
        break;
    case JV_BOOL:
        ok = cinfer_jbuf_puts(out, v.u.b ? "true" : "false");
        break;
    case JV_STRING:
        ok = put_json_string(v.u.s, opts->ensure_ascii, out);
        break;
    case JV_TUPLE: /* the reference's serializer knows no tuples */
        return cinfer_jinja_fail(rt, at, CINFER_ERR_UNSUPPORTED, "cannot convert to JSON: TupleValue");
    case JV_ARRAY: {
        const struct jv_array *a = v.u.a;
        cinfer_jbuf_putc(out, '[');
        for (size_t i = 0; i < a->n; i++) {
            if (i)
                cinfer_jbuf_puts(out, item_sep);
            if (opts->indent)
                put_padding(out, opts->indent, depth + 1);
            int rc = cinfer_jv_to_json(rt, at, a->items[i], opts, depth + 1, out);
            if (rc)
                return rc;
        }
        if (opts->indent && a->n)
            put_padding(out, opts->indent, depth);
        ok = cinfer_jbuf_putc(out, ']');
        break;
    }
    case JV_OBJECT:
    case JV_KWARGS:
    case JV_NAMESPACE: {
        const struct jv_object *o = v.u.o;
        size_t *order = NULL;
        if (opts->sort_keys && o->n > 1) {
            order = malloc(o->n * sizeof(*order));
            if (!order)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_NOMEM, "out of memory while rendering");
            for (size_t i = 0; i < o->n; i++) {
                size_t j = i;
                while (j > 0 && locale_cmp(o->keys[order[j - 1]], o->keys[i]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = i;
            }
        }
        cinfer_jbuf_putc(out, '{');
        int rc = 0;
        for (size_t i = 0; i < o->n && !rc; i++) {
            size_t k = order ? order[i] : i;
            if (i)
                cinfer_jbuf_puts(out, item_sep);
            if (opts->indent)
                put_padding(out, opts->indent, depth + 1);
            put_json_string(o->keys[k], opts->ensure_ascii, out);
            cinfer_jbuf_puts(out, key_sep);
            rc = cinfer_jv_to_json(rt, at, o->vals[k], opts, depth + 1, out);
        }
        free(order);
        if (rc)
            return rc;
        if (opts->indent && o->n)
            put_padding(out, opts->indent, depth);
        ok = cinfer_jbuf_putc(out, '}');
        break;
    }
    case JV_FUNCTION:
        return cinfer_jinja_fail(rt, at, CINFER_ERR_UNSUPPORTED, "cannot convert to JSON: FunctionValue");
    }
    return ok && !out->failed ? 0 : out_fail(rt, at, out);
}

/* ---- equality and order --------------------------------------------------------------- */

static bool same_str(struct jstr a, struct jstr b) { return a.n == b.n && memcmp(a.p, b.p, a.n) == 0; }

bool cinfer_jv_strict_equal(struct jv a, struct jv b)
{
    bool an = jv_is_number(a), bn = jv_is_number(b);
    if (an || bn)
        return an && bn && a.u.num == b.u.num;
    if (jv_is_array(a) || jv_is_array(b))
        return jv_is_array(a) && jv_is_array(b) && a.u.a == b.u.a;
    if (jv_is_object(a) || a.kind == JV_NAMESPACE)
        return (jv_is_object(b) || b.kind == JV_NAMESPACE) && a.u.o == b.u.o;
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JV_UNDEFINED:
    case JV_NULL:
        return true;
    case JV_BOOL:
        return a.u.b == b.u.b;
    case JV_STRING:
        return same_str(a.u.s, b.u.s);
    case JV_FUNCTION:
        return a.u.f == b.u.f;
    default:
        return false;
    }
}

/* The primitive JavaScript makes of an object for == (its toString). */
static int to_primitive(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jv *out)
{
    struct jbuf b = {.limit_bytes = rt->max_output_bytes};
    int rc = cinfer_jv_js_string(rt, at, v, &b);
    if (!rc && !cinfer_jv_from_buf(rt, &b, out))
        rc = cinfer_jinja_nomem(rt, at);
    cinfer_jbuf_free(&b);
    return rc;
}

int cinfer_jv_loose_equal(struct jinja_rt *rt, const struct jinja_node *at, struct jv a, struct jv b, bool *eq)
{
    for (int round = 0; round < 4; round++) {
        bool a_nullish = a.kind == JV_UNDEFINED || a.kind == JV_NULL;
        bool b_nullish = b.kind == JV_UNDEFINED || b.kind == JV_NULL;
        if (a_nullish || b_nullish) {
            *eq = a_nullish && b_nullish;
            return 0;
        }
        bool a_obj = jv_is_array(a) || jv_is_object(a) || a.kind == JV_NAMESPACE || a.kind == JV_FUNCTION;
        bool b_obj = jv_is_array(b) || jv_is_object(b) || b.kind == JV_NAMESPACE || b.kind == JV_FUNCTION;
        if (a_obj && b_obj) {
            *eq = cinfer_jv_strict_equal(a, b);
            return 0;
        }
        if (a.kind == JV_BOOL)
            a = jv_int(a.u.b);
        if (b.kind == JV_BOOL)
            b = jv_int(b.u.b);
        if (a_obj || b_obj) {
            int rc = to_primitive(rt, at, a_obj ? a : b, a_obj ? &a : &b);
            if (rc)
                return rc;
            continue;
        }
        if (jv_is_number(a) && jv_is_number(b)) {
            *eq = a.u.num == b.u.num;
            return 0;
        }
        if (a.kind == JV_STRING && b.kind == JV_STRING) {
            *eq = same_str(a.u.s, b.u.s);
            return 0;
        }
        /* number vs string */
        double x = a.kind == JV_STRING ? cinfer_jinja_js_string_to_number(a.u.s) : a.u.num;
        double y = b.kind == JV_STRING ? cinfer_jinja_js_string_to_number(b.u.s) : b.u.num;
        *eq = x == y;
        return 0;
    }
    *eq = false;
    return 0;
}

/* JavaScript's < on strings: UTF-16 code unit order, which UTF-8 byte order matches
 * below U+E000. */
static int str_cmp(struct jstr a, struct jstr b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
}

int cinfer_jv_compare(struct jinja_rt *rt, const struct jinja_node *at, struct jv a, struct jv b, bool case_sensitive,
                      int *result)
{
    if (a.kind == JV_NULL || b.kind == JV_NULL) {
        if (a.kind == JV_NULL && b.kind == JV_NULL) {
            *result = 0;
            return 0;
        }
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "cannot compare %s with %s",
                                 cinfer_jv_type_name(a),
                                 cinfer_jv_type_name(b));
    }
    if (a.kind == JV_UNDEFINED || b.kind == JV_UNDEFINED) {
        if (a.kind == JV_UNDEFINED && b.kind == JV_UNDEFINED) {
            *result = 0;
            return 0;
        }
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "cannot compare %s with %s",
                                 cinfer_jv_type_name(a),
                                 cinfer_jv_type_name(b));
    }
    bool an = jv_is_number(a) || a.kind == JV_BOOL, bn = jv_is_number(b) || b.kind == JV_BOOL;
    if (an && bn) {
        double x = a.kind == JV_BOOL ? a.u.b : a.u.num, y = b.kind == JV_BOOL ? b.u.b : b.u.num;
        *result = x < y ? -1 : x > y ? 1 : 0;
        return 0;
    }
    if (a.kind != b.kind)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "cannot compare different types: %s and %s",
                                 cinfer_jv_type_name(a), cinfer_jv_type_name(b));
    if (a.kind != JV_STRING)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "cannot compare type: %s",
                                 cinfer_jv_type_name(a));
    if (case_sensitive) {
        *result = str_cmp(a.u.s, b.u.s);
        return 0;
    }
    struct jbuf x = {0}, y = {0};
    cinfer_jinja_case_map(a.u.s, false, &x);
    cinfer_jinja_case_map(b.u.s, false, &y);
    int rc = 0;
    if (x.failed || y.failed)
        rc = cinfer_jinja_fail(rt, at, CINFER_ERR_NOMEM, "out of memory while comparing");
    else
        *result = str_cmp((struct jstr){x.p ? x.p : "", x.n}, (struct jstr){y.p ? y.p : "", y.n});
    cinfer_jbuf_free(&x);
    cinfer_jbuf_free(&y);
    return rc;
}
