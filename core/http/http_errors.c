/* http/http_errors.c — an engine error as an HTTP status and OpenAI error type.
 *
 * The status code decides where it can: bad values are the caller's (400), a stopped
 * engine is 503. A scheduler's refusal crosses a process boundary and reaches us as
 * CINFER_ERR_CHILD with the scheduler's own sentence, so for that code alone the
 * sentence's opening words (as core/scheduler/scheduler.c and core/engine write them)
 * tell a full queue, a prompt that cannot fit and a lost worker apart. */
#include <string.h>

#include "http/http_server.h"

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The scheduler's refusals of a request it was given (cinfer_scheduler_add). */
static int is_request_refusal(const char *m)
{
    return (starts_with(m, "prompt of ") && (strstr(m, "does not fit the KV cache") || strstr(m, "leaves no room"))) ||
           starts_with(m, "prompt token ") || (starts_with(m, "request ") && strstr(m, "has an empty prompt"));
}

int cinfer_http_engine_error_status(const struct cinfer_error *err, const char **type)
{
    const char *m = err->message;
    switch (err->code) {
    case CINFER_ERR_INVALID_ARGUMENT:
    case CINFER_ERR_RANGE:
    case CINFER_ERR_PARSE:
    case CINFER_ERR_UNSUPPORTED:
        *type = "invalid_request_error";
        return 400;
    case CINFER_ERR_NOT_FOUND:
        *type = "not_found_error";
        return 404;
    case CINFER_ERR_STATE:
        /* "queue full" (an in-process scheduler), "the engine is shutting down", "the
         * scheduler is not running". */
        *type = starts_with(m, "queue full") ? "server_overloaded" : "service_unavailable";
        return 503;
    case CINFER_ERR_TIMEOUT:
        *type = "service_unavailable";
        return 503;
    case CINFER_ERR_CHILD:
        if (starts_with(m, "queue full")) {
            *type = "server_overloaded";
            return 503;
        }
        if (is_request_refusal(m)) {
            *type = "invalid_request_error";
            return 400;
        }
        if (starts_with(m, "the engine lost a worker") || starts_with(m, "the engine is not healthy")) {
            *type = "service_unavailable";
            return 503;
        }
        *type = "internal_error";
        return 500;
    case CINFER_ERR_IO:
        /* The client went away: nobody reads the answer, but say what happened. */
        *type = "internal_error";
        return 499;
    default:
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
