/* Encoders and decoders for every IPC message (messages.h). */
#include "ipc/messages.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/wire.h"

const char *cinfer_msg_type_name(uint32_t type)
{
    switch (type) {
    case CINFER_MSG_READY: return "READY";
    case CINFER_MSG_FAILED: return "FAILED";
    case CINFER_MSG_GENERATE: return "GENERATE";
    case CINFER_MSG_ABORT: return "ABORT";
    case CINFER_MSG_TOKENS: return "TOKENS";
    case CINFER_MSG_TEXT: return "TEXT";
    case CINFER_MSG_RPC_CALL: return "RPC_CALL";
    case CINFER_MSG_RPC_REPLY: return "RPC_REPLY";
    case CINFER_MSG_SHUTDOWN: return "SHUTDOWN";
    case CINFER_MSG_DETOK_REQUEST: return "DETOK_REQUEST";
    case CINFER_MSG_HEARTBEAT: return "HEARTBEAT";
    case CINFER_MSG_WORKER_SETTINGS: return "WORKER_SETTINGS";
    }
    return "unknown";
}

/* ---- framing ---------------------------------------------------------------------- */

static void begin(struct wire_writer *w, uint32_t type)
{
    memset(w, 0, sizeof *w);
    cinfer_wire_put_u32(w, CINFER_IPC_MAGIC);
    cinfer_wire_put_u32(w, CINFER_IPC_VERSION);
    cinfer_wire_put_u32(w, type);
}

static int finish(struct wire_writer *w, void **frame, size_t *frame_len)
{
    if (w->failed) {
        cinfer_wire_writer_free(w);
        return CINFER_ERR_NOMEM;
    }
    *frame = w->buf;
    *frame_len = w->len;
    return CINFER_OK;
}

int cinfer_msg_peek_type(const void *frame, size_t len, uint32_t *type, struct cinfer_error *err)
{
    struct wire_reader r;
    cinfer_wire_reader_init(&r, frame, len);
    uint32_t magic = cinfer_wire_get_u32(&r, "magic");
    uint32_t version = cinfer_wire_get_u32(&r, "version");
    *type = cinfer_wire_get_u32(&r, "type");
    if (r.failed_field)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "frame of %zu bytes is too short for a header", len);
    if (magic != CINFER_IPC_MAGIC)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "frame does not start with the magic 0x%08X (found 0x%08X)",
                                CINFER_IPC_MAGIC, magic);
    if (version != CINFER_IPC_VERSION)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "frame has protocol version %u, expected %u", version,
                                CINFER_IPC_VERSION);
    return CINFER_OK;
}

/* Checks the header is the expected type; leaves r at the body. */
static int open_body(struct wire_reader *r, const void *frame, size_t len, uint32_t expected,
                     struct cinfer_error *err)
{
    uint32_t type;
    int rc = cinfer_msg_peek_type(frame, len, &type, err);
    if (rc)
        return rc;
    if (type != expected)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "expected a %s frame, found type %u (%s)",
                                cinfer_msg_type_name(expected), type, cinfer_msg_type_name(type));
    cinfer_wire_reader_init(r, (const uint8_t *)frame + 12, len - 12);
    return CINFER_OK;
}

static int close_body(struct wire_reader *r, uint32_t type, struct cinfer_error *err)
{
    if (cinfer_wire_reader_done(r))
        return CINFER_OK;
    return cinfer_error_set(err, CINFER_ERR_PARSE, "%s frame: field '%s': %s", cinfer_msg_type_name(type),
                            r->failed_field, r->why);
}

/* Records why field is refused, as the wire readers do. */
__attribute__((format(printf, 3, 4))) static void refuse_field(struct wire_reader *r, const char *field,
                                                               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    r->failed_field = field;
}

/* ---- READY / FAILED --------------------------------------------------------------- */

int cinfer_msg_encode_ready(const struct cinfer_msg_ready *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_READY);
    cinfer_wire_put_u8(&w, m->role);
    cinfer_wire_put_u32(&w, m->tp_rank);
    cinfer_wire_put_u32(&w, m->dp_rank);
    cinfer_wire_put_u32(&w, m->pid);
    cinfer_wire_put_u64(&w, m->max_total_tokens);
    cinfer_wire_put_u32(&w, m->max_request_len);
    cinfer_wire_put_u32(&w, m->max_running_requests);
    cinfer_wire_put_u32(&w, m->vocab_size);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_ready(const void *frame, size_t len, struct cinfer_msg_ready *m, struct cinfer_error *err)
{
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_READY, err);
    if (rc)
        return rc;
    m->role = cinfer_wire_get_u8(&r, "role");
    m->tp_rank = cinfer_wire_get_u32(&r, "tp_rank");
    m->dp_rank = cinfer_wire_get_u32(&r, "dp_rank");
    m->pid = cinfer_wire_get_u32(&r, "pid");
    m->max_total_tokens = cinfer_wire_get_u64(&r, "max_total_tokens");
    m->max_request_len = cinfer_wire_get_u32(&r, "max_request_len");
    m->max_running_requests = cinfer_wire_get_u32(&r, "max_running_requests");
    m->vocab_size = cinfer_wire_get_u32(&r, "vocab_size");
    return close_body(&r, CINFER_MSG_READY, err);
}

int cinfer_msg_encode_heartbeat(const struct cinfer_msg_heartbeat *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_HEARTBEAT);
    cinfer_wire_put_u8(&w, m->role);
    cinfer_wire_put_u32(&w, m->tp_rank);
    cinfer_wire_put_u32(&w, m->dp_rank);
    cinfer_wire_put_u32(&w, m->pid);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_heartbeat(const void *frame, size_t len, struct cinfer_msg_heartbeat *m,
                                struct cinfer_error *err)
{
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_HEARTBEAT, err);
    if (rc)
        return rc;
    m->role = cinfer_wire_get_u8(&r, "role");
    m->tp_rank = cinfer_wire_get_u32(&r, "tp_rank");
    m->dp_rank = cinfer_wire_get_u32(&r, "dp_rank");
    m->pid = cinfer_wire_get_u32(&r, "pid");
    return close_body(&r, CINFER_MSG_HEARTBEAT, err);
}

/* ---- WORKER_SETTINGS ---------------------------------------------------------------- */

/* The endpoints in order; each is a fixed array of the port args. */
#define PORT_FIELDS(X)                                                                                  \
    X(run_dir) X(status) X(tokenizer_input) X(detokenizer_input) X(scheduler_input) X(rpc) X(plan) X(comm) \
    X(curve_server_public) X(curve_server_secret) X(curve_client_public) X(curve_client_secret)

int cinfer_msg_encode_worker_settings(const struct cinfer_msg_worker_settings *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_WORKER_SETTINGS);
    cinfer_wire_put_str(&w, m->server_args);
#define PUT_PORT(field) cinfer_wire_put_str(&w, m->ports.field);
    PORT_FIELDS(PUT_PORT)
#undef PUT_PORT
    return finish(&w, frame, frame_len);
}

/* Copies one endpoint into its fixed array, refusing one that does not fit. */
static void get_port(struct wire_reader *r, const char *field, char *dst, size_t dst_bytes)
{
    char *s = cinfer_wire_get_str(r, field, (uint32_t)dst_bytes - 1);
    if (s)
        snprintf(dst, dst_bytes, "%s", s);
    free(s);
}

int cinfer_msg_decode_worker_settings(const void *frame, size_t len, struct cinfer_msg_worker_settings *m,
                                      struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_WORKER_SETTINGS, err);
    if (rc)
        return rc;
    m->server_args = cinfer_wire_get_str(&r, "server_args", CINFER_IPC_MAX_SETTINGS);
#define GET_PORT(field) get_port(&r, "ports." #field, m->ports.field, sizeof m->ports.field);
    PORT_FIELDS(GET_PORT)
#undef GET_PORT
    rc = close_body(&r, CINFER_MSG_WORKER_SETTINGS, err);
    if (rc)
        cinfer_msg_worker_settings_free(m);
    return rc;
}

void cinfer_msg_worker_settings_free(struct cinfer_msg_worker_settings *m)
{
    free(m->server_args);
    memset(m, 0, sizeof *m);
}

int cinfer_msg_encode_failed(const struct cinfer_msg_failed *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_FAILED);
    cinfer_wire_put_u8(&w, m->role);
    cinfer_wire_put_u32(&w, m->tp_rank);
    cinfer_wire_put_u32(&w, m->dp_rank);
    cinfer_wire_put_u32(&w, m->pid);
    cinfer_wire_put_i32(&w, m->code);
    cinfer_wire_put_str(&w, m->message);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_failed(const void *frame, size_t len, struct cinfer_msg_failed *m, struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_FAILED, err);
    if (rc)
        return rc;
    m->role = cinfer_wire_get_u8(&r, "role");
    m->tp_rank = cinfer_wire_get_u32(&r, "tp_rank");
    m->dp_rank = cinfer_wire_get_u32(&r, "dp_rank");
    m->pid = cinfer_wire_get_u32(&r, "pid");
    m->code = cinfer_wire_get_i32(&r, "code");
    if (!r.failed_field && (m->code >= 0 || m->code < CINFER_STATUS_MIN))
        refuse_field(&r, "code", "%d is not a failure's status code (expected %d..-1)", (int)m->code,
                     CINFER_STATUS_MIN);
    m->message = cinfer_wire_get_str(&r, "message", CINFER_IPC_MAX_SHORT_TEXT);
    rc = close_body(&r, CINFER_MSG_FAILED, err);
    if (rc)
        cinfer_msg_failed_free(m);
    return rc;
}

void cinfer_msg_failed_free(struct cinfer_msg_failed *m)
{
    free(m->message);
    m->message = NULL;
}

static char *empty_to_null(char *s)
{
    if (s && !s[0]) {
        free(s);
        return NULL;
    }
    return s;
}

/* ---- GENERATE / ABORT ------------------------------------------------------------- */

static void put_sampling(struct wire_writer *w, const struct cinfer_sampling_params *s)
{
    cinfer_wire_put_f32(w, s->temperature);
    cinfer_wire_put_i32(w, s->top_k);
    cinfer_wire_put_f32(w, s->top_p);
    cinfer_wire_put_f32(w, s->min_p);
    cinfer_wire_put_f32(w, s->repetition_penalty);
    cinfer_wire_put_f32(w, s->frequency_penalty);
    cinfer_wire_put_f32(w, s->presence_penalty);
    cinfer_wire_put_u64(w, s->seed);
    cinfer_wire_put_u8(w, (uint8_t)(s->has_seed != 0));
    cinfer_wire_put_i32(w, s->max_new_tokens);
    cinfer_wire_put_i32(w, s->min_new_tokens);
    cinfer_wire_put_u8(w, (uint8_t)(s->ignore_eos != 0));
    cinfer_wire_put_u8(w, (uint8_t)(s->skip_special_tokens != 0));
    cinfer_wire_put_u8(w, (uint8_t)(s->no_stop_trim != 0));
    int n_stop = s->n_stop < 0 ? 0 : s->n_stop > CINFER_MAX_STOP_STRINGS ? CINFER_MAX_STOP_STRINGS : s->n_stop;
    cinfer_wire_put_u32(w, (uint32_t)n_stop);
    for (int i = 0; i < n_stop; i++)
        cinfer_wire_put_str(w, s->stop[i]);
    int n_ids = s->n_stop_token_ids < 0 ? 0
                : s->n_stop_token_ids > CINFER_MAX_STOP_TOKEN_IDS ? CINFER_MAX_STOP_TOKEN_IDS
                                                                  : s->n_stop_token_ids;
    cinfer_wire_put_i32_array(w, s->stop_token_ids, (uint32_t)n_ids);
    int n_bias = s->n_logit_bias < 0 ? 0 : s->n_logit_bias > CINFER_MAX_LOGIT_BIAS ? CINFER_MAX_LOGIT_BIAS
                                                                                  : s->n_logit_bias;
    cinfer_wire_put_i32_array(w, s->logit_bias_ids, (uint32_t)n_bias);
    for (int i = 0; i < n_bias; i++) /* the values follow their ids, as many */
        cinfer_wire_put_f32(w, s->logit_bias_values[i]);
    cinfer_wire_put_u8(w, (uint8_t)(s->logprobs != 0));
    cinfer_wire_put_i32(w, s->top_logprobs);
    cinfer_wire_put_i32(w, s->priority);
    cinfer_wire_put_i32(w, s->waiting_timeout_ms);
    cinfer_wire_put_i32(w, s->running_timeout_ms);
}

static void get_sampling(struct wire_reader *r, struct cinfer_sampling_params *s)
{
    memset(s, 0, sizeof *s);
    s->temperature = cinfer_wire_get_f32(r, "sampling.temperature");
    s->top_k = cinfer_wire_get_i32(r, "sampling.top_k");
    s->top_p = cinfer_wire_get_f32(r, "sampling.top_p");
    s->min_p = cinfer_wire_get_f32(r, "sampling.min_p");
    s->repetition_penalty = cinfer_wire_get_f32(r, "sampling.repetition_penalty");
    s->frequency_penalty = cinfer_wire_get_f32(r, "sampling.frequency_penalty");
    s->presence_penalty = cinfer_wire_get_f32(r, "sampling.presence_penalty");
    s->seed = cinfer_wire_get_u64(r, "sampling.seed");
    s->has_seed = cinfer_wire_get_u8(r, "sampling.has_seed");
    s->max_new_tokens = cinfer_wire_get_i32(r, "sampling.max_new_tokens");
    s->min_new_tokens = cinfer_wire_get_i32(r, "sampling.min_new_tokens");
    s->ignore_eos = cinfer_wire_get_u8(r, "sampling.ignore_eos");
    s->skip_special_tokens = cinfer_wire_get_u8(r, "sampling.skip_special_tokens");
    s->no_stop_trim = cinfer_wire_get_u8(r, "sampling.no_stop_trim");
    uint32_t n_stop = cinfer_wire_get_u32(r, "sampling.n_stop");
    if (n_stop > CINFER_MAX_STOP_STRINGS) {
        if (!r->failed_field) {
            r->failed_field = "sampling.n_stop";
            snprintf(r->why, sizeof r->why, "%u stop strings, at most %d allowed", n_stop, CINFER_MAX_STOP_STRINGS);
        }
        return;
    }
    for (uint32_t i = 0; i < n_stop && !r->failed_field; i++) {
        s->stop[i] = cinfer_wire_get_str(r, "sampling.stop", CINFER_IPC_MAX_SHORT_TEXT);
        if (s->stop[i])
            s->n_stop = (int)i + 1;
    }
    uint32_t n_ids = 0;
    int32_t *ids = cinfer_wire_get_i32_array(r, "sampling.stop_token_ids", CINFER_MAX_STOP_TOKEN_IDS, &n_ids);
    if (ids) {
        memcpy(s->stop_token_ids, ids, n_ids * sizeof *ids);
        s->n_stop_token_ids = (int)n_ids;
        free(ids);
    }
    uint32_t n_bias = 0;
    int32_t *bias_ids = cinfer_wire_get_i32_array(r, "sampling.logit_bias_ids", CINFER_MAX_LOGIT_BIAS, &n_bias);
    if (bias_ids) {
        memcpy(s->logit_bias_ids, bias_ids, n_bias * sizeof *bias_ids);
        free(bias_ids);
        for (uint32_t i = 0; i < n_bias; i++)
            s->logit_bias_values[i] = cinfer_wire_get_f32(r, "sampling.logit_bias_values");
        s->n_logit_bias = (int)n_bias;
    }
    s->logprobs = cinfer_wire_get_u8(r, "sampling.logprobs");
    s->top_logprobs = cinfer_wire_get_i32(r, "sampling.top_logprobs");
    s->priority = cinfer_wire_get_i32(r, "sampling.priority");
    s->waiting_timeout_ms = cinfer_wire_get_i32(r, "sampling.waiting_timeout_ms");
    s->running_timeout_ms = cinfer_wire_get_i32(r, "sampling.running_timeout_ms");
}

static void free_sampling(struct cinfer_sampling_params *s)
{
    for (int i = 0; i < s->n_stop; i++) {
        free((char *)s->stop[i]);
        s->stop[i] = NULL;
    }
    s->n_stop = 0;
}

int cinfer_msg_encode_generate(const struct cinfer_msg_generate *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_GENERATE);
    cinfer_wire_put_u64(&w, m->rid);
    cinfer_wire_put_i32_array(&w, m->ids, m->n_ids);
    put_sampling(&w, &m->sampling);
    cinfer_wire_put_u8(&w, m->stream);
    cinfer_wire_put_str(&w, m->grammar);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_generate(const void *frame, size_t len, struct cinfer_msg_generate *m,
                               struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_GENERATE, err);
    if (rc)
        return rc;
    m->rid = cinfer_wire_get_u64(&r, "rid");
    m->ids = cinfer_wire_get_i32_array(&r, "ids", CINFER_IPC_MAX_IDS, &m->n_ids);
    get_sampling(&r, &m->sampling);
    m->stream = cinfer_wire_get_u8(&r, "stream");
    m->grammar = empty_to_null(cinfer_wire_get_str(&r, "grammar", CINFER_IPC_MAX_GRAMMAR));
    rc = close_body(&r, CINFER_MSG_GENERATE, err);
    if (rc)
        cinfer_msg_generate_free(m);
    return rc;
}

void cinfer_msg_generate_free(struct cinfer_msg_generate *m)
{
    free(m->ids);
    m->ids = NULL;
    m->n_ids = 0;
    free_sampling(&m->sampling);
    free(m->grammar);
    m->grammar = NULL;
}

int cinfer_msg_encode_abort(const struct cinfer_msg_abort *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_ABORT);
    cinfer_wire_put_u64(&w, m->rid);
    cinfer_wire_put_u8(&w, m->quiet);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_abort(const void *frame, size_t len, struct cinfer_msg_abort *m, struct cinfer_error *err)
{
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_ABORT, err);
    if (rc)
        return rc;
    m->rid = cinfer_wire_get_u64(&r, "rid");
    m->quiet = cinfer_wire_get_u8(&r, "quiet");
    return close_body(&r, CINFER_MSG_ABORT, err);
}

/* ---- TOKENS / TEXT ---------------------------------------------------------------- */

/* The logprobs of n_ids tokens, after the ids (layout in messages.h). The token of each
 * entry is its id, so it is not sent again; with no ids there is nothing to describe
 * and the flag says none. */
static void put_logprobs(struct wire_writer *w, const struct cinfer_token_logprob *lp, uint32_t n_ids)
{
    int present = lp && n_ids;
    cinfer_wire_put_u8(w, (uint8_t)present);
    for (uint32_t i = 0; present && i < n_ids; i++) {
        int n_top = lp[i].n_top < 0 ? 0 : lp[i].n_top > CINFER_MAX_TOP_LOGPROBS ? CINFER_MAX_TOP_LOGPROBS : lp[i].n_top;
        cinfer_wire_put_f32(w, lp[i].logprob);
        cinfer_wire_put_u8(w, (uint8_t)n_top);
        for (int k = 0; k < n_top; k++) {
            cinfer_wire_put_i32(w, lp[i].top_ids[k]);
            cinfer_wire_put_f32(w, lp[i].top_logprobs[k]);
        }
    }
}

/* Field names as refusals show them, inside a TOKENS item or at the top of TEXT. */
struct logprob_fields {
    const char *flag, *entries, *logprob, *n_top, *top_ids, *top_logprobs;
};
static const struct logprob_fields item_logprob_fields = {
    "items.has_logprobs", "items.logprobs", "items.logprobs.logprob", "items.logprobs.n_top",
    "items.logprobs.top_ids", "items.logprobs.top_logprobs"};
static const struct logprob_fields text_logprob_fields = {
    "has_logprobs", "logprobs", "logprobs.logprob", "logprobs.n_top", "logprobs.top_ids", "logprobs.top_logprobs"};

/* A malloc'd (n_ids) array, or NULL when the flag says none or on failure (r records
 * why). */
static struct cinfer_token_logprob *get_logprobs(struct wire_reader *r, const struct logprob_fields *f,
                                                 const int32_t *ids, uint32_t n_ids)
{
    uint8_t present = cinfer_wire_get_u8(r, f->flag);
    if (r->failed_field || present == 0)
        return NULL;
    if (present != 1) {
        refuse_field(r, f->flag, "%u is neither 0 nor 1", present);
        return NULL;
    }
    if (n_ids == 0) {
        refuse_field(r, f->flag, "logprobs are present for no ids");
        return NULL;
    }
    /* Each entry takes at least 5 bytes: a huge n_ids in a short frame fails here. */
    if ((size_t)n_ids * 5 > (size_t)(r->end - r->p)) {
        refuse_field(r, f->entries, "%u entries cannot fit in %zu bytes", n_ids, (size_t)(r->end - r->p));
        return NULL;
    }
    struct cinfer_token_logprob *lp = calloc(n_ids, sizeof *lp);
    if (!lp) {
        refuse_field(r, f->entries, "out of memory for %u entries", n_ids);
        return NULL;
    }
    for (uint32_t i = 0; i < n_ids && !r->failed_field; i++) {
        lp[i].token = ids[i];
        lp[i].logprob = cinfer_wire_get_f32(r, f->logprob);
        uint8_t n_top = cinfer_wire_get_u8(r, f->n_top);
        if (!r->failed_field && n_top > CINFER_MAX_TOP_LOGPROBS) {
            refuse_field(r, f->n_top, "%u exceeds the limit %d", n_top, CINFER_MAX_TOP_LOGPROBS);
            break;
        }
        lp[i].n_top = n_top;
        for (int k = 0; k < n_top && !r->failed_field; k++) {
            lp[i].top_ids[k] = cinfer_wire_get_i32(r, f->top_ids);
            lp[i].top_logprobs[k] = cinfer_wire_get_f32(r, f->top_logprobs);
        }
    }
    if (r->failed_field) {
        free(lp);
        return NULL;
    }
    return lp;
}

/* A request's error code from the wire (layout in messages.h): a member of enum
 * cinfer_status, nonzero exactly when the finish reason is ERROR. Anything else would
 * reach a caller as a status nobody raised, so the frame is refused. */
static void check_code(struct wire_reader *r, const char *field, int32_t code, uint8_t finish_reason)
{
    if (r->failed_field)
        return;
    if (code > 0 || code < CINFER_STATUS_MIN)
        refuse_field(r, field, "%d is not a status code (expected %d..0)", (int)code, CINFER_STATUS_MIN);
    else if (finish_reason == CINFER_FINISH_ERROR && code == 0)
        refuse_field(r, field, "0 for a request that failed (finish reason error needs its code)");
    else if (finish_reason != CINFER_FINISH_ERROR && code != 0)
        refuse_field(r, field, "%d for a request that did not fail (finish reason %u)", (int)code, finish_reason);
}

int cinfer_msg_encode_tokens(const struct cinfer_msg_tokens *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_TOKENS);
    cinfer_wire_put_u32(&w, m->n_items);
    for (uint32_t i = 0; i < m->n_items; i++) {
        const struct cinfer_token_item *it = &m->items[i];
        cinfer_wire_put_u64(&w, it->rid);
        cinfer_wire_put_i32_array(&w, it->ids, it->n_ids);
        cinfer_wire_put_u8(&w, it->finish_reason);
        cinfer_wire_put_u32(&w, it->prompt_tokens);
        cinfer_wire_put_u32(&w, it->completion_tokens);
        cinfer_wire_put_str(&w, it->error);
        put_logprobs(&w, it->logprobs, it->n_ids);
        cinfer_wire_put_i32(&w, it->code);
        cinfer_wire_put_u32(&w, it->cached_tokens);
    }
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_tokens(const void *frame, size_t len, struct cinfer_msg_tokens *m, struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_TOKENS, err);
    if (rc)
        return rc;
    uint32_t n = cinfer_wire_get_u32(&r, "n_items");
    if (!r.failed_field && n > CINFER_IPC_MAX_BATCH)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "TOKENS frame: field 'n_items': %u exceeds the limit %u", n,
                                CINFER_IPC_MAX_BATCH);
    /* Each item takes at least 34 bytes (rid 8, ids count 4, finish 1, two counts 8,
     * error length 4, logprobs flag 1, code 4, cached count 4: an abort carries
     * nothing more), so a huge count in a short frame fails here. */
    if (!r.failed_field && (size_t)n * 34 > (size_t)(r.end - r.p))
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "TOKENS frame: field 'n_items': %u items cannot fit in %zu bytes",
                                n, (size_t)(r.end - r.p));
    if (n) {
        m->items = calloc(n, sizeof *m->items);
        if (!m->items)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "TOKENS frame: out of memory for %u items", n);
    }
    for (uint32_t i = 0; i < n && !r.failed_field; i++) {
        struct cinfer_token_item *it = &m->items[i];
        it->rid = cinfer_wire_get_u64(&r, "items.rid");
        it->ids = cinfer_wire_get_i32_array(&r, "items.ids", CINFER_IPC_MAX_IDS, &it->n_ids);
        it->finish_reason = cinfer_wire_get_u8(&r, "items.finish_reason");
        it->prompt_tokens = cinfer_wire_get_u32(&r, "items.prompt_tokens");
        it->completion_tokens = cinfer_wire_get_u32(&r, "items.completion_tokens");
        it->error = cinfer_wire_get_str(&r, "items.error", CINFER_IPC_MAX_SHORT_TEXT);
        if (it->error && !it->error[0]) {
            free(it->error);
            it->error = NULL;
        }
        it->logprobs = get_logprobs(&r, &item_logprob_fields, it->ids, it->n_ids);
        it->code = cinfer_wire_get_i32(&r, "items.code");
        it->cached_tokens = cinfer_wire_get_u32(&r, "items.cached_tokens");
        if (!r.failed_field && it->finish_reason > CINFER_FINISH_ERROR) {
            r.failed_field = "items.finish_reason";
            snprintf(r.why, sizeof r.why, "unknown finish reason %u", it->finish_reason);
        }
        check_code(&r, "items.code", it->code, it->finish_reason);
        m->n_items = i + 1;
    }
    rc = close_body(&r, CINFER_MSG_TOKENS, err);
    if (rc)
        cinfer_msg_tokens_free(m);
    return rc;
}

void cinfer_msg_tokens_free(struct cinfer_msg_tokens *m)
{
    for (uint32_t i = 0; i < m->n_items; i++) {
        free(m->items[i].ids);
        free(m->items[i].error);
        free(m->items[i].logprobs);
    }
    free(m->items);
    m->items = NULL;
    m->n_items = 0;
}

int cinfer_msg_encode_text(const struct cinfer_msg_text *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_TEXT);
    cinfer_wire_put_u64(&w, m->rid);
    cinfer_wire_put_bytes(&w, m->text ? m->text : "", m->text ? m->text_len : 0);
    cinfer_wire_put_i32_array(&w, m->ids, m->n_ids);
    cinfer_wire_put_u8(&w, m->finish_reason);
    cinfer_wire_put_str(&w, m->matched_stop);
    cinfer_wire_put_u32(&w, m->prompt_tokens);
    cinfer_wire_put_u32(&w, m->completion_tokens);
    cinfer_wire_put_str(&w, m->error);
    put_logprobs(&w, m->logprobs, m->n_ids);
    cinfer_wire_put_i32(&w, m->code);
    cinfer_wire_put_u32(&w, m->cached_tokens);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_text(const void *frame, size_t len, struct cinfer_msg_text *m, struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_TEXT, err);
    if (rc)
        return rc;
    m->rid = cinfer_wire_get_u64(&r, "rid");
    uint32_t text_len = 0;
    const uint8_t *text = cinfer_wire_get_bytes(&r, "text", CINFER_IPC_MAX_TEXT, &text_len);
    if (!r.failed_field) {
        m->text = malloc((size_t)text_len + 1);
        if (!m->text)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "TEXT frame: out of memory for %u bytes", text_len);
        if (text_len)
            memcpy(m->text, text, text_len);
        m->text[text_len] = '\0';
        m->text_len = text_len;
    }
    m->ids = cinfer_wire_get_i32_array(&r, "ids", CINFER_IPC_MAX_IDS, &m->n_ids);
    m->finish_reason = cinfer_wire_get_u8(&r, "finish_reason");
    m->matched_stop = empty_to_null(cinfer_wire_get_str(&r, "matched_stop", CINFER_IPC_MAX_SHORT_TEXT));
    m->prompt_tokens = cinfer_wire_get_u32(&r, "prompt_tokens");
    m->completion_tokens = cinfer_wire_get_u32(&r, "completion_tokens");
    m->error = empty_to_null(cinfer_wire_get_str(&r, "error", CINFER_IPC_MAX_SHORT_TEXT));
    m->logprobs = get_logprobs(&r, &text_logprob_fields, m->ids, m->n_ids);
    m->code = cinfer_wire_get_i32(&r, "code");
    m->cached_tokens = cinfer_wire_get_u32(&r, "cached_tokens");
    if (!r.failed_field && m->finish_reason > CINFER_FINISH_ERROR) {
        r.failed_field = "finish_reason";
        snprintf(r.why, sizeof r.why, "unknown finish reason %u", m->finish_reason);
    }
    check_code(&r, "code", m->code, m->finish_reason);
    rc = close_body(&r, CINFER_MSG_TEXT, err);
    if (rc)
        cinfer_msg_text_free(m);
    return rc;
}

void cinfer_msg_text_free(struct cinfer_msg_text *m)
{
    free(m->text);
    free(m->ids);
    free(m->matched_stop);
    free(m->error);
    free(m->logprobs);
    memset(m, 0, sizeof *m);
}

/* ---- RPC and SHUTDOWN ------------------------------------------------------------- */

int cinfer_msg_encode_rpc_call(const struct cinfer_msg_rpc_call *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_RPC_CALL);
    cinfer_wire_put_u64(&w, m->call_id);
    cinfer_wire_put_str(&w, m->method);
    cinfer_wire_put_str(&w, m->payload);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_rpc_call(const void *frame, size_t len, struct cinfer_msg_rpc_call *m,
                               struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_RPC_CALL, err);
    if (rc)
        return rc;
    m->call_id = cinfer_wire_get_u64(&r, "call_id");
    m->method = cinfer_wire_get_str(&r, "method", CINFER_IPC_MAX_SHORT_TEXT);
    m->payload = cinfer_wire_get_str(&r, "payload", CINFER_IPC_MAX_TEXT);
    rc = close_body(&r, CINFER_MSG_RPC_CALL, err);
    if (rc)
        cinfer_msg_rpc_call_free(m);
    return rc;
}

void cinfer_msg_rpc_call_free(struct cinfer_msg_rpc_call *m)
{
    free(m->method);
    free(m->payload);
    m->method = m->payload = NULL;
}

int cinfer_msg_encode_rpc_reply(const struct cinfer_msg_rpc_reply *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_RPC_REPLY);
    cinfer_wire_put_u64(&w, m->call_id);
    cinfer_wire_put_u32(&w, m->tp_rank);
    cinfer_wire_put_i32(&w, m->status);
    cinfer_wire_put_str(&w, m->payload);
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_rpc_reply(const void *frame, size_t len, struct cinfer_msg_rpc_reply *m,
                                struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_RPC_REPLY, err);
    if (rc)
        return rc;
    m->call_id = cinfer_wire_get_u64(&r, "call_id");
    m->tp_rank = cinfer_wire_get_u32(&r, "tp_rank");
    m->status = cinfer_wire_get_i32(&r, "status");
    if (!r.failed_field && (m->status > 0 || m->status < CINFER_STATUS_MIN))
        refuse_field(&r, "status", "%d is not a status code (expected %d..0)", (int)m->status, CINFER_STATUS_MIN);
    m->payload = cinfer_wire_get_str(&r, "payload", CINFER_IPC_MAX_TEXT);
    rc = close_body(&r, CINFER_MSG_RPC_REPLY, err);
    if (rc)
        cinfer_msg_rpc_reply_free(m);
    return rc;
}

void cinfer_msg_rpc_reply_free(struct cinfer_msg_rpc_reply *m)
{
    free(m->payload);
    m->payload = NULL;
}

int cinfer_msg_encode_shutdown(void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_SHUTDOWN);
    return finish(&w, frame, frame_len);
}

/* ---- DETOK_REQUEST ---------------------------------------------------------------- */

int cinfer_msg_encode_detok_request(const struct cinfer_msg_detok_request *m, void **frame, size_t *frame_len)
{
    struct wire_writer w;
    begin(&w, CINFER_MSG_DETOK_REQUEST);
    cinfer_wire_put_u64(&w, m->rid);
    cinfer_wire_put_u8(&w, m->skip_special_tokens);
    cinfer_wire_put_u8(&w, m->no_stop_trim);
    uint32_t n = m->n_stop > CINFER_MAX_STOP_STRINGS ? CINFER_MAX_STOP_STRINGS : m->n_stop;
    cinfer_wire_put_u32(&w, n);
    for (uint32_t i = 0; i < n; i++)
        cinfer_wire_put_str(&w, m->stop[i]);
    uint32_t n_tail = m->n_prompt_tail > CINFER_IPC_MAX_PROMPT_TAIL ? CINFER_IPC_MAX_PROMPT_TAIL : m->n_prompt_tail;
    cinfer_wire_put_i32_array(&w, m->prompt_tail ? m->prompt_tail + (m->n_prompt_tail - n_tail) : NULL,
                              m->prompt_tail ? n_tail : 0); /* the last ids when there are more */
    return finish(&w, frame, frame_len);
}

int cinfer_msg_decode_detok_request(const void *frame, size_t len, struct cinfer_msg_detok_request *m,
                                    struct cinfer_error *err)
{
    memset(m, 0, sizeof *m);
    struct wire_reader r;
    int rc = open_body(&r, frame, len, CINFER_MSG_DETOK_REQUEST, err);
    if (rc)
        return rc;
    m->rid = cinfer_wire_get_u64(&r, "rid");
    m->skip_special_tokens = cinfer_wire_get_u8(&r, "skip_special_tokens");
    m->no_stop_trim = cinfer_wire_get_u8(&r, "no_stop_trim");
    uint32_t n = cinfer_wire_get_u32(&r, "n_stop");
    if (!r.failed_field && n > CINFER_MAX_STOP_STRINGS)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "DETOK_REQUEST frame: field 'n_stop': %u stop strings, at most %d",
                                n, CINFER_MAX_STOP_STRINGS);
    for (uint32_t i = 0; i < n && !r.failed_field; i++) {
        m->stop[i] = cinfer_wire_get_str(&r, "stop", CINFER_IPC_MAX_SHORT_TEXT);
        if (m->stop[i])
            m->n_stop = i + 1;
    }
    m->prompt_tail = cinfer_wire_get_i32_array(&r, "prompt_tail", CINFER_IPC_MAX_PROMPT_TAIL, &m->n_prompt_tail);
    rc = close_body(&r, CINFER_MSG_DETOK_REQUEST, err);
    if (rc)
        cinfer_msg_detok_request_free(m);
    return rc;
}

void cinfer_msg_detok_request_free(struct cinfer_msg_detok_request *m)
{
    for (uint32_t i = 0; i < m->n_stop; i++)
        free(m->stop[i]);
    free(m->prompt_tail);
    memset(m, 0, sizeof *m);
}
