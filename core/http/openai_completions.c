/* POST /v1/completions: OpenAI's legacy completions. Text prompts are tokenized as
 * the engine tokenizes a text prompt (with the tokenizer's BOS/EOS rules); token-id
 * prompts go in as they are. */
#include <stdio.h>
#include <string.h>

#include "http/openai_request.h"
#include "http/openai_run.h"

void cinfer_openai_handle_completions(const struct http_request *req)
{
    json_t *body = cinfer_http_parse_json_object(req);
    if (!body)
        return;
    struct openai_request r;
    if (cinfer_openai_request_parse(req, body, OPENAI_COMPLETIONS, cinfer_openai_vocab_size(req->ctx), &r) < 0)
        return;
    for (size_t i = 0; i < r.n_prompts; i++) {
        if (!r.prompts[i].text)
            continue;
        char field[32] = "prompt";
        if (r.n_prompts > 1 || json_is_array(json_object_get(r.body, "prompt")))
            snprintf(field, sizeof field, "prompt[%zu]", i);
        if (cinfer_openai_tokenize_prompt(req, r.prompts[i].text, r.prompts[i].text_len, 1, field, &r.prompts[i]) < 0) {
            cinfer_openai_request_free(&r);
            return;
        }
    }
    cinfer_openai_run(req, &r);
}
