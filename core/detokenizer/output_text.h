/* A request's output text as it reads after its prompt: decode(prompt + output) with
 * the prompt's own text taken off the front, produced incrementally.
 *
 * Decoding the output ids alone is not that: SentencePiece-style decoders drop the
 * leading space of a text's first token (Metaspace, Strip), so "The cat" + "▁and" read
 * "The catand". As SGLang and vLLM do, the decoder first runs over the prompt's last ids
 * (the context) and what that yields is discarded. A context that is only the prompt's
 * tail starts at its first id from which decode() is neither empty nor starts with
 * U+FFFD: one that starts inside a character spelled by a byte-fallback run would turn
 * that whole run into U+FFFD, and the output's bytes that continue it with it. A
 * context that is the whole prompt starts at its first id.
 *
 * After the context the decoder may still hold some of the prompt's text (a byte-fallback
 * run waiting for its end, a character being spelled, held strip characters): the rest of
 * decode(context) past what it released. The output's first characters are dropped while
 * they are that text; at the first that differs (the output completed a character the
 * prompt left half spelled, or carried its byte run on into other text) nothing more is
 * dropped. So the output text is decode(context + output) past the characters it shares
 * with decode(context): exactly decode(prompt + output) minus decode(prompt) wherever
 * decode(prompt) is a prefix of decode(prompt + output), and the text past what the two
 * share where it is not, as long as the context reaches back past what the decoder
 * remembers: an id with text when special tokens are skipped, and the start of a
 * trailing byte-fallback run (the scheduler sends CINFER_IPC_MAX_PROMPT_TAIL = 32 ids).
 * When the prompt ends in 32 special tokens that are skipped, the output reads as the
 * start of a text.
 *
 * It works through the tokenizer vtable alone (decode, decoder_new/step/finish), so any
 * tokenizer plugin gets it; it relies on the deltas and finish() adding up to decode(). */
#ifndef CINFER_DETOKENIZER_OUTPUT_TEXT_H
#define CINFER_DETOKENIZER_OUTPUT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"
#include "cinfer/tokenizer.h"

struct cinfer_output_text {
    const struct cinfer_tokenizer_ops *ops;
    struct cinfer_token_decoder *decoder;
    char *held;          /* the prompt's text the decoder still held after the context */
    size_t held_len;
    size_t held_seen;    /* bytes of it found at the start of the output so far */
    int context_failed;  /* the context did not decode (an id outside the tokenizer): none was used */
};

/* Starts decoding an output after a prompt whose last ids are context[0..n_context)
 * (none: the output is the start of the text); context_is_prompt: they are all of it
 * (the scheduler sends fewer than CINFER_IPC_MAX_PROMPT_TAIL only then). skip_special
 * as for decode(). When the context does not decode (an id the tokenizer lacks),
 * decoding starts without it and o->context_failed says so; only a failure to start at
 * all is returned. */
int cinfer_output_text_start(struct cinfer_output_text *o, const struct cinfer_tokenizer_ops *ops,
                             const struct cinfer_tokenizer *tok, int skip_special, const int32_t *context,
                             size_t n_context, int context_is_prompt, struct cinfer_error *err);
/* The text that the next output ids add: malloc'd, NUL-terminated, complete UTF-8
 * characters only (possibly empty), as decoder_step. */
int cinfer_output_text_step(struct cinfer_output_text *o, const int32_t *ids, size_t n, char **delta,
                            size_t *delta_len, struct cinfer_error *err);
/* The rest, once the output has ended, as decoder_finish. */
int cinfer_output_text_finish(struct cinfer_output_text *o, char **delta, size_t *delta_len,
                              struct cinfer_error *err);
void cinfer_output_text_free(struct cinfer_output_text *o);

#endif
