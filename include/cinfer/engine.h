/* cinfer/engine.h — the engine: create it from a configuration, generate (blocking,
 * streaming by callback, or as an iterator), abort, flush the prefix cache, ask for
 * server info, call every scheduler rank, shut down.
 *
 * The engine is a main process (this library, in the caller's process) joined by
 * ZeroMQ to worker processes: dp_size replicas of tp_size scheduler ranks each, and one
 * detokenizer, started through a launcher plugin and watched by a watchdog thread.
 * Every function is thread-safe; two engines in one process are independent. */
#ifndef CINFER_ENGINE_H
#define CINFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cinfer_engine;
struct cinfer_server_args;    /* cinfer/config.h */
/* A tokenizer ready to use: the plugin that made it, its ops and its state. */
struct cinfer_plugin;
struct cinfer_tokenizer;
struct cinfer_tokenizer_ops;
struct cinfer_tokenizer_ctx {
    struct cinfer_plugin *plugin;          /* NULL when the ops are not from a plugin */
    const struct cinfer_tokenizer_ops *ops;
    struct cinfer_tokenizer *tok;
};
/* Closes the tokenizer and its plugin; sets *ctx to NULL. */
CINFER_API void cinfer_tokenizer_ctx_free(struct cinfer_tokenizer_ctx **ctx);

/* ---- sampling and stopping, per request -------------------------------------------- */
#define CINFER_MAX_STOP_STRINGS 16
#define CINFER_MAX_STOP_TOKEN_IDS 16
#define CINFER_MAX_LOGIT_BIAS 64    /* entries in one request's logit_bias map */
#define CINFER_MAX_TOP_LOGPROBS 20  /* alternatives per token, as OpenAI's top_logprobs */
#define CINFER_MAX_STOP_STRING_BYTES 4096

struct cinfer_sampling_params {
    float temperature;          /* 0: greedy */
    int top_k;                  /* 0 or -1: off */
    float top_p;                /* 1: off */
    float min_p;                /* 0: off */
    float repetition_penalty;   /* 1: off */
    float frequency_penalty;    /* 0: off */
    float presence_penalty;     /* 0: off */
    uint64_t seed;              /* used when has_seed */
    int has_seed;
    int max_new_tokens;
    int min_new_tokens;
    int ignore_eos;
    int skip_special_tokens;    /* in the returned text */
    int no_stop_trim;           /* keep the matched stop string in the text */
    const char *stop[CINFER_MAX_STOP_STRINGS];
    int n_stop;
    int32_t stop_token_ids[CINFER_MAX_STOP_TOKEN_IDS];
    int n_stop_token_ids;
    /* OpenAI's logit_bias map: logit_bias_values[i] in [-100, 100] is added to token
     * logit_bias_ids[i] after the penalties and before the temperature. */
    int32_t logit_bias_ids[CINFER_MAX_LOGIT_BIAS];
    float logit_bias_values[CINFER_MAX_LOGIT_BIAS];
    int n_logit_bias;
    int logprobs;               /* report each token's logprob (after penalties, bias and
                                   temperature, before truncation) */
    int top_logprobs;           /* and this many alternatives, 0..CINFER_MAX_TOP_LOGPROBS */
    int priority;               /* waiting requests of higher priority start first; default 0 */
    int waiting_timeout_ms;     /* not started within this: finishes ABORT, "waiting timeout of N ms"; 0: none */
    int running_timeout_ms;     /* not done this long after it started: ABORT, "running timeout of N ms"; 0: none */
    /* Constrained decoding, SGLang's parameters (at most one; NULL: none): the output
     * is a JSON value valid under json_schema (JSON text; "{\"type\":\"object\"}"
     * for OpenAI's json_object), matches regex whole (ECMAScript syntax), or is a
     * sentence of ebnf (GBNF / XGrammar EBNF, start rule `root`). A token the
     * grammar does not allow next is never sampled; EOS and stop token ids are
     * allowed only where the grammar can end. Unsupported schema keywords or regex
     * features are refused (CINFER_ERR_UNSUPPORTED) naming them. */
    const char *json_schema;
    const char *regex;
    const char *ebnf;
};

/* Defaults as SGLang's: greedy off (temperature 1), max_new_tokens 128, skip specials. */
CINFER_API void cinfer_sampling_params_init(struct cinfer_sampling_params *p);

enum cinfer_finish_reason {
    CINFER_FINISH_NONE = 0,        /* not finished (stream chunks) */
    CINFER_FINISH_LENGTH = 1,      /* max_new_tokens or the context limit */
    CINFER_FINISH_STOP_TOKEN = 2,  /* EOS or a stop token id */
    CINFER_FINISH_STOP_STRING = 3, /* a stop string matched */
    CINFER_FINISH_ABORT = 4,       /* aborted by the caller */
    CINFER_FINISH_ERROR = 5,       /* failed: the error says why */
};
CINFER_API const char *cinfer_finish_reason_name(enum cinfer_finish_reason r);

#define CINFER_MAX_CHOICES 128   /* n of one request, as OpenAI's limit */

struct cinfer_generate_request {
    const char *prompt;           /* text, tokenized by the engine; or NULL and input_ids */
    const int32_t *input_ids;
    size_t n_input_ids;
    struct cinfer_sampling_params sampling;
    int n;                        /* choices (OpenAI's n): 0 or 1 is one; more needs
                                     cinfer_engine_generate_n() */
};

/* One generated token's log-probability and its most likely alternatives, as OpenAI's
 * logprobs.content[i]; present when sampling.logprobs is set. The distribution is the
 * one sampled from: after penalties, logit bias and temperature (a temperature below
 * 1e-5 keeps the raw scale), before top-k/top-p/min-p truncation. */
struct cinfer_token_logprob {
    int32_t token;
    float logprob;                /* natural log; -inf for a token that was impossible */
    int n_top;                    /* 0..sampling.top_logprobs (tokens at -inf are left out) */
    int32_t top_ids[CINFER_MAX_TOP_LOGPROBS];      /* most likely first, lower id first on ties */
    float top_logprobs[CINFER_MAX_TOP_LOGPROBS];
};

/* One piece of a stream: the text and ids that are new since the last chunk. */
struct cinfer_stream_chunk {
    uint64_t request_id;
    const char *text;             /* new text, complete UTF-8 */
    size_t text_len;
    const int32_t *ids;           /* new token ids */
    size_t n_ids;
    enum cinfer_finish_reason finish_reason; /* NONE until the last chunk */
    const char *matched_stop;     /* the stop string or NULL */
    int prompt_tokens;
    int completion_tokens;
    const struct cinfer_token_logprob *logprobs; /* (n_logprobs): one per id of ids, or
                                                    NULL when sampling.logprobs is off */
    size_t n_logprobs;
    int cached_tokens;            /* prompt tokens the prefix cache held when it started */
};

struct cinfer_generate_result {
    uint64_t request_id;
    char *text;                   /* malloc'd */
    size_t text_len;
    int32_t *output_ids;          /* malloc'd */
    size_t n_output_ids;
    enum cinfer_finish_reason finish_reason;
    char *matched_stop;           /* malloc'd or NULL */
    int prompt_tokens;
    int completion_tokens;
    struct cinfer_token_logprob *logprobs; /* (n_logprobs) malloc'd, one per output id; NULL
                                              when sampling.logprobs is off */
    size_t n_logprobs;
    int cached_tokens;            /* prompt tokens the prefix cache held when it started
                                     (OpenAI's usage.prompt_tokens_details.cached_tokens) */
};
CINFER_API void cinfer_generate_result_free(struct cinfer_generate_result *r);

/* ---- channels: the seeds' PortArgs --------------------------------------------------- */
/* The ZeroMQ endpoints one worker uses, as the engine hands them to it (on its standard
 * input, with its settings): ipc:// inside the engine's private run folder (mode 0700)
 * between processes on one machine, tcp:// with CURVE between hosts. The receiving side
 * of each channel binds, so each can be reached (and tested) alone. A worker's copy has
 * its own replica's and rank's endpoints in the per-worker fields. */
#define CINFER_ENDPOINT_BYTES 256
#define CINFER_CURVE_KEY_BYTES 41 /* a Z85 key: 40 characters and a NUL */
struct cinfer_port_args {
    char run_dir[192];
    char status[CINFER_ENDPOINT_BYTES];            /* workers PUSH READY/FAILED/HEARTBEAT -> main PULL (binds) */
    char tokenizer_input[CINFER_ENDPOINT_BYTES];   /* detokenizer PUSH TEXT -> main PULL (binds) */
    char detokenizer_input[CINFER_ENDPOINT_BYTES]; /* schedulers PUSH -> detokenizer PULL (binds) */
    /* per worker: */
    char scheduler_input[CINFER_ENDPOINT_BYTES];   /* main PUSH -> its replica's tp0 PULL (binds) */
    char rpc[CINFER_ENDPOINT_BYTES];               /* main DEALER -> its rank's ROUTER (binds) */
    char plan[CINFER_ENDPOINT_BYTES];              /* its replica's tp0 ROUTER (binds) -> followers' DEALER:
                                                    * each forward's plan (tensor parallelism) */
    char comm[128];                                /* its replica's communicator (tp_size > 1), see below */
    /* CURVE for tcp:// endpoints (empty for ipc://): the binding side of every channel
     * serves with the server key pair and accepts only clients that present the client
     * key pair; both are fresh for each engine and travel only on standard input. */
    char curve_server_public[CINFER_CURVE_KEY_BYTES];
    char curve_server_secret[CINFER_CURVE_KEY_BYTES];
    char curve_client_public[CINFER_CURVE_KEY_BYTES];
    char curve_client_secret[CINFER_CURVE_KEY_BYTES];
};

/* How port args' comm names a replica's communicator:
 *   "/NAME"             a shared-memory segment the engine made on this machine;
 *   "shm-by-rank0:/NAME" a shared-memory segment rank 0 makes on its host (all the
 *                       replica's ranks are there); the others wait for it, and rank 0
 *                       removes the name once every rank has joined;
 *   "tcp://ADDR:PORT"   the tcp communicator through rank 0 (ranks on different hosts
 *                       without MPI: the slow path);
 *   "group"             the one the launcher's group_join hands the worker (launch-mpi). */
#define CINFER_COMM_SHM_BY_RANK0 "shm-by-rank0:"
#define CINFER_COMM_GROUP "group"

/* ---- hooks: how worker processes run and how the tokenizer is made ----------------- */
/* Bump when a slot is appended; slots are never reordered or removed. A caller fills
 * the struct with cinfer_engine_default_hooks() (which sets version and struct_size)
 * and then replaces the slots it wants; the engine reads only the slots struct_size
 * covers and uses its defaults for the rest. */
#define CINFER_ENGINE_HOOKS_VERSION 1u
struct cinfer_engine_hooks {
    uint32_t version;     /* CINFER_ENGINE_HOOKS_VERSION the caller was built with */
    uint32_t struct_size; /* sizeof(struct cinfer_engine_hooks) the caller was built with */
    /* Runs in the scheduler worker process; returns its exit status. */
    int (*run_scheduler_process)(const struct cinfer_server_args *args, const struct cinfer_port_args *ports,
                                 int gpu_id, int tp_rank, int dp_rank);
    /* Runs in the detokenizer worker process; returns its exit status. */
    int (*run_detokenizer_process)(const struct cinfer_server_args *args, const struct cinfer_port_args *ports);
    /* Runs in the main process (and in the detokenizer) to make the tokenizer. */
    int (*init_tokenizer)(const struct cinfer_server_args *args, struct cinfer_tokenizer_ctx **out,
                          struct cinfer_error *err);
};
/* The real implementations (and version, struct_size); an embedder copies them and
 * overrides some slots. */
CINFER_API void cinfer_engine_default_hooks(struct cinfer_engine_hooks *hooks);

/* The body of a worker executable: parses `ROLE [--dp-rank R] [--tp-rank N]`, reads the
 * engine's settings and endpoints from standard input (which then stays open as the
 * lifeline: end of file means the engine is gone) and runs the hook for the role
 * (hooks may be NULL for the defaults). cinfer-worker is main() calling this. */
CINFER_API int cinfer_worker_main(int argc, char **argv, const struct cinfer_engine_hooks *hooks);

/* ---- lifecycle --------------------------------------------------------------------- */
/* hooks may be NULL (the defaults). Waits for every worker's READY up to the configured
 * start deadline; on failure nothing is left running and err names the worker and
 * carries its own message. */
CINFER_API int cinfer_engine_create(const struct cinfer_server_args *args, const struct cinfer_engine_hooks *hooks,
                                    struct cinfer_engine **out, struct cinfer_error *err);
/* Stops accepting, drains in-flight requests up to drain_timeout_ms, stops the workers,
 * removes the run folder; sets *engine to NULL. */
CINFER_API void cinfer_engine_shutdown(struct cinfer_engine **engine, int drain_timeout_ms);
/* 1 while every worker is alive and answering. */
CINFER_API int cinfer_engine_healthy(struct cinfer_engine *engine);
/* The main process's tokenizer (the one prompts are encoded with), owned by the
 * engine and valid until shutdown; its encode and decode may be called from any thread. */
CINFER_API struct cinfer_tokenizer_ctx *cinfer_engine_tokenizer(struct cinfer_engine *engine);

/* ---- generation -------------------------------------------------------------------- */
/* One choice: a request with n > 1 is refused here (see cinfer_engine_generate_n). */
CINFER_API int cinfer_engine_generate(struct cinfer_engine *engine, const struct cinfer_generate_request *req,
                                      struct cinfer_generate_result *out, struct cinfer_error *err);
/* n > 1 (OpenAI's n, SGLang's parallel sampling): req->n choices of one prompt, sent
 * together so they batch and share the prompt's KV pages through the prefix cache.
 * Each choice is its own request; when sampling.has_seed, choice i samples with seed
 * + i, so generating it alone with that seed gives the same output. results must hold
 * n_results >= max(req->n, 1) entries; they are filled in choice order. On an error
 * no result is left allocated and the choices still running are aborted. */
CINFER_API int cinfer_engine_generate_n(struct cinfer_engine *engine, const struct cinfer_generate_request *req,
                                        struct cinfer_generate_result *results, size_t n_results,
                                        struct cinfer_error *err);
/* Calls fn for each chunk (from the calling thread); fn returns nonzero to abort.
 * One choice, as cinfer_engine_generate (and cinfer_engine_stream_open). */
typedef int (*cinfer_stream_fn)(const struct cinfer_stream_chunk *chunk, void *ctx);
CINFER_API int cinfer_engine_generate_stream(struct cinfer_engine *engine, const struct cinfer_generate_request *req,
                                             cinfer_stream_fn fn, void *ctx, struct cinfer_error *err);
/* Iterator form: open, then next() until it reports a finish reason, then close.
 * Closing early aborts the request. */
struct cinfer_stream;
CINFER_API int cinfer_engine_stream_open(struct cinfer_engine *engine, const struct cinfer_generate_request *req,
                                         struct cinfer_stream **out, struct cinfer_error *err);
/* Waits up to timeout_ms (-1 forever); the chunk stays valid until the next call. */
CINFER_API int cinfer_stream_next(struct cinfer_stream *s, struct cinfer_stream_chunk *chunk, int timeout_ms,
                                  struct cinfer_error *err);
CINFER_API uint64_t cinfer_stream_request_id(const struct cinfer_stream *s);
CINFER_API void cinfer_stream_close(struct cinfer_stream **s);

CINFER_API int cinfer_engine_abort(struct cinfer_engine *engine, uint64_t request_id);

/* ---- control ----------------------------------------------------------------------- */
enum cinfer_worker_phase {
    CINFER_WORKER_STARTING = 1,   /* started, READY not yet seen */
    CINFER_WORKER_UP = 2,         /* READY, heartbeating */
    CINFER_WORKER_DOWN = 3,       /* ended (exited, killed, stopped by the watchdog) */
};
/* One worker process of the engine. */
struct cinfer_worker_info {
    char role[16];                /* "scheduler" or "detokenizer" */
    int dp_rank;                  /* replica (0 for the detokenizer) */
    int tp_rank;
    char host[64];                /* where it runs ("localhost" for this machine) */
    int pid;                      /* on that host; 0 before READY */
    enum cinfer_worker_phase phase;
};
/* One data-parallel replica: its requests and its prefix cache. */
struct cinfer_replica_info {
    int dp_rank;
    int up;                       /* 1 when every rank is READY and serving */
    int running_requests;
    int queued_requests;
    int routed_requests;          /* requests sent to it since start */
    int in_flight;                /* of those, still open */
    int64_t prefix_cache_hit_tokens;
    int64_t prefix_cache_query_tokens;
    int kv_pages_total;
    int kv_pages_free;
    int64_t prefill_tokens;
    int64_t retractions;
};
struct cinfer_server_info {
    char model_path[1024];
    char run_dir[192];            /* the engine's private folder of sockets (for operators) */
    int n_workers;                /* every worker process (cinfer_engine_workers lists them) */
    int n_replicas;               /* data-parallel replicas (cinfer_engine_replicas lists them) */
    char architecture[32];
    char version[32];             /* cinfer's */
    int tp_size;
    int dp_size;
    int vocab_size;
    int64_t max_total_tokens;     /* KV cache capacity in tokens, from the scheduler's READY */
    int max_request_len;          /* the context length */
    int max_running_requests;
    int64_t prefix_cache_hit_tokens;
    int64_t prefix_cache_query_tokens;
    int running_requests;
    int queued_requests;
    int kv_pages_total;           /* KV cache pages of scheduler tp0, and how many are free */
    int kv_pages_free;            /* (pages held only by the prefix cache count as used) */
    int kv_page_size;             /* tokens per page */
    int64_t prefill_tokens;       /* prompt tokens computed since start (cache hits excluded) */
    int64_t retractions;          /* requests sent back to the queue under KV pressure */
};
/* The figures are sums over the replicas that are up; a replica's KV page figures are
 * its tp0's. */
CINFER_API int cinfer_engine_server_info(struct cinfer_engine *engine, struct cinfer_server_info *out,
                                         struct cinfer_error *err);
/* Every worker: the detokenizer, then each replica's ranks in order. *out is malloc'd
 * (free() it), *n entries; never fails but for memory. */
CINFER_API int cinfer_engine_workers(struct cinfer_engine *engine, struct cinfer_worker_info **out, int *n,
                                     struct cinfer_error *err);
/* Every replica with its own figures (a replica that is down has only its counts).
 * *out is malloc'd (free() it), *n entries. */
CINFER_API int cinfer_engine_replicas(struct cinfer_engine *engine, struct cinfer_replica_info **out, int *n,
                                      struct cinfer_error *err);
CINFER_API int cinfer_engine_flush_cache(struct cinfer_engine *engine, struct cinfer_error *err);

/* Calls `method` on every scheduler rank of every replica that is up; replies[i] is
 * one rank's answer (malloc'd), replica by replica, rank by rank. */
struct cinfer_rpc_reply {
    int dp_rank;
    int tp_rank;
    int status;                   /* 0 or a cinfer_status from that rank */
    char *payload;                /* malloc'd, NUL-terminated (JSON text) */
    size_t payload_len;
};
CINFER_API int cinfer_engine_collective_rpc(struct cinfer_engine *engine, const char *method, const char *payload,
                                            int timeout_ms, struct cinfer_rpc_reply **replies, int *n_replies,
                                            struct cinfer_error *err);
CINFER_API void cinfer_rpc_replies_free(struct cinfer_rpc_reply *replies, int n);

#ifdef __cplusplus
}
#endif
#endif
