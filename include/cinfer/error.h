/* cinfer/error.h — the one status enum every cinfer function returns, and an error
 * record that carries a sentence for a person (what, where, expected, found). */
#ifndef CINFER_ERROR_H
#define CINFER_ERROR_H

#include <stddef.h>

#include "cinfer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0 is success; every failure is a negative code from this enum.
 * Append only: the numbers are part of the plugin ABI. */
enum cinfer_status {
    CINFER_OK = 0,
    CINFER_ERR_NOMEM = -1,          /* an allocation failed */
    CINFER_ERR_INVALID_ARGUMENT = -2, /* a caller passed a value outside the contract */
    CINFER_ERR_IO = -3,             /* reading or writing a file or socket failed */
    CINFER_ERR_PARSE = -4,          /* outside data (file, frame, body) is malformed */
    CINFER_ERR_UNSUPPORTED = -5,    /* well-formed but not something cinfer handles */
    CINFER_ERR_NOT_FOUND = -6,      /* a file, key, tensor or plugin does not exist */
    CINFER_ERR_ABI = -7,            /* a plugin was built for another ABI version */
    CINFER_ERR_PLUGIN = -8,         /* a plugin could not be loaded or refused to work */
    CINFER_ERR_CONFIG = -9,         /* a configuration key or flag is wrong */
    CINFER_ERR_RANGE = -10,         /* a number is outside its allowed range */
    CINFER_ERR_TIMEOUT = -11,       /* a deadline passed */
    CINFER_ERR_CHILD = -12,         /* a worker process failed or died */
    CINFER_ERR_STATE = -13,         /* the object is not in a state that allows the call */
    CINFER_ERR_INTERNAL = -14,      /* a cinfer bug: an invariant did not hold */
    CINFER_ERR_OVERLOADED = -15,    /* the engine's queue is full: retry later */
    CINFER_ERR_CONTEXT_LENGTH = -16, /* a prompt does not fit the context length or the KV cache */
    CINFER_ERR_UNAVAILABLE = -17,   /* the engine is shutting down or restarting its workers */
};
#define CINFER_STATUS_MIN CINFER_ERR_UNAVAILABLE

/* Words for every code; never NULL (unknown codes get "unknown error"). */
CINFER_API const char *cinfer_strerror(int code);

/* A failure as a person reads it. Functions that take one fill it on failure only. */
#define CINFER_ERROR_MESSAGE_BYTES 1024
struct cinfer_error {
    int code;
    char message[CINFER_ERROR_MESSAGE_BYTES];
};

/* Fills err (when not NULL) and returns code, so callers write
 *   return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: line %d: ...", path, line); */
CINFER_API int cinfer_error_set(struct cinfer_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Puts "prefix: " in front of the message already in err; returns err->code. */
CINFER_API int cinfer_error_prefix(struct cinfer_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

CINFER_API void cinfer_error_clear(struct cinfer_error *err);

#ifdef __cplusplus
}
#endif
#endif
