/* core/chat/jinja_builtins.c — what the reference renderer offers by name: string
 * methods (upper, strip, split, replace, ...), dict methods (get, items, dictsort, ...),
 * filters (on each type the reference supports them for), tests, and the global
 * functions namespace(), range(), raise_exception() and strftime_now(). Each behaves as
 * the reference's implementation does, including its JavaScript corner cases. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"

#define MAX_RANGE_ITEMS 10000000.0

struct jv_object *cinfer_jinja_split_kwargs(struct jv *args, size_t *nargs)
{
    if (*nargs && args[*nargs - 1].kind == JV_KWARGS) {
        (*nargs)--;
        return args[*nargs].u.o;
    }
    return NULL;
}

static struct jv kwarg(const struct jv_object *kw, const char *name)
{
    if (!kw)
        return jv_undefined();
    struct jv *v = cinfer_jv_object_get(kw, (struct jstr){name, strlen(name)});
    return v ? *v : jv_undefined();
}

/* args[i] ?? kwargs[name] ?? dflt, where "??" skips only missing values */
static struct jv arg_or(struct jv *args, size_t nargs, size_t i, const struct jv_object *kw, const char *name,
                        struct jv dflt)
{
    if (i < nargs)
        return args[i];
    if (kw && name) {
        struct jv *v = cinfer_jv_object_get(kw, (struct jstr){name, strlen(name)});
        if (v)
            return *v;
    }
    return dflt;
}

static int buf_to_value(struct jinja_rt *rt, const struct jinja_node *at, struct jbuf *b, struct jv *out)
{
    int rc = 0;
    if (b->failed)
        rc = cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "a string would exceed %zu bytes", rt->max_output_bytes);
    else if (!cinfer_jv_from_buf(rt, b, out))
        rc = cinfer_jinja_nomem(rt, at);
    cinfer_jbuf_free(b);
    return rc;
}

static struct jbuf new_buf(struct jinja_rt *rt) { return (struct jbuf){.limit_bytes = rt->max_output_bytes}; }

static struct jstr js_trim(struct jstr s, bool start, bool end_side)
{
    const char *p = s.p, *end = s.p + s.n;
    size_t l;
    while (start && (l = cinfer_jinja_js_space_len(p, end)))
        p += l;
    while (end_side && end > p && (l = cinfer_jinja_js_space_len_before(p, end)))
        end -= l;
    return (struct jstr){p, (size_t)(end - p)};
}

static int make_array(struct jinja_rt *rt, const struct jinja_node *at, size_t n, struct jv_array **a, struct jv *out)
{
    *a = cinfer_jv_array_new(rt, n);
    if (!*a)
        return cinfer_jinja_nomem(rt, at);
    *out = (struct jv){.kind = JV_ARRAY, .u.a = *a};
    return 0;
}

/* ---- string methods ------------------------------------------------------------------- */

static int case_map_value(struct jinja_rt *rt, const struct jinja_node *at, struct jstr s, bool upper, struct jv *out)
{
    struct jbuf b = new_buf(rt);
    cinfer_jinja_case_map(s, upper, &b);
    return buf_to_value(rt, at, &b, out);
}

static int m_upper(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    (void)args, (void)nargs;
    return case_map_value(rt, at, self.u.s, true, out);
}

static int m_lower(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    (void)args, (void)nargs;
    return case_map_value(rt, at, self.u.s, false, out);
}

static int m_strip(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    (void)rt, (void)at, (void)args, (void)nargs;
    *out = jv_str(js_trim(self.u.s, true, true));
    return 0;
}

static int m_lstrip(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                    struct jv *out)
{
    (void)rt, (void)at, (void)args, (void)nargs;
    *out = jv_str(js_trim(self.u.s, true, false));
    return 0;
}

static int m_rstrip(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                    struct jv *out)
{
    (void)rt, (void)at, (void)args, (void)nargs;
    *out = jv_str(js_trim(self.u.s, false, true));
    return 0;
}

static bool is_word_byte(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* value.replace(/\b\w/g, c => c.toUpperCase()): ASCII word starts only */
static int m_title(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    (void)args, (void)nargs;
    struct jstr s = self.u.s;
    char *c = cinfer_jinja_alloc(&rt->arena, s.n + 1);
    if (!c)
        return cinfer_jinja_nomem(rt, at);
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (ch >= 'a' && ch <= 'z' && (i == 0 || !is_word_byte(s.p[i - 1])))
            ch = (char)(ch - 32);
        c[i] = ch;
    }
    *out = jv_str((struct jstr){c, s.n});
    return 0;
}

static int m_capitalize(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                        struct jv *out)
{
    (void)args, (void)nargs;
    struct jstr s = self.u.s;
    if (s.n == 0) {
        *out = self;
        return 0;
    }
    size_t first = cinfer_jinja_utf8_seq_len(s.p, s.p + s.n);
    if (first == 4) { /* charAt(0) is half a surrogate pair: unchanged */
        *out = self;
        return 0;
    }
    struct jbuf b = new_buf(rt);
    cinfer_jinja_case_map((struct jstr){s.p, first}, true, &b);
    cinfer_jbuf_append(&b, s.p + first, s.n - first);
    return buf_to_value(rt, at, &b, out);
}

static bool has_prefix(struct jstr s, struct jstr p, bool suffix)
{
    if (p.n > s.n)
        return false;
    return memcmp(suffix ? s.p + s.n - p.n : s.p, p.p, p.n) == 0;
}

static int affix_test(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                      struct jv *out, bool suffix)
{
    const char *name = suffix ? "endswith" : "startswith";
    if (nargs == 0)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "%s() requires at least one argument", name);
    struct jv p = args[0];
    if (p.kind == JV_STRING) {
        *out = jv_bool(has_prefix(self.u.s, p.u.s, suffix));
        return 0;
    }
    if (jv_is_array(p)) {
        for (size_t i = 0; i < p.u.a->n; i++) {
            if (p.u.a->items[i].kind != JV_STRING)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "%s() tuple elements must be strings",
                                         name);
            if (has_prefix(self.u.s, p.u.a->items[i].u.s, suffix)) {
                *out = jv_bool(true);
                return 0;
            }
        }
        *out = jv_bool(false);
        return 0;
    }
    return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "%s() argument must be a string or tuple of strings",
                             name);
}

static int m_startswith(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                        struct jv *out)
{
    return affix_test(rt, at, self, args, nargs, out, false);
}

static int m_endswith(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                      struct jv *out)
{
    return affix_test(rt, at, self, args, nargs, out, true);
}

static int push_str(struct jinja_rt *rt, const struct jinja_node *at, struct jv **items, size_t *n, size_t *cap,
                    struct jstr s)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        struct jv *grown = cinfer_jinja_alloc(&rt->arena, c * sizeof(*grown));
        if (!grown)
            return cinfer_jinja_nomem(rt, at);
        if (*n)
            memcpy(grown, *items, *n * sizeof(*grown));
        *items = grown;
        *cap = c;
    }
    (*items)[(*n)++] = jv_str(s);
    return 0;
}

static int m_split(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    struct jv sep = nargs > 0 ? args[0] : jv_null();
    if (sep.kind != JV_STRING && sep.kind != JV_NULL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "sep argument must be a string or null");
    struct jv maxv = nargs > 1 ? args[1] : jv_int(-1);
    if (maxv.kind != JV_INT)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "maxsplit argument must be a number");
    double maxsplit = maxv.u.num;
    struct jv *items = NULL;
    size_t n = 0, cap = 0;
    int rc;
    struct jstr s = self.u.s;
    if (sep.kind == JV_NULL) {
        struct jstr text = js_trim(s, true, false);
        const char *p = text.p, *end = text.p + text.n;
        while (p < end) {
            size_t l;
            while (p < end && (l = cinfer_jinja_js_space_len(p, end)))
                p += l;
            if (p >= end)
                break;
            const char *w = p;
            while (p < end && !cinfer_jinja_js_space_len(p, end))
                p += cinfer_jinja_utf8_seq_len(p, end);
            if (maxsplit != -1 && (double)n >= maxsplit) {
                if ((rc = push_str(rt, at, &items, &n, &cap, (struct jstr){w, (size_t)(end - w)})))
                    return rc;
                break;
            }
            if ((rc = push_str(rt, at, &items, &n, &cap, (struct jstr){w, (size_t)(p - w)})))
                return rc;
        }
    } else {
        struct jstr d = sep.u.s;
        if (d.n == 0)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "empty separator");
        const char *p = s.p, *end = s.p + s.n, *piece = s.p;
        while (p + d.n <= end) {
            bool limited = maxsplit != -1 && (double)n >= maxsplit;
            if (!limited && memcmp(p, d.p, d.n) == 0) {
                if ((rc = push_str(rt, at, &items, &n, &cap, (struct jstr){piece, (size_t)(p - piece)})))
                    return rc;
                p += d.n;
                piece = p;
                continue;
            }
            if (limited)
                break;
            p++;
        }
        if ((rc = push_str(rt, at, &items, &n, &cap, (struct jstr){piece, (size_t)(end - piece)})))
            return rc;
    }
    struct jv_array *a;
    if ((rc = make_array(rt, at, n, &a, out)))
        return rc;
    if (n)
        memcpy(a->items, items, n * sizeof(*items));
    return 0;
}

static int m_replace(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                     struct jv *out)
{
    if (nargs < 2)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "replace() requires at least two arguments");
    if (args[0].kind != JV_STRING || args[1].kind != JV_STRING)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "replace() arguments must be strings");
    struct jv count = jv_null();
    if (nargs > 2)
        count = args[2].kind == JV_KWARGS ? arg_or(NULL, 0, 0, args[2].u.o, "count", jv_null()) : args[2];
    if (count.kind != JV_INT && count.kind != JV_NULL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                 "replace() count argument must be a number or null");
    struct jstr s = self.u.s, from = args[0].u.s, to = args[1].u.s;
    if (count.kind == JV_INT && count.u.num == 0) {
        *out = self;
        return 0;
    }
    double remaining = count.kind == JV_NULL || count.u.num < 0 ? INFINITY : count.u.num;
    struct jbuf b = new_buf(rt);
    const char *p = s.p, *end = s.p + s.n;
    if (from.n == 0) { /* /(?=)/gu matches before every code point and at the end */
        while (true) {
            if (remaining > 0) {
                cinfer_jbuf_append(&b, to.p, to.n);
                remaining--;
            }
            if (p >= end)
                break;
            size_t l = cinfer_jinja_utf8_seq_len(p, end);
            cinfer_jbuf_append(&b, p, l);
            p += l;
        }
    } else {
        while (p < end) {
            if (remaining > 0 && (size_t)(end - p) >= from.n && memcmp(p, from.p, from.n) == 0) {
                cinfer_jbuf_append(&b, to.p, to.n);
                p += from.n;
                remaining--;
                continue;
            }
            cinfer_jbuf_append(&b, p, 1);
            p++;
        }
    }
    return buf_to_value(rt, at, &b, out);
}

/* ---- dict methods --------------------------------------------------------------------- */

static int pairs(struct jinja_rt *rt, const struct jinja_node *at, const struct jv_object *o, struct jv *out)
{
    struct jv_array *a;
    int rc = make_array(rt, at, o->n, &a, out);
    for (size_t i = 0; i < o->n && !rc; i++) {
        struct jv_array *pair = cinfer_jv_array_new(rt, 2);
        if (!pair)
            return cinfer_jinja_nomem(rt, at);
        pair->items[0] = jv_str(o->keys[i]);
        pair->items[1] = o->vals[i];
        a->items[i] = (struct jv){.kind = JV_ARRAY, .u.a = pair};
    }
    return rc;
}

static int m_items(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    (void)args, (void)nargs;
    return pairs(rt, at, self.u.o, out);
}

static int m_keys(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                  struct jv *out)
{
    (void)args, (void)nargs;
    struct jv_array *a;
    int rc = make_array(rt, at, self.u.o->n, &a, out);
    for (size_t i = 0; !rc && i < self.u.o->n; i++)
        a->items[i] = jv_str(self.u.o->keys[i]);
    return rc;
}

static int m_values(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                    struct jv *out)
{
    (void)args, (void)nargs;
    struct jv_array *a;
    int rc = make_array(rt, at, self.u.o->n, &a, out);
    if (!rc && self.u.o->n)
        memcpy(a->items, self.u.o->vals, self.u.o->n * sizeof(*a->items));
    return rc;
}

static int m_get(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                 struct jv *out)
{
    if (nargs == 0 || args[0].kind != JV_STRING)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "object key must be a string: got %s",
                                 nargs ? cinfer_jv_type_name(args[0]) : "nothing");
    struct jv *v = cinfer_jv_object_get(self.u.o, args[0].u.s);
    *out = v ? *v : nargs > 1 ? args[1] : jv_null();
    return 0;
}

/* A stable merge sort whose comparison can fail. */
struct sort_ctx {
    struct jinja_rt *rt;
    const struct jinja_node *at;
    bool case_sensitive, reverse;
    const struct jv *attr; /* sort by this attribute path (string) */
    int index;             /* dictsort: 0 key, 1 value, -1 the item */
};

static int attribute_value(struct jv item, struct jstr path, struct jv *out);

static int sort_key(const struct sort_ctx *c, struct jv v, struct jv *out)
{
    if (c->index >= 0) {
        *out = v.u.a->items[c->index];
        return 0;
    }
    if (c->attr)
        return attribute_value(v, c->attr->u.s, out);
    *out = v;
    return 0;
}

static int sort_cmp(const struct sort_ctx *c, struct jv a, struct jv b, int *r)
{
    struct jv x, y;
    sort_key(c, a, &x);
    sort_key(c, b, &y);
    int rc = cinfer_jv_compare(c->rt, c->at, x, y, c->case_sensitive, r);
    if (!rc && c->reverse)
        *r = -*r;
    return rc;
}

static int merge_sort(const struct sort_ctx *c, struct jv *v, struct jv *tmp, size_t n)
{
    if (n < 2)
        return 0;
    size_t h = n / 2;
    int rc = merge_sort(c, v, tmp, h);
    if (!rc)
        rc = merge_sort(c, v + h, tmp, n - h);
    if (rc)
        return rc;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r;
        if ((rc = sort_cmp(c, v[j], v[i], &r)))
            return rc;
        tmp[k++] = r < 0 ? v[j++] : v[i++];
    }
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof(*v));
    return 0;
}

static int sorted_copy(const struct sort_ctx *c, const struct jv_array *src, struct jv *out)
{
    struct jv_array *a;
    int rc = make_array(c->rt, c->at, src->n, &a, out);
    if (rc)
        return rc;
    if (src->n)
        memcpy(a->items, src->items, src->n * sizeof(*a->items));
    struct jv *tmp = cinfer_jinja_alloc(&c->rt->arena, (src->n + 1) * sizeof(*tmp));
    if (!tmp)
        return cinfer_jinja_nomem(c->rt, c->at);
    return merge_sort(c, a->items, tmp, a->n);
}

static int m_dictsort(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                      struct jv *out)
{
    struct jv_object *kw = cinfer_jinja_split_kwargs(args, &nargs);
    struct jv cs = arg_or(args, nargs, 0, kw, "case_sensitive", jv_bool(false));
    if (cs.kind != JV_BOOL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "case_sensitive must be a boolean");
    struct jv by = arg_or(args, nargs, 1, kw, "by", jv_str((struct jstr){"key", 3}));
    if (by.kind != JV_STRING)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "by must be a string");
    bool by_value = by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5);
    if (!by_value && !(by.u.s.n == 3 && !memcmp(by.u.s.p, "key", 3)))
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "by must be either 'key' or 'value'");
    struct jv rev = arg_or(args, nargs, 2, kw, "reverse", jv_bool(false));
    if (rev.kind != JV_BOOL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "reverse must be a boolean");
    struct jv items;
    int rc = pairs(rt, at, self.u.o, &items);
    if (rc)
        return rc;
    struct sort_ctx c = {rt, at, cs.u.b, rev.u.b, NULL, by_value ? 1 : 0};
    return sorted_copy(&c, items.u.a, out);
}

static int bound_method(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, jinja_builtin_fn fn,
                        struct jv *out)
{
    struct jv_func *f = cinfer_jinja_alloc(&rt->arena, sizeof(*f));
    if (!f)
        return cinfer_jinja_nomem(rt, at);
    f->kind = F_BUILTIN;
    f->fn = fn;
    f->self = self;
    *out = (struct jv){.kind = JV_FUNCTION, .u.f = f};
    return 0;
}

struct named_fn {
    const char *name;
    jinja_builtin_fn fn;
};

static const struct named_fn string_methods[] = {
    {"upper", m_upper},     {"lower", m_lower},           {"strip", m_strip},           {"title", m_title},
    {"capitalize", m_capitalize}, {"rstrip", m_rstrip},   {"lstrip", m_lstrip},         {"startswith", m_startswith},
    {"endswith", m_endswith}, {"split", m_split},         {"replace", m_replace},       {NULL, NULL},
};
static const struct named_fn object_methods[] = {
    {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"dictsort", m_dictsort}, {NULL, NULL},
};

static jinja_builtin_fn find_fn(const struct named_fn *table, struct jstr name)
{
    for (; table->name; table++)
        if (strlen(table->name) == name.n && memcmp(table->name, name.p, name.n) == 0)
            return table->fn;
    return NULL;
}

static bool is_name(struct jstr s, const char *name) { return s.n == strlen(name) && memcmp(s.p, name, s.n) == 0; }

int cinfer_jinja_builtin_member(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jstr name,
                                struct jv *out)
{
    *out = jv_undefined();
    jinja_builtin_fn fn = NULL;
    if (self.kind == JV_STRING) {
        if (is_name(name, "length")) {
            *out = jv_int((double)cinfer_jinja_utf16_len(self.u.s));
            return 0;
        }
        fn = find_fn(string_methods, name);
    } else if (jv_is_array(self)) {
        if (is_name(name, "length"))
            *out = jv_int((double)self.u.a->n);
        return 0;
    } else if (jv_is_object(self)) {
        fn = find_fn(object_methods, name);
    }
    return fn ? bound_method(rt, at, self, fn, out) : 0;
}

/* ---- global functions ----------------------------------------------------------------- */

static int g_raise_exception(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args,
                             size_t nargs, struct jv *out)
{
    (void)self, (void)out;
    struct jbuf b = new_buf(rt);
    if (nargs && args[0].kind != JV_UNDEFINED) {
        int rc = cinfer_jv_js_string(rt, at, args[0], &b);
        if (rc) {
            cinfer_jbuf_free(&b);
            return rc;
        }
    }
    int rc = cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "%.*s", (int)(b.n > 900 ? 900 : b.n),
                               b.p ? b.p : "");
    cinfer_jbuf_free(&b);
    return rc;
}

static int g_range(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                   struct jv *out)
{
    (void)self;
    /* JavaScript's range(start, stop?, step = 1): an undefined start or stop compares
     * false with everything (no items); an undefined step is the default 1. */
    double v[3] = {NAN, NAN, 1};
    bool given[3] = {false, false, false};
    for (size_t i = 0; i < nargs && i < 3; i++) {
        if (args[i].kind == JV_UNDEFINED)
            continue;
        if (!jv_is_number(args[i]) && args[i].kind != JV_BOOL)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "range() arguments must be numbers, got %s",
                                     cinfer_jv_type_name(args[i]));
        v[i] = args[i].kind == JV_BOOL ? args[i].u.b : args[i].u.num;
        given[i] = true;
    }
    double start = v[0], stop = v[1], stepv = v[2];
    if (!given[1]) {
        stop = start;
        start = 0;
    }
    if (stepv == 0)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "range() step must not be zero");
    double count = stepv > 0 ? ceil((stop - start) / stepv) : ceil((start - stop) / -stepv);
    if (isnan(stepv)) /* the descending branch runs once, then i is NaN */
        count = start > stop ? 1 : 0;
    if (!(count > 0))
        count = 0;
    if (count > MAX_RANGE_ITEMS)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "range() of more than %.0f items", MAX_RANGE_ITEMS);
    struct jv_array *a;
    int rc = make_array(rt, at, (size_t)count, &a, out);
    if (rc)
        return rc;
    size_t k = 0;
    for (double i = start; k < a->n && (stepv > 0 ? i < stop : i > stop); i += stepv)
        a->items[k++] = floor(i) == i ? jv_int(i) : jv_float(i);
    a->n = k;
    return 0;
}

static int g_strftime_now(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args,
                          size_t nargs, struct jv *out)
{
    (void)self;
    if (nargs == 0 || args[0].kind != JV_STRING)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "strftime_now() expects a format string");
    static const char *const months[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    struct jstr f = args[0].u.s;
    struct jbuf b = new_buf(rt);
    char tmp[32];
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] != '%' || i + 1 >= f.n || !strchr("YmdbBHM%", f.p[i + 1]) || !f.p[i + 1]) {
            cinfer_jbuf_putc(&b, f.p[i]);
            continue;
        }
        switch (f.p[++i]) {
        case 'Y':
            snprintf(tmp, sizeof(tmp), "%d", tm.tm_year + 1900);
            break;
        case 'm':
            snprintf(tmp, sizeof(tmp), "%02d", tm.tm_mon + 1);
            break;
        case 'd':
            snprintf(tmp, sizeof(tmp), "%02d", tm.tm_mday);
            break;
        case 'b':
            snprintf(tmp, sizeof(tmp), "%.3s", months[tm.tm_mon]);
            break;
        case 'B':
            snprintf(tmp, sizeof(tmp), "%s", months[tm.tm_mon]);
            break;
        case 'H':
            snprintf(tmp, sizeof(tmp), "%02d", tm.tm_hour);
            break;
        case 'M':
            snprintf(tmp, sizeof(tmp), "%02d", tm.tm_min);
            break;
        default:
            snprintf(tmp, sizeof(tmp), "%%");
        }
        cinfer_jbuf_puts(&b, tmp);
    }
    return buf_to_value(rt, at, &b, out);
}

static int g_namespace(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args, size_t nargs,
                       struct jv *out)
{
    (void)self;
    struct jv_object *kw = cinfer_jinja_split_kwargs(args, &nargs);
    if (nargs > 1)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "namespace expected at most 1 argument, got %zu",
                                 nargs);
    struct jv_object *o = cinfer_jv_object_new(rt, 4);
    if (!o)
        return cinfer_jinja_nomem(rt, at);
    if (nargs == 1) {
        struct jv src = args[0];
        if (jv_is_object(src)) {
            for (size_t i = 0; i < src.u.o->n; i++)
                if (!cinfer_jv_object_set(rt, o, src.u.o->keys[i], src.u.o->vals[i]))
                    return cinfer_jinja_nomem(rt, at);
        } else if (jv_is_array(src)) {
            for (size_t i = 0; i < src.u.a->n; i++) {
                struct jv pair = src.u.a->items[i];
                if (!jv_is_array(pair) || pair.u.a->n != 2)
                    return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                             "namespace expected an object or an iterable of [key, value] pairs");
                if (pair.u.a->items[0].kind != JV_STRING)
                    return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "namespace keys must be strings");
                if (!cinfer_jv_object_set(rt, o, pair.u.a->items[0].u.s, pair.u.a->items[1]))
                    return cinfer_jinja_nomem(rt, at);
            }
        } else {
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "'%s' object is not iterable",
                                     cinfer_jv_type_name(src));
        }
    }
    for (size_t i = 0; kw && i < kw->n; i++)
        if (!cinfer_jv_object_set(rt, o, kw->keys[i], kw->vals[i]))
            return cinfer_jinja_nomem(rt, at);
    *out = (struct jv){.kind = JV_NAMESPACE, .u.o = o};
    return 0;
}

int cinfer_jinja_define_globals(struct jinja_rt *rt, struct jinja_scope *scope)
{
    static const struct named_fn fns[] = {{"namespace", g_namespace}, {"raise_exception", g_raise_exception},
                                          {"range", g_range}, {"strftime_now", g_strftime_now}, {NULL, NULL}};
    for (const struct named_fn *f = fns; f->name; f++) {
        struct jv v;
        if (bound_method(rt, NULL, jv_undefined(), f->fn, &v) ||
            !cinfer_jinja_scope_set(rt, scope, (struct jstr){f->name, strlen(f->name)}, v))
            return cinfer_jinja_nomem(rt, NULL);
    }
    static const struct {
        const char *name;
        int value; /* 0 false, 1 true, 2 none */
    } consts[] = {{"false", 0}, {"true", 1}, {"none", 2}, {"True", 1}, {"False", 0}, {"None", 2}};
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++) {
        struct jv v = consts[i].value == 2 ? jv_null() : jv_bool(consts[i].value == 1);
        if (!cinfer_jinja_scope_set(rt, scope, (struct jstr){consts[i].name, strlen(consts[i].name)}, v))
            return cinfer_jinja_nomem(rt, NULL);
    }
    return 0;
}

/* ---- tests ---------------------------------------------------------------------------- */

int cinfer_jinja_apply_test(struct jinja_rt *rt, const struct jinja_node *at, struct jstr name, struct jv v,
                            const struct jv *rest, size_t nrest, bool *out)
{
    if (is_name(name, "boolean"))
        *out = v.kind == JV_BOOL;
    else if (is_name(name, "callable"))
        *out = v.kind == JV_FUNCTION;
    else if (is_name(name, "odd") || is_name(name, "even")) {
        if (v.kind != JV_INT)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "cannot %.*s on %s", (int)name.n, name.p,
                                     cinfer_jv_type_name(v));
        bool odd = fmod(v.u.num, 2) != 0;
        *out = name.p[0] == 'o' ? odd : !odd;
    } else if (is_name(name, "false"))
        *out = v.kind == JV_BOOL && !v.u.b;
    else if (is_name(name, "true"))
        *out = v.kind == JV_BOOL && v.u.b;
    else if (is_name(name, "none"))
        *out = v.kind == JV_NULL;
    else if (is_name(name, "string"))
        *out = v.kind == JV_STRING;
    else if (is_name(name, "number"))
        *out = jv_is_number(v);
    else if (is_name(name, "integer"))
        *out = v.kind == JV_INT;
    else if (is_name(name, "iterable"))
        *out = v.kind == JV_ARRAY || v.kind == JV_STRING;
    else if (is_name(name, "mapping"))
        *out = jv_is_object(v);
    else if (is_name(name, "sequence"))
        *out = jv_is_array(v) || jv_is_object(v) || v.kind == JV_STRING;
    else if (is_name(name, "lower") || is_name(name, "upper")) {
        if (v.kind != JV_STRING) { /* not a string: false */
            *out = false;
            return 0;
        }
        struct jbuf b = new_buf(rt);
        cinfer_jinja_case_map(v.u.s, name.p[0] == 'u', &b);
        *out = !b.failed && b.n == v.u.s.n && (b.n == 0 || memcmp(b.p, v.u.s.p, b.n) == 0);
        cinfer_jbuf_free(&b);
    } else if (is_name(name, "defined"))
        *out = v.kind != JV_UNDEFINED;
    else if (is_name(name, "undefined"))
        *out = v.kind == JV_UNDEFINED;
    else if (is_name(name, "equalto") || is_name(name, "eq")) {
        if (nrest == 0)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                     "the '%.*s' test needs a value to compare with",
                                     (int)name.n, name.p);
        *out = cinfer_jv_strict_equal(v, rest[0]);
    } else
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "unknown test: %.*s", (int)name.n, name.p);
    return 0;
}

/* ---- filters -------------------------------------------------------------------------- */

static int attribute_value(struct jv item, struct jstr path, struct jv *out)
{
    const char *p = path.p, *end = path.p + path.n;
    struct jv v = item;
    while (true) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        struct jstr part = {p, (size_t)((dot ? dot : end) - p)};
        if (jv_is_object(v) || v.kind == JV_NAMESPACE) {
            struct jv *got = cinfer_jv_object_get(v.u.o, part);
            v = got ? *got : jv_undefined();
        } else if (jv_is_array(v)) {
            double idx = cinfer_jinja_js_parse_int(part);
            if (!isnan(idx) && idx >= 0 && idx < (double)v.u.a->n) {
                v = v.u.a->items[(size_t)idx];
            } else {
                *out = jv_undefined();
                return 0;
            }
        } else {
            *out = jv_undefined();
            return 0;
        }
        if (!dot)
            break;
        p = dot + 1;
    }
    *out = v;
    return 0;
}

/* |join: JavaScript's Array.prototype.join of the items' raw values. */
static int join_values(struct jinja_rt *rt, const struct jinja_node *at, const struct jv_array *a, struct jstr sep,
                       struct jv *out)
{
    struct jbuf b = new_buf(rt);
    for (size_t i = 0; i < a->n; i++) {
        if (i)
            cinfer_jbuf_append(&b, sep.p, sep.n);
        struct jv v = a->items[i];
        if (v.kind == JV_NULL || v.kind == JV_UNDEFINED)
            continue;
        int rc = cinfer_jv_js_string(rt, at, v, &b);
        if (rc) {
            cinfer_jbuf_free(&b);
            return rc;
        }
    }
    return buf_to_value(rt, at, &b, out);
}

static bool same_value_zero(struct jv a, struct jv b)
{
    if (jv_is_number(a) && jv_is_number(b) && isnan(a.u.num) && isnan(b.u.num))
        return true;
    return cinfer_jv_strict_equal(a, b);
}

static int indent_lines(struct jinja_rt *rt, const struct jinja_node *at, struct jstr s, struct jstr pad, bool first,
                        bool blank, struct jv *out)
{
    struct jbuf b = new_buf(rt);
    const char *p = s.p, *end = s.p + s.n;
    for (size_t line = 0;; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        bool skip = (!first && line == 0) || (!blank && le == p);
        if (!skip)
            cinfer_jbuf_append(&b, pad.p, pad.n);
        cinfer_jbuf_append(&b, p, (size_t)(le - p));
        if (!nl)
            break;
        cinfer_jbuf_putc(&b, '\n');
        p = nl + 1;
    }
    return buf_to_value(rt, at, &b, out);
}

static int tojson_value(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, const struct jinja_json_opts *o,
                        struct jv *out)
{
    struct jbuf b = new_buf(rt);
    int rc = cinfer_jv_to_json(rt, at, v, o, 0, &b);
    if (rc) {
        cinfer_jbuf_free(&b);
        return rc;
    }
    return buf_to_value(rt, at, &b, out);
}

static int cannot_apply(struct jinja_rt *rt, const struct jinja_node *at, struct jstr name, struct jv v)
{
    return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "cannot apply filter \"%.*s\" to type: %s",
                             (int)name.n,
                             name.p, cinfer_jv_type_name(v));
}

static int unknown_filter(struct jinja_rt *rt, const struct jinja_node *at, const char *kind, struct jstr name)
{
    return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "unknown %s filter: %.*s", kind, (int)name.n, name.p);
}

static int filter_plain(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jstr name, struct jv *out)
{
    if (is_name(name, "safe")) {
        *out = v;
        return 0;
    }
    if (is_name(name, "tojson")) {
        struct jinja_json_opts o = {.undefined_as_null = true};
        return tojson_value(rt, at, v, &o, out);
    }
    if (jv_is_array(v)) {
        const struct jv_array *a = v.u.a;
        if (is_name(name, "list")) {
            *out = v;
        } else if (is_name(name, "first")) {
            *out = a->n ? a->items[0] : jv_undefined();
        } else if (is_name(name, "last")) {
            *out = a->n ? a->items[a->n - 1] : jv_undefined();
        } else if (is_name(name, "length")) {
            *out = jv_int((double)a->n);
        } else if (is_name(name, "reverse")) {
            struct jv_array *r;
            int rc = make_array(rt, at, a->n, &r, out);
            for (size_t i = 0; !rc && i < a->n; i++)
                r->items[i] = a->items[a->n - 1 - i];
            return rc;
        } else if (is_name(name, "sort")) {
            struct sort_ctx c = {rt, at, false, false, NULL, -1};
            return sorted_copy(&c, a, out);
        } else if (is_name(name, "join")) {
            return join_values(rt, at, a, (struct jstr){"", 0}, out);
        } else if (is_name(name, "string")) {
            struct jinja_json_opts o = {0};
            return tojson_value(rt, at, v, &o, out);
        } else if (is_name(name, "unique")) {
            struct jv_array *r;
            int rc = make_array(rt, at, a->n, &r, out);
            if (rc)
                return rc;
            size_t k = 0;
            for (size_t i = 0; i < a->n; i++) {
                bool seen = false;
                for (size_t j = 0; j < k && !seen; j++)
                    seen = same_value_zero(r->items[j], a->items[i]);
                if (!seen)
                    r->items[k++] = a->items[i];
            }
            r->n = k;
        } else {
            return unknown_filter(rt, at, "ArrayValue", name);
        }
        return 0;
    }
    if (v.kind == JV_STRING) {
        struct jstr s = v.u.s;
        if (is_name(name, "length")) {
            *out = jv_int((double)cinfer_jinja_utf16_len(s));
            return 0;
        }
        if (is_name(name, "upper") || is_name(name, "lower") || is_name(name, "title") || is_name(name, "capitalize"))
            return find_fn(string_methods, name)(rt, at, v, NULL, 0, out);
        if (is_name(name, "trim")) {
            *out = jv_str(js_trim(s, true, true));
            return 0;
        }
        if (is_name(name, "indent"))
            return indent_lines(rt, at, s, (struct jstr){"    ", 4}, false, false, out);
        if (is_name(name, "join") || is_name(name, "string")) {
            *out = v;
            return 0;
        }
        if (is_name(name, "int")) {
            double x = cinfer_jinja_js_parse_int(s);
            *out = jv_int(isnan(x) ? 0 : x);
            return 0;
        }
        if (is_name(name, "float")) {
            double x = cinfer_jinja_js_parse_float(s);
            *out = jv_float(isnan(x) ? 0 : x);
            return 0;
        }
        return unknown_filter(rt, at, "StringValue", name);
    }
    if (jv_is_number(v)) {
        if (is_name(name, "abs"))
            *out = v.kind == JV_INT ? jv_int(fabs(v.u.num)) : jv_float(fabs(v.u.num));
        else if (is_name(name, "int"))
            *out = jv_int(floor(v.u.num));
        else if (is_name(name, "float"))
            *out = jv_float(v.u.num);
        else if (is_name(name, "string")) {
            struct jbuf b = new_buf(rt);
            int rc = cinfer_jv_print(rt, at, v, &b);
            if (rc) {
                cinfer_jbuf_free(&b);
                return rc;
            }
            return buf_to_value(rt, at, &b, out);
        } else
            return unknown_filter(rt, at, "NumericValue", name);
        return 0;
    }
    if (jv_is_object(v)) {
        if (is_name(name, "items"))
            return pairs(rt, at, v.u.o, out);
        if (is_name(name, "length")) {
            *out = jv_int((double)v.u.o->n);
            return 0;
        }
        jinja_builtin_fn fn = find_fn(object_methods, name);
        if (fn)
            return fn(rt, at, v, NULL, 0, out);
        return unknown_filter(rt, at, "ObjectValue", name);
    }
    if (v.kind == JV_BOOL) {
        if (is_name(name, "bool"))
            *out = v;
        else if (is_name(name, "int"))
            *out = jv_int(v.u.b ? 1 : 0);
        else if (is_name(name, "float"))
            *out = jv_float(v.u.b ? 1 : 0);
        else if (is_name(name, "string"))
            *out = jv_str(v.u.b ? (struct jstr){"true", 4} : (struct jstr){"false", 5});
        else
            return unknown_filter(rt, at, "BooleanValue", name);
        return 0;
    }
    return cannot_apply(rt, at, name, v);
}

static int filter_tojson(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, const struct jv_object *kw,
                         struct jv *out)
{
    struct jinja_json_opts o = {.undefined_as_null = true};
    struct jv indent = arg_or(NULL, 0, 0, kw, "indent", jv_null());
    if (indent.kind != JV_INT && indent.kind != JV_NULL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "if set, indent must be a number");
    if (indent.kind == JV_INT) {
        if (indent.u.num < 0 || indent.u.num > 1000)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "indent must be between 0 and 1000");
        o.indent = (int)indent.u.num;
    }
    struct jv ascii = arg_or(NULL, 0, 0, kw, "ensure_ascii", jv_bool(false));
    if (ascii.kind != JV_BOOL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "if set, ensure_ascii must be a boolean");
    struct jv sort = arg_or(NULL, 0, 0, kw, "sort_keys", jv_bool(false));
    if (sort.kind != JV_BOOL)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "if set, sort_keys must be a boolean");
    o.ensure_ascii = ascii.u.b;
    o.sort_keys = sort.u.b;
    struct jv seps = arg_or(NULL, 0, 0, kw, "separators", jv_null());
    char *item_sep = NULL, *key_sep = NULL;
    if (jv_is_array(seps)) {
        if (seps.u.a->n != 2 || seps.u.a->items[0].kind != JV_STRING || seps.u.a->items[1].kind != JV_STRING)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "separators must be a tuple of two strings");
        /* NUL-terminated copies for the serializer */
        struct jstr a = seps.u.a->items[0].u.s, b = seps.u.a->items[1].u.s;
        item_sep = cinfer_jinja_alloc(&rt->arena, a.n + 1);
        key_sep = cinfer_jinja_alloc(&rt->arena, b.n + 1);
        if (!item_sep || !key_sep)
            return cinfer_jinja_nomem(rt, at);
        memcpy(item_sep, a.p, a.n);
        memcpy(key_sep, b.p, b.n);
        o.item_sep = item_sep;
        o.key_sep = key_sep;
    } else if (seps.kind != JV_NULL) {
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                 "if set, separators must be a tuple of two strings");
    }
    return tojson_value(rt, at, v, &o, out);
}

static int filter_called(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jstr name,
                         struct jv *args, size_t nargs, struct jv *out)
{
    struct jv *all = args;
    size_t nall = nargs;
    struct jv_object *kw = cinfer_jinja_split_kwargs(args, &nargs);
    if (is_name(name, "tojson"))
        return filter_tojson(rt, at, v, kw, out);
    if (is_name(name, "join")) {
        struct jv sep_default = jv_str((struct jstr){"", 0});
        if (v.kind != JV_STRING && !jv_is_array(v))
            return cannot_apply(rt, at, name, v);
        struct jv sep = arg_or(args, nargs, 0, kw, "separator", sep_default);
        if (sep.kind != JV_STRING)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "separator must be a string");
        if (jv_is_array(v))
            return join_values(rt, at, v.u.a, sep.u.s, out);
        struct jbuf b = new_buf(rt); /* a string joins its code points */
        const char *p = v.u.s.p, *end = v.u.s.p + v.u.s.n;
        for (bool first = true; p < end; first = false) {
            if (!first)
                cinfer_jbuf_append(&b, sep.u.s.p, sep.u.s.n);
            size_t l = cinfer_jinja_utf8_seq_len(p, end);
            cinfer_jbuf_append(&b, p, l);
            p += l;
        }
        return buf_to_value(rt, at, &b, out);
    }
    if (is_name(name, "int") || is_name(name, "float")) {
        bool is_int = name.p[0] == 'i';
        struct jv dflt = arg_or(args, nargs, 0, kw, "default", is_int ? jv_int(0) : jv_float(0));
        if (v.kind == JV_STRING) {
            double x = is_int ? cinfer_jinja_js_parse_int(v.u.s) : cinfer_jinja_js_parse_float(v.u.s);
            *out = isnan(x) ? dflt : is_int ? jv_int(x) : jv_float(x);
        } else if (jv_is_number(v)) {
            *out = v;
        } else if (v.kind == JV_BOOL) {
            *out = is_int ? jv_int(v.u.b) : jv_float(v.u.b);
        } else {
            return cannot_apply(rt, at, name, v);
        }
        return 0;
    }
    if (is_name(name, "default")) {
        struct jv dflt = nargs > 0 ? args[0] : jv_str((struct jstr){"", 0});
        struct jv boolean = arg_or(args, nargs, 1, kw, "boolean", jv_bool(false));
        if (boolean.kind != JV_BOOL)
            return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "`default` filter flag must be a boolean");
        *out = (v.kind == JV_UNDEFINED || (boolean.u.b && !cinfer_jv_truthy(v))) ? dflt : v;
        return 0;
    }
    if (jv_is_array(v)) {
        const struct jv_array *a = v.u.a;
        if (is_name(name, "sort")) {
            struct jv rev = arg_or(args, nargs, 0, kw, "reverse", jv_bool(false));
            if (rev.kind != JV_BOOL)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "reverse must be a boolean");
            struct jv cs = arg_or(args, nargs, 1, kw, "case_sensitive", jv_bool(false));
            if (cs.kind != JV_BOOL)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "case_sensitive must be a boolean");
            struct jv attr = arg_or(args, nargs, 2, kw, "attribute", jv_null());
            if (attr.kind != JV_STRING && attr.kind != JV_INT && attr.kind != JV_NULL)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                         "attribute must be a string, integer, or null");
            struct jv attr_str = attr;
            if (attr.kind == JV_INT) {
                char num[40];
                cinfer_jinja_js_number(attr.u.num, num);
                struct jstr s;
                if (!cinfer_jv_strdup(rt, num, strlen(num), &s))
                    return cinfer_jinja_nomem(rt, at);
                attr_str = jv_str(s);
            }
            struct sort_ctx c = {rt, at, cs.u.b, rev.u.b, attr.kind == JV_NULL ? NULL : &attr_str, -1};
            return sorted_copy(&c, a, out);
        }
        if (is_name(name, "selectattr") || is_name(name, "rejectattr")) {
            bool select = name.p[0] == 's';
            if (nall == 0 || all[0].kind != JV_STRING)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "%.*s needs an attribute name",
                                         (int)name.n,
                                         name.p);
            struct jv_array *r;
            int rc = make_array(rt, at, a->n, &r, out);
            if (rc)
                return rc;
            size_t k = 0;
            for (size_t i = 0; i < a->n; i++) {
                struct jv *got = cinfer_jv_object_get(a->items[i].u.o, all[0].u.s);
                bool result = false;
                if (got) {
                    if (nall > 1) {
                        if ((rc = cinfer_jinja_apply_test(rt, at, all[1].u.s, *got, all + 2, nall > 2 ? nall - 2 : 0,
                                                          &result)))
                            return rc;
                    } else {
                        result = cinfer_jv_truthy(*got);
                    }
                }
                if (select ? result : !result)
                    r->items[k++] = a->items[i];
            }
            r->n = k;
            return 0;
        }
        if (is_name(name, "map")) {
            struct jv attr = kwarg(kw, "attribute");
            if (attr.kind == JV_UNDEFINED && !(kw && cinfer_jv_object_get(kw, (struct jstr){"attribute", 9})))
                return cinfer_jinja_fail(rt, at, CINFER_ERR_UNSUPPORTED,
                                         "`map` expressions without `attribute` set are not currently supported.");
            if (attr.kind != JV_STRING)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "attribute must be a string");
            bool has_default = kw && cinfer_jv_object_get(kw, (struct jstr){"default", 7});
            struct jv dflt = kwarg(kw, "default");
            struct jv_array *r;
            int rc = make_array(rt, at, a->n, &r, out);
            for (size_t i = 0; !rc && i < a->n; i++) {
                struct jv item = a->items[i];
                if (!jv_is_object(item) && item.kind != JV_NAMESPACE)
                    return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "items in map must be an object");
                struct jv got;
                attribute_value(item, attr.u.s, &got);
                r->items[i] = got.kind == JV_UNDEFINED ? (has_default ? dflt : jv_undefined()) : got;
            }
            return rc;
        }
        return unknown_filter(rt, at, "ArrayValue", name);
    }
    if (v.kind == JV_STRING) {
        if (is_name(name, "indent")) {
            struct jv width = arg_or(args, nargs, 0, kw, "width", jv_int(4));
            if (width.kind != JV_INT)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "width must be a number");
            if (width.u.num < 0 || width.u.num > 4096)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                         "indent width must be between 0 and 4096");
            struct jv first = arg_or(args, nargs, 1, kw, "first", jv_bool(false));
            struct jv blank = arg_or(args, nargs, 2, kw, "blank", jv_bool(false));
            char *pad = cinfer_jinja_alloc(&rt->arena, (size_t)width.u.num + 1);
            if (!pad)
                return cinfer_jinja_nomem(rt, at);
            memset(pad, ' ', (size_t)width.u.num);
            return indent_lines(rt, at, v.u.s, (struct jstr){pad, (size_t)width.u.num}, cinfer_jv_truthy(first),
                                cinfer_jv_truthy(blank), out);
        }
        if (is_name(name, "replace")) {
            /* the reference passes the keyword arguments along, always */
            struct jv *with_kw = cinfer_jinja_alloc(&rt->arena, (nargs + 1) * sizeof(*with_kw));
            struct jv_object *empty = kw ? kw : cinfer_jv_object_new(rt, 0);
            if (!with_kw || !empty)
                return cinfer_jinja_nomem(rt, at);
            if (nargs)
                memcpy(with_kw, args, nargs * sizeof(*args));
            with_kw[nargs] = (struct jv){.kind = JV_KWARGS, .u.o = empty};
            return m_replace(rt, at, v, with_kw, nargs + 1, out);
        }
        return unknown_filter(rt, at, "StringValue", name);
    }
    if (jv_is_object(v)) {
        jinja_builtin_fn fn = find_fn(object_methods, name);
        if (!fn)
            return unknown_filter(rt, at, "ObjectValue", name);
        return fn(rt, at, v, all, nall, out);
    }
    return cannot_apply(rt, at, name, v);
}

int cinfer_jinja_apply_filter(struct jinja_rt *rt, const struct jinja_node *at, struct jv operand, struct jstr name,
                              bool call,
                              struct jv *args, size_t nargs, struct jv *out)
{
    if (!call)
        return filter_plain(rt, at, operand, name, out);
    return filter_called(rt, at, operand, name, args, nargs, out);
}
