/* A small HTTP/1.1 client over plain sockets, for the HTTP tests and bench_serving:
 * an incremental response parser (status line, headers, Content-Length or chunked
 * body, server-sent events split as they arrive), and a blocking fetch on top of it.
 * Many parsers can be driven from one poll() loop (the load test, the benchmark). */
#ifndef CINFER_TEST_HTTP_CLIENT_H
#define CINFER_TEST_HTTP_CLIENT_H

#include <stddef.h>

/* Called for every complete SSE event with the text after "data: " (without the
 * blank line); data is NUL-terminated. Returning nonzero stops the parser (feed
 * then returns -1). */
typedef int (*http_client_event_fn)(void *ctx, const char *data, size_t len);

enum http_client_state { HTTP_CLIENT_HEAD, HTTP_CLIENT_BODY, HTTP_CLIENT_DONE };

struct http_client_parser {
    enum http_client_state state;
    int status;                 /* 200, 503, ... once the head is in */
    char content_type[128];
    int chunked;                /* Transfer-Encoding: chunked */
    long long content_length;   /* -1: until the connection closes */
    char *head;                 /* the raw head (status line and headers), NUL-terminated */
    size_t head_len, head_cap;
    char *body;                 /* the decoded body (chunks joined) */
    size_t body_len, body_cap;
    size_t events_scanned;      /* body bytes already split into events */
    int n_events;
    int framing_errors;         /* SSE lines that are not "data: ..." or blank */
    char framing_error[256];    /* the first one, described */
    /* chunked decoding */
    int chunk_state;            /* 0 size line, 1 data, 2 CRLF after data, 3 trailer */
    long long chunk_left;
    char line[64];
    size_t line_len;
    long long body_read;        /* body bytes of a Content-Length body so far */
    http_client_event_fn on_event;
    void *event_ctx;
    char error[256];            /* why feed returned -1 */
};

void http_client_parser_init(struct http_client_parser *p, http_client_event_fn on_event, void *ctx);
void http_client_parser_free(struct http_client_parser *p);
/* Feeds received bytes (n == 0 means the peer closed). Returns 0 when more is needed,
 * 1 when the response is complete, -1 on a malformed response (p->error says why). */
int http_client_feed(struct http_client_parser *p, const char *data, size_t n);

/* "http://HOST:PORT" (trailing path ignored) -> host and port; 0 or -1. */
int http_client_parse_url(const char *url, char *host, size_t host_bytes, int *port);
/* A TCP connection to host:port, nonblocking when asked (the connect may then still be
 * in progress); the fd or -1. */
int http_client_connect(const char *host, int port, int nonblocking);
/* The bytes of a request with Connection: close; malloc'd into *out. body may be NULL. */
int http_client_format(char **out, size_t *out_len, const char *method, const char *host, int port, const char *path,
                       const char *body, size_t body_len);

/* A blocking request: sends, reads the whole response into p (events go to p's
 * callback as they arrive). Returns 0, or -1 on a connection error, a timeout or a
 * malformed response (p->error says which). */
int http_client_fetch(struct http_client_parser *p, const char *host, int port, const char *method, const char *path,
                      const char *body, int timeout_ms);

/* ---- many requests from one poll() loop ---------------------------------------------- */
/* One request of a run. The caller fills the request part; the run fills the rest. */
struct http_client_job {
    const char *method;
    const char *path;
    const char *body;            /* NULL for none; the caller keeps it alive */
    double start_at_s;           /* monotonic time to start it (0: at once) */
    http_client_event_fn on_event;
    void *event_ctx;
    /* filled by the run */
    struct http_client_parser parser;
    int result;                  /* 0 never finished (deadline), 1 complete, -1 failed */
    char error[256];             /* why it failed */
    double t_sent_s;             /* the request's last byte written */
    double t_done_s;             /* the response complete, or the failure */
    /* the run's own */
    int fd;
    int phase;
    char *request;
    size_t request_len, request_sent;
};

/* Runs every job against host:port from this thread: starts each at its start_at_s
 * with at most max_concurrency in flight (0: no cap), until all are done or the
 * monotonic deadline passes (jobs still open then keep result 0 and are closed).
 * Returns how many completed (result 1). Free each job's parser afterwards. */
int http_client_run(struct http_client_job *jobs, size_t n, const char *host, int port, int max_concurrency,
                    double deadline_s);

/* Monotonic seconds. */
double http_client_now_s(void);

#endif
