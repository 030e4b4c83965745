/* core/chat/jinja_eval.c — walks the syntax tree as @huggingface/jinja's Interpreter
 * does: the same scoping (a for loop and a macro call open a scope; macros see the
 * caller's scope), the same operator rules (JavaScript's == on values, + that joins
 * strings, numbers as doubles), break/continue dropping the current iteration's output,
 * and bounds on steps, nesting and output so that no template runs away. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja.h"

enum { JINJA_BREAK = 1, JINJA_CONTINUE = 2 }; /* positive: control flow, not errors */

struct jinja_scope {
    struct jinja_scope *parent;
    struct jstr *names;
    struct jv *vals;
    size_t n, cap;
};

struct jinja_scope *cinfer_jinja_scope_new(struct jinja_rt *rt, struct jinja_scope *parent)
{
    struct jinja_scope *s = cinfer_jinja_alloc(&rt->arena, sizeof(*s));
    if (s)
        s->parent = parent;
    return s;
}

static struct jv *scope_find_here(struct jinja_scope *s, struct jstr name)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i].n == name.n && memcmp(s->names[i].p, name.p, name.n) == 0)
            return &s->vals[i];
    return NULL;
}

bool cinfer_jinja_scope_set(struct jinja_rt *rt, struct jinja_scope *s, struct jstr name, struct jv v)
{
    struct jv *have = scope_find_here(s, name);
    if (have) {
        *have = v;
        return true;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct jstr *names = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*names));
        struct jv *vals = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*vals));
        if (!names || !vals)
            return false;
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof(*names));
            memcpy(vals, s->vals, s->n * sizeof(*vals));
        }
        s->names = names;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
    return true;
}

static struct jv scope_lookup(struct jinja_scope *s, struct jstr name)
{
    for (; s; s = s->parent) {
        struct jv *v = scope_find_here(s, name);
        if (v)
            return *v;
    }
    return jv_undefined();
}

static int step(struct jinja_rt *rt, const struct jinja_node *at)
{
    if (++rt->steps > rt->max_steps)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "the template ran more than %zu steps (a runaway loop?)",
                                 rt->max_steps);
    return 0;
}

static int out_fail(struct jinja_rt *rt, const struct jinja_node *at, const struct jbuf *out)
{
    if (out->limit_bytes && out->n + 1 >= out->limit_bytes / 2)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "the output would exceed %zu bytes", out->limit_bytes);
    return cinfer_jinja_fail(rt, at, CINFER_ERR_NOMEM, "out of memory while rendering");
}

static int eval(struct jinja_rt *rt, const struct jinja_node *nd, struct jinja_scope *sc, struct jv *out);
static int exec_block(struct jinja_rt *rt, const struct jinja_node_list *body, struct jinja_scope *sc,
                      struct jbuf *out);

/* Renders a block into a new string value (macro bodies, set blocks, filter blocks). */
static int render_to_value(struct jinja_rt *rt, const struct jinja_node *at, const struct jinja_node_list *body,
                           struct jinja_scope *sc, struct jv *out)
{
    struct jbuf b = {.limit_bytes = rt->max_output_bytes};
    int rc = exec_block(rt, body, sc, &b);
    if (!rc && !cinfer_jv_from_buf(rt, &b, out))
        rc = b.failed ? out_fail(rt, at, &b) : cinfer_jinja_nomem(rt, at);
    cinfer_jbuf_free(&b);
    return rc;
}

/* ---- calls ---------------------------------------------------------------------------- */

/* Positional arguments (with *spread) first, then keyword arguments (with **spread) as
 * one trailing kwargs value when there are any. */
static int eval_args(struct jinja_rt *rt, const struct jinja_node_list *list, struct jinja_scope *sc,
                     bool always_kwargs,
                     struct jv **args_out, size_t *nargs_out)
{
    size_t cap = list->n + 1; /* grown below for *spread arguments */
    struct jv *args = cinfer_jinja_alloc(&rt->arena, cap * sizeof(*args));
    if (!args)
        return cinfer_jinja_nomem(rt, NULL);
    size_t n = 0;
    for (size_t i = 0; i < list->n; i++) {
        const struct jinja_node *a = list->items[i];
        if (a->kind == N_KWARG || a->kind == N_KWSPREAD)
            continue;
        struct jv v;
        int rc = eval(rt, a->kind == N_SPREAD ? a->a : a, sc, &v);
        if (rc)
            return rc;
        if (a->kind != N_SPREAD) {
            args[n++] = v;
            continue;
        }
        if (!jv_is_array(v))
            return cinfer_jinja_fail(rt, a, CINFER_ERR_INVALID_ARGUMENT, "cannot unpack non-iterable type: %s",
                                     cinfer_jv_type_name(v));
        struct jv *grown = cinfer_jinja_alloc(&rt->arena, (cap + v.u.a->n) * sizeof(*grown));
        if (!grown)
            return cinfer_jinja_nomem(rt, a);
        memcpy(grown, args, n * sizeof(*args));
        memcpy(grown + n, v.u.a->items, v.u.a->n * sizeof(*grown));
        args = grown;
        n += v.u.a->n;
        cap += v.u.a->n;
    }
    struct jv_object *kw = NULL;
    for (size_t i = 0; i < list->n; i++) {
        const struct jinja_node *a = list->items[i];
        if (a->kind != N_KWARG && a->kind != N_KWSPREAD)
            continue;
        if (!kw && !(kw = cinfer_jv_object_new(rt, 4)))
            return cinfer_jinja_nomem(rt, a);
        struct jv v;
        int rc = eval(rt, a->a, sc, &v);
        if (rc)
            return rc;
        if (a->kind == N_KWARG) {
            if (cinfer_jv_object_get(kw, a->str))
                return cinfer_jinja_fail(rt, a, CINFER_ERR_INVALID_ARGUMENT,
                                         "got multiple values for keyword argument '%.*s'",
                                         (int)a->str.n, a->str.p);
            if (!cinfer_jv_object_set(rt, kw, a->str, v))
                return cinfer_jinja_nomem(rt, a);
            continue;
        }
        if (!jv_is_object(v))
            return cinfer_jinja_fail(rt, a, CINFER_ERR_INVALID_ARGUMENT, "argument after ** must be a mapping, not %s",
                                     cinfer_jv_type_name(v));
        for (size_t k = 0; k < v.u.o->n; k++) {
            if (cinfer_jv_object_get(kw, v.u.o->keys[k]))
                return cinfer_jinja_fail(rt, a, CINFER_ERR_INVALID_ARGUMENT,
                                         "got multiple values for keyword argument '%.*s'",
                                         (int)v.u.o->keys[k].n, v.u.o->keys[k].p);
            if (!cinfer_jv_object_set(rt, kw, v.u.o->keys[k], v.u.o->vals[k]))
                return cinfer_jinja_nomem(rt, a);
        }
    }
    if (!kw && always_kwargs && !(kw = cinfer_jv_object_new(rt, 0)))
        return cinfer_jinja_nomem(rt, NULL);
    if (kw && kw->n == 0 && !always_kwargs)
        kw = NULL;
    if (kw)
        args[n++] = (struct jv){.kind = JV_KWARGS, .u.o = kw};
    *args_out = args;
    *nargs_out = n;
    return 0;
}

/* bindMacroArguments of the reference. */
static int bind_arguments(struct jinja_rt *rt, const struct jinja_node *at, const char *display,
                          const struct jinja_node_list *params, bool uses_kwargs, bool uses_varargs, struct jv *args,
                          size_t nargs, struct jinja_scope *sc)
{
    struct jv_object *kw = cinfer_jinja_split_kwargs(args, &nargs);
    bool *used = NULL;
    if (kw && kw->n && !(used = cinfer_jinja_alloc(&rt->arena, kw->n * sizeof(*used))))
        return cinfer_jinja_nomem(rt, at);
    const struct jinja_node **pending = cinfer_jinja_alloc(&rt->arena, (params->n + 1) * sizeof(*pending));
    if (!pending)
        return cinfer_jinja_nomem(rt, at);
    for (size_t i = 0; i < params->n; i++) {
        const struct jinja_node *p = params->items[i];
        struct jv v = jv_undefined();
        bool have = i < nargs;
        if (have)
            v = args[i];
        if (!have && kw) {
            for (size_t k = 0; k < kw->n; k++)
                if (!used[k] && kw->keys[k].n == p->str.n && memcmp(kw->keys[k].p, p->str.p, p->str.n) == 0) {
                    v = kw->vals[k];
                    used[k] = true;
                    have = true;
                    break;
                }
        }
        pending[i] = !have && p->kind == N_KWARG ? p : NULL;
        if (!cinfer_jinja_scope_set(rt, sc, p->str, v))
            return cinfer_jinja_nomem(rt, at);
    }
    size_t unused = 0, first_unused = 0;
    for (size_t k = 0; kw && k < kw->n; k++)
        if (!used[k] && unused++ == 0)
            first_unused = k;
    if (uses_kwargs) {
        struct jv_object *rest = cinfer_jv_object_new(rt, unused);
        if (!rest)
            return cinfer_jinja_nomem(rt, at);
        for (size_t k = 0; kw && k < kw->n; k++)
            if (!used[k] && !cinfer_jv_object_set(rt, rest, kw->keys[k], kw->vals[k]))
                return cinfer_jinja_nomem(rt, at);
        if (!cinfer_jinja_scope_set(rt, sc, (struct jstr){"kwargs", 6}, (struct jv){.kind = JV_OBJECT, .u.o = rest}))
            return cinfer_jinja_nomem(rt, at);
    } else if (unused) {
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "macro %s takes no keyword argument '%.*s'",
                                 display,
                                 (int)kw->keys[first_unused].n, kw->keys[first_unused].p);
    }
    if (uses_varargs) {
        size_t extra = nargs > params->n ? nargs - params->n : 0;
        struct jv_array *a = cinfer_jv_array_new(rt, extra);
        if (!a)
            return cinfer_jinja_nomem(rt, at);
        for (size_t i = 0; i < extra; i++)
            a->items[i] = args[params->n + i];
        if (!cinfer_jinja_scope_set(rt, sc, (struct jstr){"varargs", 7}, (struct jv){.kind = JV_ARRAY, .u.a = a}))
            return cinfer_jinja_nomem(rt, at);
    } else if (nargs > params->n) {
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "macro %s takes not more than %zu argument(s)",
                                 display,
                                 params->n);
    }
    for (size_t i = 0; i < params->n; i++) {
        if (!pending[i])
            continue;
        struct jv v;
        int rc = eval(rt, pending[i]->a, sc, &v);
        if (rc)
            return rc;
        if (!cinfer_jinja_scope_set(rt, sc, pending[i]->str, v))
            return cinfer_jinja_nomem(rt, at);
    }
    return 0;
}

int cinfer_jinja_call(struct jinja_rt *rt, const struct jinja_node *at, struct jv fn, struct jv *args, size_t nargs,
                      struct jinja_scope *scope, struct jv *out)
{
    if (fn.kind != JV_FUNCTION)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                 "cannot call something that is not a function: got %s",
                                 cinfer_jv_type_name(fn));
    const struct jv_func *f = fn.u.f;
    if (f->kind == F_BUILTIN)
        return f->fn(rt, at, f->self, args, nargs, out);
    if (++rt->depth > rt->max_depth)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_RANGE, "calls nested deeper than %d (runaway recursion?)",
                                 rt->max_depth);
    const struct jinja_node *m = f->node;
    struct jinja_scope *sc = cinfer_jinja_scope_new(rt, f->kind == F_MACRO ? scope : f->scope);
    if (!sc)
        return cinfer_jinja_nomem(rt, at);
    char display[80];
    if (f->kind == F_MACRO)
        snprintf(display, sizeof(display), "'%.*s'", (int)(m->str.n > 60 ? 60 : m->str.n), m->str.p);
    else
        snprintf(display, sizeof(display), "None");
    int rc = bind_arguments(rt, at, display, &m->list, m->uses_kwargs, m->uses_varargs, args, nargs, sc);
    if (!rc)
        rc = render_to_value(rt, at, &m->list2, sc, out);
    rt->depth--;
    return rc;
}

/* ---- expressions ---------------------------------------------------------------------- */

static int concat_js(struct jinja_rt *rt, const struct jinja_node *at, struct jv a, struct jv b, struct jv *out)
{
    struct jbuf buf = {.limit_bytes = rt->max_output_bytes};
    int rc = cinfer_jv_js_string(rt, at, a, &buf);
    if (!rc)
        rc = cinfer_jv_js_string(rt, at, b, &buf);
    if (!rc && !cinfer_jv_from_buf(rt, &buf, out))
        rc = buf.failed ? out_fail(rt, at, &buf) : cinfer_jinja_nomem(rt, at);
    cinfer_jbuf_free(&buf);
    return rc;
}

static bool str_contains(struct jstr hay, struct jstr needle)
{
    if (needle.n == 0)
        return true;
    for (size_t i = 0; i + needle.n <= hay.n; i++)
        if (memcmp(hay.p + i, needle.p, needle.n) == 0)
            return true;
    return false;
}

static const char *op_text(enum jinja_op op)
{
    static const char *const t[] = {[OP_AND] = "and", [OP_OR] = "or", [OP_NOT] = "not", [OP_EQ] = "==",
                                    [OP_NE] = "!=", [OP_LT] = "<", [OP_GT] = ">", [OP_LE] = "<=", [OP_GE] = ">=",
                                    [OP_IN] = "in", [OP_NOT_IN] = "not in", [OP_ADD] = "+", [OP_SUB] = "-",
                                    [OP_CONCAT] = "~", [OP_MUL] = "*", [OP_DIV] = "/", [OP_FLOORDIV] = "//",
                                    [OP_MOD] = "%", [OP_POW] = "**"};
    return op <= OP_POW && t[op] ? t[op] : "?";
}

static int eval_binary(struct jinja_rt *rt, const struct jinja_node *nd, struct jinja_scope *sc, struct jv *out)
{
    struct jv l, r;
    int rc = eval(rt, nd->a, sc, &l);
    if (rc)
        return rc;
    if (nd->op == OP_AND)
        return cinfer_jv_truthy(l) ? eval(rt, nd->b, sc, out) : (*out = l, 0);
    if (nd->op == OP_OR)
        return cinfer_jv_truthy(l) ? (*out = l, 0) : eval(rt, nd->b, sc, out);
    if ((rc = eval(rt, nd->b, sc, &r)))
        return rc;
    enum jinja_op op = nd->op;
    if (op == OP_EQ || op == OP_NE) {
        bool eq;
        if ((rc = cinfer_jv_loose_equal(rt, nd, l, r, &eq)))
            return rc;
        *out = jv_bool(op == OP_EQ ? eq : !eq);
        return 0;
    }
    if (l.kind == JV_UNDEFINED || r.kind == JV_UNDEFINED) {
        if (r.kind == JV_UNDEFINED && (op == OP_IN || op == OP_NOT_IN)) {
            *out = jv_bool(op == OP_NOT_IN);
            return 0;
        }
        return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "cannot perform operation %s on undefined values",
                                 op_text(op));
    }
    if (l.kind == JV_NULL || r.kind == JV_NULL)
        return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "cannot perform operation %s on null values",
                                 op_text(op));
    if (op == OP_CONCAT)
        return concat_js(rt, nd, l, r, out);
    bool ln = jv_is_number(l) || l.kind == JV_BOOL, rn = jv_is_number(r) || r.kind == JV_BOOL;
    if (op == OP_POW && ln && rn) {
        double a = l.kind == JV_BOOL ? l.u.b : l.u.num, b = r.kind == JV_BOOL ? r.u.b : r.u.num;
        if (a == 0 && b < 0)
            return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "0.0 cannot be raised to a negative power");
        double res = pow(a, b);
        if (isnan(a) || isnan(b) || (a == 1 && isinf(b)))
            res = NAN; /* JavaScript: 1 ** Infinity is NaN */
        if (!isfinite(res))
            return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT,
                                     "exponentiation result is not a finite real number");
        *out = (l.kind == JV_FLOAT || r.kind == JV_FLOAT || b < 0) ? jv_float(res) : jv_int(res);
        return 0;
    }
    if (jv_is_number(l) && jv_is_number(r)) {
        double a = l.u.num, b = r.u.num;
        bool is_float = l.kind == JV_FLOAT || r.kind == JV_FLOAT;
        switch (op) {
        case OP_ADD:
        case OP_SUB:
        case OP_MUL: {
            double res = op == OP_ADD ? a + b : op == OP_SUB ? a - b : a * b;
            *out = is_float ? jv_float(res) : jv_int(res);
            return 0;
        }
        case OP_DIV:
            *out = jv_float(a / b);
            return 0;
        case OP_FLOORDIV: {
            double res = floor(a / b);
            *out = is_float ? jv_float(res) : jv_int(res);
            return 0;
        }
        case OP_MOD: {
            double res = (isinf(b) && isfinite(a)) ? a : fmod(a, b);
            *out = is_float ? jv_float(res) : jv_int(res);
            return 0;
        }
        case OP_LT:
            *out = jv_bool(a < b);
            return 0;
        case OP_GT:
            *out = jv_bool(a > b);
            return 0;
        case OP_GE:
            *out = jv_bool(a >= b);
            return 0;
        case OP_LE:
            *out = jv_bool(a <= b);
            return 0;
        default:
            break;
        }
    } else if (jv_is_array(l) && jv_is_array(r)) {
        if (op == OP_ADD) {
            struct jv_array *a = cinfer_jv_array_new(rt, l.u.a->n + r.u.a->n);
            if (!a)
                return cinfer_jinja_nomem(rt, nd);
            if (l.u.a->n)
                memcpy(a->items, l.u.a->items, l.u.a->n * sizeof(*a->items));
            if (r.u.a->n)
                memcpy(a->items + l.u.a->n, r.u.a->items, r.u.a->n * sizeof(*a->items));
            *out = (struct jv){.kind = JV_ARRAY, .u.a = a};
            return 0;
        }
    } else if (jv_is_array(r)) {
        if (op == OP_IN || op == OP_NOT_IN) {
            bool member = false;
            for (size_t i = 0; i < r.u.a->n && !member; i++)
                member = cinfer_jv_strict_equal(r.u.a->items[i], l);
            *out = jv_bool(op == OP_IN ? member : !member);
            return 0;
        }
    }
    if ((l.kind == JV_STRING || r.kind == JV_STRING) && op == OP_ADD)
        return concat_js(rt, nd, l, r, out);
    if (l.kind == JV_STRING && r.kind == JV_STRING && (op == OP_IN || op == OP_NOT_IN)) {
        bool has = str_contains(r.u.s, l.u.s);
        *out = jv_bool(op == OP_IN ? has : !has);
        return 0;
    }
    if (l.kind == JV_STRING && jv_is_object(r) && (op == OP_IN || op == OP_NOT_IN)) {
        bool has = cinfer_jv_object_get(r.u.o, l.u.s) != NULL;
        *out = jv_bool(op == OP_IN ? has : !has);
        return 0;
    }
    return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "unknown operator \"%s\" between %s and %s",
                             op_text(op),
                             cinfer_jv_type_name(l), cinfer_jv_type_name(r));
}

/* slice() of the reference's utils on n items. */
static size_t slice_indices(size_t len, struct jv start, struct jv stop, struct jv stepv, size_t **idx_out,
                            struct jinja_rt *rt)
{
    double n = (double)len, st = stepv.kind == JV_UNDEFINED ? 1 : stepv.u.num;
    double dir = st > 0 ? 1 : st < 0 ? -1 : 0;
    double a, b;
    if (dir >= 0) {
        a = start.kind == JV_UNDEFINED ? 0 : start.u.num;
        a = a < 0 ? fmax(n + a, 0) : fmin(a, n);
        b = stop.kind == JV_UNDEFINED ? n : stop.u.num;
        b = b < 0 ? fmax(n + b, 0) : fmin(b, n);
    } else {
        a = start.kind == JV_UNDEFINED ? n - 1 : start.u.num;
        a = a < 0 ? fmax(n + a, -1) : fmin(a, n - 1);
        b = stop.kind == JV_UNDEFINED ? -1 : stop.u.num;
        b = b < -1 ? fmax(n + b, -1) : fmin(b, n - 1);
    }
    size_t count = 0;
    if (dir != 0 && dir * a < dir * b)
        count = (size_t)ceil((b - a) / st);
    size_t *idx = count ? cinfer_jinja_alloc(&rt->arena, count * sizeof(*idx)) : NULL;
    if (count && !idx)
        return (size_t)-1;
    size_t k = 0;
    for (double i = a; dir * i < dir * b && k < count; i += st)
        idx[k++] = (size_t)i;
    *idx_out = idx;
    return k;
}

static int eval_slice(struct jinja_rt *rt, const struct jinja_node *nd, struct jv obj, struct jinja_scope *sc,
                      struct jv *out)
{
    if (!jv_is_array(obj) && obj.kind != JV_STRING)
        return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "slice object must be an array or string");
    struct jv parts[3] = {jv_undefined(), jv_undefined(), jv_undefined()};
    const struct jinja_node *nodes[3] = {nd->a, nd->b, nd->c};
    static const char *const names[3] = {"start", "stop", "step"};
    for (int i = 0; i < 3; i++) {
        if (nodes[i]) {
            int rc = eval(rt, nodes[i], sc, &parts[i]);
            if (rc)
                return rc;
        }
        if (parts[i].kind != JV_INT && parts[i].kind != JV_UNDEFINED)
            return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "slice %s must be numeric or undefined",
                                     names[i]);
    }
    if (jv_is_array(obj)) {
        size_t *idx;
        size_t n = slice_indices(obj.u.a->n, parts[0], parts[1], parts[2], &idx, rt);
        if (n == (size_t)-1)
            return cinfer_jinja_nomem(rt, nd);
        struct jv_array *a = cinfer_jv_array_new(rt, n);
        if (!a)
            return cinfer_jinja_nomem(rt, nd);
        for (size_t i = 0; i < n; i++)
            a->items[i] = obj.u.a->items[idx[i]];
        *out = (struct jv){.kind = JV_ARRAY, .u.a = a};
        return 0;
    }
    /* strings slice by code points (Array.from) */
    struct jstr s = obj.u.s;
    size_t ncp = 0;
    for (const char *p = s.p, *end = s.p + s.n; p < end; ncp++)
        p += cinfer_jinja_utf8_seq_len(p, end);
    const char **starts = cinfer_jinja_alloc(&rt->arena, (ncp + 1) * sizeof(*starts));
    if (!starts)
        return cinfer_jinja_nomem(rt, nd);
    size_t k = 0;
    for (const char *p = s.p, *end = s.p + s.n; p < end; k++) {
        starts[k] = p;
        p += cinfer_jinja_utf8_seq_len(p, end);
    }
    starts[ncp] = s.p + s.n;
    size_t *idx;
    size_t n = slice_indices(ncp, parts[0], parts[1], parts[2], &idx, rt);
    if (n == (size_t)-1)
        return cinfer_jinja_nomem(rt, nd);
    struct jbuf b = {.limit_bytes = rt->max_output_bytes};
    for (size_t i = 0; i < n; i++)
        cinfer_jbuf_append(&b, starts[idx[i]], (size_t)(starts[idx[i] + 1] - starts[idx[i]]));
    int rc = cinfer_jv_from_buf(rt, &b, out) ? 0 : cinfer_jinja_nomem(rt, nd);
    cinfer_jbuf_free(&b);
    return rc;
}

/* The UTF-16 code unit at index i (negative from the end) of s, as a string. */
static int string_at(struct jinja_rt *rt, const struct jinja_node *at, struct jstr s, double i, struct jv *out)
{
    double len = (double)cinfer_jinja_utf16_len(s);
    if (i < 0)
        i += len;
    if (!(i >= 0 && i < len) || floor(i) != i) {
        *out = jv_undefined();
        return 0;
    }
    size_t unit = 0;
    const char *p = s.p, *end = s.p + s.n;
    while (p < end) {
        size_t n = cinfer_jinja_utf8_seq_len(p, end);
        size_t units = n == 4 ? 2 : 1;
        if ((double)(unit + units) > i) {
            struct jstr r;
            if (units == 2) { /* half of a pair: a lone surrogate */
                const char *q = p;
                uint32_t cp = cinfer_jinja_utf8_decode(&q, end) - 0x10000;
                uint32_t half = (double)unit == i ? 0xd800 + (cp >> 10) : 0xdc00 + (cp & 0x3ff);
                char enc[4];
                size_t l = cinfer_jinja_utf8_encode(half, enc);
                if (!cinfer_jv_strdup(rt, enc, l, &r))
                    return cinfer_jinja_nomem(rt, at);
            } else if (!cinfer_jv_strdup(rt, p, n, &r)) {
                return cinfer_jinja_nomem(rt, at);
            }
            *out = jv_str(r);
            return 0;
        }
        unit += units;
        p += n;
    }
    *out = jv_undefined();
    return 0;
}

static int eval_member(struct jinja_rt *rt, const struct jinja_node *nd, struct jinja_scope *sc, struct jv *out)
{
    struct jv obj, prop;
    int rc = eval(rt, nd->a, sc, &obj);
    if (rc)
        return rc;
    if (nd->flag) {
        if (nd->b->kind == N_SLICE)
            return eval_slice(rt, nd->b, obj, sc, out);
        if ((rc = eval(rt, nd->b, sc, &prop)))
            return rc;
    } else if (nd->b->kind == N_INT) {
        prop = jv_int(nd->b->num);
    } else {
        prop = jv_str(nd->b->str);
    }
    *out = jv_undefined();
    if (jv_is_object(obj) || obj.kind == JV_NAMESPACE) {
        if (prop.kind != JV_STRING)
            return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT,
                                     "cannot access property with non-string: got %s",
                                     cinfer_jv_type_name(prop));
        struct jv *v = cinfer_jv_object_get(obj.u.o, prop.u.s);
        if (v) {
            *out = *v;
            return 0;
        }
        return obj.kind == JV_NAMESPACE ? 0 : cinfer_jinja_builtin_member(rt, nd, obj, prop.u.s, out);
    }
    if (jv_is_array(obj) || obj.kind == JV_STRING) {
        if (prop.kind == JV_INT) {
            if (obj.kind == JV_STRING)
                return string_at(rt, nd, obj.u.s, prop.u.num, out);
            double i = prop.u.num, n = (double)obj.u.a->n;
            if (i < 0)
                i += n;
            if (i >= 0 && i < n && floor(i) == i)
                *out = obj.u.a->items[(size_t)i];
            return 0;
        }
        if (prop.kind == JV_STRING)
            return cinfer_jinja_builtin_member(rt, nd, obj, prop.u.s, out);
        return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT,
                                 "cannot access property with non-string/non-number: got %s",
                                 cinfer_jv_type_name(prop));
    }
    if (prop.kind != JV_STRING)
        return cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "cannot access property with non-string: got %s",
                                 cinfer_jv_type_name(prop));
    return cinfer_jinja_builtin_member(rt, nd, obj, prop.u.s, out);
}

static int apply_filter_node(struct jinja_rt *rt, const struct jinja_node *at, struct jv operand,
                             const struct jinja_node *filter, struct jinja_scope *sc, struct jv *out)
{
    if (filter->kind == N_IDENT)
        return cinfer_jinja_apply_filter(rt, at, operand, filter->str, false, NULL, 0, out);
    /* {% filter 0 %} parses (any primary) and fails only when it runs */
    if (filter->kind != N_CALL || filter->a->kind != N_IDENT)
        return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "unknown filter: not a name");
    struct jstr name = filter->a->str;
    bool attr_filter = (name.n == 10 && (!memcmp(name.p, "selectattr", 10) || !memcmp(name.p, "rejectattr", 10)));
    if (attr_filter && jv_is_array(operand)) {
        for (size_t i = 0; i < operand.u.a->n; i++) {
            enum jv_kind k = operand.u.a->items[i].kind;
            if (k != JV_OBJECT && k != JV_KWARGS && k != JV_NAMESPACE)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT,
                                         "`%.*s` can only be applied to array of objects",
                                         (int)name.n, name.p);
        }
        for (size_t i = 0; i < filter->list.n; i++)
            if (filter->list.items[i]->kind != N_STRING)
                return cinfer_jinja_fail(rt, at, CINFER_ERR_INVALID_ARGUMENT, "arguments of `%.*s` must be strings",
                                         (int)name.n, name.p);
    }
    struct jv *args;
    size_t nargs;
    int rc = eval_args(rt, &filter->list, sc, false, &args, &nargs);
    if (rc)
        return rc;
    return cinfer_jinja_apply_filter(rt, at, operand, name, true, args, nargs, out);
}

static int eval(struct jinja_rt *rt, const struct jinja_node *nd, struct jinja_scope *sc, struct jv *out)
{
    int rc = step(rt, nd);
    if (rc)
        return rc;
    if (++rt->depth > rt->max_depth) {
        rt->depth--;
        return cinfer_jinja_fail(rt, nd, CINFER_ERR_RANGE, "expressions nested deeper than %d", rt->max_depth);
    }
    switch (nd->kind) {
    case N_INT:
        *out = jv_int(nd->num);
        break;
    case N_FLOAT:
        *out = jv_float(nd->num);
        break;
    case N_STRING:
    case N_TEXT:
        *out = jv_str(nd->str);
        break;
    case N_IDENT:
        *out = scope_lookup(sc, nd->str);
        break;
    case N_ARRAY:
    case N_TUPLE: {
        struct jv_array *a = cinfer_jv_array_new(rt, nd->list.n);
        if (!a) {
            rc = cinfer_jinja_nomem(rt, nd);
            break;
        }
        for (size_t i = 0; i < nd->list.n && !rc; i++)
            rc = eval(rt, nd->list.items[i], sc, &a->items[i]);
        *out = (struct jv){.kind = nd->kind == N_ARRAY ? JV_ARRAY : JV_TUPLE, .u.a = a};
        break;
    }
    case N_OBJECT: {
        struct jv_object *o = cinfer_jv_object_new(rt, nd->list.n);
        if (!o) {
            rc = cinfer_jinja_nomem(rt, nd);
            break;
        }
        for (size_t i = 0; i < nd->list.n && !rc; i++) {
            struct jv k, v;
            if ((rc = eval(rt, nd->list.items[i], sc, &k)))
                break;
            if (k.kind != JV_STRING) {
                rc = cinfer_jinja_fail(rt, nd->list.items[i], CINFER_ERR_INVALID_ARGUMENT,
                                       "object keys must be strings: got %s",
                                       cinfer_jv_type_name(k));
                break;
            }
            if ((rc = eval(rt, nd->list2.items[i], sc, &v)))
                break;
            if (!cinfer_jv_object_set(rt, o, k.u.s, v))
                rc = cinfer_jinja_nomem(rt, nd);
        }
        *out = (struct jv){.kind = JV_OBJECT, .u.o = o};
        break;
    }
    case N_CALL: {
        struct jv *args, fn;
        size_t nargs;
        if ((rc = eval_args(rt, &nd->list, sc, false, &args, &nargs)))
            break;
        if ((rc = eval(rt, nd->a, sc, &fn)))
            break;
        rc = cinfer_jinja_call(rt, nd, fn, args, nargs, sc, out);
        break;
    }
    case N_MEMBER:
        rc = eval_member(rt, nd, sc, out);
        break;
    case N_UNARY: {
        struct jv v;
        if ((rc = eval(rt, nd->a, sc, &v)))
            break;
        if (nd->op == OP_NOT) {
            *out = jv_bool(!cinfer_jv_truthy(v));
            break;
        }
        double sign = nd->op == OP_SUB ? -1 : 1;
        if (jv_is_number(v) || v.kind == JV_BOOL) {
            double x = v.kind == JV_BOOL ? (v.u.b ? 1 : 0) : v.u.num;
            *out = v.kind == JV_FLOAT ? jv_float(sign * x) : jv_int(sign * x);
        } else {
            rc = cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "unknown operator \"%s\" for %s",
                                   nd->op == OP_SUB ? "-" : "+", cinfer_jv_type_name(v));
        }
        break;
    }
    case N_BINARY:
        rc = eval_binary(rt, nd, sc, out);
        break;
    case N_FILTER: {
        struct jv operand;
        if ((rc = eval(rt, nd->a, sc, &operand)))
            break;
        rc = apply_filter_node(rt, nd, operand, nd->b, sc, out);
        break;
    }
    case N_TEST: {
        struct jv operand;
        bool r;
        if ((rc = eval(rt, nd->a, sc, &operand)))
            break;
        if ((rc = cinfer_jinja_apply_test(rt, nd, nd->str, operand, NULL, 0, &r)))
            break;
        *out = jv_bool(nd->flag ? !r : r);
        break;
    }
    case N_SELECT: {
        struct jv cond;
        if ((rc = eval(rt, nd->b, sc, &cond)))
            break;
        if (!cinfer_jv_truthy(cond))
            *out = jv_undefined();
        else
            rc = eval(rt, nd->a, sc, out);
        break;
    }
    case N_TERNARY: {
        struct jv cond;
        if ((rc = eval(rt, nd->a, sc, &cond)))
            break;
        rc = eval(rt, cinfer_jv_truthy(cond) ? nd->b : nd->c, sc, out);
        break;
    }
    case N_SLICE:
        rc = cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "a slice is only allowed inside '[]'");
        break;
    default:
        rc = cinfer_jinja_fail(rt, nd, CINFER_ERR_INVALID_ARGUMENT, "this statement cannot be used as a value");
    }
    rt->depth--;
    return rc;
}

/* ---- statements ----------------------------------------------------------------------- */

static int assign(struct jinja_rt *rt, const struct jinja_node *target, struct jv v, struct jinja_scope *sc)
{
    if (target->kind == N_IDENT)
        return cinfer_jinja_scope_set(rt, sc, target->str, v) ? 0 : cinfer_jinja_nomem(rt, target);
    if (target->kind == N_TUPLE) {
        if (!jv_is_array(v))
            return cinfer_jinja_fail(rt, target, CINFER_ERR_INVALID_ARGUMENT,
                                     "cannot unpack non-iterable type in set: %s",
                                     cinfer_jv_type_name(v));
        if (v.u.a->n != target->list.n)
            return cinfer_jinja_fail(rt, target, CINFER_ERR_INVALID_ARGUMENT, "too %s items to unpack in set",
                                     target->list.n > v.u.a->n ? "few" : "many");
        for (size_t i = 0; i < target->list.n; i++) {
            const struct jinja_node *e = target->list.items[i];
            if (e->kind != N_IDENT)
                return cinfer_jinja_fail(rt, e, CINFER_ERR_INVALID_ARGUMENT,
                                         "cannot unpack to a non-identifier in set");
            if (!cinfer_jinja_scope_set(rt, sc, e->str, v.u.a->items[i]))
                return cinfer_jinja_nomem(rt, e);
        }
        return 0;
    }
    if (target->kind == N_MEMBER) {
        struct jv obj;
        int rc = eval(rt, target->a, sc, &obj);
        if (rc)
            return rc;
        if (obj.kind != JV_NAMESPACE)
            return cinfer_jinja_fail(rt, target, CINFER_ERR_INVALID_ARGUMENT,
                                     "cannot assign attribute on non-namespace object");
        if (target->flag || target->b->kind != N_IDENT)
            return cinfer_jinja_fail(rt, target, CINFER_ERR_INVALID_ARGUMENT,
                                     "cannot assign to member with non-identifier property");
        return cinfer_jv_object_set(rt, obj.u.o, target->b->str, v) ? 0 : cinfer_jinja_nomem(rt, target);
    }
    return cinfer_jinja_fail(rt, target, CINFER_ERR_INVALID_ARGUMENT, "invalid left-hand side in 'set'");
}

static int exec_for(struct jinja_rt *rt, const struct jinja_node *nd, struct jinja_scope *parent, struct jbuf *out)
{
    struct jinja_scope *sc = cinfer_jinja_scope_new(rt, parent);
    if (!sc)
        return cinfer_jinja_nomem(rt, nd);
    const struct jinja_node *test = NULL, *iter_node = nd->b;
    if (iter_node->kind == N_SELECT) {
        test = iter_node->b;
        iter_node = iter_node->a;
    }
    struct jv it;
    int rc = eval(rt, iter_node, sc, &it);
    if (rc)
        return rc;
    struct jv *items;
    size_t n;
    if (jv_is_array(it)) {
        items = it.u.a->items;
        n = it.u.a->n;
    } else if (jv_is_object(it)) {
        n = it.u.o->n;
        items = cinfer_jinja_alloc(&rt->arena, (n + 1) * sizeof(*items));
        if (!items)
            return cinfer_jinja_nomem(rt, nd);
        for (size_t i = 0; i < n; i++)
            items[i] = jv_str(it.u.o->keys[i]);
    } else {
        return cinfer_jinja_fail(rt, nd->b, CINFER_ERR_INVALID_ARGUMENT,
                                 "expected iterable or object type in for loop: got %s",
                                 cinfer_jv_type_name(it));
    }
    struct jv *kept = cinfer_jinja_alloc(&rt->arena, (n + 1) * sizeof(*kept));
    if (!kept)
        return cinfer_jinja_nomem(rt, nd);
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        struct jv cur = items[i];
        if (nd->a->kind == N_TUPLE) {
            if (cur.kind != JV_ARRAY)
                return cinfer_jinja_fail(rt, nd->a, CINFER_ERR_INVALID_ARGUMENT, "cannot unpack non-iterable type: %s",
                                         cinfer_jv_type_name(cur));
            if (cur.u.a->n != nd->a->list.n)
                return cinfer_jinja_fail(rt, nd->a, CINFER_ERR_INVALID_ARGUMENT, "too %s items to unpack",
                                         nd->a->list.n > cur.u.a->n ? "few" : "many");
        }
        if (test) {
            struct jinja_scope *ls = cinfer_jinja_scope_new(rt, sc);
            if (!ls)
                return cinfer_jinja_nomem(rt, nd);
            if ((rc = assign(rt, nd->a, cur, ls)))
                return rc;
            struct jv t;
            if ((rc = eval(rt, test, ls, &t)))
                return rc;
            if (!cinfer_jv_truthy(t))
                continue;
        }
        kept[nk++] = cur;
    }
    bool no_iteration = true;
    for (size_t i = 0; i < nk; i++) {
        if ((rc = step(rt, nd)))
            return rc;
        struct jv_object *loop = cinfer_jv_object_new(rt, 9);
        if (!loop)
            return cinfer_jinja_nomem(rt, nd);
        loop->n = 9;
        static const struct jstr keys[9] = {{"index", 5},     {"index0", 6}, {"revindex", 8},
                                            {"revindex0", 9}, {"first", 5},  {"last", 4},
                                            {"length", 6},    {"previtem", 8}, {"nextitem", 8}};
        memcpy(loop->keys, keys, sizeof(keys));
        loop->vals[0] = jv_int((double)i + 1);
        loop->vals[1] = jv_int((double)i);
        loop->vals[2] = jv_int((double)(nk - i));
        loop->vals[3] = jv_int((double)(nk - i - 1));
        loop->vals[4] = jv_bool(i == 0);
        loop->vals[5] = jv_bool(i == nk - 1);
        loop->vals[6] = jv_int((double)nk);
        loop->vals[7] = i > 0 ? kept[i - 1] : jv_undefined();
        loop->vals[8] = i + 1 < nk ? kept[i + 1] : jv_undefined();
        if (!cinfer_jinja_scope_set(rt, sc, (struct jstr){"loop", 4}, (struct jv){.kind = JV_OBJECT, .u.o = loop}))
            return cinfer_jinja_nomem(rt, nd);
        if (nd->a->kind == N_IDENT) {
            if (!cinfer_jinja_scope_set(rt, sc, nd->a->str, kept[i]))
                return cinfer_jinja_nomem(rt, nd);
        } else {
            for (size_t k = 0; k < nd->a->list.n; k++) {
                const struct jinja_node *e = nd->a->list.items[k];
                if (e->kind != N_IDENT)
                    return cinfer_jinja_fail(rt, e, CINFER_ERR_INVALID_ARGUMENT, "cannot unpack non-identifier type");
                if (!cinfer_jinja_scope_set(rt, sc, e->str, kept[i].u.a->items[k]))
                    return cinfer_jinja_nomem(rt, nd);
            }
        }
        size_t mark = out->n;
        rc = exec_block(rt, &nd->list, sc, out);
        if (rc == JINJA_CONTINUE || rc == JINJA_BREAK) {
            out->n = mark; /* the reference drops the output of an interrupted iteration */
            if (out->p)
                out->p[mark] = 0;
            if (rc == JINJA_BREAK)
                break;
            continue;
        }
        if (rc)
            return rc;
        no_iteration = false;
    }
    if (no_iteration)
        return exec_block(rt, &nd->list2, sc, out);
    return 0;
}

static int print_value(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jbuf *out)
{
    if (v.kind == JV_NULL || v.kind == JV_UNDEFINED)
        return 0;
    int rc = cinfer_jv_print(rt, at, v, out);
    if (!rc && out->failed)
        rc = out_fail(rt, at, out);
    return rc;
}

static int exec_statement(struct jinja_rt *rt, const struct jinja_node *nd, struct jinja_scope *sc, struct jbuf *out)
{
    int rc = step(rt, nd);
    if (rc)
        return rc;
    switch (nd->kind) {
    case N_TEXT:
        return cinfer_jbuf_append(out, nd->str.p, nd->str.n) ? 0 : out_fail(rt, nd, out);
    case N_COMMENT:
        return 0;
    case N_BREAK:
        return JINJA_BREAK;
    case N_CONTINUE:
        return JINJA_CONTINUE;
    case N_IF: {
        struct jv t;
        if ((rc = eval(rt, nd->a, sc, &t)))
            return rc;
        return exec_block(rt, cinfer_jv_truthy(t) ? &nd->list : &nd->list2, sc, out);
    }
    case N_FOR:
        return exec_for(rt, nd, sc, out);
    case N_SET: {
        struct jv v;
        if (nd->b)
            rc = eval(rt, nd->b, sc, &v);
        else
            rc = render_to_value(rt, nd, &nd->list, sc, &v);
        return rc ? rc : assign(rt, nd->a, v, sc);
    }
    case N_MACRO: {
        struct jv_func *f = cinfer_jinja_alloc(&rt->arena, sizeof(*f));
        if (!f)
            return cinfer_jinja_nomem(rt, nd);
        f->kind = F_MACRO;
        f->node = nd;
        return cinfer_jinja_scope_set(rt, sc, nd->str, (struct jv){.kind = JV_FUNCTION,
                                      .u.f = f}) ? 0 : cinfer_jinja_nomem(rt, nd);
    }
    case N_CALL_BLOCK: {
        struct jv_func *caller = cinfer_jinja_alloc(&rt->arena, sizeof(*caller));
        if (!caller)
            return cinfer_jinja_nomem(rt, nd);
        caller->kind = F_CALLER;
        caller->node = nd;
        caller->scope = sc;
        /* a caller is a macro whose parameters are the call block's */
        struct jinja_node *as_macro = cinfer_jinja_alloc(&rt->arena, sizeof(*as_macro));
        if (!as_macro)
            return cinfer_jinja_nomem(rt, nd);
        *as_macro = *nd;
        caller->node = as_macro;
        struct jv *args, fn, result;
        size_t nargs;
        if ((rc = eval_args(rt, &nd->a->list, sc, true, &args, &nargs)))
            return rc;
        if ((rc = eval(rt, nd->a->a, sc, &fn)))
            return rc;
        struct jinja_scope *call_scope = cinfer_jinja_scope_new(rt, sc);
        if (!call_scope ||
            !cinfer_jinja_scope_set(rt, call_scope, (struct jstr){"caller", 6}, (struct jv){.kind = JV_FUNCTION,
                                    .u.f = caller}))
            return cinfer_jinja_nomem(rt, nd);
        if ((rc = cinfer_jinja_call(rt, nd, fn, args, nargs, call_scope, &result)))
            return rc;
        return print_value(rt, nd, result, out);
    }
    case N_FILTER_BLOCK: {
        struct jv body, result;
        if ((rc = render_to_value(rt, nd, &nd->list, sc, &body)))
            return rc;
        if ((rc = apply_filter_node(rt, nd, body, nd->b, sc, &result)))
            return rc;
        return print_value(rt, nd, result, out);
    }
    default: {
        struct jv v;
        if ((rc = eval(rt, nd, sc, &v)))
            return rc;
        return print_value(rt, nd, v, out);
    }
    }
}

static int exec_block(struct jinja_rt *rt, const struct jinja_node_list *body, struct jinja_scope *sc, struct jbuf *out)
{
    if (++rt->depth > rt->max_depth) {
        rt->depth--;
        return cinfer_jinja_fail(rt, body->n ? body->items[0] : NULL, CINFER_ERR_RANGE, "blocks nested deeper than %d",
                                 rt->max_depth);
    }
    int rc = 0;
    for (size_t i = 0; i < body->n && !rc; i++)
        rc = exec_statement(rt, body->items[i], sc, out);
    rt->depth--;
    return rc;
}

static const char *const reserved_globals[] = {"namespace", "false", "true", "none", "raise_exception", "range",
                                                "strftime_now", "True", "False", "None", NULL};

int cinfer_jinja_render(struct jinja_rt *rt, const struct jinja_node_list *program, struct jv context, struct jbuf *out)
{
    struct jinja_scope *globals = cinfer_jinja_scope_new(rt, NULL);
    if (!globals)
        return cinfer_jinja_nomem(rt, NULL);
    rt->globals = globals;
    int rc = cinfer_jinja_define_globals(rt, globals);
    if (rc)
        return rc;
    for (size_t i = 0; i < context.u.o->n; i++) {
        struct jstr k = context.u.o->keys[i];
        for (size_t g = 0; reserved_globals[g]; g++)
            if (k.n == strlen(reserved_globals[g]) && memcmp(k.p, reserved_globals[g], k.n) == 0)
                return cinfer_jinja_fail(rt, NULL, CINFER_ERR_INVALID_ARGUMENT,
                                         "context: variable already declared: %s (a built-in name)",
                                         reserved_globals[g]);
        if (!cinfer_jinja_scope_set(rt, globals, k, context.u.o->vals[i]))
            return cinfer_jinja_nomem(rt, NULL);
    }
    rc = exec_block(rt, program, globals, out);
    if (rc == JINJA_BREAK || rc == JINJA_CONTINUE)
        return cinfer_jinja_fail(rt, NULL, CINFER_ERR_INVALID_ARGUMENT, "'%s' outside a loop",
                                 rc == JINJA_BREAK ? "break" : "continue");
    return rc;
}
