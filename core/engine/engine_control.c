/* Control calls: collective RPC to every scheduler rank of every replica that is up
 * (each rank's reply, with a deadline), and the server info and cache flush built on it. */
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

/* The worker at (dp_rank, tp_rank): its name for messages. */
static const char *scheduler_name(const struct cinfer_engine *e, int dp_rank, int tp_rank)
{
    return e->workers[e->replicas[dp_rank].first_worker + tp_rank].name;
}

int cinfer_engine_collective_rpc(struct cinfer_engine *e, const char *method, const char *payload, int timeout_ms,
                                 struct cinfer_rpc_reply **replies, int *n_replies, struct cinfer_error *err)
{
    *replies = NULL;
    *n_replies = 0;
    int tp = e->args.tp_size;
    struct cinfer_rpc_reply *out = calloc((size_t)(e->n_replicas * tp), sizeof *out);
    if (!out)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d RPC replies", e->n_replicas * tp);
    pthread_mutex_lock(&e->rpc_lock); /* one call at a time: replies match their call */
    pthread_mutex_lock(&e->lock);
    int n = 0;
    for (int r = 0; r < e->n_replicas; r++)
        if (e->replicas[r].state == REPLICA_UP && e->replicas[r].rpc[0])
            for (int t = 0; t < tp; t++)
                out[n++] = (struct cinfer_rpc_reply){.dp_rank = r, .tp_rank = t, .status = CINFER_ERR_TIMEOUT};
    char failure[sizeof e->failure];
    snprintf(failure, sizeof failure, "%s", e->failure);
    pthread_mutex_unlock(&e->lock);
    if (n == 0) {
        pthread_mutex_unlock(&e->rpc_lock);
        free(out);
        return cinfer_error_set(err, CINFER_ERR_CHILD, "the engine is not healthy: %s", failure);
    }
    uint64_t call_id = ++e->next_call_id;
    struct cinfer_msg_rpc_call call = {.call_id = call_id, .method = (char *)method,
                                       .payload = (char *)(payload ? payload : "")};
    void *frame = NULL;
    size_t len;
    int rc = cinfer_msg_encode_rpc_call(&call, &frame, &len);
    for (int i = 0; rc == CINFER_OK && i < n; i++)
        rc = cinfer_channel_send(e->replicas[out[i].dp_rank].rpc[out[i].tp_rank], frame, len, 0, err);
    free(frame);
    long deadline = now_ms() + (timeout_ms >= 0 ? timeout_ms : 3600000L);
    int answered = 0;
    while (rc == CINFER_OK && answered < n) {
        long left = deadline - now_ms();
        if (left <= 0) {
            for (int i = 0; i < n; i++)
                if (!out[i].payload) {
                    rc = cinfer_error_set(err, CINFER_ERR_TIMEOUT, "RPC '%s': %s did not answer within %d ms", method,
                                          scheduler_name(e, out[i].dp_rank, out[i].tp_rank), timeout_ms);
                    break;
                }
            break;
        }
        for (int i = 0; i < n; i++) {
            if (out[i].payload)
                continue;
            void *reply_frame;
            size_t reply_len;
            void *socket = e->replicas[out[i].dp_rank].rpc[out[i].tp_rank];
            if (!socket || cinfer_channel_recv(socket, (int)(left < 20 ? left : 20) / n + 1, &reply_frame, &reply_len,
                                               NULL, NULL))
                continue;
            struct cinfer_msg_rpc_reply reply;
            struct cinfer_error derr = {0};
            if (cinfer_msg_decode_rpc_reply(reply_frame, reply_len, &reply, &derr) == CINFER_OK) {
                if (reply.call_id == call_id) { /* a late reply to an earlier call is dropped */
                    out[i].status = reply.status;
                    out[i].payload = reply.payload;
                    out[i].payload_len = strlen(reply.payload);
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
        rc = cinfer_error_set(err, replies[i].status, "%s: %s",
                              scheduler_name(e, replies[i].dp_rank, replies[i].tp_rank),
                              why ? why : replies[i].payload);
        json_decref(answer);
    }
    cinfer_rpc_replies_free(replies, n);
    return rc;
}

/* One replica's figures from its tp0's server_info answer. */
static void read_replica_answer(const char *payload, struct cinfer_replica_info *ri)
{
    json_error_t jerr;
    json_t *j = json_loads(payload, 0, &jerr);
    if (!j)
        return;
    ri->running_requests = (int)json_integer_value(json_object_get(j, "running_requests"));
    ri->queued_requests = (int)json_integer_value(json_object_get(j, "queued_requests"));
    ri->prefix_cache_hit_tokens = json_integer_value(json_object_get(j, "prefix_cache_hit_tokens"));
    ri->prefix_cache_query_tokens = json_integer_value(json_object_get(j, "prefix_cache_query_tokens"));
    ri->kv_pages_total = (int)json_integer_value(json_object_get(j, "kv_pages_total"));
    ri->kv_pages_free = (int)json_integer_value(json_object_get(j, "kv_pages_free"));
    ri->prefill_tokens = json_integer_value(json_object_get(j, "prefill_tokens"));
    ri->retractions = json_integer_value(json_object_get(j, "retractions"));
    json_decref(j);
}

/* Each replica's counts, then the figures of those that answer the server_info RPC. */
static int gather_replicas(struct cinfer_engine *e, struct cinfer_replica_info *out, struct cinfer_error *err)
{
    pthread_mutex_lock(&e->lock);
    for (int r = 0; r < e->n_replicas; r++) {
        out[r] = (struct cinfer_replica_info){.dp_rank = r, .up = e->replicas[r].state == REPLICA_UP,
                                              .routed_requests = e->replicas[r].routed,
                                              .in_flight = e->replicas[r].in_flight};
    }
    pthread_mutex_unlock(&e->lock);
    struct cinfer_rpc_reply *replies;
    int n;
    int rc = cinfer_engine_collective_rpc(e, "server_info", "{}", 5000, &replies, &n, err);
    for (int i = 0; rc == CINFER_OK && i < n; i++)
        if (replies[i].tp_rank == 0 && replies[i].status == CINFER_OK)
            read_replica_answer(replies[i].payload, &out[replies[i].dp_rank]);
    cinfer_rpc_replies_free(replies, n); /* a timeout still hands back the replies that came */
    return rc;
}

int cinfer_engine_replicas(struct cinfer_engine *e, struct cinfer_replica_info **out, int *n, struct cinfer_error *err)
{
    *out = calloc((size_t)e->n_replicas, sizeof **out);
    *n = 0;
    if (!*out)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d replicas", e->n_replicas);
    int rc = gather_replicas(e, *out, err);
    if (rc) {
        free(*out);
        *out = NULL;
        return rc;
    }
    *n = e->n_replicas;
    return CINFER_OK;
}

int cinfer_engine_workers(struct cinfer_engine *e, struct cinfer_worker_info **out, int *n, struct cinfer_error *err)
{
    *out = calloc((size_t)e->n_workers, sizeof **out);
    *n = 0;
    if (!*out)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %d workers", e->n_workers);
    pthread_mutex_lock(&e->lock);
    for (int i = 0; i < e->n_workers; i++) {
        const struct engine_worker *w = &e->workers[i];
        struct cinfer_worker_info *wi = &(*out)[i];
        snprintf(wi->role, sizeof wi->role, "%s", w->role == CINFER_WORKER_SCHEDULER ? "scheduler" : "detokenizer");
        wi->dp_rank = w->dp_rank;
        wi->tp_rank = w->tp_rank;
        snprintf(wi->host, sizeof wi->host, "%s", w->host);
        wi->pid = (int)w->limits.pid;
        wi->phase = w->phase;
    }
    *n = e->n_workers;
    pthread_mutex_unlock(&e->lock);
    return CINFER_OK;
}

int cinfer_engine_server_info(struct cinfer_engine *e, struct cinfer_server_info *out, struct cinfer_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model_path, sizeof out->model_path, "%s",
             e->args.model_path ? e->args.model_path : cinfer_default_model_path());
    snprintf(out->version, sizeof out->version, "%s", CINFER_VERSION);
    snprintf(out->run_dir, sizeof out->run_dir, "%s", e->endpoints.run_dir);
    out->tp_size = e->args.tp_size;
    out->dp_size = e->args.dp_size;
    out->kv_page_size = e->args.page_size;
    out->n_workers = e->n_workers;
    out->n_replicas = e->n_replicas;
    pthread_mutex_lock(&e->lock);
    for (int i = 0; i < e->n_workers && !out->vocab_size; i++) {
        const struct engine_worker *w = &e->workers[i];
        if (w->role == CINFER_WORKER_SCHEDULER && w->limits.vocab_size) { /* every replica: the same model */
            out->max_total_tokens = (int64_t)w->limits.max_total_tokens;
            out->max_request_len = (int)w->limits.max_request_len;
            out->max_running_requests = (int)w->limits.max_running_requests;
            out->vocab_size = (int)w->limits.vocab_size;
        }
    }
    pthread_mutex_unlock(&e->lock);
    struct cinfer_replica_info *replicas = calloc((size_t)e->n_replicas, sizeof *replicas);
    if (!replicas)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for the server info");
    int rc = gather_replicas(e, replicas, err);
    for (int r = 0; rc == CINFER_OK && r < e->n_replicas; r++) {
        const struct cinfer_replica_info *ri = &replicas[r];
        out->running_requests += ri->running_requests;
        out->queued_requests += ri->queued_requests;
        out->prefix_cache_hit_tokens += ri->prefix_cache_hit_tokens;
        out->prefix_cache_query_tokens += ri->prefix_cache_query_tokens;
        out->kv_pages_total += ri->kv_pages_total;
        out->kv_pages_free += ri->kv_pages_free;
        out->prefill_tokens += ri->prefill_tokens;
        out->retractions += ri->retractions;
    }
    free(replicas);
    return rc;
}
