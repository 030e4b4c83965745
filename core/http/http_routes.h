/* http/http_routes.h — the route table: which handler answers a path and method. */
#ifndef CINFER_HTTP_ROUTES_H
#define CINFER_HTTP_ROUTES_H

#include <stddef.h>

#include "http/http_server.h"

struct http_route {
    const char *path;
    const char *method;
    http_handler_fn handler;
    int needs_auth;
};

/* The route of (path, method), or NULL with *path_known telling 404 from 405 and allow
 * filled with the path's methods ("GET, HEAD") for the Allow header. */
const struct http_route *cinfer_http_route_find(const char *path, const char *method, int *path_known, char *allow,
                                                size_t allow_bytes);

#endif
