/* IPC messages round-trip, and every malformed frame — cut short at each byte, with a
 * wrong magic, version or type, trailing bytes, or counts beyond their limits — is
 * rejected with a message naming the frame type and the field. Logprobs (version 2)
 * round-trip bit for bit and their counts are bounded. Error codes (version 3) of
 * TOKENS items and TEXT round-trip for every status, and a code outside the enum, an
 * error without a code or a code without an error is rejected; so are RPC reply and
 * FAILED codes outside the enum. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>
#include <unistd.h>

#include "engine/port_args.h"
#include "ipc/messages.h"
#include "ipc/worker_settings.h"
#include "support/runner.h"

START_TEST(generate_round_trips)
{
    int32_t ids[] = {1, 15043, 3186, -1, 2147483647};
    struct cinfer_msg_generate in = {.rid = 0x1122334455667788ull, .ids = ids, .n_ids = 5, .stream = 1,
                                     .grammar = "root ::= \"yes\" | \"no\"\n"};
    cinfer_sampling_params_init(&in.sampling);
    in.sampling.temperature = 0.7f;
    in.sampling.top_k = 40;
    in.sampling.seed = 42;
    in.sampling.has_seed = 1;
    in.sampling.stop[0] = "\n\n";
    in.sampling.stop[1] = "The End";
    in.sampling.n_stop = 2;
    in.sampling.stop_token_ids[0] = 2;
    in.sampling.n_stop_token_ids = 1;
    in.sampling.logit_bias_ids[0] = 50256;
    in.sampling.logit_bias_values[0] = -100.0f;
    in.sampling.logit_bias_ids[1] = 7;
    in.sampling.logit_bias_values[1] = 2.5f;
    in.sampling.n_logit_bias = 2;
    in.sampling.logprobs = 1;
    in.sampling.top_logprobs = 5;
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_generate(&in, &frame, &len), CINFER_OK);
    struct cinfer_msg_generate out;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_msg_decode_generate(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.rid, in.rid);
    ck_assert_str_eq(out.grammar, in.grammar);
    ck_assert_uint_eq(out.n_ids, 5);
    ck_assert_mem_eq(out.ids, ids, sizeof ids);
    ck_assert_float_eq(out.sampling.temperature, 0.7f);
    ck_assert_int_eq(out.sampling.top_k, 40);
    ck_assert_uint_eq(out.sampling.seed, 42);
    ck_assert_int_eq(out.sampling.n_stop, 2);
    ck_assert_str_eq(out.sampling.stop[1], "The End");
    ck_assert_int_eq(out.sampling.stop_token_ids[0], 2);
    ck_assert_int_eq(out.sampling.n_logit_bias, 2);
    ck_assert_int_eq(out.sampling.logit_bias_ids[0], 50256);
    ck_assert_float_eq(out.sampling.logit_bias_values[0], -100.0f);
    ck_assert_int_eq(out.sampling.logit_bias_ids[1], 7);
    ck_assert_float_eq(out.sampling.logit_bias_values[1], 2.5f);
    ck_assert_int_eq(out.sampling.logprobs, 1);
    ck_assert_int_eq(out.sampling.top_logprobs, 5);
    ck_assert_int_eq(out.stream, 1);
    cinfer_msg_generate_free(&out);

    /* Every truncation is rejected, never trusted. */
    for (size_t cut = 0; cut < len; cut++) {
        cinfer_error_clear(&err);
        ck_assert_int_eq(cinfer_msg_decode_generate(frame, cut, &out, &err), CINFER_ERR_PARSE);
        ck_assert(err.message[0] != '\0');
    }
    free(frame);
}
END_TEST

/* DETOK_REQUEST (version 3) carries the prompt's last ids: they round-trip, the encoder
 * keeps the last CINFER_IPC_MAX_PROMPT_TAIL of a longer list, and a frame that claims
 * more, or is cut anywhere, is rejected naming the field. */
START_TEST(detok_request_round_trips_with_the_prompt_tail)
{
    int32_t prompt[CINFER_IPC_MAX_PROMPT_TAIL + 5];
    for (size_t i = 0; i < sizeof prompt / sizeof prompt[0]; i++)
        prompt[i] = (int32_t)(1000 + i);
    struct cinfer_msg_detok_request in = {.rid = 0x0102030405060708ull, .skip_special_tokens = 1, .no_stop_trim = 1,
                                          .stop = {"\n\n", "The End"}, .n_stop = 2, .prompt_tail = prompt,
                                          .n_prompt_tail = 3};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_detok_request(&in, &frame, &len), CINFER_OK);
    struct cinfer_msg_detok_request out;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_msg_decode_detok_request(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.rid, in.rid);
    ck_assert_int_eq(out.skip_special_tokens, 1);
    ck_assert_int_eq(out.no_stop_trim, 1);
    ck_assert_uint_eq(out.n_stop, 2);
    ck_assert_str_eq(out.stop[1], "The End");
    ck_assert_uint_eq(out.n_prompt_tail, 3);
    ck_assert_mem_eq(out.prompt_tail, prompt, 3 * sizeof *prompt);
    cinfer_msg_detok_request_free(&out);
    for (size_t cut = 0; cut < len; cut++) {
        cinfer_error_clear(&err);
        ck_assert_int_eq(cinfer_msg_decode_detok_request(frame, cut, &out, &err), CINFER_ERR_PARSE);
        ck_assert(err.message[0] != '\0');
    }
    free(frame);

    /* No prompt ids (a request the scheduler refuses still gets one). */
    in.prompt_tail = NULL;
    in.n_prompt_tail = 0;
    ck_assert_int_eq(cinfer_msg_encode_detok_request(&in, &frame, &len), CINFER_OK);
    ck_assert_int_eq(cinfer_msg_decode_detok_request(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.n_prompt_tail, 0);
    ck_assert_ptr_null(out.prompt_tail);
    cinfer_msg_detok_request_free(&out);
    free(frame);

    /* More than the limit: the last ones are sent. */
    in.prompt_tail = prompt;
    in.n_prompt_tail = sizeof prompt / sizeof prompt[0];
    ck_assert_int_eq(cinfer_msg_encode_detok_request(&in, &frame, &len), CINFER_OK);
    ck_assert_int_eq(cinfer_msg_decode_detok_request(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.n_prompt_tail, CINFER_IPC_MAX_PROMPT_TAIL);
    ck_assert_mem_eq(out.prompt_tail, prompt + 5, CINFER_IPC_MAX_PROMPT_TAIL * sizeof *prompt);
    cinfer_msg_detok_request_free(&out);

    /* A frame that claims one more than the limit is refused, naming the field. */
    uint8_t *count = (uint8_t *)frame + len - 4 * (CINFER_IPC_MAX_PROMPT_TAIL + 1);
    ck_assert_int_eq(count[0], CINFER_IPC_MAX_PROMPT_TAIL);
    count[0] = CINFER_IPC_MAX_PROMPT_TAIL + 1;
    ck_assert_int_eq(cinfer_msg_decode_detok_request(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "DETOK_REQUEST frame: field 'prompt_tail': count 33 exceeds the limit 32");
    free(frame);
}
END_TEST

START_TEST(tokens_and_text_round_trip)
{
    int32_t a[] = {5, 6}, b[] = {7};
    struct cinfer_token_item items[] = {
        {.rid = 1, .ids = a, .n_ids = 2, .finish_reason = CINFER_FINISH_NONE, .prompt_tokens = 3,
        .completion_tokens = 2},
        {.rid = 2, .ids = b, .n_ids = 1, .finish_reason = CINFER_FINISH_ERROR, .error = "out of KV pages",
         .code = CINFER_ERR_NOMEM},
    };
    struct cinfer_msg_tokens in = {.items = items, .n_items = 2};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
    struct cinfer_msg_tokens out;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.n_items, 2);
    ck_assert_int_eq(out.items[0].ids[1], 6);
    ck_assert_ptr_null(out.items[0].error);
    ck_assert_int_eq(out.items[0].code, 0);
    ck_assert_str_eq(out.items[1].error, "out of KV pages");
    ck_assert_int_eq(out.items[1].code, CINFER_ERR_NOMEM);
    cinfer_msg_tokens_free(&out);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(cinfer_msg_decode_tokens(frame, cut, &out, &err), CINFER_ERR_PARSE);
    free(frame);

    struct cinfer_msg_text t = {.rid = 9, .text = "h\xc3\xa9llo", .text_len = 6, .ids = a, .n_ids = 2,
                                .finish_reason = CINFER_FINISH_STOP_STRING, .matched_stop = "\n"};
    ck_assert_int_eq(cinfer_msg_encode_text(&t, &frame, &len), CINFER_OK);
    struct cinfer_msg_text tout;
    ck_assert_int_eq(cinfer_msg_decode_text(frame, len, &tout, &err), CINFER_OK);
    ck_assert_str_eq(tout.text, "h\xc3\xa9llo");
    ck_assert_str_eq(tout.matched_stop, "\n");
    ck_assert_int_eq(tout.finish_reason, CINFER_FINISH_STOP_STRING);
    cinfer_msg_text_free(&tout);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(cinfer_msg_decode_text(frame, cut, &tout, &err), CINFER_ERR_PARSE);
    free(frame);
}
END_TEST

/* The decoder's size bound must admit the smallest real item: an abort (no ids, no
 * error, no logprobs) riding in a frame with other requests' tokens. */
START_TEST(frames_of_smallest_items_decode)
{
    int32_t one[] = {42};
    struct cinfer_token_item items[9];
    for (uint32_t k = 1; k < 9; k++) {
        for (uint32_t i = 0; i < k; i++)
            items[i] = (struct cinfer_token_item){.rid = 100 + i, .finish_reason = CINFER_FINISH_ABORT};
        items[k] = (struct cinfer_token_item){.rid = 7, .ids = one, .n_ids = 1, .prompt_tokens = 4,
                                              .completion_tokens = 1};
        struct cinfer_msg_tokens in = {.items = items, .n_items = k + 1};
        void *frame;
        size_t len;
        ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
        struct cinfer_msg_tokens out;
        struct cinfer_error err = {0};
        ck_assert_msg(cinfer_msg_decode_tokens(frame, len, &out, &err) == CINFER_OK, "%u aborts + 1 token: %s", k,
                      err.message);
        ck_assert_uint_eq(out.n_items, k + 1);
        ck_assert_int_eq(out.items[0].finish_reason, CINFER_FINISH_ABORT);
        ck_assert_int_eq(out.items[k].ids[0], 42);
        cinfer_msg_tokens_free(&out);
        free(frame);
    }
}
END_TEST

static struct cinfer_token_logprob make_logprob(int32_t token, float logprob, int n_top)
{
    struct cinfer_token_logprob lp = {.token = token, .logprob = logprob, .n_top = n_top};
    for (int k = 0; k < n_top; k++) {
        lp.top_ids[k] = 1000 + k;
        lp.top_logprobs[k] = -0.25f * (float)(k + 1);
    }
    return lp;
}

static void assert_same_logprob(const struct cinfer_token_logprob *a, const struct cinfer_token_logprob *b)
{
    ck_assert_int_eq(a->token, b->token);
    ck_assert_mem_eq(&a->logprob, &b->logprob, sizeof a->logprob); /* bit for bit: -inf too */
    ck_assert_int_eq(a->n_top, b->n_top);
    ck_assert_mem_eq(a->top_ids, b->top_ids, (size_t)a->n_top * sizeof a->top_ids[0]);
    ck_assert_mem_eq(a->top_logprobs, b->top_logprobs, (size_t)a->n_top * sizeof a->top_logprobs[0]);
}

START_TEST(logprobs_round_trip_in_tokens_and_text)
{
    int32_t a[] = {5, 6}, b[] = {7};
    struct cinfer_token_logprob lp_a[] = {make_logprob(5, -0.125f, 3), make_logprob(6, -INFINITY, 20)};
    struct cinfer_token_item items[] = {
        {.rid = 1, .ids = a, .n_ids = 2, .logprobs = lp_a},
        {.rid = 2, .ids = b, .n_ids = 1}, /* did not ask */
        {.rid = 3, .finish_reason = CINFER_FINISH_ABORT, .logprobs = lp_a}, /* no ids: nothing to describe */
    };
    struct cinfer_msg_tokens in = {.items = items, .n_items = 3};
    void *frame, *again;
    size_t len, again_len;
    ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
    struct cinfer_msg_tokens out;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_msg_decode_tokens(frame, len, &out, &err) == CINFER_OK, "%s", err.message);
    ck_assert_uint_eq(out.n_items, 3);
    ck_assert_ptr_nonnull(out.items[0].logprobs);
    assert_same_logprob(&out.items[0].logprobs[0], &lp_a[0]);
    assert_same_logprob(&out.items[0].logprobs[1], &lp_a[1]);
    ck_assert_ptr_null(out.items[1].logprobs);
    ck_assert_ptr_null(out.items[2].logprobs);
    /* What was decoded writes back the very same bytes. */
    ck_assert_int_eq(cinfer_msg_encode_tokens(&out, &again, &again_len), CINFER_OK);
    ck_assert_uint_eq(again_len, len);
    ck_assert_mem_eq(again, frame, len);
    free(again);
    cinfer_msg_tokens_free(&out);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(cinfer_msg_decode_tokens(frame, cut, &out, &err), CINFER_ERR_PARSE);
    free(frame);

    struct cinfer_msg_text t = {.rid = 9, .text = "hi", .text_len = 2, .ids = a, .n_ids = 2, .logprobs = lp_a};
    ck_assert_int_eq(cinfer_msg_encode_text(&t, &frame, &len), CINFER_OK);
    struct cinfer_msg_text tout;
    ck_assert_msg(cinfer_msg_decode_text(frame, len, &tout, &err) == CINFER_OK, "%s", err.message);
    ck_assert_ptr_nonnull(tout.logprobs);
    assert_same_logprob(&tout.logprobs[0], &lp_a[0]);
    assert_same_logprob(&tout.logprobs[1], &lp_a[1]);
    ck_assert_int_eq(cinfer_msg_encode_text(&tout, &again, &again_len), CINFER_OK);
    ck_assert_uint_eq(again_len, len);
    ck_assert_mem_eq(again, frame, len);
    free(again);
    cinfer_msg_text_free(&tout);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(cinfer_msg_decode_text(frame, cut, &tout, &err), CINFER_ERR_PARSE);
    free(frame);
}
END_TEST

START_TEST(logprobs_beyond_their_limits_are_rejected)
{
    /* One item, one id, one alternative: the frame ends with the flag (1 byte), the
     * logprob (4), n_top (1) and one pair (8). */
    int32_t id = 4;
    struct cinfer_token_logprob lp = make_logprob(4, -1.0f, 1);
    struct cinfer_token_item item = {.rid = 1, .ids = &id, .n_ids = 1, .logprobs = &lp};
    struct cinfer_msg_tokens in = {.items = &item, .n_items = 1};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
    uint8_t *bytes = frame;
    struct cinfer_msg_tokens out;
    struct cinfer_error err = {0};
    /* (and the item's error code and cached count, 4 bytes each, after them) */
    ck_assert_int_eq(bytes[len - 22], 1);
    ck_assert_int_eq(bytes[len - 17], 1);

    bytes[len - 17] = CINFER_MAX_TOP_LOGPROBS + 1;
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "TOKENS frame: field 'items.logprobs.n_top': 21 exceeds the limit 20");
    bytes[len - 17] = 1;

    bytes[len - 22] = 2;
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "TOKENS frame: field 'items.has_logprobs': 2 is neither 0 nor 1");
    bytes[len - 22] = 1;
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_OK);
    cinfer_msg_tokens_free(&out);
    free(frame);

    /* A TEXT frame with no ids cannot carry logprobs: a hand-made one that claims them
     * is refused. */
    struct cinfer_msg_text t = {.rid = 9};
    ck_assert_int_eq(cinfer_msg_encode_text(&t, &frame, &len), CINFER_OK);
    bytes = frame;
    ck_assert_int_eq(bytes[len - 9], 0); /* the flag, before the 4-byte code and cached count */
    bytes[len - 9] = 1;
    struct cinfer_msg_text tout;
    ck_assert_int_eq(cinfer_msg_decode_text(frame, len, &tout, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "TEXT frame: field 'has_logprobs': logprobs are present for no ids");
    free(frame);
}
END_TEST

START_TEST(headers_are_checked)
{
    struct cinfer_msg_abort in = {.rid = 77, .quiet = 1};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_abort(&in, &frame, &len), CINFER_OK);
    struct cinfer_error err = {0};
    struct cinfer_msg_abort out;
    ck_assert_int_eq(cinfer_msg_decode_abort(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.rid, 77);

    /* Wrong type: an ABORT frame offered as READY. */
    struct cinfer_msg_ready ready;
    ck_assert_int_eq(cinfer_msg_decode_ready(frame, len, &ready, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "expected a READY frame, found type 4 (ABORT)");

    uint8_t *bytes = frame;
    bytes[0] ^= 0xFF; /* magic */
    ck_assert_int_eq(cinfer_msg_decode_abort(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "magic"));
    bytes[0] ^= 0xFF;
    bytes[4] = 99; /* version */
    ck_assert_int_eq(cinfer_msg_decode_abort(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "frame has protocol version 99, expected 4");
    bytes[4] = CINFER_IPC_VERSION;

    /* Trailing bytes are as wrong as missing ones. */
    uint8_t *longer = malloc(len + 3);
    memcpy(longer, frame, len);
    ck_assert_int_eq(cinfer_msg_decode_abort(longer, len + 3, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "ABORT frame: field 'end of frame': 3 trailing bytes after the last field");
    free(longer);
    free(frame);
}
END_TEST

START_TEST(heartbeat_round_trips)
{
    struct cinfer_msg_heartbeat in = {.role = CINFER_WORKER_SCHEDULER, .tp_rank = 3, .dp_rank = 1, .pid = 4242};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_heartbeat(&in, &frame, &len), CINFER_OK);
    ck_assert_uint_eq(len, 12 + 1 + 4 + 4 + 4);
    struct cinfer_msg_heartbeat out;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_msg_decode_heartbeat(frame, len, &out, &err), CINFER_OK);
    ck_assert_uint_eq(out.role, CINFER_WORKER_SCHEDULER);
    ck_assert_uint_eq(out.tp_rank, 3);
    ck_assert_uint_eq(out.dp_rank, 1);
    ck_assert_uint_eq(out.pid, 4242);
    ck_assert_int_eq(cinfer_msg_decode_heartbeat(frame, len - 1, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "HEARTBEAT frame: field 'pid': needs 4 bytes, only 3 left");
    free(frame);
}
END_TEST

/* How a replica's communicator is named, by where its ranks run (cinfer/engine.h's
 * CINFER_COMM_*). */
static void comm_of(const char *config, int group_comm, int dp_rank, char *out, size_t out_bytes)
{
    struct cinfer_server_args in;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_server_args_init(&in, &err), 0);
    ck_assert_msg(cinfer_server_args_load_string(&in, config, "test", &err) == 0, "%s", err.message);
    struct engine_endpoints endpoints;
    ck_assert_msg(cinfer_endpoints_init(&endpoints, "/tmp/cinfer-Ab", &in, group_comm, &err) == 0, "%s", err.message);
    struct cinfer_port_args ports;
    cinfer_endpoints_of_worker(&endpoints, CINFER_WORKER_SCHEDULER, dp_rank, 1, &ports);
    snprintf(out, out_bytes, "%s", ports.comm);
    cinfer_endpoints_free(&endpoints);
    cinfer_server_args_free(&in);
}

START_TEST(a_replica_s_communicator_is_named_for_where_its_ranks_run)
{
    char comm[128];
    comm_of("launcher = { tp_size = 1; };", 0, 0, comm, sizeof comm);
    ck_assert_str_eq(comm, ""); /* one rank: none */
    comm_of("launcher = { tp_size = 2; dp_size = 2; };", 0, 1, comm, sizeof comm);
    ck_assert_str_eq(comm, "/cinfer-Ab-comm-dp1"); /* this machine: the engine makes the segment */
    comm_of("launcher = { tp_size = 2; dp_size = 2; hosts = [\"127.0.0.1\", \"127.0.0.2\"]; port_base = 30000; };", 0,
            1,
            comm, sizeof comm);
    ck_assert_str_eq(comm, CINFER_COMM_SHM_BY_RANK0 "/cinfer-Ab-comm-dp1"); /* a replica per host: rank 0 makes it */
    comm_of("launcher = { tp_size = 2; hosts = [\"127.0.0.1\", \"127.0.0.2\"]; port_base = 30000; };", 0, 0, comm,
            sizeof comm);
    /* ranks on two hosts: tcp through rank 0, on its replica's last port (2 + tp + 3 ports) */
    ck_assert_str_eq(comm, "tcp://127.0.0.1:30006");
    comm_of("launcher = { tp_size = 2; hosts = [\"127.0.0.1\", \"127.0.0.2\"]; port_base = 30000; };", 1, 0, comm,
            sizeof comm);
    ck_assert_str_eq(comm, CINFER_COMM_GROUP); /* the launcher brings it (launch-mpi) */
}
END_TEST

/* A worker's settings over a socket pair, as the engine hands them over: what goes in
 * comes out, and every way the stream can be wrong is refused with words. */
START_TEST(worker_settings_travel_on_stdin)
{
    struct cinfer_server_args in;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_server_args_init(&in, &err), 0);
    ck_assert_int_eq(cinfer_server_args_load_string(
                         &in, "launcher = { dp_size = 3; tp_size = 2; }; model = { dtype = \"f16\"; };", "test", &err),
                     0);
    struct engine_endpoints endpoints;
    ck_assert_int_eq(cinfer_endpoints_init(&endpoints, "/tmp/cinfer-XyZ123", &in, 0, &err), 0);
    struct cinfer_port_args ports;
    cinfer_endpoints_of_worker(&endpoints, CINFER_WORKER_SCHEDULER, 2, 1, &ports);
    ck_assert_str_eq(ports.rpc, "ipc:///tmp/cinfer-XyZ123/rpc-dp2-tp1");
    ck_assert_str_eq(ports.scheduler_input, "ipc:///tmp/cinfer-XyZ123/scheduler-in-dp2");
    ck_assert_str_eq(ports.comm, "/cinfer-XyZ123-comm-dp2");
    snprintf(ports.curve_client_secret, sizeof ports.curve_client_secret, "%s",
             "0123456789012345678901234567890123456789");
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(cinfer_worker_settings_send(sv[0], &in, &ports, &err), 0);
    struct cinfer_server_args out;
    struct cinfer_port_args out_ports;
    ck_assert_msg(cinfer_worker_settings_receive(sv[1], 1000, &out, &out_ports, &err) == 0, "%s", err.message);
    char *a, *b;
    ck_assert_int_eq(cinfer_server_args_to_string(&in, &a, &err), 0);
    ck_assert_int_eq(cinfer_server_args_to_string(&out, &b, &err), 0);
    ck_assert_str_eq(a, b);
    ck_assert_int_eq(out.dp_size, 3);
    ck_assert_int_eq(memcmp(&ports, &out_ports, sizeof ports), 0);
    free(a);
    free(b);
    cinfer_server_args_free(&out);

    /* Nothing written yet: a timeout that says so. */
    ck_assert_int_eq(cinfer_worker_settings_receive(sv[1], 50, &out, &out_ports, &err), CINFER_ERR_TIMEOUT);
    ck_assert_str_eq(err.message,
                     "no settings on standard input: 0 of 4 bytes of the settings' length came within 50 ms");
    /* A length beyond any settings. */
    ck_assert_int_eq(write(sv[0], "\xff\xff\xff\x7f", 4), 4);
    ck_assert_int_eq(cinfer_worker_settings_receive(sv[1], 1000, &out, &out_ports, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "the settings' length is 2147483647 bytes, expected 12 to"), "%s", err.message);
    /* A settings text the configuration refuses: named as the engine's settings. */
    struct cinfer_msg_worker_settings bad = {.server_args = "model = { dtype = \"f8\"; };", .ports = ports};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_worker_settings(&bad, &frame, &len), 0);
    ck_assert_int_eq(cinfer_worker_settings_parse(frame, len, &out, &out_ports, &err), CINFER_ERR_CONFIG);
    ck_assert_msg(strstr(err.message, "the engine's settings:1: model.dtype: expected one of"), "%s", err.message);
    free(frame);
    /* The stream ends early: the engine is gone before the worker read its settings. */
    ck_assert_int_eq(write(sv[0], "\x40\x00", 2), 2);
    close(sv[0]);
    ck_assert_int_eq(cinfer_worker_settings_receive(sv[1], 1000, &out, &out_ports, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "standard input ended after 2 of 4 bytes of the settings' length"), "%s",
                  err.message);
    close(sv[1]);
    cinfer_server_args_free(&in);
}
END_TEST

START_TEST(logit_bias_beyond_its_limit_is_rejected)
{
    struct cinfer_msg_generate in = {.rid = 1};
    cinfer_sampling_params_init(&in.sampling);
    in.sampling.logit_bias_ids[0] = 0x0ABBCCDD; /* distinctive bytes to find the count by */
    in.sampling.logit_bias_ids[1] = 3;
    in.sampling.n_logit_bias = 2;
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_generate(&in, &frame, &len), CINFER_OK);
    const uint8_t count_then_id[8] = {2, 0, 0, 0, 0xDD, 0xCC, 0xBB, 0x0A};
    uint8_t *at = memmem(frame, len, count_then_id, sizeof count_then_id);
    ck_assert_ptr_nonnull(at);
    at[0] = CINFER_MAX_LOGIT_BIAS + 1;
    struct cinfer_msg_generate out;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_msg_decode_generate(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "sampling.logit_bias_ids"), "%s", err.message);
    free(frame);
}
END_TEST

START_TEST(counts_beyond_limits_are_rejected)
{
    /* A TOKENS frame that claims 4 billion items in a few bytes. */
    uint8_t frame[16] = {0x43, 0x49, 0x4E, 0x46, CINFER_IPC_VERSION, 0, 0, 0, CINFER_MSG_TOKENS, 0, 0, 0, 0xFF, 0xFF,
    0xFF, 0xFF};
    struct cinfer_msg_tokens out;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, sizeof frame, &out, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "n_items"));

    /* A GENERATE frame whose id count is far beyond what follows. */
    uint8_t gen[24] = {0x43, 0x49, 0x4E, 0x46, CINFER_IPC_VERSION, 0, 0, 0, CINFER_MSG_GENERATE, 0, 0, 0,
                       1, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0x0F, 0};
    struct cinfer_msg_generate g;
    ck_assert_int_eq(cinfer_msg_decode_generate(gen, sizeof gen, &g, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "GENERATE frame: field 'ids'"), "%s", err.message);

    /* A text field with an embedded NUL. */
    struct cinfer_msg_failed f = {.role = 1, .code = CINFER_ERR_IO, .message = "x"};
    void *bytes;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_failed(&f, &bytes, &len), CINFER_OK);
    ((uint8_t *)bytes)[len - 1] = 0;
    struct cinfer_msg_failed fo;
    ck_assert_int_eq(cinfer_msg_decode_failed(bytes, len, &fo, &err), CINFER_ERR_PARSE);
    ck_assert_msg(strstr(err.message, "NUL"), "%s", err.message);
    free(bytes);
}
END_TEST

/* Overwrites the last 4 bytes of a frame (where TOKENS items and TEXT end with the
 * code) with code, little-endian. */
/* The code is the last i32 before the cached-token count that ends a TOKENS item and
 * a TEXT message. */
static void put_last_i32(void *frame, size_t len, int32_t code)
{
    uint32_t u = (uint32_t)code;
    uint8_t *end = (uint8_t *)frame + len - 8;
    for (int i = 0; i < 4; i++)
        end[i] = (uint8_t)(u >> (8 * i));
}

START_TEST(error_codes_round_trip_in_tokens_and_text)
{
    int32_t id = 3;
    for (int code = -1; code >= CINFER_STATUS_MIN; code--) {
        struct cinfer_token_item items[] = {
            {.rid = 1, .ids = &id, .n_ids = 1, .completion_tokens = 1}, /* another request, going on */
            {.rid = 2, .finish_reason = CINFER_FINISH_ERROR, .prompt_tokens = 9, .error = "why", .code = code,
             .cached_tokens = 8},
        };
        struct cinfer_msg_tokens in = {.items = items, .n_items = 2};
        void *frame, *again;
        size_t len, again_len;
        ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
        struct cinfer_msg_tokens out;
        struct cinfer_error err = {0};
        ck_assert_msg(cinfer_msg_decode_tokens(frame, len, &out, &err) == CINFER_OK, "%d: %s", code, err.message);
        ck_assert_int_eq(out.items[0].code, 0);
        ck_assert_int_eq(out.items[1].code, code);
        ck_assert_uint_eq(out.items[1].cached_tokens, 8);
        ck_assert_int_eq(out.items[1].finish_reason, CINFER_FINISH_ERROR);
        ck_assert_str_eq(out.items[1].error, "why");
        ck_assert_int_eq(cinfer_msg_encode_tokens(&out, &again, &again_len), CINFER_OK);
        ck_assert_uint_eq(again_len, len);
        ck_assert_mem_eq(again, frame, len);
        free(again);
        cinfer_msg_tokens_free(&out);
        free(frame);

        struct cinfer_msg_text t = {.rid = 2, .finish_reason = CINFER_FINISH_ERROR, .error = "why", .code = code,
                                    .cached_tokens = 16};
        ck_assert_int_eq(cinfer_msg_encode_text(&t, &frame, &len), CINFER_OK);
        struct cinfer_msg_text tout;
        ck_assert_msg(cinfer_msg_decode_text(frame, len, &tout, &err) == CINFER_OK, "%d: %s", code, err.message);
        ck_assert_int_eq(tout.code, code);
        ck_assert_uint_eq(tout.cached_tokens, 16);
        ck_assert_str_eq(tout.error, "why");
        ck_assert_int_eq(cinfer_msg_encode_text(&tout, &again, &again_len), CINFER_OK);
        ck_assert_uint_eq(again_len, len);
        ck_assert_mem_eq(again, frame, len);
        free(again);
        cinfer_msg_text_free(&tout);
        for (size_t cut = 0; cut < len; cut++)
            ck_assert_int_eq(cinfer_msg_decode_text(frame, cut, &tout, &err), CINFER_ERR_PARSE);
        free(frame);
    }
}
END_TEST

START_TEST(codes_outside_the_enum_are_rejected)
{
    char expected[160];
    /* TOKENS: one failed item, its code last in the frame. */
    struct cinfer_token_item item = {.rid = 5, .finish_reason = CINFER_FINISH_ERROR, .error = "x",
                                     .code = CINFER_ERR_OVERLOADED};
    struct cinfer_msg_tokens in = {.items = &item, .n_items = 1};
    void *frame;
    size_t len;
    ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
    struct cinfer_msg_tokens out;
    struct cinfer_error err = {0};
    const int32_t outside[] = {1, 2, 500, CINFER_STATUS_MIN - 1, -1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        put_last_i32(frame, len, outside[i]);
        ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_ERR_PARSE);
        snprintf(expected, sizeof expected,
                 "TOKENS frame: field 'items.code': %d is not a status code (expected %d..0)", (int)outside[i],
                 CINFER_STATUS_MIN);
        ck_assert_str_eq(err.message, expected);
    }
    put_last_i32(frame, len, 0); /* an error must say which */
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "TOKENS frame: field 'items.code': 0 for a request that failed "
                                  "(finish reason error needs its code)");
    free(frame);
    item.finish_reason = CINFER_FINISH_LENGTH; /* a code on a request that did not fail */
    item.code = 0;
    ck_assert_int_eq(cinfer_msg_encode_tokens(&in, &frame, &len), CINFER_OK);
    put_last_i32(frame, len, CINFER_ERR_CHILD);
    ck_assert_int_eq(cinfer_msg_decode_tokens(frame, len, &out, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "TOKENS frame: field 'items.code': -12 for a request that did not fail "
                                  "(finish reason 1)");
    free(frame);

    /* TEXT, the same way. */
    struct cinfer_msg_text t = {.rid = 5, .finish_reason = CINFER_FINISH_ERROR, .error = "x", .code = CINFER_ERR_CHILD};
    ck_assert_int_eq(cinfer_msg_encode_text(&t, &frame, &len), CINFER_OK);
    struct cinfer_msg_text tout;
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        put_last_i32(frame, len, outside[i]);
        ck_assert_int_eq(cinfer_msg_decode_text(frame, len, &tout, &err), CINFER_ERR_PARSE);
        snprintf(expected, sizeof expected, "TEXT frame: field 'code': %d is not a status code (expected %d..0)",
                 (int)outside[i], CINFER_STATUS_MIN);
        ck_assert_str_eq(err.message, expected);
    }
    put_last_i32(frame, len, 0);
    ck_assert_int_eq(cinfer_msg_decode_text(frame, len, &tout, &err), CINFER_ERR_PARSE);
    ck_assert_str_eq(err.message, "TEXT frame: field 'code': 0 for a request that failed "
                                  "(finish reason error needs its code)");
    free(frame);

    /* An RPC reply's status (last before the payload string: patched by search). */
    struct cinfer_msg_rpc_reply r = {.call_id = 1, .status = CINFER_ERR_STATE, .payload = "{}"};
    ck_assert_int_eq(cinfer_msg_encode_rpc_reply(&r, &frame, &len), CINFER_OK);
    const uint8_t state_then_len[8] = {0xF3, 0xFF, 0xFF, 0xFF, 2, 0, 0, 0}; /* -13, then strlen("{}") */
    uint8_t *at = memmem(frame, len, state_then_len, sizeof state_then_len);
    ck_assert_ptr_nonnull(at);
    struct cinfer_msg_rpc_reply rout;
    ck_assert_int_eq(cinfer_msg_decode_rpc_reply(frame, len, &rout, &err), CINFER_OK);
    ck_assert_int_eq(rout.status, CINFER_ERR_STATE);
    cinfer_msg_rpc_reply_free(&rout);
    at[0] = 7;
    at[1] = at[2] = at[3] = 0;
    ck_assert_int_eq(cinfer_msg_decode_rpc_reply(frame, len, &rout, &err), CINFER_ERR_PARSE);
    snprintf(expected, sizeof expected, "RPC_REPLY frame: field 'status': 7 is not a status code (expected %d..0)",
             CINFER_STATUS_MIN);
    ck_assert_str_eq(err.message, expected);
    free(frame);

    /* A worker's FAILED must carry a failure's code. */
    struct cinfer_msg_failed f = {.role = 1, .code = CINFER_ERR_IO, .message = "boom"};
    ck_assert_int_eq(cinfer_msg_encode_failed(&f, &frame, &len), CINFER_OK);
    const uint8_t io_then_len[8] = {0xFD, 0xFF, 0xFF, 0xFF, 4, 0, 0, 0}; /* -3, then strlen("boom") */
    at = memmem(frame, len, io_then_len, sizeof io_then_len);
    ck_assert_ptr_nonnull(at);
    at[0] = at[1] = at[2] = at[3] = 0;
    struct cinfer_msg_failed fout;
    ck_assert_int_eq(cinfer_msg_decode_failed(frame, len, &fout, &err), CINFER_ERR_PARSE);
    snprintf(expected, sizeof expected,
             "FAILED frame: field 'code': 0 is not a failure's status code (expected %d..-1)", CINFER_STATUS_MIN);
    ck_assert_str_eq(err.message, expected);
    free(frame);
}
END_TEST

static Suite *suite_ipc_messages(void)
{
    Suite *s = suite_create("ipc_messages");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, generate_round_trips);
    tcase_add_test(tc, detok_request_round_trips_with_the_prompt_tail);
    tcase_add_test(tc, tokens_and_text_round_trip);
    tcase_add_test(tc, frames_of_smallest_items_decode);
    tcase_add_test(tc, logprobs_round_trip_in_tokens_and_text);
    tcase_add_test(tc, logprobs_beyond_their_limits_are_rejected);
    tcase_add_test(tc, headers_are_checked);
    tcase_add_test(tc, heartbeat_round_trips);
    tcase_add_test(tc, worker_settings_travel_on_stdin);
    tcase_add_test(tc, a_replica_s_communicator_is_named_for_where_its_ranks_run);
    tcase_add_test(tc, counts_beyond_limits_are_rejected);
    tcase_add_test(tc, logit_bias_beyond_its_limit_is_rejected);
    tcase_add_test(tc, error_codes_round_trip_in_tokens_and_text);
    tcase_add_test(tc, codes_outside_the_enum_are_rejected);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_ipc_messages)
