/* core/chat/jinja_parser.c — tokens to a syntax tree with @huggingface/jinja's grammar
 * and precedence (lowest first): ternary / select, or, and, not, comparison and
 * membership, + - ~, * / // %, **, is-tests, |filters, unary sign, calls and member
 * access, primaries. Errors name the line and column, what was expected and found. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/jinja.h"

#define JINJA_MAX_PARSE_DEPTH 200

struct parser {
    const struct jinja_token *t;
    size_t n, pos;
    const char *name;
    struct jinja_arena *arena;
    struct cinfer_error *err;
    int depth;
};

static const struct jinja_token *peek(const struct parser *p, size_t ahead)
{
    return p->pos + ahead < p->n ? &p->t[p->pos + ahead] : NULL;
}

__attribute__((format(printf, 3, 4))) static int fail(struct parser *p, const struct jinja_token *at, const char *fmt,
                                                      ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!at && p->n)
        at = &p->t[p->n - 1];
    if (!at)
        return cinfer_error_set(p->err, CINFER_ERR_PARSE, "%s: %s", p->name, msg);
    return cinfer_error_set(p->err, CINFER_ERR_PARSE, "%s:%d:%d: %s", p->name, at->line, at->col, msg);
}

/* "found ..." for messages: the token's text, or the end of the template. */
static const char *found(const struct parser *p, char *buf, size_t size)
{
    const struct jinja_token *t = peek(p, 0);
    if (!t)
        return "the end of the template";
    if (t->type == TK_TEXT)
        return "text";
    snprintf(buf, size, "'%.*s'", (int)(t->text.n > 40 ? 40 : t->text.n), t->text.p);
    return buf;
}

static bool is(const struct parser *p, enum jinja_tok type)
{
    const struct jinja_token *t = peek(p, 0);
    return t && t->type == type;
}

static bool is_ident(const struct parser *p, size_t ahead, const char *word)
{
    const struct jinja_token *t = peek(p, ahead);
    return t && t->type == TK_IDENT && t->text.n == strlen(word) && memcmp(t->text.p, word, t->text.n) == 0;
}

/* {% word ... for one of the words (NULL-terminated list) */
static bool is_statement(const struct parser *p, const char *const *words)
{
    if (!is(p, TK_OPEN_STMT))
        return false;
    for (; *words; words++)
        if (is_ident(p, 1, *words))
            return true;
    return false;
}

static int expect(struct parser *p, enum jinja_tok type, const char *context)
{
    if (is(p, type)) {
        p->pos++;
        return 0;
    }
    char buf[64];
    return fail(p, peek(p, 0), "expected %s %s, found %s", cinfer_jinja_tok_name(type), context, found(p, buf,
                                                                                                       sizeof(buf)));
}

static int expect_word(struct parser *p, const char *word, const char *context)
{
    if (is_ident(p, 0, word)) {
        p->pos++;
        return 0;
    }
    char buf[64];
    return fail(p, peek(p, 0), "expected '%s' %s, found %s", word, context, found(p, buf, sizeof(buf)));
}

static struct jinja_node *node(struct parser *p, enum jinja_node_kind kind, const struct jinja_token *at)
{
    struct jinja_node *nd = cinfer_jinja_alloc(p->arena, sizeof(*nd));
    if (!nd) {
        cinfer_error_set(p->err, CINFER_ERR_NOMEM, "%s: out of memory while parsing", p->name);
        return NULL;
    }
    nd->kind = kind;
    if (at) {
        nd->line = at->line;
        nd->col = at->col;
    }
    return nd;
}

static int list_push(struct parser *p, struct jinja_node_list *l, struct jinja_node *nd)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct jinja_node **items = cinfer_jinja_alloc(p->arena, cap * sizeof(*items));
        if (!items)
            return cinfer_error_set(p->err, CINFER_ERR_NOMEM, "%s: out of memory while parsing", p->name);
        if (l->n)
            memcpy(items, l->items, l->n * sizeof(*items));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = nd;
    return 0;
}

static int parse_any(struct parser *p, struct jinja_node **out);
static int parse_expression(struct parser *p, struct jinja_node **out);
static int parse_primary(struct parser *p, struct jinja_node **out);
static int parse_call(struct parser *p, struct jinja_node *callee, struct jinja_node **out);
static int parse_member(struct parser *p, struct jinja_node *object, struct jinja_node **out);

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        int rc_ = (x);                                                                                                 \
        if (rc_)                                                                                                       \
            return rc_;                                                                                                \
    } while (0)

/* Statements until one of the words ({% word) opens a statement. */
static int parse_body(struct parser *p, const char *const *until, struct jinja_node_list *body, const char *what,
                      const struct jinja_token *opened)
{
    static const char *const closers[] = {"endif", "endfor", "endmacro", "endset", "endcall", "endfilter",
                                          "elif", "else", NULL};
    while (!is_statement(p, until)) {
        if (is_statement(p, closers)) {
            const struct jinja_token *w = peek(p, 1);
            return fail(p, w, "expected '%s' to close '%s' (line %d), found '%.*s'", until[0], what, opened->line,
                        (int)w->text.n, w->text.p);
        }
        if (p->pos >= p->n)
            return fail(p, opened, "'%s' is never closed: expected {%% %s %%} before the end of the template", what,
                        until[0]);
        struct jinja_node *nd;
        TRY(parse_any(p, &nd));
        TRY(list_push(p, body, nd));
    }
    return 0;
}

enum args_mode { ARGS_CALL, ARGS_PARAMETERS };

static int parse_args(struct parser *p, enum args_mode mode, struct jinja_node_list *args)
{
    TRY(expect(p, TK_LPAREN, "to open the argument list"));
    bool saw_keyword = false, saw_spread = false;
    while (!is(p, TK_RPAREN)) {
        const struct jinja_token *at = peek(p, 0);
        if (!at)
            return fail(p, NULL, "expected ')' to close the argument list, found the end of the template");
        bool kw_spread = at->type == TK_POW;
        bool spread = at->type == TK_MUL && at->text.n == 1 && at->text.p[0] == '*';
        if (mode == ARGS_PARAMETERS && (kw_spread || spread))
            return fail(p, at, "argument unpacking is not allowed in parameter declarations");
        if (kw_spread) {
            p->pos++;
            struct jinja_node *nd = node(p, N_KWSPREAD, at);
            if (!nd)
                return CINFER_ERR_NOMEM;
            TRY(parse_expression(p, &nd->a));
            TRY(list_push(p, args, nd));
            if (is(p, TK_COMMA))
                p->pos++;
            if (!is(p, TK_RPAREN))
                return fail(p, peek(p, 0), "expected ')': '**' must be applied to the final argument");
            break;
        }
        struct jinja_node *arg;
        if (spread) {
            if (saw_spread)
                return fail(p, at, "only one '*' argument unpacking is allowed");
            saw_spread = true;
            p->pos++;
            arg = node(p, N_SPREAD, at);
            if (!arg)
                return CINFER_ERR_NOMEM;
            TRY(parse_expression(p, &arg->a));
        } else {
            TRY(parse_expression(p, &arg));
            if (is(p, TK_EQUALS)) {
                p->pos++;
                if (arg->kind != N_IDENT)
                    return fail(p, at, mode == ARGS_PARAMETERS ? "expected an identifier for a parameter declaration"
                                                               : "expected an identifier for a keyword argument");
                struct jinja_node *kw = node(p, N_KWARG, at);
                if (!kw)
                    return CINFER_ERR_NOMEM;
                kw->str = arg->str;
                TRY(parse_expression(p, &kw->a));
                arg = kw;
            }
            if (mode == ARGS_PARAMETERS) {
                if (arg->kind != N_IDENT && arg->kind != N_KWARG)
                    return fail(p, at, "expected an identifier for a parameter declaration");
                for (size_t i = 0; i < args->n; i++)
                    if (args->items[i]->str.n == arg->str.n && memcmp(args->items[i]->str.p, arg->str.p,
                                                                      arg->str.n) == 0)
                        return fail(p, at, "duplicate parameter name '%.*s'", (int)arg->str.n, arg->str.p);
            }
            if (arg->kind == N_KWARG)
                saw_keyword = true;
            else if (saw_keyword)
                return fail(p, at, mode == ARGS_CALL ? "positional arguments must come before keyword arguments"
                                                     : "non-default argument follows default argument");
            else if (saw_spread)
                return fail(p, at, "positional arguments must not follow '*' argument unpacking");
        }
        TRY(list_push(p, args, arg));
        if (is(p, TK_COMMA))
            p->pos++;
    }
    return expect(p, TK_RPAREN, "to close the argument list");
}

static int parse_sequence(struct parser *p, bool primary, struct jinja_node **out)
{
    const struct jinja_token *at = peek(p, 0);
    struct jinja_node *first;
    TRY(primary ? parse_primary(p, &first) : parse_expression(p, &first));
    if (!is(p, TK_COMMA)) {
        *out = first;
        return 0;
    }
    struct jinja_node *tuple = node(p, N_TUPLE, at);
    if (!tuple)
        return CINFER_ERR_NOMEM;
    TRY(list_push(p, &tuple->list, first));
    while (is(p, TK_COMMA)) {
        p->pos++;
        struct jinja_node *e;
        TRY(primary ? parse_primary(p, &e) : parse_expression(p, &e));
        TRY(list_push(p, &tuple->list, e));
    }
    *out = tuple;
    return 0;
}

static int parse_if(struct parser *p, const struct jinja_token *opened, struct jinja_node **out)
{
    static const char *const stops[] = {"endif", "elif", "else", NULL};
    static const char *const endif[] = {"endif", NULL};
    struct jinja_node *nd = node(p, N_IF, opened);
    if (!nd)
        return CINFER_ERR_NOMEM;
    TRY(parse_expression(p, &nd->a));
    TRY(expect(p, TK_CLOSE_STMT, "to close 'if'"));
    TRY(parse_body(p, stops, &nd->list, "if", opened));
    if (is_ident(p, 1, "elif")) {
        const struct jinja_token *elif = peek(p, 1);
        p->pos += 2;
        struct jinja_node *nested;
        TRY(parse_if(p, elif, &nested));
        TRY(list_push(p, &nd->list2, nested));
    } else if (is_ident(p, 1, "else")) {
        p->pos += 2;
        TRY(expect(p, TK_CLOSE_STMT, "to close 'else'"));
        TRY(parse_body(p, endif, &nd->list2, "if", opened));
    }
    *out = nd;
    return 0;
}

/* Whether a tree mentions the identifier (kwargs / varargs inside a macro body). */
static bool mentions(const struct jinja_node *nd, const char *word, int depth)
{
    if (!nd || depth > JINJA_MAX_PARSE_DEPTH * 4)
        return false;
    if (nd->kind == N_IDENT && nd->str.n == strlen(word) && memcmp(nd->str.p, word, nd->str.n) == 0)
        return true;
    if (mentions(nd->a, word, depth + 1) || mentions(nd->b, word, depth + 1) || mentions(nd->c, word, depth + 1))
        return true;
    for (size_t i = 0; i < nd->list.n; i++)
        if (mentions(nd->list.items[i], word, depth + 1))
            return true;
    for (size_t i = 0; i < nd->list2.n; i++)
        if (mentions(nd->list2.items[i], word, depth + 1))
            return true;
    return false;
}

static bool list_mentions(const struct jinja_node_list *l, const char *word)
{
    for (size_t i = 0; i < l->n; i++)
        if (mentions(l->items[i], word, 0))
            return true;
    return false;
}

static int parse_statement(struct parser *p, struct jinja_node **out)
{
    const struct jinja_token *open = peek(p, 0);
    p->pos++; /* {% */
    const struct jinja_token *kw = peek(p, 0);
    char buf[64];
    if (!kw || kw->type != TK_IDENT)
        return fail(p, kw ? kw : open, "expected a statement name after '{%%', found %s", found(p, buf, sizeof(buf)));
    const char *w = NULL;
    static const char *const words[] = {"set", "if", "macro", "for", "call", "break", "continue", "filter", NULL};
    for (size_t i = 0; words[i]; i++)
        if (is_ident(p, 0, words[i]))
            w = words[i];
    if (!w)
        return fail(p, kw, "unknown statement '%.*s'", (int)(kw->text.n > 40 ? 40 : kw->text.n), kw->text.p);
    p->pos++;
    struct jinja_node *nd;
    if (!strcmp(w, "set")) {
        static const char *const endset[] = {"endset", NULL};
        nd = node(p, N_SET, kw);
        if (!nd)
            return CINFER_ERR_NOMEM;
        TRY(parse_sequence(p, false, &nd->a));
        if (is(p, TK_EQUALS)) {
            p->pos++;
            TRY(parse_sequence(p, false, &nd->b));
        } else {
            TRY(expect(p, TK_CLOSE_STMT, "to close 'set'"));
            TRY(parse_body(p, endset, &nd->list, "set", kw));
            p->pos++;
            TRY(expect_word(p, "endset", "to close 'set'"));
        }
        TRY(expect(p, TK_CLOSE_STMT, "to close 'set'"));
    } else if (!strcmp(w, "if")) {
        TRY(parse_if(p, kw, &nd));
        TRY(expect(p, TK_OPEN_STMT, "to close 'if'"));
        TRY(expect_word(p, "endif", "to close 'if'"));
        TRY(expect(p, TK_CLOSE_STMT, "after 'endif'"));
    } else if (!strcmp(w, "macro")) {
        static const char *const endmacro[] = {"endmacro", NULL};
        nd = node(p, N_MACRO, kw);
        if (!nd)
            return CINFER_ERR_NOMEM;
        struct jinja_node *name;
        const struct jinja_token *nt = peek(p, 0);
        TRY(parse_primary(p, &name));
        if (name->kind != N_IDENT)
            return fail(p, nt, "expected the macro's name after 'macro'");
        nd->str = name->str;
        TRY(parse_args(p, ARGS_PARAMETERS, &nd->list));
        TRY(expect(p, TK_CLOSE_STMT, "to close 'macro'"));
        TRY(parse_body(p, endmacro, &nd->list2, "macro", kw));
        p->pos++;
        TRY(expect_word(p, "endmacro", "to close 'macro'"));
        TRY(expect(p, TK_CLOSE_STMT, "after 'endmacro'"));
        nd->uses_kwargs = list_mentions(&nd->list2, "kwargs");
        nd->uses_varargs = list_mentions(&nd->list2, "varargs");
    } else if (!strcmp(w, "for")) {
        static const char *const stops[] = {"endfor", "else", NULL};
        static const char *const endfor[] = {"endfor", NULL};
        nd = node(p, N_FOR, kw);
        if (!nd)
            return CINFER_ERR_NOMEM;
        const struct jinja_token *vt = peek(p, 0);
        TRY(parse_sequence(p, true, &nd->a));
        if (nd->a->kind != N_IDENT && nd->a->kind != N_TUPLE)
            return fail(p, vt, "expected an identifier or a tuple as the loop variable");
        if (!is_ident(p, 0, "in"))
            return fail(p, peek(p, 0), "expected 'in' after the loop variable, found %s", found(p, buf, sizeof(buf)));
        p->pos++;
        TRY(parse_expression(p, &nd->b));
        TRY(expect(p, TK_CLOSE_STMT, "to close 'for'"));
        TRY(parse_body(p, stops, &nd->list, "for", kw));
        if (is_ident(p, 1, "else")) {
            p->pos += 2;
            TRY(expect(p, TK_CLOSE_STMT, "to close 'else'"));
            TRY(parse_body(p, endfor, &nd->list2, "for", kw));
        }
        TRY(expect(p, TK_OPEN_STMT, "to close 'for'"));
        TRY(expect_word(p, "endfor", "to close 'for'"));
        TRY(expect(p, TK_CLOSE_STMT, "after 'endfor'"));
    } else if (!strcmp(w, "call")) {
        static const char *const endcall[] = {"endcall", NULL};
        nd = node(p, N_CALL_BLOCK, kw);
        if (!nd)
            return CINFER_ERR_NOMEM;
        if (is(p, TK_LPAREN)) {
            nd->flag = true;
            TRY(parse_args(p, ARGS_PARAMETERS, &nd->list));
        }
        const struct jinja_token *ct = peek(p, 0);
        struct jinja_node *callee;
        TRY(parse_primary(p, &callee));
        if (callee->kind != N_IDENT)
            return fail(p, ct, "expected an identifier after 'call'");
        nd->a = node(p, N_CALL, ct);
        if (!nd->a)
            return CINFER_ERR_NOMEM;
        nd->a->a = callee;
        TRY(parse_args(p, ARGS_CALL, &nd->a->list));
        TRY(expect(p, TK_CLOSE_STMT, "to close 'call'"));
        TRY(parse_body(p, endcall, &nd->list2, "call", kw));
        p->pos++;
        TRY(expect_word(p, "endcall", "to close 'call'"));
        TRY(expect(p, TK_CLOSE_STMT, "after 'endcall'"));
        nd->uses_kwargs = list_mentions(&nd->list2, "kwargs");
        nd->uses_varargs = list_mentions(&nd->list2, "varargs");
    } else if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        nd = node(p, w[0] == 'b' ? N_BREAK : N_CONTINUE, kw);
        if (!nd)
            return CINFER_ERR_NOMEM;
        TRY(expect(p, TK_CLOSE_STMT, w[0] == 'b' ? "after 'break'" : "after 'continue'"));
    } else { /* filter */
        static const char *const endfilter[] = {"endfilter", NULL};
        nd = node(p, N_FILTER_BLOCK, kw);
        if (!nd)
            return CINFER_ERR_NOMEM;
        TRY(parse_primary(p, &nd->b));
        if (nd->b->kind == N_IDENT && is(p, TK_LPAREN))
            TRY(parse_call(p, nd->b, &nd->b));
        TRY(expect(p, TK_CLOSE_STMT, "to close 'filter'"));
        TRY(parse_body(p, endfilter, &nd->list, "filter", kw));
        p->pos++;
        TRY(expect_word(p, "endfilter", "to close 'filter'"));
        TRY(expect(p, TK_CLOSE_STMT, "after 'endfilter'"));
    }
    *out = nd;
    return 0;
}

static int parse_any(struct parser *p, struct jinja_node **out)
{
    const struct jinja_token *t = peek(p, 0);
    if (!t)
        return fail(p, NULL, "unexpected end of the template");
    if (++p->depth > JINJA_MAX_PARSE_DEPTH)
        return fail(p, t, "blocks nested deeper than %d", JINJA_MAX_PARSE_DEPTH);
    int rc = 0;
    switch (t->type) {
    case TK_COMMENT:
    case TK_TEXT:
        *out = node(p, t->type == TK_TEXT ? N_TEXT : N_COMMENT, t);
        if (!*out) {
            rc = CINFER_ERR_NOMEM;
            break;
        }
        (*out)->str = t->text;
        p->pos++;
        break;
    case TK_OPEN_STMT:
        rc = parse_statement(p, out);
        break;
    case TK_OPEN_EXPR:
        p->pos++;
        rc = parse_expression(p, out);
        if (!rc)
            rc = expect(p, TK_CLOSE_EXPR, "to close '{{'");
        break;
    default: {
        char buf[64];
        rc = fail(p, t, "unexpected %s outside a tag", found(p, buf, sizeof(buf)));
    }
    }
    p->depth--;
    return rc;
}

/* ---- expressions ---------------------------------------------------------------------- */

static int binary(struct parser *p, enum jinja_op op, const struct jinja_token *at, struct jinja_node *l,
                  struct jinja_node *r, struct jinja_node **out)
{
    struct jinja_node *nd = node(p, N_BINARY, at);
    if (!nd)
        return CINFER_ERR_NOMEM;
    nd->op = op;
    nd->a = l;
    nd->b = r;
    *out = nd;
    return 0;
}

static int parse_or(struct parser *p, struct jinja_node **out);

static int parse_if_expr(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *a;
    TRY(parse_or(p, &a));
    if (!is_ident(p, 0, "if")) {
        *out = a;
        return 0;
    }
    const struct jinja_token *at = peek(p, 0);
    p->pos++;
    struct jinja_node *test;
    TRY(parse_or(p, &test));
    if (is_ident(p, 0, "else")) {
        p->pos++;
        struct jinja_node *nd = node(p, N_TERNARY, at);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->a = test;
        nd->b = a;
        TRY(parse_if_expr(p, &nd->c));
        *out = nd;
        return 0;
    }
    struct jinja_node *nd = node(p, N_SELECT, at);
    if (!nd)
        return CINFER_ERR_NOMEM;
    nd->a = a;
    nd->b = test;
    *out = nd;
    return 0;
}

static int parse_expression(struct parser *p, struct jinja_node **out)
{
    if (++p->depth > JINJA_MAX_PARSE_DEPTH)
        return fail(p, peek(p, 0), "expression nested deeper than %d", JINJA_MAX_PARSE_DEPTH);
    int rc = parse_if_expr(p, out);
    p->depth--;
    return rc;
}

static int parse_not(struct parser *p, struct jinja_node **out);

static int parse_and(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *l = NULL;
    TRY(parse_not(p, &l));
    while (is_ident(p, 0, "and")) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        struct jinja_node *r = NULL;
        TRY(parse_not(p, &r));
        TRY(binary(p, OP_AND, at, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_or(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *l = NULL;
    TRY(parse_and(p, &l));
    while (is_ident(p, 0, "or")) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        struct jinja_node *r = NULL;
        TRY(parse_and(p, &r));
        TRY(binary(p, OP_OR, at, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_comparison(struct parser *p, struct jinja_node **out);

static int parse_not(struct parser *p, struct jinja_node **out)
{
    if (!is_ident(p, 0, "not"))
        return parse_comparison(p, out);
    const struct jinja_token *at = peek(p, 0);
    p->pos++;
    if (++p->depth > JINJA_MAX_PARSE_DEPTH)
        return fail(p, at, "expression nested deeper than %d", JINJA_MAX_PARSE_DEPTH);
    struct jinja_node *nd = node(p, N_UNARY, at);
    if (!nd)
        return CINFER_ERR_NOMEM;
    nd->op = OP_NOT;
    TRY(parse_not(p, &nd->a));
    p->depth--;
    *out = nd;
    return 0;
}

static int parse_additive(struct parser *p, struct jinja_node **out);

static enum jinja_op cmp_op(struct jstr s)
{
    if (s.n == 1)
        return s.p[0] == '<' ? OP_LT : OP_GT;
    switch (s.p[0]) {
    case '<':
        return OP_LE;
    case '>':
        return OP_GE;
    case '=':
        return OP_EQ;
    default:
        return OP_NE;
    }
}

static int parse_comparison(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *l = NULL;
    TRY(parse_additive(p, &l));
    while (true) {
        const struct jinja_token *at = peek(p, 0);
        enum jinja_op op;
        if (is_ident(p, 0, "not") && is_ident(p, 1, "in")) {
            op = OP_NOT_IN;
            p->pos += 2;
        } else if (is_ident(p, 0, "in")) {
            op = OP_IN;
            p->pos++;
        } else if (is(p, TK_CMP)) {
            op = cmp_op(at->text);
            p->pos++;
        } else {
            break;
        }
        struct jinja_node *r = NULL;
        TRY(parse_additive(p, &r));
        TRY(binary(p, op, at, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_multiplicative(struct parser *p, struct jinja_node **out);

static int parse_additive(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *l = NULL;
    TRY(parse_multiplicative(p, &l));
    while (is(p, TK_ADD)) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        struct jinja_node *r = NULL;
        TRY(parse_multiplicative(p, &r));
        enum jinja_op op = at->text.p[0] == '+' ? OP_ADD : at->text.p[0] == '-' ? OP_SUB : OP_CONCAT;
        TRY(binary(p, op, at, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_power(struct parser *p, struct jinja_node **out);

static int parse_multiplicative(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *l = NULL;
    TRY(parse_power(p, &l));
    while (is(p, TK_MUL)) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        struct jinja_node *r = NULL;
        TRY(parse_power(p, &r));
        enum jinja_op op = at->text.n == 2 ? OP_FLOORDIV : at->text.p[0] == '*' ? OP_MUL
                                                       : at->text.p[0] == '/' ? OP_DIV : OP_MOD;
        TRY(binary(p, op, at, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_test(struct parser *p, struct jinja_node **out);

static int parse_power(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *l = NULL;
    TRY(parse_test(p, &l));
    while (is(p, TK_POW)) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        struct jinja_node *r = NULL;
        TRY(parse_test(p, &r));
        TRY(binary(p, OP_POW, at, l, r, &l));
    }
    *out = l;
    return 0;
}

static int parse_filter(struct parser *p, struct jinja_node **out);

static int parse_test(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *operand = NULL; /* set by TRY below; gcc -O2 cannot see it */
    TRY(parse_filter(p, &operand));
    while (is_ident(p, 0, "is")) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        bool negate = is_ident(p, 0, "not");
        if (negate)
            p->pos++;
        const struct jinja_token *tt = peek(p, 0);
        struct jinja_node *name;
        TRY(parse_primary(p, &name));
        if (name->kind != N_IDENT)
            return fail(p, tt, "expected the name of a test after 'is'");
        struct jinja_node *nd = node(p, N_TEST, at);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->a = operand;
        nd->flag = negate;
        nd->str = name->str;
        operand = nd;
    }
    *out = operand;
    return 0;
}

static int parse_unary_sign(struct parser *p, struct jinja_node **out);

static int parse_filter(struct parser *p, struct jinja_node **out)
{
    struct jinja_node *operand = NULL;
    TRY(parse_unary_sign(p, &operand));
    while (is(p, TK_PIPE)) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        const struct jinja_token *ft = peek(p, 0);
        struct jinja_node *filter;
        TRY(parse_primary(p, &filter));
        if (filter->kind != N_IDENT)
            return fail(p, ft, "expected the name of a filter after '|'");
        if (is(p, TK_LPAREN))
            TRY(parse_call(p, filter, &filter));
        struct jinja_node *nd = node(p, N_FILTER, at);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->a = operand;
        nd->b = filter;
        operand = nd;
    }
    *out = operand;
    return 0;
}

static int parse_unary_sign(struct parser *p, struct jinja_node **out)
{
    const struct jinja_token *t = peek(p, 0);
    if (t && (t->type == TK_UNARY || t->type == TK_ADD) && t->text.n == 1 && (t->text.p[0] == '-' || t->text.p[0] == '+')) {
        p->pos++;
        if (++p->depth > JINJA_MAX_PARSE_DEPTH)
            return fail(p, t, "expression nested deeper than %d", JINJA_MAX_PARSE_DEPTH);
        struct jinja_node *nd = node(p, N_UNARY, t);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->op = t->text.p[0] == '-' ? OP_SUB : OP_ADD;
        TRY(parse_unary_sign(p, &nd->a));
        p->depth--;
        *out = nd;
        return 0;
    }
    struct jinja_node *member;
    TRY(parse_primary(p, &member));
    TRY(parse_member(p, member, &member));
    if (is(p, TK_LPAREN))
        return parse_call(p, member, out);
    *out = member;
    return 0;
}

static int parse_call(struct parser *p, struct jinja_node *callee, struct jinja_node **out)
{
    while (true) {
        struct jinja_node *nd = node(p, N_CALL, NULL);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->line = callee->line; /* errors of a call point at what is called */
        nd->col = callee->col;
        nd->a = callee;
        TRY(parse_args(p, ARGS_CALL, &nd->list));
        TRY(parse_member(p, nd, &callee));
        if (!is(p, TK_LPAREN))
            break;
    }
    *out = callee;
    return 0;
}

static int parse_subscript(struct parser *p, const struct jinja_token *at, struct jinja_node **out)
{
    struct jinja_node *slots[4] = {0};
    size_t n = 0;
    bool slice = false;
    while (!is(p, TK_RBRACKET)) {
        if (!peek(p, 0))
            return fail(p, NULL, "expected ']' to close '[', found the end of the template");
        if (n == 4)
            return fail(p, at, "expected at most 3 parts in a slice");
        if (is(p, TK_COLON)) {
            slots[n++] = NULL;
            p->pos++;
            slice = true;
        } else {
            TRY(parse_expression(p, &slots[n++]));
            if (is(p, TK_COLON)) {
                p->pos++;
                slice = true;
            }
        }
    }
    if (n == 0)
        return fail(p, at, "expected an index or a slice inside '[]'");
    if (!slice) {
        *out = slots[0];
        return 0;
    }
    if (n > 3)
        return fail(p, at, "expected at most 3 parts in a slice");
    struct jinja_node *nd = node(p, N_SLICE, at);
    if (!nd)
        return CINFER_ERR_NOMEM;
    nd->a = slots[0];
    nd->b = slots[1];
    nd->c = slots[2];
    *out = nd;
    return 0;
}

static int parse_member(struct parser *p, struct jinja_node *object, struct jinja_node **out)
{
    while (is(p, TK_DOT) || is(p, TK_LBRACKET)) {
        const struct jinja_token *at = peek(p, 0);
        p->pos++;
        struct jinja_node *nd = node(p, N_MEMBER, at);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->a = object;
        if (at->type == TK_LBRACKET) {
            nd->flag = true;
            TRY(parse_subscript(p, at, &nd->b));
            TRY(expect(p, TK_RBRACKET, "to close '['"));
        } else {
            const struct jinja_token *pt = peek(p, 0);
            TRY(parse_primary(p, &nd->b));
            if (nd->b->kind != N_IDENT && nd->b->kind != N_INT)
                return fail(p, pt, "expected an identifier or an integer after '.'");
        }
        object = nd;
    }
    *out = object;
    return 0;
}

static int parse_primary(struct parser *p, struct jinja_node **out)
{
    const struct jinja_token *t = peek(p, 0);
    if (!t)
        return fail(p, NULL, "expected an expression, found the end of the template");
    if (++p->depth > JINJA_MAX_PARSE_DEPTH)
        return fail(p, t, "expression nested deeper than %d", JINJA_MAX_PARSE_DEPTH);
    p->pos++;
    struct jinja_node *nd = NULL;
    switch (t->type) {
    case TK_NUMBER: {
        bool is_float = memchr(t->text.p, '.', t->text.n) != NULL;
        nd = node(p, is_float ? N_FLOAT : N_INT, t);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->num = cinfer_jinja_js_string_to_number(t->text);
        break;
    }
    case TK_STRING: {
        nd = node(p, N_STRING, t);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->str = t->text;
        if (is(p, TK_STRING)) { /* adjacent literals join */
            struct jbuf b = {0};
            cinfer_jbuf_append(&b, t->text.p, t->text.n);
            while (is(p, TK_STRING)) {
                cinfer_jbuf_append(&b, peek(p, 0)->text.p, peek(p, 0)->text.n);
                p->pos++;
            }
            char *copy = b.failed ? NULL : cinfer_jinja_alloc(p->arena, b.n + 1);
            if (copy)
                memcpy(copy, b.p, b.n);
            nd->str = (struct jstr){copy, b.n};
            cinfer_jbuf_free(&b);
            if (!copy)
                return cinfer_error_set(p->err, CINFER_ERR_NOMEM, "%s: out of memory while parsing", p->name);
        }
        break;
    }
    case TK_IDENT:
        nd = node(p, N_IDENT, t);
        if (!nd)
            return CINFER_ERR_NOMEM;
        nd->str = t->text;
        break;
    case TK_LPAREN:
        TRY(parse_sequence(p, false, &nd));
        TRY(expect(p, TK_RPAREN, "to close '('"));
        break;
    case TK_LBRACKET:
        nd = node(p, N_ARRAY, t);
        if (!nd)
            return CINFER_ERR_NOMEM;
        while (!is(p, TK_RBRACKET)) {
            if (!peek(p, 0))
                return fail(p, t, "expected ']' to close the list, found the end of the template");
            struct jinja_node *e;
            TRY(parse_expression(p, &e));
            TRY(list_push(p, &nd->list, e));
            if (is(p, TK_COMMA))
                p->pos++;
        }
        p->pos++;
        break;
    case TK_LBRACE:
        nd = node(p, N_OBJECT, t);
        if (!nd)
            return CINFER_ERR_NOMEM;
        while (!is(p, TK_RBRACE)) {
            if (!peek(p, 0))
                return fail(p, t, "expected '}' to close the dict, found the end of the template");
            struct jinja_node *k, *v;
            TRY(parse_expression(p, &k));
            TRY(expect(p, TK_COLON, "between a key and its value"));
            TRY(parse_expression(p, &v));
            TRY(list_push(p, &nd->list, k));
            TRY(list_push(p, &nd->list2, v));
            if (is(p, TK_COMMA))
                p->pos++;
        }
        p->pos++;
        break;
    default: {
        p->pos--;
        char buf[64];
        return fail(p, t, "expected an expression, found %s", found(p, buf, sizeof(buf)));
    }
    }
    p->depth--;
    *out = nd;
    return 0;
}

int cinfer_jinja_parse(const struct jinja_tokens *tokens, const char *name, struct jinja_arena *arena,
                       struct jinja_node_list *program, struct cinfer_error *err)
{
    struct parser p = {.t = tokens->items, .n = tokens->n, .name = name, .arena = arena, .err = err};
    memset(program, 0, sizeof(*program));
    while (p.pos < p.n) {
        struct jinja_node *nd;
        TRY(parse_any(&p, &nd));
        TRY(list_push(&p, program, nd));
    }
    return 0;
}
