/* http/http_errors.c — an engine error as an HTTP status and OpenAI error type.
 *
 * The status code alone decides: it is the code of whoever raised the error (the
 * scheduler's refusal, the detokenizer's failure, the engine's watchdog), carried
 * across the processes unchanged (core/ipc/messages.h). The message is only words for
 * the person reading the answer; nothing here reads it. */
#include "http/http_server.h"

int cinfer_http_engine_error_status(const struct cinfer_error *err, const char **type)
{
    switch (err->code) {
    case CINFER_ERR_INVALID_ARGUMENT: /* an empty prompt, n out of range, ... */
    case CINFER_ERR_RANGE:            /* a sampling value or a prompt token out of range */
    case CINFER_ERR_PARSE:
    case CINFER_ERR_UNSUPPORTED:
    case CINFER_ERR_CONTEXT_LENGTH:   /* the prompt does not fit the context or the KV cache */
    case CINFER_ERR_STATE:            /* not now: flush_cache while requests run or wait */
        *type = "invalid_request_error";
        return 400;
    case CINFER_ERR_NOT_FOUND:
        *type = "not_found_error";
        return 404;
    case CINFER_ERR_OVERLOADED:       /* the scheduler's queue is full: retry later */
        *type = "server_overloaded";
        return 503;
    case CINFER_ERR_CHILD:            /* a worker died: the engine is down */
    case CINFER_ERR_UNAVAILABLE:      /* shutting down, or restarting its workers */
    case CINFER_ERR_TIMEOUT:          /* a worker did not answer in time */
        *type = "service_unavailable";
        return 503;
    case CINFER_ERR_IO:
        /* The client went away (core/http/http_generation.c): nobody reads the answer,
         * but say what happened. */
        *type = "internal_error";
        return 499;
    default:                          /* NOMEM, INTERNAL, ...: our failure, not the caller's */
        *type = "internal_error";
        return 500;
    }
}

void cinfer_http_reply_engine_error(struct http_conn *c, const struct cinfer_error *err)
{
    const char *type = "internal_error";
    int status = cinfer_http_engine_error_status(err, &type);
    cinfer_http_reply_error(c, status, type, NULL, "%s", err->message[0] ? err->message : cinfer_strerror(err->code));
}
