/* fuzz_ipc_frames: every IPC decoder on arbitrary bytes. A frame either decodes (and
 * then re-encodes to the very same bytes, so nothing was guessed) or is rejected with a
 * message; nothing may crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/messages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Called after the encoder, never with it as an argument: the order in which a call's
 * arguments are evaluated is unspecified (gcc read frame and len before encoding). */
static void same_bytes(int rc, void *frame, size_t len, const uint8_t *data, size_t size)
{
    if (rc == CINFER_OK && (len != size || memcmp(frame, data, size) != 0))
        abort();
    free(frame);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cinfer_error err = {0};
    void *frame = NULL;
    size_t len = 0;
    uint32_t type;
    if (cinfer_msg_peek_type(data, size, &type, &err) != CINFER_OK) {
        if (!err.message[0])
            abort(); /* a refusal must say why */
        return 0;
    }
    struct cinfer_msg_ready ready;
    if (cinfer_msg_decode_ready(data, size, &ready, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_ready(&ready, &frame, &len);
        same_bytes(rc, frame, len, data, size);
    }
    struct cinfer_msg_heartbeat beat;
    if (cinfer_msg_decode_heartbeat(data, size, &beat, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_heartbeat(&beat, &frame, &len);
        same_bytes(rc, frame, len, data, size);
    }
    struct cinfer_msg_failed failed;
    if (cinfer_msg_decode_failed(data, size, &failed, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_failed(&failed, &frame, &len);
        same_bytes(rc, frame, len, data, size);
        cinfer_msg_failed_free(&failed);
    }
    struct cinfer_msg_generate gen;
    if (cinfer_msg_decode_generate(data, size, &gen, &err) == CINFER_OK)
        cinfer_msg_generate_free(&gen); /* booleans are normalised: no byte identity */
    struct cinfer_msg_abort ab;
    if (cinfer_msg_decode_abort(data, size, &ab, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_abort(&ab, &frame, &len);
        same_bytes(rc, frame, len, data, size);
    }
    struct cinfer_msg_tokens tokens;
    if (cinfer_msg_decode_tokens(data, size, &tokens, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_tokens(&tokens, &frame, &len);
        same_bytes(rc, frame, len, data, size);
        cinfer_msg_tokens_free(&tokens);
    }
    struct cinfer_msg_text text;
    if (cinfer_msg_decode_text(data, size, &text, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_text(&text, &frame, &len);
        same_bytes(rc, frame, len, data, size);
        cinfer_msg_text_free(&text);
    }
    struct cinfer_msg_detok_request dr;
    if (cinfer_msg_decode_detok_request(data, size, &dr, &err) == CINFER_OK) {
        same_bytes(cinfer_msg_encode_detok_request(&dr, &frame, &len), frame, len, data, size);
        cinfer_msg_detok_request_free(&dr);
    }
    struct cinfer_msg_rpc_call call;
    if (cinfer_msg_decode_rpc_call(data, size, &call, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_rpc_call(&call, &frame, &len);
        same_bytes(rc, frame, len, data, size);
        cinfer_msg_rpc_call_free(&call);
    }
    struct cinfer_msg_rpc_reply reply;
    if (cinfer_msg_decode_rpc_reply(data, size, &reply, &err) == CINFER_OK) {
        int rc = cinfer_msg_encode_rpc_reply(&reply, &frame, &len);
        same_bytes(rc, frame, len, data, size);
        cinfer_msg_rpc_reply_free(&reply);
    }
    return 0;
}
