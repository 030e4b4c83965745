#include "support/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double http_client_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void http_client_parser_init(struct http_client_parser *p, http_client_event_fn on_event, void *ctx)
{
    memset(p, 0, sizeof *p);
    p->content_length = -1;
    p->on_event = on_event;
    p->event_ctx = ctx;
}

void http_client_parser_free(struct http_client_parser *p)
{
    free(p->head);
    free(p->body);
    p->head = p->body = NULL;
}

static int append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = (*len + n + 1) * 2;
        char *grown = realloc(*buf, c);
        if (!grown)
            return -1;
        *buf = grown;
        *cap = c;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static int fail(struct http_client_parser *p, const char *why)
{
    snprintf(p->error, sizeof p->error, "%s", why);
    return -1;
}

/* Reads the status line and the headers we care about. */
static int parse_head(struct http_client_parser *p)
{
    if (sscanf(p->head, "HTTP/1.%*d %d", &p->status) != 1)
        return fail(p, "the response does not start with an HTTP/1.x status line");
    for (char *line = strstr(p->head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
        char *h = line + 2;
        char *colon = strchr(h, ':');
        char *end = strstr(h, "\r\n");
        if (!colon || (end && colon > end))
            continue;
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        size_t vlen = end ? (size_t)(end - v) : strlen(v);
        if (strncasecmp(h, "Content-Type:", 13) == 0)
            snprintf(p->content_type, sizeof p->content_type, "%.*s", (int)vlen, v);
        else if (strncasecmp(h, "Transfer-Encoding:", 18) == 0 && vlen >= 7 && strncasecmp(v, "chunked", 7) == 0)
            p->chunked = 1;
        else if (strncasecmp(h, "Content-Length:", 15) == 0)
            p->content_length = strtoll(v, NULL, 10);
    }
    return 0;
}

/* Splits the decoded body into SSE events: each must be exactly "data: <payload>"
 * followed by a blank line; anything else counts as a framing error. */
static int scan_events(struct http_client_parser *p)
{
    if (strncmp(p->content_type, "text/event-stream", 17) != 0)
        return 0;
    for (;;) {
        char *start = p->body + p->events_scanned;
        char *end = p->body_len > p->events_scanned ? strstr(start, "\n\n") : NULL;
        if (!end)
            return 0;
        size_t len = (size_t)(end - start);
        p->events_scanned += len + 2;
        if (len < 6 || strncmp(start, "data: ", 6) != 0 || memchr(start, '\n', len)) {
            if (p->framing_errors++ == 0)
                snprintf(p->framing_error, sizeof p->framing_error, "event %d is not one \"data: ...\" line: \"%.120s\"",
                         p->n_events, start);
            continue;
        }
        p->n_events++;
        if (p->on_event) {
            char saved = *end;
            *end = '\0';
            int stop = p->on_event(p->event_ctx, start + 6, len - 6);
            *end = saved;
            if (stop)
                return fail(p, "stopped by the event handler");
        }
    }
}

static int body_bytes(struct http_client_parser *p, const char *data, size_t n)
{
    if (append(&p->body, &p->body_len, &p->body_cap, data, n))
        return fail(p, "out of memory");
    return scan_events(p);
}

/* Chunked transfer coding: "<hex size>\r\n<data>\r\n" ... "0\r\n\r\n". */
static int feed_chunked(struct http_client_parser *p, const char *data, size_t n)
{
    size_t i = 0;
    while (i < n && p->state == HTTP_CLIENT_BODY) {
        if (p->chunk_state == 1) {
            size_t take = n - i < (size_t)p->chunk_left ? n - i : (size_t)p->chunk_left;
            if (body_bytes(p, data + i, take))
                return -1;
            i += take;
            p->chunk_left -= (long long)take;
            if (p->chunk_left == 0)
                p->chunk_state = 2;
            continue;
        }
        char ch = data[i++];
        if (ch != '\n') {
            if (ch != '\r' && p->line_len + 1 < sizeof p->line)
                p->line[p->line_len++] = ch;
            continue;
        }
        p->line[p->line_len] = '\0';
        if (p->chunk_state == 0) {
            char *end;
            p->chunk_left = strtoll(p->line, &end, 16);
            if (end == p->line || p->chunk_left < 0)
                return fail(p, "malformed chunk size line");
            p->chunk_state = p->chunk_left ? 1 : 3;
        } else if (p->chunk_state == 2) {
            if (p->line_len)
                return fail(p, "chunk data not followed by CRLF");
            p->chunk_state = 0;
        } else if (p->chunk_state == 3 && p->line_len == 0) {
            p->state = HTTP_CLIENT_DONE;
        }
        p->line_len = 0;
    }
    return p->state == HTTP_CLIENT_DONE ? 1 : 0;
}

int http_client_feed(struct http_client_parser *p, const char *data, size_t n)
{
    if (p->state == HTTP_CLIENT_DONE)
        return 1;
    if (n == 0) { /* the peer closed */
        if (p->state == HTTP_CLIENT_BODY && !p->chunked && p->content_length < 0) {
            p->state = HTTP_CLIENT_DONE;
            return 1;
        }
        return fail(p, p->state == HTTP_CLIENT_HEAD ? "the connection closed before a response head"
                                                    : "the connection closed in the middle of the body");
    }
    if (p->state == HTTP_CLIENT_HEAD) {
        size_t before = p->head_len;
        if (append(&p->head, &p->head_len, &p->head_cap, data, n))
            return fail(p, "out of memory");
        char *end = strstr(p->head, "\r\n\r\n");
        if (!end)
            return p->head_len > (1u << 20) ? fail(p, "a response head over 1 MiB") : 0;
        size_t head_bytes = (size_t)(end - p->head) + 4;
        size_t used = head_bytes - before;
        p->head[head_bytes - 2] = '\0';
        p->head_len = head_bytes - 2;
        if (parse_head(p))
            return -1;
        p->state = HTTP_CLIENT_BODY;
        data += used;
        n -= used;
        if (!p->chunked && p->content_length == 0) {
            p->state = HTTP_CLIENT_DONE;
            return 1;
        }
    }
    if (p->chunked)
        return feed_chunked(p, data, n);
    if (n && body_bytes(p, data, n))
        return -1;
    p->body_read += (long long)n;
    if (p->content_length >= 0 && p->body_read >= p->content_length) {
        p->state = HTTP_CLIENT_DONE;
        return 1;
    }
    return 0;
}

int http_client_parse_url(const char *url, char *host, size_t host_bytes, int *port)
{
    const char *h = strncmp(url, "http://", 7) == 0 ? url + 7 : url;
    const char *colon = strchr(h, ':');
    const char *slash = strchr(h, '/');
    size_t hlen = colon && (!slash || colon < slash) ? (size_t)(colon - h) : slash ? (size_t)(slash - h) : strlen(h);
    if (hlen == 0 || hlen >= host_bytes)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = colon && (!slash || colon < slash) ? atoi(colon + 1) : 80;
    return *port > 0 && *port < 65536 ? 0 : -1;
}

int http_client_connect(const char *host, int port, int nonblocking)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &ai) != 0 || !ai)
        return -1;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (nonblocking)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc != 0 && !(nonblocking && errno == EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

int http_client_format(char **out, size_t *out_len, const char *method, const char *host, int port, const char *path,
                       const char *body, size_t body_len)
{
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\nAccept: */*\r\n%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, host, port, body ? "Content-Type: application/json\r\n" : "", body ? body_len : 0);
    if (n < 0 || (size_t)n >= sizeof head)
        return -1;
    char *buf = malloc((size_t)n + (body ? body_len : 0) + 1);
    if (!buf)
        return -1;
    memcpy(buf, head, (size_t)n);
    if (body)
        memcpy(buf + n, body, body_len);
    *out_len = (size_t)n + (body ? body_len : 0);
    buf[*out_len] = '\0';
    *out = buf;
    return 0;
}

int http_client_fetch(struct http_client_parser *p, const char *host, int port, const char *method, const char *path,
                      const char *body, int timeout_ms)
{
    double deadline = http_client_now_s() + timeout_ms / 1000.0;
    int fd = http_client_connect(host, port, 0);
    if (fd < 0)
        return fail(p, "cannot connect");
    char *req;
    size_t req_len;
    if (http_client_format(&req, &req_len, method, host, port, path, body, body ? strlen(body) : 0)) {
        close(fd);
        return fail(p, "cannot format the request");
    }
    size_t sent = 0;
    while (sent < req_len) {
        ssize_t w = send(fd, req + sent, req_len - sent, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server may answer (413) before taking the whole body */
        sent += (size_t)w;
    }
    free(req);
    int rc = 0;
    char buf[16384];
    while (rc == 0) {
        int left_ms = (int)((deadline - http_client_now_s()) * 1000.0);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left_ms <= 0 || poll(&pfd, 1, left_ms) <= 0) {
            rc = fail(p, "timed out waiting for the response");
            break;
        }
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = fail(p, "recv failed");
            break;
        }
        rc = http_client_feed(p, buf, (size_t)r);
    }
    close(fd);
    return rc < 0 ? -1 : 0;
}

/* ---- many requests from one poll() loop ---------------------------------------------- */
enum { PHASE_WAITING, PHASE_CONNECTING, PHASE_SENDING, PHASE_READING, PHASE_DONE };

static void job_end(struct http_client_job *j, int result, const char *why)
{
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
    j->phase = PHASE_DONE;
    j->result = result;
    j->t_done_s = http_client_now_s();
    if (why)
        snprintf(j->error, sizeof j->error, "%s", why);
    free(j->request);
    j->request = NULL;
}

static void job_start(struct http_client_job *j, const char *host, int port)
{
    http_client_parser_init(&j->parser, j->on_event, j->event_ctx);
    if (http_client_format(&j->request, &j->request_len, j->method, host, port, j->path, j->body,
                           j->body ? strlen(j->body) : 0)) {
        job_end(j, -1, "cannot format the request");
        return;
    }
    j->fd = http_client_connect(host, port, 1);
    if (j->fd < 0) {
        char why[128];
        snprintf(why, sizeof why, "connect: %s", strerror(errno));
        job_end(j, -1, why);
        return;
    }
    j->phase = PHASE_CONNECTING;
}

/* Writes what the socket takes; reads and feeds what arrived. */
static void job_io(struct http_client_job *j, short revents)
{
    if (j->phase == PHASE_CONNECTING) {
        int soerr = 0;
        socklen_t len = sizeof soerr;
        getsockopt(j->fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        if (soerr) {
            char why[128];
            snprintf(why, sizeof why, "connect: %s", strerror(soerr));
            job_end(j, -1, why);
            return;
        }
        j->phase = PHASE_SENDING;
    }
    if (j->phase == PHASE_SENDING && (revents & POLLOUT)) {
        ssize_t w = send(j->fd, j->request + j->request_sent, j->request_len - j->request_sent, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            char why[128];
            snprintf(why, sizeof why, "send: %s", strerror(errno));
            job_end(j, -1, why);
            return;
        }
        if (w > 0)
            j->request_sent += (size_t)w;
        if (j->request_sent == j->request_len) {
            j->phase = PHASE_READING;
            j->t_sent_s = http_client_now_s();
        }
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[16384];
        ssize_t r = recv(j->fd, buf, sizeof buf, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (r < 0) {
            char why[128];
            snprintf(why, sizeof why, "recv: %s", strerror(errno));
            job_end(j, -1, why);
            return;
        }
        int rc = http_client_feed(&j->parser, buf, (size_t)r);
        if (rc > 0)
            job_end(j, 1, NULL);
        else if (rc < 0)
            job_end(j, -1, j->parser.error);
    }
}

int http_client_run(struct http_client_job *jobs, size_t n, const char *host, int port, int max_concurrency,
                    double deadline_s)
{
    struct pollfd *pfds = calloc(n ? n : 1, sizeof *pfds);
    size_t *which = calloc(n ? n : 1, sizeof *which);
    if (!pfds || !which) {
        free(pfds);
        free(which);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        jobs[i].fd = -1;
        jobs[i].phase = PHASE_WAITING;
        jobs[i].result = 0;
        jobs[i].request = NULL;
        jobs[i].request_sent = 0;
        jobs[i].error[0] = '\0';
        http_client_parser_init(&jobs[i].parser, jobs[i].on_event, jobs[i].event_ctx);
    }
    size_t next = 0, done = 0;
    int active = 0;
    while (done < n) {
        double now = http_client_now_s();
        if (now >= deadline_s)
            break;
        /* Start the jobs whose time has come (jobs are started in order). */
        while (next < n && jobs[next].start_at_s <= now && (max_concurrency <= 0 || active < max_concurrency)) {
            job_start(&jobs[next], host, port);
            if (jobs[next].phase == PHASE_DONE)
                done++;
            else
                active++;
            next++;
        }
        nfds_t m = 0;
        for (size_t i = 0; i < next; i++) {
            struct http_client_job *j = &jobs[i];
            if (j->phase == PHASE_DONE)
                continue;
            pfds[m] = (struct pollfd){.fd = j->fd,
                                      .events = (short)(j->phase == PHASE_READING ? POLLIN : (POLLOUT | POLLIN))};
            which[m++] = i;
        }
        double wake = deadline_s;
        if (next < n && (max_concurrency <= 0 || active < max_concurrency) && jobs[next].start_at_s < wake)
            wake = jobs[next].start_at_s;
        int timeout_ms = (int)((wake - now) * 1000.0) + 1;
        if (timeout_ms > 100)
            timeout_ms = 100;
        int ready = poll(pfds, m, timeout_ms);
        if (ready < 0 && errno != EINTR)
            break;
        for (nfds_t k = 0; ready > 0 && k < m; k++) {
            if (!pfds[k].revents)
                continue;
            struct http_client_job *j = &jobs[which[k]];
            job_io(j, pfds[k].revents);
            if (j->phase == PHASE_DONE) {
                done++;
                active--;
            }
        }
    }
    int completed = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].phase != PHASE_DONE && jobs[i].phase != PHASE_WAITING) {
            int fd = jobs[i].fd;
            jobs[i].fd = -1;
            if (fd >= 0)
                close(fd);
            free(jobs[i].request);
            jobs[i].request = NULL;
            snprintf(jobs[i].error, sizeof jobs[i].error, "still open at the deadline");
        }
        completed += jobs[i].result == 1;
    }
    free(pfds);
    free(which);
    return completed;
}
