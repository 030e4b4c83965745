/* The default run_detokenizer_process hook: the body of the detokenizer worker. For
 * each request it keeps an incremental decoder primed with the prompt's last ids, so
 * the output reads as it does after the prompt (output_text.h; O(new tokens) per step,
 * never half a UTF-8 character), and a stop-string matcher on that output text. It
 * turns each TOKENS step into TEXT deltas for the main process (the ids and their
 * logprobs pass through unchanged), and finishes a request when a stop string appears. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "cinfer/config.h"
#include "cinfer/tokenizer.h"
#include "detokenizer/output_text.h"
#include "detokenizer/stop_matcher.h"
#include "ipc/channel.h"
#include "ipc/messages.h"
#include "util/log.h"
#include "worker/hooks.h"
#include "worker/worker_link.h"

#define BUCKETS 1024

struct request_state {
    uint64_t rid;
    struct cinfer_output_text text;
    struct cinfer_stop_matcher stops;
    int stopped;  /* a stop string matched: wait for the scheduler's abort, send nothing more */
    struct request_state *next;
};

struct detokenizer {
    struct cinfer_worker_link link;
    struct cinfer_tokenizer_ctx *tok;
    void *input;   /* PULL, bound */
    void *output;  /* PUSH to the main process */
    struct request_state *buckets[BUCKETS];
};

static struct request_state **slot(struct detokenizer *d, uint64_t rid)
{
    struct request_state **p = &d->buckets[rid % BUCKETS];
    while (*p && (*p)->rid != rid)
        p = &(*p)->next;
    return p;
}

static void drop_state(struct detokenizer *d, uint64_t rid)
{
    struct request_state **p = slot(d, rid);
    struct request_state *st = *p;
    if (!st)
        return;
    *p = st->next;
    cinfer_output_text_free(&st->text);
    cinfer_stop_matcher_free(&st->stops);
    free(st);
}

static void send_text(struct detokenizer *d, const struct cinfer_msg_text *t)
{
    void *frame;
    size_t len;
    struct cinfer_error err = {0};
    if (cinfer_msg_encode_text(t, &frame, &len) != CINFER_OK)
        return;
    if (cinfer_channel_send(d->output, frame, len, 0, &err) != CINFER_OK)
        cinfer_log(CINFER_LOG_SEV_WARNING, "sending TEXT: %s", err.message);
    free(frame);
}

/* The code of this worker's own failure on a request: never the request's fault (its
 * ids came from the model), so INTERNAL whatever the tokenizer said, unless memory ran
 * out. */
static int own_failure_code(int rc)
{
    return rc == CINFER_ERR_NOMEM ? CINFER_ERR_NOMEM : CINFER_ERR_INTERNAL;
}

static void handle_request(struct detokenizer *d, struct cinfer_msg_detok_request *r)
{
    drop_state(d, r->rid); /* a reused id starts over */
    struct request_state *st = calloc(1, sizeof *st);
    struct cinfer_error err = {0};
    int rc = !st ? CINFER_ERR_NOMEM : cinfer_stop_matcher_init(&st->stops, r->stop, (int)r->n_stop, r->no_stop_trim);
    if (rc == CINFER_OK)
        rc = cinfer_output_text_start(&st->text, d->tok->ops, d->tok->tok, r->skip_special_tokens, r->prompt_tail,
                                      r->n_prompt_tail, r->n_prompt_tail < CINFER_IPC_MAX_PROMPT_TAIL, &err);
    if (rc != CINFER_OK) {
        char why[CINFER_ERROR_MESSAGE_BYTES + 64];
        snprintf(why, sizeof why, "cannot start decoding request %llu: %s", (unsigned long long)r->rid,
                 err.message[0] ? err.message : cinfer_strerror(rc));
        cinfer_log(CINFER_LOG_SEV_ERROR, "%s", why);
        /* Fail it now: its tokens, unknown here, would otherwise end it as a success
         * with no text. */
        struct cinfer_msg_text t = {.rid = r->rid, .finish_reason = CINFER_FINISH_ERROR, .error = why,
                                    .code = own_failure_code(rc)};
        send_text(d, &t);
        if (st) {
            cinfer_output_text_free(&st->text);
            cinfer_stop_matcher_free(&st->stops);
        }
        free(st);
        return;
    }
    if (st->text.context_failed)
        cinfer_log(CINFER_LOG_SEV_WARNING, "request %llu: the prompt's last ids do not decode (%s): its output is "
                   "decoded as the start of a text", (unsigned long long)r->rid, err.message);
    st->rid = r->rid;
    struct request_state **p = slot(d, r->rid);
    *p = st;
}

static void handle_item(struct detokenizer *d, const struct cinfer_token_item *it)
{
    struct request_state *st = *slot(d, it->rid);
    struct cinfer_msg_text t = {.rid = it->rid, .ids = it->ids, .n_ids = it->n_ids, .finish_reason = it->finish_reason,
                                .prompt_tokens = it->prompt_tokens, .completion_tokens = it->completion_tokens,
                                .error = it->error, .logprobs = it->logprobs, .code = it->code,
                                .cached_tokens = it->cached_tokens};
    if (!st) {
        /* Unknown request: only a final error or abort is worth passing on. */
        if (it->finish_reason != CINFER_FINISH_NONE)
            send_text(d, &t);
        return;
    }
    if (st->stopped) {
        if (it->finish_reason != CINFER_FINISH_NONE)
            drop_state(d, it->rid); /* the scheduler has let go of it too */
        return;
    }
    struct cinfer_error err = {0};
    char *delta = NULL, *tail = NULL;
    size_t delta_len = 0, tail_len = 0;
    int final = it->finish_reason != CINFER_FINISH_NONE;
    int rc = it->n_ids ? cinfer_output_text_step(&st->text, it->ids, it->n_ids, &delta, &delta_len, &err) : 0;
    if (rc == CINFER_OK && final)
        rc = cinfer_output_text_finish(&st->text, &tail, &tail_len, &err);
    if (rc != CINFER_OK) {
        /* ids the model produced did not decode */
        t.finish_reason = CINFER_FINISH_ERROR;
        t.code = own_failure_code(rc);
        t.error = err.message;
        send_text(d, &t);
        free(delta);
        free(tail);
        drop_state(d, it->rid);
        return;
    }
    const char *out;
    size_t out_len;
    int matched = cinfer_stop_matcher_feed(&st->stops, delta ? delta : "", delta_len, final && !tail_len, &out,
                                           &out_len);
    /* Concatenate what the decoder step and its flush allow. */
    size_t n = out_len;
    char *text = malloc(out_len + tail_len + 1);
    if (text) {
        memcpy(text, out, out_len);
        if (!matched && tail_len) {
            const char *out2;
            size_t out2_len;
            matched = cinfer_stop_matcher_feed(&st->stops, tail, tail_len, 1, &out2, &out2_len);
            memcpy(text + n, out2, out2_len);
            n += out2_len;
        }
        text[n] = '\0';
    }
    t.text = text;
    t.text_len = (uint32_t)(text ? n : 0);
    if (matched == 1) {
        t.finish_reason = CINFER_FINISH_STOP_STRING;
        t.matched_stop = st->stops.stops[st->stops.matched];
    }
    send_text(d, &t);
    free(text);
    free(delta);
    free(tail);
    if (matched == 1 && !final)
        st->stopped = 1;
    else if (final || matched == 1)
        drop_state(d, it->rid);
}

static void handle_input(struct detokenizer *d)
{
    void *frame;
    size_t len;
    struct cinfer_error err = {0};
    if (cinfer_channel_recv(d->input, 0, &frame, &len, NULL, &err) != CINFER_OK)
        return;
    uint32_t type = 0;
    int rc = cinfer_msg_peek_type(frame, len, &type, &err);
    if (rc == CINFER_OK && type == CINFER_MSG_TOKENS) {
        struct cinfer_msg_tokens m;
        if ((rc = cinfer_msg_decode_tokens(frame, len, &m, &err)) == CINFER_OK) {
            for (uint32_t i = 0; i < m.n_items; i++)
                handle_item(d, &m.items[i]);
            cinfer_msg_tokens_free(&m);
        }
    } else if (rc == CINFER_OK && type == CINFER_MSG_DETOK_REQUEST) {
        struct cinfer_msg_detok_request r;
        if ((rc = cinfer_msg_decode_detok_request(frame, len, &r, &err)) == CINFER_OK) {
            handle_request(d, &r);
            cinfer_msg_detok_request_free(&r);
        }
    } else if (rc == CINFER_OK) {
        rc = cinfer_error_set(&err, CINFER_ERR_PARSE, "unexpected %s frame", cinfer_msg_type_name(type));
    }
    if (rc)
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the detokenizer input (%zu bytes): %s", len,
                   err.message);
    free(frame);
}

int cinfer_default_run_detokenizer_process(const struct cinfer_server_args *args, const struct cinfer_port_args *ports)
{
    struct detokenizer *d = calloc(1, sizeof *d);
    struct cinfer_error err = {0};
    if (!d || cinfer_worker_link_open(&d->link, ports, CINFER_WORKER_DETOKENIZER, 0, 0, 1, &err)) {
        fprintf(stderr, "detokenizer: %s\n", d ? err.message : "out of memory");
        free(d);
        return 1;
    }
    int status = 0;
    void *z = d->link.zmq_context;
    if (cinfer_worker_hooks()->init_tokenizer(args, &d->tok, &err) != CINFER_OK ||
        !(d->input = cinfer_channel_open_keyed(z, ZMQ_PULL, ports->detokenizer_input, 1, NULL, ports, &err)) ||
        !(d->output = cinfer_channel_open(z, ZMQ_PUSH, ports->tokenizer_input, 0, NULL, &err))) {
        status = cinfer_worker_link_failed(&d->link, err.code, err.message);
    } else {
        struct cinfer_tokenizer_info info;
        d->tok->ops->info(d->tok->tok, &info);
        struct cinfer_msg_ready ready = {.vocab_size = info.vocab_size};
        cinfer_worker_link_ready(&d->link, &ready);
        int idle_poll_ms = cinfer_worker_heartbeat_interval_ms(args->watchdog_timeout_ms);
        for (;;) {
            cinfer_worker_link_heartbeat(&d->link, args->watchdog_timeout_ms);
            zmq_pollitem_t items[] = {{.socket = d->input, .events = ZMQ_POLLIN}, {.fd = 0, .events = ZMQ_POLLIN}};
            if (zmq_poll(items, 2, idle_poll_ms) < 0 && zmq_errno() != EINTR)
                break;
            if (items[1].revents && cinfer_lifeline_gone())
                break;
            if (items[0].revents & ZMQ_POLLIN)
                handle_input(d);
        }
    }
    for (int b = 0; b < BUCKETS; b++)
        while (d->buckets[b])
            drop_state(d, d->buckets[b]->rid);
    cinfer_tokenizer_ctx_free(&d->tok);
    cinfer_channel_close(&d->input);
    cinfer_channel_close(&d->output);
    cinfer_worker_link_close(&d->link);
    free(d);
    return status;
}
