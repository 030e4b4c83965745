/* Constrained decoding: a context-free grammar over bytes, and the token masks that
 * keep a model's output inside it.
 *
 * Text form (grammar_parse.c): rules `name ::= expression`, the GBNF / XGrammar EBNF
 * dialect SGLang's `ebnf` parameter takes: "literals" and 'literals' (escapes \n \t \r
 * \\ \" \' \xHH \uHHHH \UHHHHHHHH), character classes [a-z] and [^"\\] over Unicode code
 * points (matched as their UTF-8 bytes), `.` (any code point), rule names, ( ), |,
 * and the postfix * + ? {m} {m,} {m,n}; `#` starts a comment. The start rule is `root`.
 *
 * Compiled form (grammar_build.c): every rule becomes a deterministic automaton whose
 * edges are byte ranges or calls of other rules; left recursion is refused, naming the
 * rule. Matching keeps a set of stacks (the nondeterminism of a context-free grammar)
 * as hash-consed persistent lists, so equal stacks are one id.
 *
 * Masks (grammar_mask.c), the XGrammar idea: a stack's top is a position inside one
 * rule. For each position the vocabulary is split once into tokens accepted whatever
 * is below the top (they stay inside the rule, or the rule ends exactly where the
 * token does), tokens rejected whatever is below (they fail inside the rule, or leave
 * it for a byte that can never follow the rule), and the few "uncertain" tokens that
 * leave the rule mid-token: only those are checked against the real stack at run
 * time. A position's split is computed the first time a matcher stands there and kept
 * with the compiled grammar, which every request with the same grammar text shares. */
#ifndef CINFER_GRAMMAR_GRAMMAR_H
#define CINFER_GRAMMAR_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

/* Limits: a grammar past them is refused, saying which. */
#define CINFER_GRAMMAR_MAX_TEXT (1u << 22)   /* bytes of grammar text */
#define CINFER_GRAMMAR_MAX_STATES (1 << 20)  /* automaton states of all rules */
#define CINFER_GRAMMAR_MAX_REPEAT 10000      /* m and n of {m,n} */
/* NFA positions the automata's states stand for, all states together: the work and
 * memory of compiling. A pattern such as (a|b)*a(a|b){30} or x+xx.{120} makes a DFA
 * that doubles with each step; without this budget a 400-byte regex in one request
 * took 1.4-5.5 s and 90+ MB before the state limit refused it (a fuzz find); with this
 * budget 0.1-0.2 s. The largest grammar of the tests (a JSON schema, 4031 states) holds
 * 27,039, a 39th of it. */
#define CINFER_GRAMMAR_MAX_POSITIONS (1 << 20)

struct cinfer_grammar;

/* Parses and builds text[0..len). err names the line, column and what was expected,
 * or the rule (undefined, left-recursive). */
int cinfer_grammar_compile_text(const char *text, size_t len, struct cinfer_grammar **out, struct cinfer_error *err);
void cinfer_grammar_free(struct cinfer_grammar **g);
int cinfer_grammar_n_states(const struct cinfer_grammar *g);
int cinfer_grammar_n_rules(const struct cinfer_grammar *g);

/* ---- the vocabulary as bytes --------------------------------------------------- */

/* Every token's bytes as they appear in decoded text mid-stream; tokens without bytes
 * (special and control tokens, unused ids) never match a grammar. Sorted so that a walk
 * over the vocabulary shares the work of common prefixes. */
struct cinfer_token_table {
    int vocab;               /* logit rows: ids are [0, vocab) */
    int n_sorted;            /* tokens with bytes */
    int32_t *sorted;         /* (n_sorted) ids by their bytes */
    int32_t *lcp;            /* (n_sorted) common prefix with the previous in sorted order */
    uint32_t *offset;        /* (vocab) into bytes */
    uint32_t *len;           /* (vocab) 0: no bytes */
    uint8_t *bytes;
    int max_len;             /* longest token, bytes */
};
/* get(ctx, id, &bytes, &len) returns 0 and the token's bytes (len 0: none), or an
 * error code; ids past n_known have none. */
typedef int (*cinfer_token_bytes_fn)(void *ctx, int32_t id, const uint8_t **bytes, size_t *len);
int cinfer_token_table_create(int vocab, int n_known, cinfer_token_bytes_fn get, void *ctx,
                              struct cinfer_token_table **out, struct cinfer_error *err);
void cinfer_token_table_free(struct cinfer_token_table **t);

/* ---- masks and matchers ---------------------------------------------------------- */

/* A grammar bound to a vocabulary, with its per-position token splits. Reference
 * counted: matchers hold one. */
struct cinfer_grammar_masks;
/* Takes g over (freed with the masks). tt must outlive the masks. */
int cinfer_grammar_masks_create(struct cinfer_grammar *g, const struct cinfer_token_table *tt,
                                struct cinfer_grammar_masks **out, struct cinfer_error *err);
void cinfer_grammar_masks_ref(struct cinfer_grammar_masks *m);
void cinfer_grammar_masks_unref(struct cinfer_grammar_masks **m);
/* Computes every position's split now (else each is computed on first use); returns how
 * many positions there are. */
int cinfer_grammar_masks_precompute_all(struct cinfer_grammar_masks *m);
/* Counters for benchmarks: positions computed, and of the tokens they split, how many
 * were uncertain. */
void cinfer_grammar_masks_stats(const struct cinfer_grammar_masks *m, int *positions, int *computed,
                                int64_t *uncertain_tokens);

struct cinfer_grammar_matcher;
int cinfer_grammar_matcher_create(struct cinfer_grammar_masks *masks, struct cinfer_grammar_matcher **out);
void cinfer_grammar_matcher_free(struct cinfer_grammar_matcher **m);
/* bits ((vocab + 63) / 64 words) gets the tokens the grammar allows next, stop tokens
 * not included (see can_end). */
void cinfer_grammar_matcher_fill_mask(struct cinfer_grammar_matcher *m, uint64_t *bits);
/* 1 when the output so far is a whole sentence of the grammar (a stop token may come). */
int cinfer_grammar_matcher_can_end(const struct cinfer_grammar_matcher *m);
/* 1 when nothing but the end can follow (only a stop token is allowed). */
int cinfer_grammar_matcher_must_end(const struct cinfer_grammar_matcher *m);
/* Advances over a token's bytes: 0, or -1 when the grammar does not allow it (the
 * matcher is then unchanged). */
int cinfer_grammar_matcher_accept_token(struct cinfer_grammar_matcher *m, int32_t id);
int cinfer_grammar_matcher_accept_bytes(struct cinfer_grammar_matcher *m, const uint8_t *bytes, size_t len);

/* Grammar text with its rule `root` renamed to new_name everywhere (definition and
 * references; literals, classes and comments untouched), for embedding one grammar in
 * another; *out is malloc'd. */
int cinfer_grammar_rename_root(const char *text, const char *new_name, char **out);

/* ---- sources: JSON Schema and regular expressions into grammar text --------------- */

/* The grammar of JSON values valid under schema (JSON text). Unsupported keywords are
 * refused naming the keyword and where it is (a JSON pointer). *out is malloc'd text
 * whose start rule is `root`. */
int cinfer_json_schema_to_grammar(const char *schema, size_t len, char **out, struct cinfer_error *err);
/* The same for an already parsed schema (a jansson json_t *), with rule names
 * prefixed by prefix, the value's rule written to *root_rule (malloc'd); the text has
 * no root rule. For composing: tool calls put several schemas in one grammar. */
int cinfer_json_schema_to_rules(const void *schema_json, const char *prefix, char **rules, char **root_rule,
                                struct cinfer_error *err);
/* A regular expression (the ECMAScript subset JSON Schema patterns and SGLang's
 * `regex` use: literals, classes, \d \w \s, ., groups, |, quantifiers; anchors only at
 * the ends) as grammar text with start rule `root`, matching the whole output. */
int cinfer_regex_to_grammar(const char *regex, size_t len, char **out, struct cinfer_error *err);

#endif
