/* http/openai_token_text.h — what one token id stands for, for the "token" and "bytes"
 * of OpenAI's logprobs: the raw bytes of its vocabulary piece (a byte-level BPE piece
 * mapped back through GPT-2's byte table, a SentencePiece piece with U+2581 as a space
 * and <0xNN> as that byte), so a token holding half of a UTF-8 character keeps its
 * bytes; special tokens and anything else are decoded by the tokenizer. */
#ifndef CINFER_HTTP_OPENAI_TOKEN_TEXT_H
#define CINFER_HTTP_OPENAI_TOKEN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cinfer/engine.h"

#define OPENAI_TOKEN_MAX_BYTES 256

/* Fills bytes (up to OPENAI_TOKEN_MAX_BYTES; a longer token is cut) and *len. An id
 * the tokenizer does not know gives "" . */
void cinfer_openai_token_bytes(const struct cinfer_tokenizer_ctx *tok, int32_t id, char *bytes, size_t *len);
/* A JSON string of the bytes with each invalid UTF-8 sequence replaced by U+FFFD. */
json_t *cinfer_openai_token_string(const char *bytes, size_t len);
/* [b0, b1, ...] as integers 0..255. */
json_t *cinfer_openai_token_byte_array(const char *bytes, size_t len);

#endif
