/* fuzz/http_stand_in.h — the transport's side of an HTTP handler, as the fuzz targets
 * of the request readers see it: struct http_conn records the replies (how many, the
 * last status, field and message) so a target can check that a refusal is one reply
 * with words, and an acceptance none. http_stand_in.c defines cinfer_http_reply_error and
 * cinfer_http_reply_text on it in place of the real transport's. */
#ifndef CINFER_FUZZ_HTTP_STAND_IN_H
#define CINFER_FUZZ_HTTP_STAND_IN_H

#include "http/http_server.h"

struct http_conn {
    int replies;
    int status;
    char param[64];     /* the field an error names, "" for none */
    char message[2048];
};

#endif
