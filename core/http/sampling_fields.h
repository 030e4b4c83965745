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

#endif
