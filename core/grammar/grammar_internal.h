/* The grammar's internal forms: the parsed expression tree and the compiled automata
 * (grammar.h says what each is for). */
#ifndef CINFER_GRAMMAR_INTERNAL_H
#define CINFER_GRAMMAR_INTERNAL_H

#include <stdint.h>

#include "grammar/grammar.h"

/* ---- expression tree (grammar_parse.c) ---------------------------------------- */
enum gx_kind { GX_EMPTY, GX_BYTES, GX_CLASS, GX_REF, GX_SEQ, GX_ALT, GX_REPEAT };
struct gx {
    enum gx_kind kind;
    /* GX_BYTES: the literal's UTF-8 */
    uint8_t *bytes;
    int n_bytes;
    /* GX_CLASS: code point ranges, sorted and disjoint, after negation */
    uint32_t *ranges; /* (2 * n_ranges): lo, hi inclusive */
    int n_ranges;
    /* GX_REF */
    int rule;
    /* GX_SEQ, GX_ALT: children; GX_REPEAT: kids[0] */
    struct gx **kids;
    int n_kids;
    int min, max; /* GX_REPEAT: max -1 for unbounded */
};
void cinfer_gx_free(struct gx *x);

struct grammar_rules {
    int n;
    char **names;
    struct gx **body;   /* NULL until defined */
    int *line;          /* where first referenced or defined, for errors */
};
int cinfer_grammar_parse(const char *text, size_t len, struct grammar_rules *out, struct cinfer_error *err);
void cinfer_grammar_rules_free(struct grammar_rules *r);

/* ---- compiled automata (grammar_build.c) ------------------------------------------ */
struct gedge {
    uint8_t lo, hi;  /* byte range, for a byte edge */
    int32_t ref;     /* -1: byte edge; else the rule called */
    int32_t to;      /* state after the byte, or after the call returns */
};
struct gstate {
    int32_t first_edge;
    int32_t n_byte_edges; /* byte edges first, sorted by lo */
    int32_t n_edges;
    int32_t rule;
    uint8_t final;
};
struct cinfer_grammar {
    int n_rules;
    char **rule_names;
    int32_t *rule_start;  /* (n_rules) */
    int root;
    int n_states;
    struct gstate *states;
    int n_edges;
    struct gedge *edges;
    uint64_t (*follow)[4];  /* (n_rules) bytes that may come right after the rule ends */
};

#endif
