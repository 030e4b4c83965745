/* The messages that cross process boundaries, one encode/decode pair per type.
 *
 * Frame: magic "CINF" (u32 0x464E4943), protocol version (u32), type (u32), then the
 * body fields in order, all little-endian, every length and count bounded. Decoders
 * reject a frame that is short, long, of another version, or whose fields exceed
 * their limits, and say which field; a rejected frame is logged and dropped.
 *
 * Logprobs (in TOKENS items and TEXT) follow the ids they describe: a u8 flag (0: none,
 * 1: present) and, when present, per id: f32 logprob, u8 n_top (at most
 * CINFER_MAX_TOP_LOGPROBS), then n_top pairs of i32 id and f32 logprob.
 *
 * GENERATE ends with the request's grammar (constrained decoding: grammar text as
 * core/grammar/grammar.h reads it, the json_schema / regex / ebnf of the request
 * already turned into it by the main process; empty for none).
 *
 * A TOKENS item and a TEXT message end with a u32 cached_tokens (prompt tokens the
 * prefix cache held when the request first started) after the code.
 *
 * A TOKENS item and a TEXT message end with an i32 code: the enum cinfer_status of a
 * request that failed (finish reason ERROR), 0 for any other. The code is what callers
 * get (C API status, HTTP status); the error string is only words for a person. A
 * decoder rejects a code outside the enum, an ERROR without a code and a code without
 * an ERROR. */
#ifndef CINFER_IPC_MESSAGES_H
#define CINFER_IPC_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/engine.h"
#include "cinfer/error.h"

#define CINFER_IPC_MAGIC 0x464E4943u /* "CINF" */
/* 2: TOKENS and TEXT carry logprobs; 3: and an error code; DETOK_REQUEST carries the
 * prompt's tail; HEARTBEAT and WORKER_SETTINGS. 4: GENERATE carries a grammar, TOKENS
 * items and TEXT the prefix-cache hit. */
#define CINFER_IPC_VERSION 4u

/* Limits a decoder enforces. */
#define CINFER_IPC_MAX_IDS (1u << 22)        /* token ids in one message */
#define CINFER_IPC_MAX_TEXT (1u << 26)       /* bytes of text in one message */
#define CINFER_IPC_MAX_SHORT_TEXT 4096u      /* method names, stop strings, error messages */
#define CINFER_IPC_MAX_BATCH 65536u          /* items in one token batch */
#define CINFER_IPC_MAX_PROMPT_TAIL 32u       /* prompt ids in a DETOK_REQUEST (the scheduler sends this many) */

enum cinfer_msg_type {
    CINFER_MSG_READY = 1,       /* worker -> main (status channel) */
    CINFER_MSG_FAILED = 2,      /* worker -> main (status channel) */
    CINFER_MSG_GENERATE = 3,    /* main -> scheduler */
    CINFER_MSG_ABORT = 4,       /* main -> scheduler */
    CINFER_MSG_TOKENS = 5,      /* scheduler -> detokenizer */
    CINFER_MSG_TEXT = 6,        /* detokenizer -> main */
    CINFER_MSG_RPC_CALL = 7,    /* main -> scheduler (DEALER/ROUTER) */
    CINFER_MSG_RPC_REPLY = 8,   /* scheduler -> main */
    CINFER_MSG_SHUTDOWN = 9,    /* main -> workers: drain and exit */
    CINFER_MSG_DETOK_REQUEST = 10, /* scheduler -> detokenizer: how to decode a new request */
    CINFER_MSG_HEARTBEAT = 11,  /* worker -> main (status channel): its loop is turning */
    CINFER_MSG_WORKER_SETTINGS = 12, /* main -> worker (its standard input): settings and endpoints */
};
const char *cinfer_msg_type_name(uint32_t type);

enum cinfer_worker_role_id { CINFER_WORKER_SCHEDULER = 1, CINFER_WORKER_DETOKENIZER = 2 };

struct cinfer_msg_ready {
    uint8_t role;               /* enum cinfer_worker_role_id */
    uint32_t tp_rank, dp_rank;
    uint32_t pid;
    uint64_t max_total_tokens;  /* KV capacity in tokens (scheduler) */
    uint32_t max_request_len;   /* context length (scheduler) */
    uint32_t max_running_requests;
    uint32_t vocab_size;
};

struct cinfer_msg_failed {
    uint8_t role;
    uint32_t tp_rank, dp_rank;
    uint32_t pid;
    int32_t code;               /* enum cinfer_status */
    char *message;              /* malloc'd by decode */
};

/* Sent by a worker's loop between steps (at most every few hundred ms): the watchdog
 * declares a worker hung when none has come for engine.watchdog_timeout. */
struct cinfer_msg_heartbeat {
    uint8_t role;
    uint32_t tp_rank, dp_rank;
    uint32_t pid;
};

/* What a worker needs to run, sent on its standard input before anything else: every
 * setting (libconfig text, as cinfer_server_args_to_string writes it) and the engine's
 * endpoints. Its identity (role, ranks) comes from its launch, not from here. */
#define CINFER_IPC_MAX_SETTINGS (1u << 24) /* bytes of settings text */
struct cinfer_msg_worker_settings {
    char *server_args;               /* malloc'd by decode */
    struct cinfer_port_args ports;
};

struct cinfer_msg_generate {
    uint64_t rid;
    int32_t *ids;               /* (n_ids) prompt tokens; malloc'd by decode */
    uint32_t n_ids;
    struct cinfer_sampling_params sampling; /* stop strings malloc'd by decode; json_schema,
                                               regex and ebnf are not sent (grammar is) */
    uint8_t stream;
    char *grammar;              /* grammar text or NULL; malloc'd by decode */
};
#define CINFER_IPC_MAX_GRAMMAR (1u << 22) /* bytes of grammar text */

struct cinfer_msg_abort {
    uint64_t rid;
    uint8_t quiet;              /* 1: finished elsewhere (stop string); send nothing back */
};

/* One request's new tokens in a scheduler step. */
struct cinfer_token_item {
    uint64_t rid;
    int32_t *ids;               /* new ids; malloc'd by decode */
    uint32_t n_ids;
    uint8_t finish_reason;      /* enum cinfer_finish_reason */
    uint32_t prompt_tokens;
    uint32_t completion_tokens;
    char *error;                /* for CINFER_FINISH_ERROR; malloc'd by decode, may be NULL */
    struct cinfer_token_logprob *logprobs; /* (n_ids) or NULL when not asked; malloc'd by decode */
    int32_t code;               /* enum cinfer_status for CINFER_FINISH_ERROR, else 0 */
    uint32_t cached_tokens;     /* prompt tokens found in the prefix cache */
};

struct cinfer_msg_tokens {
    struct cinfer_token_item *items;
    uint32_t n_items;
};

struct cinfer_msg_text {
    uint64_t rid;
    char *text;                 /* new text; malloc'd by decode */
    uint32_t text_len;
    int32_t *ids;
    uint32_t n_ids;
    uint8_t finish_reason;
    char *matched_stop;         /* may be NULL */
    uint32_t prompt_tokens;
    uint32_t completion_tokens;
    char *error;                /* may be NULL */
    struct cinfer_token_logprob *logprobs; /* (n_ids) or NULL; malloc'd by decode */
    int32_t code;               /* enum cinfer_status for CINFER_FINISH_ERROR, else 0 */
    uint32_t cached_tokens;     /* prompt tokens found in the prefix cache */
};

/* Sent by the scheduler before the first TOKENS of a request, on the same channel, so
 * the detokenizer knows how to turn its ids into text and where to stop. The prompt's
 * last ids let it decode the output as it reads after the prompt (the first output
 * token's leading space, a character the prompt left half spelled). */
struct cinfer_msg_detok_request {
    uint64_t rid;
    uint8_t skip_special_tokens;
    uint8_t no_stop_trim;
    char *stop[CINFER_MAX_STOP_STRINGS]; /* malloc'd by decode */
    uint32_t n_stop;
    int32_t *prompt_tail;       /* (n_prompt_tail) the prompt's last ids, in order; malloc'd by decode */
    uint32_t n_prompt_tail;     /* at most CINFER_IPC_MAX_PROMPT_TAIL */
};

struct cinfer_msg_rpc_call {
    uint64_t call_id;
    char *method;
    char *payload;              /* JSON text */
};

struct cinfer_msg_rpc_reply {
    uint64_t call_id;
    uint32_t tp_rank;
    int32_t status;
    char *payload;
};

/* Encoders return a malloc'd frame in *frame / *frame_len. */
int cinfer_msg_encode_ready(const struct cinfer_msg_ready *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_failed(const struct cinfer_msg_failed *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_heartbeat(const struct cinfer_msg_heartbeat *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_worker_settings(const struct cinfer_msg_worker_settings *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_generate(const struct cinfer_msg_generate *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_abort(const struct cinfer_msg_abort *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_tokens(const struct cinfer_msg_tokens *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_text(const struct cinfer_msg_text *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_rpc_call(const struct cinfer_msg_rpc_call *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_rpc_reply(const struct cinfer_msg_rpc_reply *m, void **frame, size_t *frame_len);
int cinfer_msg_encode_shutdown(void **frame, size_t *frame_len);
int cinfer_msg_encode_detok_request(const struct cinfer_msg_detok_request *m, void **frame, size_t *frame_len);
int cinfer_msg_decode_detok_request(const void *frame, size_t len, struct cinfer_msg_detok_request *m,
                                    struct cinfer_error *err);
void cinfer_msg_detok_request_free(struct cinfer_msg_detok_request *m);

/* Reads the header; CINFER_ERR_PARSE (with err saying why) for a bad one. */
int cinfer_msg_peek_type(const void *frame, size_t len, uint32_t *type, struct cinfer_error *err);

/* Decoders fill *m (owning malloc'd fields, freed by the matching _free) or return
 * CINFER_ERR_PARSE with the message type, the field and the problem in err. */
int cinfer_msg_decode_ready(const void *frame, size_t len, struct cinfer_msg_ready *m, struct cinfer_error *err);
int cinfer_msg_decode_failed(const void *frame, size_t len, struct cinfer_msg_failed *m, struct cinfer_error *err);
int cinfer_msg_decode_heartbeat(const void *frame, size_t len, struct cinfer_msg_heartbeat *m,
                                struct cinfer_error *err);
int cinfer_msg_decode_worker_settings(const void *frame, size_t len, struct cinfer_msg_worker_settings *m,
                                      struct cinfer_error *err);
void cinfer_msg_worker_settings_free(struct cinfer_msg_worker_settings *m);
int cinfer_msg_decode_generate(const void *frame, size_t len, struct cinfer_msg_generate *m, struct cinfer_error *err);
int cinfer_msg_decode_abort(const void *frame, size_t len, struct cinfer_msg_abort *m, struct cinfer_error *err);
int cinfer_msg_decode_tokens(const void *frame, size_t len, struct cinfer_msg_tokens *m, struct cinfer_error *err);
int cinfer_msg_decode_text(const void *frame, size_t len, struct cinfer_msg_text *m, struct cinfer_error *err);
int cinfer_msg_decode_rpc_call(const void *frame, size_t len, struct cinfer_msg_rpc_call *m, struct cinfer_error *err);
int cinfer_msg_decode_rpc_reply(const void *frame, size_t len, struct cinfer_msg_rpc_reply *m, struct cinfer_error *err);

void cinfer_msg_failed_free(struct cinfer_msg_failed *m);
void cinfer_msg_generate_free(struct cinfer_msg_generate *m);
void cinfer_msg_tokens_free(struct cinfer_msg_tokens *m);
void cinfer_msg_text_free(struct cinfer_msg_text *m);
void cinfer_msg_rpc_call_free(struct cinfer_msg_rpc_call *m);
void cinfer_msg_rpc_reply_free(struct cinfer_msg_rpc_reply *m);

#endif
