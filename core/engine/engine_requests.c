/* Requests in flight in the main process: a table by request id (each with the replica
 * it was sent to), the queue of output chunks each caller waits on, and the handling of
 * TEXT frames from the detokenizer. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "ipc/channel.h"
#include "util/log.h"

struct engine_request *cinfer_engine_request_register(struct cinfer_engine *e)
{
    struct engine_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_cond_init(&r->ready, NULL);
    r->rid = ++e->next_rid;
    r->replica = -1; /* until routed */
    struct engine_request **b = &e->buckets[r->rid % ENGINE_BUCKETS];
    r->next = *b;
    *b = r;
    e->n_inflight++;
    return r;
}

void cinfer_engine_request_unregister(struct cinfer_engine *e, struct engine_request *r)
{
    for (struct engine_request **p = &e->buckets[r->rid % ENGINE_BUCKETS]; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    while (r->head) {
        struct engine_chunk *c = r->head;
        r->head = c->next;
        cinfer_engine_chunk_free(c);
    }
    pthread_cond_destroy(&r->ready);
    if (r->replica >= 0)
        e->replicas[r->replica].in_flight--;
    free(r);
    e->n_inflight--;
    pthread_cond_broadcast(&e->idle);
}

struct engine_request *cinfer_engine_request_find(struct cinfer_engine *e, uint64_t rid)
{
    for (struct engine_request *r = e->buckets[rid % ENGINE_BUCKETS]; r; r = r->next)
        if (r->rid == rid)
            return r;
    return NULL;
}

void cinfer_engine_chunk_free(struct engine_chunk *c)
{
    if (!c)
        return;
    free(c->text);
    free(c->ids);
    free(c->logprobs);
    free(c->matched_stop);
    free(c->error);
    free(c);
}

void cinfer_engine_request_push(struct engine_request *r, struct engine_chunk *c)
{
    if (r->final_queued) {
        cinfer_engine_chunk_free(c);
        return;
    }
    if (c->finish_reason != CINFER_FINISH_NONE)
        r->final_queued = 1;
    c->next = NULL;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    pthread_cond_broadcast(&r->ready);
}

static void fail_requests(struct cinfer_engine *e, int replica, int code, const char *why)
{
    for (int b = 0; b < ENGINE_BUCKETS; b++)
        for (struct engine_request *r = e->buckets[b]; r; r = r->next) {
            if (replica >= 0 && r->replica != replica)
                continue;
            struct engine_chunk *c = calloc(1, sizeof *c);
            if (!c)
                continue;
            c->finish_reason = CINFER_FINISH_ERROR;
            c->code = code;
            c->error = strdup(why);
            cinfer_engine_request_push(r, c);
        }
}

void cinfer_engine_fail_all(struct cinfer_engine *e, int code, const char *why)
{
    fail_requests(e, -1, code, why);
}

void cinfer_engine_fail_replica(struct cinfer_engine *e, int replica, int code, const char *why)
{
    fail_requests(e, replica, code, why);
}

int cinfer_engine_send_to_scheduler(struct cinfer_engine *e, int replica, const void *frame, size_t len,
                                    struct cinfer_error *err)
{
    pthread_mutex_lock(&e->send_lock);
    void *socket = replica >= 0 && replica < e->n_replicas ? e->replicas[replica].to_scheduler : NULL;
    int rc = socket ? cinfer_channel_send(socket, frame, len, 0, err)
                    : cinfer_error_set(err, CINFER_ERR_UNAVAILABLE, "the scheduler of replica dp%d is not running",
                                       replica);
    pthread_mutex_unlock(&e->send_lock);
    /* A socket error is no fault of the request (nor a client gone, which CINFER_ERR_IO
     * means to the HTTP server): the engine cannot take requests now. */
    if (rc == CINFER_ERR_IO || rc == CINFER_ERR_TIMEOUT) {
        cinfer_error_prefix(err, "sending to the scheduler");
        rc = CINFER_ERR_UNAVAILABLE;
        if (err)
            err->code = rc;
    }
    return rc;
}

/* A TEXT frame from the detokenizer: hand its chunk to the waiting caller. When a stop
 * string ended the request, the scheduler is told to let go of it (quietly). */
void cinfer_engine_handle_text_frame(struct cinfer_engine *e, const void *frame, size_t len)
{
    struct cinfer_msg_text t;
    struct cinfer_error err = {0};
    if (cinfer_msg_decode_text(frame, len, &t, &err) != CINFER_OK) {
        cinfer_log(CINFER_LOG_SEV_WARNING, "dropped a malformed frame on the tokenizer input (%zu bytes): %s", len,
                   err.message);
        return;
    }
    if (t.finish_reason == CINFER_FINISH_STOP_STRING) {
        pthread_mutex_lock(&e->lock);
        struct engine_request *held = cinfer_engine_request_find(e, t.rid);
        int replica = held ? held->replica : -1; /* a caller gone early has aborted it already */
        pthread_mutex_unlock(&e->lock);
        struct cinfer_msg_abort a = {.rid = t.rid, .quiet = 1};
        void *out;
        size_t out_len;
        if (replica >= 0 && cinfer_msg_encode_abort(&a, &out, &out_len) == CINFER_OK) {
            cinfer_engine_send_to_scheduler(e, replica, out, out_len, &err);
            free(out);
        }
    }
    struct engine_chunk *c = calloc(1, sizeof *c);
    if (!c) {
        cinfer_msg_text_free(&t);
        return;
    }
    c->text = t.text;
    c->text_len = t.text_len;
    c->ids = t.ids;
    c->n_ids = t.n_ids;
    c->logprobs = t.logprobs; /* (n_ids) when present: the decoder guarantees it */
    c->finish_reason = (enum cinfer_finish_reason)t.finish_reason;
    c->matched_stop = t.matched_stop;
    c->error = t.error;
    c->code = t.code; /* the decoder guarantees a status code, nonzero exactly for an error */
    c->prompt_tokens = (int)t.prompt_tokens;
    c->completion_tokens = (int)t.completion_tokens;
    c->cached_tokens = (int)t.cached_tokens;
    pthread_mutex_lock(&e->lock);
    struct engine_request *r = cinfer_engine_request_find(e, t.rid);
    if (r)
        cinfer_engine_request_push(r, c);
    else
        cinfer_engine_chunk_free(c); /* its caller has gone (aborted or timed out) */
    pthread_mutex_unlock(&e->lock);
}
