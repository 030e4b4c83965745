/* http/cinfer_openai_run.h — running an OpenAI request once it is read: every prompt x n
 * choices started together (so they batch), then answered as one JSON response or as
 * a server-sent-event stream with the choices' chunks interleaved. Shared by
 * /v1/completions and /v1/chat/completions. */
#ifndef CINFER_HTTP_OPENAI_RUN_H
#define CINFER_HTTP_OPENAI_RUN_H

#include <stddef.h>

#include "http/http_server.h"
#include "http/openai_request.h"

/* The tokenizer's vocabulary size (0 when there is no tokenizer). */
int cinfer_openai_vocab_size(const struct http_server_ctx *ctx);

/* Tokenizes text into prompt->ids. add_special: as the engine does for a text prompt
 * (completions); chat templates write their own special tokens, so chat passes 0.
 * Returns 0, or -1 after replying (400 when it tokenizes to nothing). */
int cinfer_openai_tokenize_prompt(const struct http_request *req, const char *text, size_t len, int add_special,
                                  const char *field, struct openai_prompt *prompt);

/* Every prompt of r must be token ids by now. Takes r over (it is freed, also on
 * failure) and answers the request. */
void cinfer_openai_run(const struct http_request *req, struct openai_request *r);

#endif
