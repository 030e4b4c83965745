/* A request's constraint (sampling params json_schema, regex or ebnf) as grammar text,
 * and a cache of grammars compiled against one vocabulary (the scheduler's). */
#ifndef CINFER_GRAMMAR_CONSTRAINT_H
#define CINFER_GRAMMAR_CONSTRAINT_H

#include "cinfer/engine.h"
#include "grammar/grammar.h"

/* *out: the grammar text p asks for (malloc'd), or NULL when p has no constraint.
 * Refuses two constraints at once (CINFER_ERR_INVALID_ARGUMENT), and whatever the
 * conversion or the grammar refuses, the message starting with the parameter's name.
 * check: also compile the text once, so errors come back before the request runs. */
int cinfer_constraint_grammar(const struct cinfer_sampling_params *p, int check, char **out, struct cinfer_error *err);

/* The token table of a tokenizer for a model of vocab logit rows: each token's bytes
 * from the tokenizer's token_bytes (a version-1 tokenizer without it: the text of
 * decode() of the token alone, which cannot show a byte token's lone byte). */
struct cinfer_tokenizer_ctx;
int cinfer_token_table_from_tokenizer(const struct cinfer_tokenizer_ctx *tok, int vocab,
                                      struct cinfer_token_table **out, struct cinfer_error *err);

/* Compiled grammars by their text, least recently used dropped past max_entries. */
struct cinfer_grammar_cache;
int cinfer_grammar_cache_create(const struct cinfer_token_table *tt, int max_entries,
                                struct cinfer_grammar_cache **out);
void cinfer_grammar_cache_free(struct cinfer_grammar_cache **c);
/* A reference to the masks of text (compiled now when not cached); the caller
 * unrefs it. */
int cinfer_grammar_cache_get(struct cinfer_grammar_cache *c, const char *text, struct cinfer_grammar_masks **out,
                             struct cinfer_error *err);
/* Lookups since creation and how many found the grammar compiled. */
void cinfer_grammar_cache_stats(const struct cinfer_grammar_cache *c, int64_t *lookups, int64_t *hits);

#endif
