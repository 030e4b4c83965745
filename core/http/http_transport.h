/* http/http_transport.h — the transport's own pieces, shared by its files
 * (http_server.c, http_conn.c, http_reply.c, http_sse.c, http_routes.c, http_auth.c,
 * http_generation.c) and never by the API layers, which see http_server.h only. */
#ifndef CINFER_HTTP_TRANSPORT_H
#define CINFER_HTTP_TRANSPORT_H

#include <microhttpd.h>
#include <stdatomic.h>

#include "cinfer/config.h"
#include "http/http_auth.h"
#include "http/http_routes.h"
#include "http/http_server.h"

struct cinfer_http_server {
    struct MHD_Daemon *daemon;
    struct http_server_ctx ctx;
    struct cinfer_server_args args;           /* our copy; ctx.args points here */
    char *model_name;
    struct cinfer_chat_template *chat_template;
    char *tls_cert_pem, *tls_key_pem;         /* kept while the daemon runs (MHD borrows them) */
    atomic_int stopping;                      /* set first by stop: blocked handlers give up */
    atomic_int requests_open;                 /* from headers to completion; at 0 memory is trimmed */
    int port;
};

/* One request on one connection, from its headers to MHD's completion callback. */
struct http_conn {
    struct cinfer_http_server *server;
    struct MHD_Connection *mhd;
    double arrival_s;                 /* monotonic clock when the headers arrived */
    const struct http_route *route;   /* NULL once refused before the body */
    struct http_buffer body;          /* NUL-terminated as it grows */
    int body_too_large;               /* passed the limit while arriving */
    size_t dropped_bytes;             /* read past the limit and thrown away */
    int answered;                     /* a response is queued (exactly one per request) */
    int dispatched;                   /* the handler ran */
    int gone;                         /* the client was seen gone (sticky) */
    /* A server-sent-event stream: the source, what next() produced, how much is sent. */
    int sse_open, sse_closed, sse_over;
    struct http_sse_source sse;
    struct http_buffer sse_out;
    size_t sse_sent;
};


/* http_conn.c */
double cinfer_http_now_s(void);
struct http_conn *cinfer_http_conn_new(struct cinfer_http_server *srv, struct MHD_Connection *mhd);
/* MHD's completion callback: closes an open event stream (once) and frees. */
void cinfer_http_conn_free(struct http_conn **c);
/* 1 when the server is stopping or the client is gone: blocked work should give up. */
int cinfer_http_conn_should_stop(struct http_conn *c);
double cinfer_http_conn_arrival_s(const struct http_conn *c);

/* http_reply.c: queues resp with status; adds extra headers first. Marks the conn answered. */
void cinfer_http_queue(struct http_conn *c, int status, struct MHD_Response *resp);
/* 405 with an Allow header, 401 with WWW-Authenticate: cinfer_http_reply_error plus one header. */
void cinfer_http_reply_error_with_header(struct http_conn *c, int status, const char *type, const char *header,
                                         const char *header_value, const char *fmt, ...) __attribute__((format(printf,
                                                                                                               6, 7)));

/* http_sse.c: closes the stream's source exactly once. */
void cinfer_http_sse_close_once(struct http_conn *c);

#endif
