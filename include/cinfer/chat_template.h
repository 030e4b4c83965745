/* cinfer/chat_template.h — renders a model's chat template (the Jinja source in
 * tokenizer_config.json's "chat_template" or GGUF's tokenizer.chat_template) into the
 * prompt text, as Hugging Face's apply_chat_template does.
 *
 * The renderer is a Jinja interpreter written for chat templates: the statements,
 * expressions, tests, filters and string/list/dict methods that real templates use,
 * with Hugging Face's settings (trim_blocks and lstrip_blocks on, raise_exception(),
 * {% generation %} tags dropped). Its output equals byte for byte what the official
 * renderer (@huggingface/jinja, as transformers.js uses it) produces, including that
 * renderer's own ways: true/false/none print in lower case, lists and dicts print as
 * JSON, tojson writes ", " and ": " (with indent: "," and ": "), strings are measured
 * and indexed in UTF-16 code units. tests/test_chat_template.c checks that for the
 * templates of every supported family (Qwen2.5/3, Llama 3.x, Mistral, SmolLM2,
 * TinyLlama) and for each language feature. What that renderer does not support is
 * not supported here either (it fails in both): e.g. tests with arguments
 * ("is divisibleby(3)"), map/select by a filter name, string formatting with "%".
 * strftime_now() reads the local clock: pass date_string (Llama 3.x) for a fixed date.
 *
 * A compiled template is immutable: render it from many threads at once. */
#ifndef CINFER_CHAT_TEMPLATE_H
#define CINFER_CHAT_TEMPLATE_H

#include <stddef.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cinfer_chat_template;

/* Parses source (len bytes, need not be NUL-terminated; invalid UTF-8 reads as
 * U+FFFD). name (a file name or "tokenizer_config.json:chat_template") goes into every
 * error, with line and column, and the failure is CINFER_ERR_PARSE:
 *   "chat.jinja:3:14: expected 'endfor' to close 'for' (line 1), found 'endif'" */
CINFER_API int cinfer_chat_template_compile(const char *source, size_t len, const char *name,
                                            struct cinfer_chat_template **out, struct cinfer_error *err);

/* Renders with the variables of context_json, a JSON object as text, e.g.
 *   {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true,
 *    "bos_token": "<s>", "eos_token": "</s>", "tools": [...], "enable_thinking": false}
 * JSON objects become Jinja mappings (keys keep their order), arrays lists, and so on.
 * On success *out is malloc'd UTF-8, NUL-terminated (*out_len bytes; out_len may be
 * NULL). A raise_exception("text") in the template fails with CINFER_ERR_INVALID_ARGUMENT
 * and the message "name:line:col: text"; a runtime error (unknown filter, wrong type)
 * fails the same way with what went wrong; a context that is not a JSON object fails
 * with CINFER_ERR_PARSE or CINFER_ERR_INVALID_ARGUMENT; a bound hit with
 * CINFER_ERR_RANGE. Output is bounded
 * (CINFER_CHAT_TEMPLATE_MAX_OUTPUT_BYTES) and loops and recursion are bounded, so a
 * hostile template cannot exhaust memory or run forever. */
#define CINFER_CHAT_TEMPLATE_MAX_OUTPUT_BYTES (64u << 20)
CINFER_API int cinfer_chat_template_render(const struct cinfer_chat_template *t, const char *context_json,
                                           size_t context_len, char **out, size_t *out_len,
                                           struct cinfer_error *err);

/* Sets *t to NULL. */
CINFER_API void cinfer_chat_template_free(struct cinfer_chat_template **t);

#ifdef __cplusplus
}
#endif
#endif
