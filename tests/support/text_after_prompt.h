/* What a generation's text must read, computed without the detokenizer: the tokenizer's
 * decode() of prompt + output with decode() of the prompt taken off the front (issue
 * 15: SentencePiece-style tokenizers must not lose the output's leading space). And the
 * models and prompts the end-to-end tests check it on: the trained stories260K (a
 * SentencePiece vocabulary) and the embedded default model (byte-level BPE), each with
 * a prompt whose first greedy output token starts with a space and prompts that end
 * inside a word. */
#ifndef CINFER_TEST_TEXT_AFTER_PROMPT_H
#define CINFER_TEST_TEXT_AFTER_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/engine.h"

#define CINFER_TEST_BOUNDARY_PROMPTS 4

struct cinfer_test_boundary_model {
    const char *path;
    const char *name;           /* for messages */
    /* Greedy, the first prompt's output starts with a space ("The cat" -> " and a boy");
     * the others end inside a word. */
    const char *prompts[CINFER_TEST_BOUNDARY_PROMPTS];
    const char *chat_template;  /* for a model without one: its text is the messages' contents */
};

/* The models the boundary is checked on: stories260K (tests/data/models) and the default
 * model; returns how many were written to out (room for 2). */
int cinfer_test_boundary_models(struct cinfer_test_boundary_model *out);

/* decode(prompt + output)[len(decode(prompt)):] with tok's decode(), malloc'd; fails the
 * test when decode(prompt) is not a prefix of decode(prompt + output). */
char *cinfer_test_text_after_prompt(const struct cinfer_tokenizer_ctx *tok, const int32_t *prompt, size_t n_prompt,
                                    const int32_t *output, size_t n_output, int skip_special);

/* The same from the text of the prompt alone (the one decode) and of prompt + output,
 * as an HTTP test gets them from /v1/detokenize; malloc'd. */
char *cinfer_test_text_past(const char *prompt_text, const char *all_text);

#endif
