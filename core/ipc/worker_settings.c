#include "ipc/worker_settings.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/messages.h"

static int write_all(int fd, const void *data, size_t len, struct cinfer_error *err)
{
    const uint8_t *p = data;
    while (len) {
        /* send() on a socket (no SIGPIPE), write() on anything else */
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return cinfer_error_set(err, CINFER_ERR_RANGE,
                                    "a worker's settings (%zu bytes left to write) do not fit its standard input's "
                                    "buffer, and nothing reads them yet", len);
        if (n <= 0)
            return cinfer_error_set(err, CINFER_ERR_IO, "writing a worker's settings to its standard input: %s",
                                    n < 0 ? strerror(errno) : "nothing written");
        p += n;
        len -= (size_t)n;
    }
    return CINFER_OK;
}

int cinfer_worker_settings_send(int fd, const struct cinfer_server_args *args, const struct cinfer_port_args *ports,
                                struct cinfer_error *err)
{
    struct cinfer_msg_worker_settings m = {.ports = *ports};
    int rc = cinfer_server_args_to_string(args, &m.server_args, err);
    if (rc)
        return rc;
    void *frame;
    size_t len;
    rc = cinfer_msg_encode_worker_settings(&m, &frame, &len);
    free(m.server_args);
    if (rc)
        return cinfer_error_set(err, rc, "out of memory encoding a worker's settings");
    uint8_t head[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
    rc = write_all(fd, head, sizeof head, err);
    if (rc == CINFER_OK)
        rc = write_all(fd, frame, len, err);
    free(frame);
    return rc;
}

/* Reads exactly len bytes, each wait bounded by timeout_ms. */
static int read_all(int fd, void *data, size_t len, int timeout_ms, const char *what, struct cinfer_error *err)
{
    uint8_t *p = data;
    size_t got = 0;
    while (got < len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int ready = poll(&pfd, 1, timeout_ms);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0)
            return cinfer_error_set(err, CINFER_ERR_TIMEOUT,
                                    "no settings on standard input: %zu of %zu bytes of %s came within %d ms", got,
                                    len, what, timeout_ms);
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return cinfer_error_set(err, CINFER_ERR_RANGE,
                                    "a worker's settings (%zu bytes left to write) do not fit its standard input's "
                                    "buffer, and nothing reads them yet", len);
        if (n <= 0)
            return cinfer_error_set(err, n == 0 ? CINFER_ERR_PARSE : CINFER_ERR_IO,
                                    "standard input ended after %zu of %zu bytes of %s%s%s (cinfer-worker is "
                                    "started by the engine, which writes its settings there)",
                                    got, len, what, n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
        got += (size_t)n;
    }
    return CINFER_OK;
}

int cinfer_worker_settings_parse(const void *frame, size_t len, struct cinfer_server_args *args,
                                 struct cinfer_port_args *ports, struct cinfer_error *err)
{
    struct cinfer_msg_worker_settings m;
    int rc = cinfer_msg_decode_worker_settings(frame, len, &m, err);
    if (rc)
        return rc;
    rc = cinfer_server_args_init(args, err);
    if (rc == CINFER_OK && (rc = cinfer_server_args_load_string(args, m.server_args, "the engine's settings", err)) ==
                               CINFER_OK)
        rc = cinfer_server_args_validate(args, err);
    if (rc == CINFER_OK)
        *ports = m.ports;
    else
        cinfer_server_args_free(args);
    cinfer_msg_worker_settings_free(&m);
    return rc;
}

int cinfer_worker_settings_receive(int fd, int timeout_ms, struct cinfer_server_args *args,
                                   struct cinfer_port_args *ports, struct cinfer_error *err)
{
    uint8_t head[4];
    int rc = read_all(fd, head, sizeof head, timeout_ms, "the settings' length", err);
    if (rc)
        return rc;
    uint32_t len = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24;
    if (len < 12 || len > CINFER_IPC_MAX_SETTINGS + 64 * 1024)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "standard input: the settings' length is %u bytes, expected 12 to %u", len,
                                CINFER_IPC_MAX_SETTINGS + 64 * 1024);
    void *frame = malloc(len);
    if (!frame)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory for %u bytes of settings", len);
    rc = read_all(fd, frame, len, timeout_ms, "the settings", err);
    if (rc == CINFER_OK)
        rc = cinfer_worker_settings_parse(frame, len, args, ports, err);
    free(frame);
    return rc;
}
