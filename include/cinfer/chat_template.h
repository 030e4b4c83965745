/* cinfer/chat_template.h — renders a model's chat template (the Jinja source in
 * tokenizer_config.json's "chat_template" or GGUF's tokenizer.chat_template) into the
 * prompt text, as Hugging Face's apply_chat_template does.
 *
 * The renderer is a Jinja interpreter written for chat templates: the statements,
 * expressions, tests, filters and string/list/dict methods that real templates use,
 * with Hugging Face's settings (trim_blocks and lstrip_blocks on, raise_exception(),
 * tojson as Python's json.dumps with the template's indent). Its output must equal
 * byte for byte what the official renderer (@huggingface/jinja) produces; the tests
 * check that for the templates of every supported family.
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

/* Parses source (len bytes, need not be NUL-terminated). name (a file name or
 * "tokenizer_config.json:chat_template") goes into every error, with line and column:
 *   "chat.jinja:3:14: expected '%}' to close 'if', found 'endfor'" */
CINFER_API int cinfer_chat_template_compile(const char *source, size_t len, const char *name,
                                            struct cinfer_chat_template **out, struct cinfer_error *err);

/* Renders with the variables of context_json, a JSON object as text, e.g.
 *   {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true,
 *    "bos_token": "<s>", "eos_token": "</s>", "tools": [...], "enable_thinking": false}
 * JSON objects become Jinja mappings (keys keep their order), arrays lists, and so on.
 * On success *out is malloc'd and NUL-terminated (*out_len bytes, may be NULL).
 * A raise_exception() in the template fails with its message; so does a runtime error
 * (undefined method, wrong type), named with the line and column. Output is bounded
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
