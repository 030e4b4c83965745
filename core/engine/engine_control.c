/* Control calls: collective RPC to every scheduler rank (each rank's reply, with a
 * deadline), and the server info and cache flush built on it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer/tokenizer.h"
#include "engine/engine_internal.h"
#include "engine/default_model.h"
#include "ipc/channel.h"

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

void cinfer_rpc_replies_free(struct cinfer_rpc_reply *replies, int n)
{
    for (int i = 0; replies && i < n; i++)
        free(replies[i].payload);
    free(replies);
}

int cinfer_engine_collective_rpc(struct cinfer_engine *e, const char *method, const char *payload, int timeout_ms,
                                 struct cinfer_rpc_reply **replies, int *n_replies, struct cinfer_error *err)
{
    *replies = NULL;
    *n_replies = 0;
    if (!cinfer_engine_healthy(e))
        return cinfer_error_set(err, CINFER_ERR_CHILD, "the engine is not healthy: %s", e->failure);
    int n = e->args.tp_size;
    struct cinfer_rpc_reply *out = calloc((size_t)n, sizeof *out);
    if (!out)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d RPC replies", n);
    pthread_mutex_lock(&e->rpc_lock); /* one call at a time: replies match their call */
    if (!e->rpc[0]) { /* the workers are being restarted */
        pthread_mutex_unlock(&e->rpc_lock);
        free(out);
        return cinfer_error_set(err, CINFER_ERR_UNAVAILABLE, "the schedulers are restarting");
    }
    uint64_t call_id = ++e->next_call_id;
    struct cinfer_msg_rpc_call call = {.call_id = call_id, .method = (char *)method, .payload = (char *)(payload ? payload : "")};
    void *frame = NULL;
    size_t len;
    int rc = cinfer_msg_encode_rpc_call(&call, &frame, &len);
    for (int rank = 0; rc == CINFER_OK && rank < n; rank++) {
        out[rank].tp_rank = rank;
        out[rank].status = CINFER_ERR_TIMEOUT;
        rc = cinfer_channel_send(e->rpc[rank], frame, len, 0, err);
    }
    free(frame);
    long deadline = now_ms() + (timeout_ms >= 0 ? timeout_ms : 3600000L);
    int answered = 0;
    while (rc == CINFER_OK && answered < n) {
        long left = deadline - now_ms();
        if (left <= 0) {
            for (int rank = 0; rank < n; rank++)
                if (!out[rank].payload) {
                    rc = cinfer_error_set(err, CINFER_ERR_TIMEOUT, "RPC '%s': scheduler tp%d did not answer within %d ms",
                                          method, rank, timeout_ms);
                    break;
                }
            break;
        }
        for (int rank = 0; rank < n; rank++) {
            if (out[rank].payload)
                continue;
            void *reply_frame;
            size_t reply_len;
            if (cinfer_channel_recv(e->rpc[rank], (int)(left < 20 ? left : 20), &reply_frame, &reply_len, NULL, NULL))
                continue;
            struct cinfer_msg_rpc_reply reply;
            struct cinfer_error derr = {0};
            if (cinfer_msg_decode_rpc_reply(reply_frame, reply_len, &reply, &derr) == CINFER_OK) {
                if (reply.call_id == call_id) { /* a late reply to an earlier call is dropped */
                    out[rank].status = reply.status;
                    out[rank].payload = reply.payload;
                    out[rank].payload_len = strlen(reply.payload);
                    reply.payload = NULL;
                    answered++;
                }
                cinfer_msg_rpc_reply_free(&reply);
            }
            free(reply_frame);
        }
    }
    pthread_mutex_unlock(&e->rpc_lock);
    if (rc && rc != CINFER_ERR_TIMEOUT) {
        cinfer_rpc_replies_free(out, n);
        return rc;
    }
    *replies = out;
    *n_replies = n;
    return rc;
}

/* A rank's refusal keeps its status; its words are the "error" member of its JSON
 * answer (the whole answer when there is none). */
int cinfer_engine_flush_cache(struct cinfer_engine *e, struct cinfer_error *err)
{
    struct cinfer_rpc_reply *replies;
    int n;
    int rc = cinfer_engine_collective_rpc(e, "flush_cache", "{}", 5000, &replies, &n, err);
    for (int i = 0; rc == CINFER_OK && i < n; i++) {
        if (replies[i].status == CINFER_OK)
            continue;
        json_error_t jerr;
        json_t *answer = json_loads(replies[i].payload, 0, &jerr);
        const char *why = json_string_value(json_object_get(answer, "error"));
        rc = cinfer_error_set(err, replies[i].status, "scheduler tp%d: %s", i, why ? why : replies[i].payload);
        json_decref(answer);
    }
    cinfer_rpc_replies_free(replies, n);
    return rc;
}

int cinfer_engine_server_info(struct cinfer_engine *e, struct cinfer_server_info *out, struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model_path, sizeof out->model_path, "%s",
             e->args.model_path ? e->args.model_path : cinfer_default_model_path());
    snprintf(out->version, sizeof out->version, "%s", CINFER_VERSION);
    snprintf(out->run_dir, sizeof out->run_dir, "%s", e->ports.run_dir);
    for (int i = 0; i < e->n_workers && i < 16; i++)
        out->worker_pids[out->n_workers++] = e->workers[i].limits.pid;
    out->tp_size = e->args.tp_size;
    out->dp_size = e->args.dp_size;
    out->kv_page_size = e->args.page_size;
    for (int i = 0; i < e->n_workers; i++)
        if (e->workers[i].role == CINFER_WORKER_SCHEDULER && e->workers[i].tp_rank == 0) {
            out->max_total_tokens = (int64_t)e->workers[i].limits.max_total_tokens;
            out->max_request_len = (int)e->workers[i].limits.max_request_len;
            out->max_running_requests = (int)e->workers[i].limits.max_running_requests;
            out->vocab_size = (int)e->workers[i].limits.vocab_size;
        }
    struct cinfer_rpc_reply *replies;
    int n;
    int rc = cinfer_engine_collective_rpc(e, "server_info", "{}", 5000, &replies, &n, err);
    if (rc) {
        cinfer_rpc_replies_free(replies, n); /* a timeout still hands back the replies that came */
        return rc;
    }
    json_error_t jerr;
    json_t *j = n > 0 ? json_loads(replies[0].payload, 0, &jerr) : NULL;
    if (j) {
        out->running_requests = (int)json_integer_value(json_object_get(j, "running_requests"));
        out->queued_requests = (int)json_integer_value(json_object_get(j, "queued_requests"));
        out->prefix_cache_hit_tokens = json_integer_value(json_object_get(j, "prefix_cache_hit_tokens"));
        out->prefix_cache_query_tokens = json_integer_value(json_object_get(j, "prefix_cache_query_tokens"));
        out->kv_pages_total = (int)json_integer_value(json_object_get(j, "kv_pages_total"));
        out->kv_pages_free = (int)json_integer_value(json_object_get(j, "kv_pages_free"));
        out->prefill_tokens = json_integer_value(json_object_get(j, "prefill_tokens"));
        out->retractions = json_integer_value(json_object_get(j, "retractions"));
        json_decref(j);
    }
    cinfer_rpc_replies_free(replies, n);
    return CINFER_OK;
}
