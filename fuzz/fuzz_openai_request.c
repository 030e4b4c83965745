/* libFuzzer target for reading an OpenAI request body (/v1/completions when the first
 * byte is even, /v1/chat/completions when odd; the rest is the body) into engine terms,
 * with a stand-in connection that records the reply. Whatever the bytes: the reader
 * either accepts the body without replying, or replies exactly once with a 4xx that
 * names what is wrong; what it accepts, the engine's own validation accepts too
 * (sampling ranges, stop strings, logit bias, token ids inside the vocabulary). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/openai_request.h"
#include "http/request_fields.h"
#include "scheduler/sampling_validate.h"
#include "http_stand_in.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { VOCAB = 512 };

static void check_accepted(const struct openai_request *r, enum openai_kind kind)
{
    struct cinfer_error err = {0};
    if (cinfer_sampling_validate(&r->sampling, VOCAB, &err) != CINFER_OK) {
        fprintf(stderr, "accepted a request the engine refuses: %s\n", err.message);
        abort();
    }
    if (r->n < 1 || r->n > CINFER_MAX_CHOICES)
        abort();
    if (kind == OPENAI_COMPLETIONS) {
        if (r->n_prompts < 1 || r->n_prompts > OPENAI_MAX_PROMPTS ||
            r->n_prompts * (size_t)r->n > OPENAI_MAX_GENERATIONS)
            abort();
        for (size_t i = 0; i < r->n_prompts; i++) {
            if (!r->prompts[i].text && r->prompts[i].n_ids == 0)
                abort();
            for (size_t j = 0; j < r->prompts[i].n_ids; j++)
                if (r->prompts[i].ids[j] < 0 || r->prompts[i].ids[j] >= VOCAB)
                    abort();
        }
    } else {
        const json_t *messages = json_object_get(r->template_context, "messages");
        if (!json_is_array(messages) || json_array_size(messages) == 0)
            abort();
        size_t i;
        const json_t *m;
        json_array_foreach(messages, i, m) {
            const json_t *content = json_object_get(m, "content");
            if (!json_is_string(content) && !json_is_null(content))
                abort(); /* the template sees text (parts joined) or null */
        }
        if (!json_is_boolean(json_object_get(r->template_context, "add_generation_prompt")))
            abort();
        char *text = json_dumps(r->template_context, JSON_COMPACT); /* what the renderer is handed */
        if (!text)
            abort();
        free(text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum openai_kind kind = data[0] & 1 ? OPENAI_CHAT : OPENAI_COMPLETIONS;
    json_error_t jerr;
    json_t *body = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    struct http_conn conn = {0};
    struct http_server_ctx ctx = {.model_name = "default"};
    struct http_request req = {.method = "POST",
                               .path = kind == OPENAI_CHAT ? "/v1/chat/completions" : "/v1/completions",
                               .body = "",
                               .ctx = &ctx,
                               .conn = &conn};
    struct openai_request r;
    int rc = cinfer_openai_request_parse(&req, body, kind, VOCAB, &r);
    if (rc == 0) {
        if (conn.replies != 0)
            abort(); /* accepted, yet answered */
        check_accepted(&r, kind);
        cinfer_openai_request_free(&r);
    } else {
        if (rc != -1 || conn.replies != 1 || conn.message[0] == '\0')
            abort(); /* refused: exactly one answer, with words */
        if (conn.status != 400 && conn.status != 404 && conn.status != 500)
            abort();
        if (conn.status == 400 && conn.param[0] == '\0')
            abort(); /* a bad field is named */
    }
    return 0;
}
