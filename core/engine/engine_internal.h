/* The engine's state, shared by its files: lifecycle (engine.c), workers
 * (engine_workers.c), requests (engine_requests.c) and control (engine_control.c). */
#ifndef CINFER_ENGINE_ENGINE_INTERNAL_H
#define CINFER_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/launcher.h"
#include "ipc/messages.h"

#define ENGINE_MAX_WORKERS 16
#define ENGINE_BUCKETS 256

/* One piece of output waiting for its caller. */
struct engine_chunk {
    char *text;
    size_t text_len;
    int32_t *ids;
    size_t n_ids;
    struct cinfer_token_logprob *logprobs; /* (n_ids) or NULL when not asked */
    enum cinfer_finish_reason finish_reason;
    char *matched_stop;
    char *error;
    int code;                         /* enum cinfer_status for CINFER_FINISH_ERROR, else 0 */
    int prompt_tokens;
    int completion_tokens;
    struct engine_chunk *next;
};

struct engine_request {
    uint64_t rid;
    pthread_cond_t ready;             /* a chunk arrived */
    struct engine_chunk *head, *tail;
    int final_queued;                 /* the last chunk is in the queue: ignore anything later */
    struct engine_request *next;      /* hash chain */
};

struct engine_worker {
    char name[32];                    /* "scheduler tp0" */
    int role;                         /* enum cinfer_worker_role_id */
    int tp_rank;
    struct cinfer_worker_handle *handle;
    int ready;
    struct cinfer_msg_ready limits;
    int exited;                       /* the watchdog has seen it end */
    long last_heartbeat_ms;           /* monotonic; READY counts as the first heartbeat */
};

struct cinfer_engine {
    struct cinfer_server_args args;
    struct cinfer_engine_hooks hooks;
    int custom_hooks;                 /* run hooks in forked children instead of exec */
    struct cinfer_tokenizer_ctx *tok;

    struct cinfer_port_args ports;
    char worker_path[4200];
    void *zmq_context;
    void *to_scheduler;               /* PUSH; caller threads, under send_lock */
    void *from_detokenizer;           /* PULL; engine thread only */
    void *status;                     /* PULL; engine thread (and create) only */
    void *rpc[ENGINE_MAX_WORKERS];    /* DEALER per scheduler rank; under rpc_lock */
    uint64_t next_call_id;
    pthread_mutex_t send_lock;
    pthread_mutex_t rpc_lock;
    int lifeline[2];                  /* workers' stdin: [0] read end, [1] held by us */

    struct cinfer_plugin *launcher_plugin;
    const struct cinfer_launcher_ops *launcher;
    struct cinfer_launcher *launch;
    struct engine_worker workers[ENGINE_MAX_WORKERS];
    int n_workers;

    pthread_t thread;                 /* receives TEXT, watches the workers */
    int thread_started;
    volatile int stopping;

    pthread_mutex_t lock;             /* everything below */
    pthread_cond_t idle;              /* n_inflight dropped */
    struct engine_request *buckets[ENGINE_BUCKETS];
    int n_inflight;
    uint64_t next_rid;
    int healthy;
    int accepting;
    char failure[1024];               /* why the engine is unhealthy */
};

/* engine_workers.c */
int cinfer_engine_start_workers(struct cinfer_engine *e, struct cinfer_error *err);
void cinfer_engine_stop_workers(struct cinfer_engine *e);
/* Returns 1 (and fills why) when a worker has ended since the last check, or has sent
 * no heartbeat for engine.watchdog_timeout (it is then killed). */
int cinfer_engine_check_workers(struct cinfer_engine *e, char *why, size_t why_bytes);
/* Notes a HEARTBEAT frame from the status channel; engine thread only. */
void cinfer_engine_note_heartbeat(struct cinfer_engine *e, const void *frame, size_t len);

/* engine_requests.c */
struct engine_request *cinfer_engine_request_register(struct cinfer_engine *e);          /* lock held */
void cinfer_engine_request_unregister(struct cinfer_engine *e, struct engine_request *r); /* lock held */
struct engine_request *cinfer_engine_request_find(struct cinfer_engine *e, uint64_t rid); /* lock held */
/* Queues a chunk (taking ownership of its strings); lock held. */
void cinfer_engine_request_push(struct engine_request *r, struct engine_chunk *c);
void cinfer_engine_chunk_free(struct engine_chunk *c);
/* Ends every request in flight with an error chunk of code (enum cinfer_status) and
 * why; lock held. */
void cinfer_engine_fail_all(struct cinfer_engine *e, int code, const char *why);
int cinfer_engine_send_to_scheduler(struct cinfer_engine *e, const void *frame, size_t len, struct cinfer_error *err);
void cinfer_engine_handle_text_frame(struct cinfer_engine *e, const void *frame, size_t len);

#endif
