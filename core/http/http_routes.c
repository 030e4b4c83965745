/* http/http_routes.c — the endpoints: exact path, method, handler, and whether the API
 * key is needed (everywhere but /health, which load balancers probe without one). */
#include <stdio.h>
#include <string.h>

#include "http/http_routes.h"

/* 200 with an empty body while every worker is alive; 503 once one is lost. */
static void handle_health(const struct http_request *req)
{
    if (cinfer_engine_healthy(req->ctx->engine))
        cinfer_http_reply_text(req->conn, 200, "text/plain; charset=utf-8", "", 0);
    else
        cinfer_http_reply_error(req->conn, 503, "service_unavailable", NULL,
                                "the engine is not healthy: it lost a worker process");
}

static const struct http_route routes[] = {
    {"/health", "GET", handle_health, 0},
    {"/health", "HEAD", handle_health, 0},
    {"/v1/completions", "POST", cinfer_openai_handle_completions, 1},
    {"/v1/chat/completions", "POST", cinfer_openai_handle_chat_completions, 1},
    {"/v1/models", "GET", cinfer_openai_handle_models, 1},
    {"/generate", "POST", cinfer_native_handle_generate, 1},
    {"/v1/tokenize", "POST", cinfer_native_handle_tokenize, 1},
    {"/v1/detokenize", "POST", cinfer_native_handle_detokenize, 1},
    {"/get_server_info", "GET", cinfer_native_handle_server_info, 1},
    {"/flush_cache", "POST", cinfer_native_handle_flush_cache, 1},
    {"/flush_cache", "GET", cinfer_native_handle_flush_cache, 1},
    {"/abort_request", "POST", cinfer_native_handle_abort_request, 1},
    {"/health_generate", "GET", cinfer_native_handle_health_generate, 1},
    {"/metrics", "GET", cinfer_native_handle_metrics, 1},
};

const struct http_route *cinfer_http_route_find(const char *path, const char *method, int *path_known, char *allow,
                                                size_t allow_bytes)
{
    *path_known = 0;
    if (allow_bytes)
        allow[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(routes[i].path, path) != 0)
            continue;
        if (!strcmp(routes[i].method, method))
            return &routes[i];
        *path_known = 1;
        if (used < allow_bytes) {
            int n = snprintf(allow + used, allow_bytes - used, "%s%s", used ? ", " : "", routes[i].method);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return NULL;
}
