#include "ipc/curve.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "util/log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "cinfer"

int cinfer_curve_keys_generate(struct cinfer_port_args *ports, struct cinfer_error *err)
{
    if (zmq_curve_keypair(ports->curve_server_public, ports->curve_server_secret) != 0 ||
        zmq_curve_keypair(ports->curve_client_public, ports->curve_client_secret) != 0)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "cannot make CURVE keys (%s): this libzmq lacks CURVE, which tcp channels between "
                                "hosts need", zmq_strerror(zmq_errno()));
    return CINFER_OK;
}

int cinfer_curve_enabled(const struct cinfer_port_args *ports)
{
    return ports && ports->curve_server_public[0] && ports->curve_client_public[0];
}

int cinfer_curve_apply(void *s, const char *endpoint, int bind, const struct cinfer_port_args *ports,
                       struct cinfer_error *err)
{
    if (!cinfer_curve_enabled(ports) || strncmp(endpoint, "tcp://", 6) != 0)
        return CINFER_OK;
    int one = 1, rc;
    if (bind) {
        rc = zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one);
        if (rc == 0)
            rc = zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, ports->curve_server_secret, 40);
        if (rc == 0) /* every handshake goes to the ZAP handler */
            rc = zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN));
    } else {
        rc = zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, ports->curve_server_public, 40);
        if (rc == 0)
            rc = zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, ports->curve_client_public, 40);
        if (rc == 0)
            rc = zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, ports->curve_client_secret, 40);
    }
    if (rc != 0)
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot set up CURVE: %s", endpoint,
                                zmq_strerror(zmq_errno()));
    return CINFER_OK;
}

/* ---- the ZAP handler ----------------------------------------------------------------- */

struct cinfer_zap {
    void *socket;              /* REP, bound at ZAP_ENDPOINT; the thread's only */
    uint8_t allowed[32];       /* the client public key, binary */
    pthread_t thread;
    volatile int stop;
    int refusals;              /* atomic: the thread counts, anyone reads */
};

/* One frame into buf (NUL-terminated when it fits); returns its size, -1 on error. */
static int recv_frame(void *s, char *buf, size_t cap, int *more)
{
    int n = zmq_recv(s, buf, cap - 1, 0);
    if (n < 0)
        return -1;
    buf[(size_t)n < cap - 1 ? (size_t)n : cap - 1] = '\0';
    size_t more_size = sizeof *more;
    zmq_getsockopt(s, ZMQ_RCVMORE, more, &more_size);
    return n;
}

/* ZAP 1.0 (RFC 27): version, request id, domain, address, identity, mechanism, then the
 * mechanism's credentials (for CURVE, the client's 32-byte public key). */
static void answer_request(struct cinfer_zap *z)
{
    char frames[7][256];
    int sizes[7] = {0}, more = 1, n = 0;
    while (more && n < 7) {
        sizes[n] = recv_frame(z->socket, frames[n], sizeof frames[n], &more);
        if (sizes[n] < 0)
            return;
        n++;
    }
    while (more) { /* more credentials than expected: drain them */
        char skip[256];
        if (recv_frame(z->socket, skip, sizeof skip, &more) < 0)
            return;
    }
    int ok = n == 7 && !strcmp(frames[0], "1.0") && !strcmp(frames[5], "CURVE") && sizes[6] == 32 &&
             memcmp(frames[6], z->allowed, 32) == 0;
    if (!ok) {
        __atomic_fetch_add(&z->refusals, 1, __ATOMIC_RELAXED);
        cinfer_log(CINFER_LOG_SEV_WARNING, "refused a %s connection from %s: it does not hold this engine's key",
                   n > 5 ? frames[5] : "malformed", n > 3 ? frames[3] : "an unknown peer");
    }
    zmq_send(z->socket, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(z->socket, frames[1], (size_t)(sizes[1] > 0 ? sizes[1] : 0), ZMQ_SNDMORE);
    zmq_send(z->socket, ok ? "200" : "400", 3, ZMQ_SNDMORE);
    const char *text = ok ? "OK" : "not this engine's key";
    zmq_send(z->socket, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(z->socket, "", 0, ZMQ_SNDMORE); /* user id */
    zmq_send(z->socket, "", 0, 0);           /* metadata */
}

static void *zap_thread(void *arg)
{
    struct cinfer_zap *z = arg;
    while (!z->stop) {
        zmq_pollitem_t item = {.socket = z->socket, .events = ZMQ_POLLIN};
        int n = zmq_poll(&item, 1, 50);
        if (n < 0 && zmq_errno() == ETERM)
            break;
        if (n > 0)
            answer_request(z);
    }
    zmq_close(z->socket);
    return NULL;
}

int cinfer_zap_start(void *zmq_context, const struct cinfer_port_args *ports, struct cinfer_zap **out,
                     struct cinfer_error *err)
{
    *out = NULL;
    if (!cinfer_curve_enabled(ports))
        return CINFER_OK;
    struct cinfer_zap *z = calloc(1, sizeof *z);
    if (!z)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for the ZAP handler");
    if (!zmq_z85_decode(z->allowed, ports->curve_client_public)) {
        free(z);
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the CURVE client key is not a Z85 key of 40 characters");
    }
    z->socket = zmq_socket(zmq_context, ZMQ_REP);
    int linger_ms = 0;
    if (z->socket)
        zmq_setsockopt(z->socket, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    if (!z->socket || zmq_bind(z->socket, ZAP_ENDPOINT) != 0) {
        int e = zmq_errno();
        if (z->socket)
            zmq_close(z->socket);
        free(z);
        return cinfer_error_set(err, CINFER_ERR_IO, "cannot start the ZAP handler: %s", zmq_strerror(e));
    }
    if (pthread_create(&z->thread, NULL, zap_thread, z) != 0) {
        zmq_close(z->socket);
        free(z);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "cannot start the ZAP handler's thread");
    }
    *out = z;
    return CINFER_OK;
}

void cinfer_zap_stop(struct cinfer_zap **zp)
{
    struct cinfer_zap *z = zp ? *zp : NULL;
    if (!z)
        return;
    z->stop = 1;
    pthread_join(z->thread, NULL);
    free(z);
    *zp = NULL;
}

int cinfer_zap_refusals(const struct cinfer_zap *z)
{
    return z ? __atomic_load_n(&z->refusals, __ATOMIC_RELAXED) : 0;
}
