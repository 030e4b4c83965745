/* core/chat/jinja.h — the chat-template interpreter's internals, shared by its files:
 *   jinja_arena.c     the allocator (one arena per compiled template, one per render)
 *   jinja_text.c      UTF-8 / UTF-16 helpers, JavaScript whitespace, number formatting
 *   jinja_lexer.c     source -> tokens (with the official renderer's preprocessing)
 *   jinja_parser.c    tokens -> syntax tree
 *   jinja_value.c     runtime values: JSON context in, printing and tojson out
 *   jinja_builtins.c  filters, tests, string/dict methods, global functions
 *   jinja_eval.c      the tree-walking evaluator
 *   chat_template.c   the public API (include/cinfer/chat_template.h)
 *
 * The reference is @huggingface/jinja (the renderer of transformers.js): strings are
 * measured and indexed in UTF-16 code units, numbers are doubles, values print the
 * way that renderer prints them. Strings are kept as UTF-8 ("WTF-8": a lone surrogate
 * is kept as its 3-byte form and turned into U+FFFD only in the final output). */
#ifndef CINFER_CHAT_JINJA_H
#define CINFER_CHAT_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

/* ---- arena -------------------------------------------------------------------------- */

struct jinja_arena_block;
struct jinja_arena {
    struct jinja_arena_block *head;
    size_t used_bytes;
    size_t limit_bytes; /* 0: no limit */
};

/* Zeroed memory that lives until cinfer_jinja_arena_free; NULL when out of memory or over
 * the arena's limit. */
void *cinfer_jinja_alloc(struct jinja_arena *a, size_t n);
void cinfer_jinja_arena_free(struct jinja_arena *a);

/* ---- text --------------------------------------------------------------------------- */

struct jstr {
    const char *p;
    size_t n;
};

/* A growable byte buffer (malloc'd, not in an arena); limit_bytes bounds its size. */
struct jbuf {
    char *p;
    size_t n, cap;
    size_t limit_bytes;
    bool failed; /* an append failed (no memory or over the limit) */
};
bool cinfer_jbuf_append(struct jbuf *b, const char *s, size_t n);
bool cinfer_jbuf_puts(struct jbuf *b, const char *s);
bool cinfer_jbuf_putc(struct jbuf *b, char c);
void cinfer_jbuf_free(struct jbuf *b);

/* Byte length of the JavaScript whitespace character (String.prototype.trim's set,
 * which is also the regular expression \s) at p, or 0. */
size_t cinfer_jinja_js_space_len(const char *p, const char *end);
/* Byte length of the JavaScript whitespace character ending at end, or 0. */
size_t cinfer_jinja_js_space_len_before(const char *start, const char *end);
/* Length of one UTF-8/WTF-8 sequence at p (1 for an invalid byte). */
size_t cinfer_jinja_utf8_seq_len(const char *p, const char *end);
/* Decodes one code point (surrogates allowed); advances *p. */
uint32_t cinfer_jinja_utf8_decode(const char **p, const char *end);
/* Encodes cp (surrogates as 3 bytes); returns the byte count (out holds 4). */
size_t cinfer_jinja_utf8_encode(uint32_t cp, char *out);
/* Number of UTF-16 code units of s. */
size_t cinfer_jinja_utf16_len(struct jstr s);
/* Source bytes as a JavaScript string would see them: invalid UTF-8 becomes U+FFFD
 * (one per maximal invalid subpart, as TextDecoder does); map[i] is the source offset
 * of output byte i. */
bool cinfer_jinja_utf8_sanitize(const char *src, size_t len, struct jbuf *out, size_t **map);
/* Output as JavaScript would write it in UTF-8: surrogate pairs joined, lone
 * surrogates as U+FFFD. In place; returns the new length. */
size_t cinfer_jinja_wtf8_to_utf8(char *s, size_t n);
/* Number formatting of JavaScript's Number.prototype.toString; out holds 32 bytes. */
void cinfer_jinja_js_number(double v, char *out);
/* JavaScript's ToNumber of a string (NaN when it is not a number). */
double cinfer_jinja_js_string_to_number(struct jstr s);
/* JavaScript's parseInt(s, 10) and parseFloat(s); NaN when there is no number. */
double cinfer_jinja_js_parse_int(struct jstr s);
double cinfer_jinja_js_parse_float(struct jstr s);
/* Unicode case mapping (Latin, Greek, Cyrillic; other scripts unchanged). */
bool cinfer_jinja_case_map(struct jstr s, bool upper, struct jbuf *out);

/* ---- tokens ------------------------------------------------------------------------- */

enum jinja_tok {
    TK_TEXT,
    TK_NUMBER,
    TK_STRING,
    TK_IDENT,
    TK_EQUALS,
    TK_LPAREN,
    TK_RPAREN,
    TK_OPEN_STMT,
    TK_CLOSE_STMT,
    TK_OPEN_EXPR,
    TK_CLOSE_EXPR,
    TK_LBRACKET,
    TK_RBRACKET,
    TK_LBRACE,
    TK_RBRACE,
    TK_COMMA,
    TK_DOT,
    TK_COLON,
    TK_PIPE,
    TK_ADD,   /* + - ~ */
    TK_MUL,   /* * / // % */
    TK_POW,   /* ** */
    TK_CMP,   /* < > <= >= == != */
    TK_UNARY, /* - + before an operand */
    TK_COMMENT,
};
const char *cinfer_jinja_tok_name(enum jinja_tok t);

struct jinja_token {
    enum jinja_tok type;
    struct jstr text;
    int line, col; /* in the original source, from 1 */
};

struct jinja_tokens {
    struct jinja_token *items;
    size_t n;
};

/* Preprocesses (trailing newline, lstrip_blocks, trim_blocks, generation tags) and
 * tokenizes. Errors are "name:line:col: ...". */
int cinfer_jinja_tokenize(const char *source, size_t len, const char *name, struct jinja_arena *arena,
                          struct jinja_tokens *out, struct cinfer_error *err);

/* ---- syntax tree -------------------------------------------------------------------- */

enum jinja_node_kind {
    /* statements */
    N_TEXT, /* str */
    N_COMMENT,
    N_IF,           /* a test, list body, list2 alternate */
    N_FOR,          /* a loop variable, b iterable, list body, list2 else */
    N_SET,          /* a target, b value (NULL: block set), list body */
    N_MACRO,        /* str name, list parameters, list2 body */
    N_CALL_BLOCK,   /* a call (N_CALL), list caller parameters, list2 body */
    N_FILTER_BLOCK, /* b filter (N_IDENT or N_CALL), list body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    N_INT,     /* num */
    N_FLOAT,   /* num */
    N_STRING,  /* str */
    N_ARRAY,   /* list */
    N_TUPLE,   /* list */
    N_OBJECT,  /* list keys, list2 values */
    N_IDENT,   /* str */
    N_CALL,    /* a callee, list arguments */
    N_MEMBER,  /* a object, b property, flag computed */
    N_SLICE,   /* a start, b stop, c step (each may be NULL) */
    N_UNARY,   /* op, a */
    N_BINARY,  /* op, a, b */
    N_FILTER,  /* a operand, b filter (N_IDENT or N_CALL) */
    N_TEST,    /* a operand, str test name, flag negated */
    N_SELECT,  /* a value, b condition ("x if c" without else) */
    N_TERNARY, /* a condition, b if true, c if false */
    N_KWARG,   /* str name, a value */
    N_SPREAD,  /* a: *value */
    N_KWSPREAD /* a: **value */
};

enum jinja_op {
    OP_NONE,
    OP_AND,
    OP_OR,
    OP_NOT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
    OP_IN,
    OP_NOT_IN,
    OP_ADD,
    OP_SUB,
    OP_CONCAT,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
};

struct jinja_node;
struct jinja_node_list {
    struct jinja_node **items;
    size_t n, cap;
};

struct jinja_node {
    enum jinja_node_kind kind;
    enum jinja_op op;
    int line, col;
    bool flag;
    bool uses_kwargs, uses_varargs; /* N_MACRO, N_CALL_BLOCK */
    double num;
    struct jstr str;
    struct jinja_node *a, *b, *c;
    struct jinja_node_list list, list2;
};

/* Parses tokens into a program (a list of statements). */
int cinfer_jinja_parse(const struct jinja_tokens *tokens, const char *name, struct jinja_arena *arena,
                       struct jinja_node_list *program, struct cinfer_error *err);

/* ---- runtime values ----------------------------------------------------------------- */

enum jv_kind {
    JV_UNDEFINED,
    JV_NULL,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STRING,
    JV_ARRAY,
    JV_TUPLE,     /* an array for every purpose but the "iterable" test */
    JV_OBJECT,
    JV_KWARGS,    /* keyword arguments passed as the last argument of a call */
    JV_NAMESPACE, /* namespace(): attributes only, mutable */
    JV_FUNCTION,
};

struct jv_array;
struct jv_object;
struct jv_func;
struct jv {
    enum jv_kind kind;
    union {
        bool b;
        double num;
        struct jstr s;
        struct jv_array *a;
        struct jv_object *o;
        struct jv_func *f;
    } u;
};

struct jv_array {
    struct jv *items;
    size_t n;
};

struct jv_object {
    struct jstr *keys;
    struct jv *vals;
    size_t n, cap;
};

static inline bool jv_is_array(struct jv v) { return v.kind == JV_ARRAY || v.kind == JV_TUPLE; }
static inline bool jv_is_object(struct jv v) { return v.kind == JV_OBJECT || v.kind == JV_KWARGS; }
static inline bool jv_is_number(struct jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT; }
static inline struct jv jv_undefined(void) { return (struct jv){.kind = JV_UNDEFINED}; }
static inline struct jv jv_null(void) { return (struct jv){.kind = JV_NULL}; }
static inline struct jv jv_bool(bool b) { return (struct jv){.kind = JV_BOOL, .u.b = b}; }
static inline struct jv jv_int(double n) { return (struct jv){.kind = JV_INT, .u.num = n}; }
static inline struct jv jv_float(double n) { return (struct jv){.kind = JV_FLOAT, .u.num = n}; }
static inline struct jv jv_str(struct jstr s) { return (struct jv){.kind = JV_STRING, .u.s = s}; }

/* The runtime: one per render. */
struct jinja_scope;
struct jinja_rt {
    struct jinja_arena arena;
    const char *name;
    struct cinfer_error *err;
    size_t steps, max_steps;
    int depth, max_depth;
    size_t max_output_bytes;
    struct jinja_scope *globals;
};

/* Fails the render: "name:line:col: message" (node may be NULL). Returns CINFER_ERR_PARSE
 * (or the code already in err when cinfer_error was filled by a deeper call). */
int cinfer_jinja_fail(struct jinja_rt *rt, const struct jinja_node *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int cinfer_jinja_nomem(struct jinja_rt *rt, const struct jinja_node *at);

const char *cinfer_jv_type_name(struct jv v); /* "StringValue", ... as the reference names them */
bool cinfer_jv_truthy(struct jv v);
struct jv_array *cinfer_jv_array_new(struct jinja_rt *rt, size_t n);
struct jv_object *cinfer_jv_object_new(struct jinja_rt *rt, size_t cap);
/* Sets key (replacing in place when present). */
bool cinfer_jv_object_set(struct jinja_rt *rt, struct jv_object *o, struct jstr key, struct jv val);
/* NULL when absent. */
struct jv *cinfer_jv_object_get(const struct jv_object *o, struct jstr key);
bool cinfer_jv_strdup(struct jinja_rt *rt, const char *p, size_t n, struct jstr *out);
bool cinfer_jv_from_buf(struct jinja_rt *rt, const struct jbuf *b, struct jv *out);
/* The JSON context as values; keys ordered as JavaScript orders an object's keys. */
int cinfer_jv_from_json(struct jinja_rt *rt, const char *json, size_t len, struct jv *out);

/* Appends what printing v ({{ v }}) writes. */
int cinfer_jv_print(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jbuf *out);
/* Appends JavaScript's String(v.value) (the "~" and "+" operators, |join). */
int cinfer_jv_js_string(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, struct jbuf *out);

struct jinja_json_opts {
    int indent; /* 0: none */
    bool ensure_ascii, sort_keys, undefined_as_null;
    const char *item_sep, *key_sep; /* NULL: the defaults */
};
int cinfer_jv_to_json(struct jinja_rt *rt, const struct jinja_node *at, struct jv v, const struct jinja_json_opts *opts,
                      int depth, struct jbuf *out);
/* Loose (==) and strict (===) equality of the values as JavaScript compares them. */
int cinfer_jv_loose_equal(struct jinja_rt *rt, const struct jinja_node *at, struct jv a, struct jv b, bool *eq);
bool cinfer_jv_strict_equal(struct jv a, struct jv b);
/* compareRuntimeValues of the reference (sort, dictsort): -1, 0, 1. */
int cinfer_jv_compare(struct jinja_rt *rt, const struct jinja_node *at, struct jv a, struct jv b, bool case_sensitive,
                      int *result);

/* ---- functions and builtins --------------------------------------------------------- */

typedef int (*jinja_builtin_fn)(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jv *args,
                                size_t nargs, struct jv *out);
enum jv_func_kind { F_BUILTIN, F_MACRO, F_CALLER };
struct jv_func {
    enum jv_func_kind kind;
    jinja_builtin_fn fn;
    struct jv self;                /* F_BUILTIN: the value a method is bound to */
    const struct jinja_node *node; /* F_MACRO: the macro; F_CALLER: the call block */
    struct jinja_scope *scope;     /* F_CALLER: the scope of the call block */
};

/* Member "name" of a value's built-ins (string methods, dict methods, length), or
 * undefined. */
int cinfer_jinja_builtin_member(struct jinja_rt *rt, const struct jinja_node *at, struct jv self, struct jstr name,
                                struct jv *out);
/* The global functions: namespace, raise_exception, range, strftime_now. */
int cinfer_jinja_define_globals(struct jinja_rt *rt, struct jinja_scope *scope);
/* Filter "operand | name" or "operand | name(args)" with evaluated arguments (call is
 * false for the first form). */
int cinfer_jinja_apply_filter(struct jinja_rt *rt, const struct jinja_node *at, struct jv operand, struct jstr name,
                              bool call, struct jv *args, size_t nargs, struct jv *out);
/* Test "operand is name"; rest are extra arguments (selectattr's value). */
int cinfer_jinja_apply_test(struct jinja_rt *rt, const struct jinja_node *at, struct jstr name, struct jv operand,
                            const struct jv *rest, size_t nrest, bool *out);
/* Splits trailing keyword arguments off: returns the kwargs object or NULL. */
struct jv_object *cinfer_jinja_split_kwargs(struct jv *args, size_t *nargs);

/* ---- evaluator ---------------------------------------------------------------------- */

bool cinfer_jinja_scope_set(struct jinja_rt *rt, struct jinja_scope *s, struct jstr name, struct jv v);
struct jinja_scope *cinfer_jinja_scope_new(struct jinja_rt *rt, struct jinja_scope *parent);
/* Calls a function value (builtin, macro or caller) with evaluated arguments. */
int cinfer_jinja_call(struct jinja_rt *rt, const struct jinja_node *at, struct jv fn, struct jv *args, size_t nargs,
                      struct jinja_scope *scope, struct jv *out);
/* Renders program with the context into out (WTF-8). */
int cinfer_jinja_render(struct jinja_rt *rt, const struct jinja_node_list *program, struct jv context,
                        struct jbuf *out);

/* ---- limits (chat_template.c) -------------------------------------------------------- */

struct cinfer_chat_template;
struct jinja_limits {
    size_t max_output_bytes; /* the rendered text and every string built on the way */
    size_t max_memory_bytes; /* all values of one render */
    size_t max_steps;        /* evaluated nodes and loop iterations */
    int max_depth;           /* nested blocks, expressions and macro calls */
};
/* The defaults of cinfer_chat_template_render. */
void cinfer_jinja_default_limits(struct jinja_limits *l);
/* cinfer_chat_template_render with other bounds (the fuzz target uses small ones). */
int cinfer_jinja_render_with_limits(const struct cinfer_chat_template *t, const char *context_json, size_t context_len,
                                    const struct jinja_limits *limits, char **out, size_t *out_len,
                                    struct cinfer_error *err);

#endif
