/* http/http_sse.c — server-sent events: MHD pulls the body through a reader that
 * calls the source's next() (which may block, e.g. on the engine) and hands out what
 * it appended. Before each next() the reader looks for a departed client or a server
 * that is stopping; the source is closed exactly once, either here when the stream
 * breaks or from MHD's completion callback (cinfer_http_conn_free). */
#include <stdlib.h>
#include <string.h>

#include "http/http_transport.h"
#include "util/log.h"

#define SSE_BLOCK_BYTES 16384  /* MHD's buffer for one reader call */

void cinfer_http_sse_close_once(struct http_conn *c)
{
    if (!c->sse_open || c->sse_closed)
        return;
    c->sse_closed = 1;
    if (c->sse.close)
        c->sse.close(c->sse.state);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct http_conn *c = cls;
    (void)pos;
    while (c->sse_sent == c->sse_out.len) {
        c->sse_out.len = 0;
        c->sse_sent = 0;
        if (c->sse_over || c->sse_closed)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (cinfer_http_conn_should_stop(c)) {
            cinfer_http_sse_close_once(c);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        int rc = c->sse.next(c->sse.state, &c->sse_out);
        if (rc < 0) {
            /* Cut the connection: the client sees the stream end without [DONE]. */
            cinfer_http_sse_close_once(c);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (rc == 1)
            c->sse_over = 1;
    }
    size_t n = c->sse_out.len - c->sse_sent;
    if (n > max)
        n = max;
    memcpy(buf, c->sse_out.data + c->sse_sent, n);
    c->sse_sent += n;
    return (ssize_t)n;
}

void cinfer_http_reply_sse(struct http_conn *c, struct http_sse_source src)
{
    if (c->answered) {
        cinfer_log(CINFER_LOG_SEV_ERROR, "http: a handler answered one request twice (event stream dropped)");
        if (src.close)
            src.close(src.state);
        return;
    }
    c->sse = src;
    c->sse_open = 1;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK_BYTES, sse_read, c, NULL);
    if (!resp) {
        cinfer_http_sse_close_once(c);
        cinfer_log(CINFER_LOG_SEV_ERROR, "http: out of memory making an event-stream response");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no"); /* proxies must not hold events back */
    cinfer_http_queue(c, 200, resp);
}
