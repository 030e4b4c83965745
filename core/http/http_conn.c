/* http/http_conn.c — one request's state and whether its client is still there.
 *
 * A departed client is seen on the raw socket (also under TLS, where MHD's fd is the
 * TCP one): a hang-up or error, a peer that shut its side (POLLRDHUP), or a readable
 * socket whose peek finds end of file. Checked from the connection's own thread. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "http/http_transport.h"

double cinfer_http_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct http_conn *cinfer_http_conn_new(struct cinfer_http_server *srv, struct MHD_Connection *mhd)
{
    struct http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->server = srv;
    c->mhd = mhd;
    c->arrival_s = cinfer_http_now_s();
    return c;
}

void cinfer_http_conn_free(struct http_conn **cp)
{
    if (!cp || !*cp)
        return;
    struct http_conn *c = *cp;
    cinfer_http_sse_close_once(c);
    free(c->body.data);
    free(c->sse_out.data);
    free(c);
    *cp = NULL;
}

double cinfer_http_conn_arrival_s(const struct http_conn *c)
{
    return c->arrival_s;
}

int cinfer_http_conn_client_gone(struct http_conn *c)
{
    if (!c)
        return 0;
    if (c->gone)
        return 1;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info)
        return 0;
    int fd = info->connect_fd;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
        c->gone = 1;
    } else if (p.revents & POLLIN) {
        /* Readable without a hang-up: either a pipelined request (still there) or EOF. */
        char byte;
        ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            c->gone = 1;
    }
    return c->gone;
}

int cinfer_http_conn_should_stop(struct http_conn *c)
{
    if (!c)
        return 0;
    return atomic_load(&c->server->stopping) || cinfer_http_conn_client_gone(c);
}
