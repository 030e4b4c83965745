/* http/cinfer_http_sse_event.c — the bytes of a server-sent event stream: a growing buffer and
 * one "data: <json>" event, the encoding every streaming endpoint shares. */
#include <stdlib.h>
#include <string.h>

#include "http/http_server.h"

int cinfer_http_buffer_append(struct http_buffer *b, const char *data, size_t len)
{
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return CINFER_ERR_NOMEM;
        b->data = grown;
        b->cap = cap;
    }
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return CINFER_OK;
}

int cinfer_http_sse_event(struct http_buffer *out, json_t *json)
{
    if (!json)
        return cinfer_http_buffer_append(out, "data: [DONE]\n\n", 14);
    /* Compact JSON has no newline of its own (jansson escapes them in strings), so the
     * event is one data line. */
    char *text = json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(json);
    if (!text)
        return CINFER_ERR_NOMEM;
    int rc = cinfer_http_buffer_append(out, "data: ", 6);
    if (!rc)
        rc = cinfer_http_buffer_append(out, text, strlen(text));
    if (!rc)
        rc = cinfer_http_buffer_append(out, "\n\n", 2);
    free(text);
    return rc;
}
