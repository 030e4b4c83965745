/* libFuzzer target for reading a /generate body (SGLang's GenerateReqInput) into
 * engine terms, with a stand-in connection that records the reply. Whatever the bytes:
 * the reader either accepts the body without replying, or replies exactly once with a
 * 400 (or 500 for memory) that names what is wrong; what it accepts is well formed
 * (one or more prompts, each text or a non-empty id list, n * prompts within the cap)
 * and the engine's own validation accepts its sampling parameters. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/native_api.h"
#include "http/request_fields.h"
#include "scheduler/sampling_validate.h"
#include "http_stand_in.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0; /* the transport answers those before any reader runs */
    }
    struct http_conn conn = {0};
    struct http_server_ctx ctx = {.model_name = "default"};
    struct http_request req = {.method = "POST", .path = "/generate", .body = (const char *)data, .body_len = size,
                               .ctx = &ctx, .conn = &conn};
    struct native_generate_spec spec;
    int rc = cinfer_native_generate_parse(&req, body, &spec);
    if (rc) {
        if (conn.replies != 1 || (conn.status != 400 && conn.status != 500) || !conn.message[0])
            abort(); /* a refusal is one reply with words */
    } else {
        if (conn.replies != 0 || spec.n_prompts == 0 || spec.n < 1 ||
            spec.n_prompts * (size_t)spec.n > NATIVE_MAX_GENERATIONS)
            abort();
        for (size_t i = 0; i < spec.n_prompts; i++) {
            const struct native_prompt *p = &spec.prompts[i];
            if (!p->text == !p->ids || (p->ids && p->n_ids == 0))
                abort(); /* text or ids, never both or neither */
            for (size_t k = 0; k < p->n_ids; k++)
                if (p->ids[k] < 0)
                    abort();
            if (p->rid && (!p->rid[0] || strlen(p->rid) >= NATIVE_RID_BYTES))
                abort();
        }
        struct cinfer_error err = {0};
        if (cinfer_sampling_validate(&spec.sampling, 0, &err) != CINFER_OK)
            abort(); /* the reader let through what the engine refuses: the client would get a 500-ish error */
        cinfer_native_generate_spec_free(&spec);
    }
    json_decref(body);
    return 0;
}
