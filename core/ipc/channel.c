#include "ipc/channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "ipc/curve.h"

void *cinfer_channel_open(void *zmq_context, int type, const char *endpoint, int bind, const char *routing_id,
                          struct cinfer_error *err)
{
    return cinfer_channel_open_keyed(zmq_context, type, endpoint, bind, routing_id, NULL, err);
}

void *cinfer_channel_prepare_keyed(void *zmq_context, int type, const char *endpoint, int bind,
                                   const char *routing_id, const struct cinfer_port_args *keys,
                                   struct cinfer_error *err)
{
    void *s = zmq_socket(zmq_context, type);
    if (!s) {
        cinfer_error_set(err, CINFER_ERR_IO, "zmq_socket for %s: %s", endpoint, zmq_strerror(zmq_errno()));
        return NULL;
    }
    int linger_ms = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    if (routing_id)
        zmq_setsockopt(s, ZMQ_ROUTING_ID, routing_id, strlen(routing_id));
    if (type == ZMQ_ROUTER) {
        int mandatory = 1; /* a reply to a peer that went away is an error, not a silent drop */
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    }
    if (!bind) {
        /* A peer may bind after we connect (workers start before the engine binds):
         * retry soon, backing off to a second. */
        int retry_ms = 10, retry_max_ms = 1000;
        zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &retry_ms, sizeof retry_ms);
        zmq_setsockopt(s, ZMQ_RECONNECT_IVL_MAX, &retry_max_ms, sizeof retry_max_ms);
    }
    if (cinfer_curve_apply(s, endpoint, bind, keys, err) != CINFER_OK) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

void *cinfer_channel_open_keyed(void *zmq_context, int type, const char *endpoint, int bind, const char *routing_id,
                                const struct cinfer_port_args *keys, struct cinfer_error *err)
{
    void *s = cinfer_channel_prepare_keyed(zmq_context, type, endpoint, bind, routing_id, keys, err);
    if (!s)
        return NULL;
    int rc = bind ? zmq_bind(s, endpoint) : zmq_connect(s, endpoint);
    if (rc != 0) {
        cinfer_error_set(err, CINFER_ERR_IO, "cannot %s %s: %s", bind ? "bind" : "connect to", endpoint,
                         zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

void cinfer_channel_close(void **socket)
{
    if (socket && *socket) {
        zmq_close(*socket);
        *socket = NULL;
    }
}

int cinfer_channel_send(void *socket, const void *frame, size_t len, int dont_wait, struct cinfer_error *err)
{
    for (;;) {
        if (zmq_send(socket, frame, len, dont_wait ? ZMQ_DONTWAIT : 0) >= 0)
            return CINFER_OK;
        if (zmq_errno() == EINTR)
            continue;
        if (zmq_errno() == EAGAIN)
            return cinfer_error_set(err, CINFER_ERR_TIMEOUT, "send would block");
        return cinfer_error_set(err, CINFER_ERR_IO, "zmq_send: %s", zmq_strerror(zmq_errno()));
    }
}

int cinfer_channel_send_to(void *socket, const char *routing_id, const void *frame, size_t len,
                           struct cinfer_error *err)
{
    if (zmq_send(socket, routing_id, strlen(routing_id), ZMQ_SNDMORE) < 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "zmq_send to %s: %s", routing_id, zmq_strerror(zmq_errno()));
    return cinfer_channel_send(socket, frame, len, 0, err);
}

int cinfer_channel_recv(void *socket, int timeout_ms, void **frame, size_t *len, char *routing_id,
                        struct cinfer_error *err)
{
    *frame = NULL;
    *len = 0;
    zmq_pollitem_t item = {.socket = socket, .events = ZMQ_POLLIN};
    int ready;
    do {
        ready = zmq_poll(&item, 1, timeout_ms);
    } while (ready < 0 && zmq_errno() == EINTR);
    if (ready < 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "zmq_poll: %s", zmq_strerror(zmq_errno()));
    if (ready == 0)
        return CINFER_ERR_TIMEOUT;

    /* A ROUTER delivers [identity, body]; collect every part, keep the last as the frame. */
    int part = 0, more = 1;
    while (more) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, socket, 0) < 0) {
            zmq_msg_close(&msg);
            free(*frame);
            *frame = NULL;
            return cinfer_error_set(err, CINFER_ERR_IO, "zmq_msg_recv: %s", zmq_strerror(zmq_errno()));
        }
        more = zmq_msg_more(&msg);
        size_t n = zmq_msg_size(&msg);
        if (more && part == 0 && routing_id) {
            size_t keep = n < 63 ? n : 63;
            memcpy(routing_id, zmq_msg_data(&msg), keep);
            routing_id[keep] = '\0';
        }
        if (!more) {
            *frame = malloc(n ? n : 1);
            if (!*frame) {
                zmq_msg_close(&msg);
                return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for a %zu-byte frame", n);
            }
            memcpy(*frame, zmq_msg_data(&msg), n);
            *len = n;
        }
        zmq_msg_close(&msg);
        part++;
    }
    return CINFER_OK;
}
