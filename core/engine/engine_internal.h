/* The engine's state, shared by its files: lifecycle (engine.c), workers
 * (engine_workers.c), requests (engine_requests.c) and control (engine_control.c). */
#ifndef CINFER_ENGINE_ENGINE_INTERNAL_H
#define CINFER_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/launcher.h"
#include "engine/port_args.h"
#include "ipc/curve.h"
#include "ipc/messages.h"

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
    int cached_tokens;
    struct engine_chunk *next;
};

struct engine_request {
    uint64_t rid;
    int replica;                      /* the data-parallel replica it was sent to */
    pthread_cond_t ready;             /* a chunk arrived */
    struct engine_chunk *head, *tail;
    int final_queued;                 /* the last chunk is in the queue: ignore anything later */
    struct engine_request *next;      /* hash chain */
};

/* A fork of the engine's process that runs a hook (custom hooks), per worker. */
struct engine_child_job {
    struct cinfer_engine *engine;
    int index;                        /* its worker in engine->workers */
    int role;
    int dp_rank, tp_rank;
};

struct engine_worker {
    char name[128];                   /* "detokenizer", "scheduler tp0", "scheduler dp1 tp0" (with dp_size > 1),
                                       * "... on host b" when it runs on a listed host */
    int role;                         /* enum cinfer_worker_role_id */
    int dp_rank, tp_rank;
    char host[64];                    /* where it runs ("localhost") */
    int listed_host;                  /* host is one of launcher.hosts, for the launcher to reach */
    struct cinfer_worker_handle *handle; /* the launcher's; NULL once reaped */
    int lifeline;                     /* our end of its standard input (socket); -1 when closed */
    enum cinfer_worker_phase phase;
    struct cinfer_msg_ready limits;   /* from its READY */
    long last_heartbeat_ms;           /* monotonic; READY counts as the first heartbeat */
    struct engine_child_job job;      /* read only by its forked child (custom hooks) */
    struct cinfer_port_args ports;    /* its endpoints, as it gets them */
};

enum engine_replica_state { REPLICA_STARTING = 1, REPLICA_UP = 2, REPLICA_DOWN = 3 };

/* One data-parallel replica: tp_size scheduler ranks, the sockets that reach them, and
 * what the router knows of it. */
struct engine_replica {
    int dp_rank;
    int first_worker;                 /* index of its tp0 in workers; its ranks follow */
    enum engine_replica_state state;
    long start_deadline_ms;           /* while STARTING (a restart) */
    void *to_scheduler;               /* PUSH to its tp0; under send_lock */
    void **rpc;                       /* (tp_size) DEALER per rank; under rpc_lock */
    int in_flight;                    /* requests routed here and still open; under lock */
    int routed;                       /* requests ever routed here; under lock */
    char comm_name[128];              /* the shared-memory communicator the engine made for it, or "" */
    int starts;                       /* times its ranks were started (names each start's segment) */
};

struct engine_router;                 /* router.h */

struct cinfer_engine {
    struct cinfer_server_args args;
    struct cinfer_engine_hooks hooks;
    int custom_hooks;                 /* run hooks in forked children instead of exec */
    struct cinfer_tokenizer_ctx *tok;

    struct engine_endpoints endpoints;
    char worker_path[4200];
    void *zmq_context;
    void *from_detokenizer;           /* PULL; engine thread only */
    void *status;                     /* PULL; engine thread (and create) only */
    struct cinfer_zap *zap;           /* admits the engine's CURVE clients (tcp channels) */
    uint64_t next_call_id;
    pthread_mutex_t send_lock;
    pthread_mutex_t rpc_lock;

    struct cinfer_plugin *launcher_plugin;
    const struct cinfer_launcher_ops *launcher;
    struct cinfer_launcher *launch;
    struct engine_worker *workers;    /* (n_workers): the detokenizer, then each replica's ranks */
    int n_workers;
    struct engine_replica *replicas;  /* (dp_size) */
    int n_replicas;
    struct engine_router *router;     /* under lock */

    pthread_t thread;                 /* receives TEXT, watches the workers */
    int thread_started;
    volatile int stopping;

    pthread_mutex_t lock;             /* everything below, and replica state / counters */
    pthread_cond_t idle;              /* n_inflight dropped */
    struct engine_request *buckets[ENGINE_BUCKETS];
    int n_inflight;
    uint64_t next_rid;
    int healthy;                      /* every worker up */
    int accepting;
    char failure[1024];               /* why the engine is (or was last) unhealthy */
};

/* engine_workers.c */
/* Starts the detokenizer and every replica and waits for all of them to be READY (up to
 * engine.start_timeout); on failure nothing is left running. */
int cinfer_engine_start_workers(struct cinfer_engine *e, struct cinfer_error *err);
/* Stops every worker (lifelines closed, SIGKILL after a grace period) and closes the
 * sockets that reach them. */
void cinfer_engine_stop_workers(struct cinfer_engine *e);
/* The watchdog's turn on the engine thread: status frames (READY of a restarting
 * replica, heartbeats, failures), workers that ended or stopped heartbeating, replicas
 * that restart. A scheduler's end fails its replica's requests only; the detokenizer's,
 * or the last replica's without a restart policy, ends the engine. */
void cinfer_engine_watch(struct cinfer_engine *e);
/* Index of a replica that is up and may take a new request for these prompt ids (the
 * router's choice), counted as in flight there; -1 when none is up. Lock held. */
int cinfer_engine_route(struct cinfer_engine *e, const int32_t *ids, size_t n_ids);

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
/* Ends every request of one replica (lock held). */
void cinfer_engine_fail_replica(struct cinfer_engine *e, int replica, int code, const char *why);
/* Sends a frame to one replica's tp0. */
int cinfer_engine_send_to_scheduler(struct cinfer_engine *e, int replica, const void *frame, size_t len,
                                    struct cinfer_error *err);
void cinfer_engine_handle_text_frame(struct cinfer_engine *e, const void *frame, size_t len);

#endif
