/* Words for every status code, and the error record helpers. */
#include "cinfer/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *cinfer_strerror(int code)
{
    switch ((enum cinfer_status)code) {
    case CINFER_OK: return "success";
    case CINFER_ERR_NOMEM: return "out of memory";
    case CINFER_ERR_INVALID_ARGUMENT: return "invalid argument";
    case CINFER_ERR_IO: return "input/output error";
    case CINFER_ERR_PARSE: return "malformed input";
    case CINFER_ERR_UNSUPPORTED: return "not supported";
    case CINFER_ERR_NOT_FOUND: return "not found";
    case CINFER_ERR_ABI: return "plugin ABI mismatch";
    case CINFER_ERR_PLUGIN: return "plugin error";
    case CINFER_ERR_CONFIG: return "configuration error";
    case CINFER_ERR_RANGE: return "value out of range";
    case CINFER_ERR_TIMEOUT: return "timed out";
    case CINFER_ERR_CHILD: return "worker process failed";
    case CINFER_ERR_STATE: return "operation not valid in this state";
    case CINFER_ERR_INTERNAL: return "internal error";
    case CINFER_ERR_OVERLOADED: return "engine overloaded, retry later";
    case CINFER_ERR_CONTEXT_LENGTH: return "prompt too long for the context";
    case CINFER_ERR_UNAVAILABLE: return "engine not available";
    }
    return "unknown error";
}

int cinfer_error_set(struct cinfer_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

int cinfer_error_prefix(struct cinfer_error *err, const char *fmt, ...)
{
    if (!err)
        return CINFER_ERR_INTERNAL;
    char prefix[CINFER_ERROR_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Shift the old message right and put "prefix: " in front, truncating the end. */
    size_t cap = sizeof err->message;
    size_t plen = strnlen(prefix, cap - 1);
    size_t head = plen + 2 < cap ? plen + 2 : cap - 1;
    size_t old = strnlen(err->message, cap - 1);
    if (old > cap - 1 - head)
        old = cap - 1 - head;
    memmove(err->message + head, err->message, old);
    err->message[head + old] = '\0';
    memcpy(err->message, prefix, head < plen ? head : plen);
    if (head >= plen + 2) {
        err->message[plen] = ':';
        err->message[plen + 1] = ' ';
    }
    return err->code;
}

void cinfer_error_clear(struct cinfer_error *err)
{
    if (err) {
        err->code = CINFER_OK;
        err->message[0] = '\0';
    }
}
