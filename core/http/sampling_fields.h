/* http/sampling_fields.h — the sampling fields the OpenAI and native (SGLang) APIs
 * share: the same JSON name, range and meaning in both. OpenAI reads them from the
 * body's top level, /generate from its sampling_params object; what differs between
 * the two (temperature's range, max_tokens vs max_new_tokens, seed, logprobs) stays
 * in each API's reader. */
#ifndef CINFER_HTTP_SAMPLING_FIELDS_H
#define CINFER_HTTP_SAMPLING_FIELDS_H

#include <jansson.h>

#include "cinfer/engine.h"
#include "http/http_server.h"

/* Reads top_p (0, 1], top_k [-1, ...), min_p [0, 1], repetition_penalty (0, 2],
 * frequency_penalty and presence_penalty [-2, 2], ignore_eos, skip_special_tokens,
 * no_stop_trim, stop, stop_token_ids and logit_bias from obj into s, leaving absent
 * fields as they are. Token ids must lie in [0, vocab_size - 1], or [0, INT32_MAX]
 * when vocab_size is 0 (unknown here; the engine checks them later). Returns 0, or -1
 * after replying 400 naming the field. Stop strings point into obj. */
int cinfer_http_read_shared_sampling(const struct http_request *req, const json_t *obj, int vocab_size,
                                     struct cinfer_sampling_params *s);

/* SGLang's constrained decoding fields: json_schema (JSON text in a string, or the
 * schema object itself), regex and ebnf (strings), at most one, into s. The
 * constraint is converted and compiled once here, so a schema keyword or regex
 * feature the grammar cannot honour is a 400 naming the field (param) and the
 * keyword. *owned gets any text made here (malloc'd; the caller frees it after the
 * request started). Returns 0, or -1 after replying. */
int cinfer_http_read_constraint(const struct http_request *req, const json_t *obj, struct cinfer_sampling_params *s,
                                char **owned);
/* Checks the constraint already in s (converting and compiling it) and replies 400
 * with param on failure: -1; else 0. */
int cinfer_http_check_constraint(const struct http_request *req, const struct cinfer_sampling_params *s,
                                 const char *param);

#endif
