/* http/http_reply.c — one answer per request: JSON, plain text, or OpenAI's error
 * shape. A second answer to the same request is a handler bug: it is logged and
 * dropped, never sent. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_transport.h"
#include "util/log.h"

void cinfer_http_queue(struct http_conn *c, int status, struct MHD_Response *resp)
{
    if (!resp) {
        cinfer_log(CINFER_LOG_SEV_ERROR, "http: out of memory making the response to a request");
        return;
    }
    if (c->answered) {
        cinfer_log(CINFER_LOG_SEV_ERROR, "http: a handler answered one request twice (status %d dropped)", status);
        MHD_destroy_response(resp);
        return;
    }
    /* MHD refuses a response while a body is still arriving; the caller answers again
     * once it is in. */
    if (MHD_queue_response(c->mhd, (unsigned int)status, resp) == MHD_YES)
        c->answered = 1;
    MHD_destroy_response(resp);
}

static struct MHD_Response *response_from_malloc(char *data, size_t len, const char *content_type)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(len, data, free);
    if (!resp) {
        free(data);
        return NULL;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    return resp;
}

void cinfer_http_reply_json(struct http_conn *c, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        cinfer_http_reply_text(c, 500, "text/plain; charset=utf-8", "out of memory encoding the JSON response\n", 42);
        return;
    }
    cinfer_http_queue(c, status, response_from_malloc(text, strlen(text), "application/json"));
}

void cinfer_http_reply_text(struct http_conn *c, int status, const char *content_type, const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = '\0';
    }
    cinfer_http_queue(c, status, copy ? response_from_malloc(copy, len, content_type) : NULL);
}

static json_t *error_body(const char *type, const char *param, const char *message)
{
    return json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", message, "type", type, "param", param, "code");
}

static void reply_error_v(struct http_conn *c, int status, const char *type, const char *param, const char *header,
                          const char *header_value, const char *fmt, va_list ap)
{
    char message[2048];
    vsnprintf(message, sizeof message, fmt, ap);
    json_t *body = error_body(type, param, message);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        cinfer_http_reply_text(c, 500, "text/plain; charset=utf-8", "out of memory encoding the JSON response\n", 42);
        return;
    }
    struct MHD_Response *resp = response_from_malloc(text, strlen(text), "application/json");
    if (resp && header)
        MHD_add_response_header(resp, header, header_value);
    cinfer_http_queue(c, status, resp);
}

void cinfer_http_reply_error(struct http_conn *c, int status, const char *type, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(c, status, type, param, NULL, NULL, fmt, ap);
    va_end(ap);
}

void cinfer_http_reply_error_with_header(struct http_conn *c, int status, const char *type, const char *header,
                                         const char *header_value, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_error_v(c, status, type, NULL, header, header_value, fmt, ap);
    va_end(ap);
}
