/* libFuzzer target for what the HTTP transport reads from a client before any handler:
 * the Authorization header, the path and method (the route table), and the body as a
 * JSON object (then encoded as a server-sent event). The input's first line is the
 * header value and the path; the rest is the body. Whatever the bytes:
 *   - the key check agrees with a plain reading of "Bearer KEY" (scheme in any case,
 *     blanks around the key ignored);
 *   - a route is found only for its own path and method, and a known path with another
 *     method lists its methods for the Allow header;
 *   - the body parser returns an object without replying, or replies exactly once with
 *     400; malformed JSON is reported with its line and column;
 *   - an accepted object becomes one "data: <json>\n\n" event whose JSON reads back
 *     equal to the object. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_auth.h"
#include "http/http_routes.h"
#include "http/http_server.h"
#include "http_stand_in.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The routes' handlers are never called here; they only have to exist. */
#define UNUSED_HANDLER(fn)                          \
    void fn(const struct http_request *req)         \
    {                                               \
        (void)req;                                  \
        abort();                                    \
    }
UNUSED_HANDLER(cinfer_openai_handle_completions)
UNUSED_HANDLER(cinfer_openai_handle_chat_completions)
UNUSED_HANDLER(cinfer_openai_handle_models)
UNUSED_HANDLER(cinfer_native_handle_generate)
UNUSED_HANDLER(cinfer_native_handle_tokenize)
UNUSED_HANDLER(cinfer_native_handle_detokenize)
UNUSED_HANDLER(cinfer_native_handle_server_info)
UNUSED_HANDLER(cinfer_native_handle_flush_cache)
UNUSED_HANDLER(cinfer_native_handle_abort_request)
UNUSED_HANDLER(cinfer_native_handle_health_generate)
UNUSED_HANDLER(cinfer_native_handle_metrics)

static const char *const key = "sk-fuzz-0123456789";

/* "Bearer" + blanks + key + blanks, the scheme in any case. */
static int plain_auth(const char *h, const char *k)
{
    if (strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    const char *t = h + 7;
    while (*t == ' ' || *t == '\t')
        t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    return n == strlen(k) && memcmp(t, k, n) == 0;
}

static void check_auth(const char *line)
{
    if (cinfer_http_auth_header_ok(line, key) != plain_auth(line, key))
        abort();
    if (!cinfer_http_auth_header_ok(NULL, NULL) || !cinfer_http_auth_header_ok(line,
                                                                               "") || cinfer_http_auth_header_ok(NULL,
                                                                                                                 key))
        abort();
    /* The token itself as the key: accepted exactly when it is a Bearer token. */
    if (strncasecmp(line, "Bearer ", 7) == 0) {
        char token[512];
        const char *t = line + 7;
        while (*t == ' ' || *t == '\t')
            t++;
        snprintf(token, sizeof token, "%s", t);
        size_t n = strlen(token);
        while (n && (token[n - 1] == ' ' || token[n - 1] == '\t'))
            token[--n] = '\0';
        if (n && strlen(t) < sizeof token && !cinfer_http_auth_header_ok(line, token))
            abort();
    }
}

static void check_route(const char *path, const char *method)
{
    int known = 0;
    char allow[128];
    const struct http_route *r = cinfer_http_route_find(path, method, &known, allow, sizeof allow);
    if (r && (strcmp(r->path, path) || strcmp(r->method, method) || !r->handler))
        abort();
    if (!r && !known && allow[0])
        abort();
    if (r || !known)
        return;
    /* Allow: the path's other methods, each of which finds a route. */
    if (!allow[0])
        abort();
    char copy[128];
    snprintf(copy, sizeof copy, "%s", allow);
    for (char *save = NULL, *m = strtok_r(copy, ", ", &save); m; m = strtok_r(NULL, ", ", &save)) {
        int k = 0;
        char a[128];
        if (!strcmp(m, method) || !cinfer_http_route_find(path, m, &k, a, sizeof a))
            abort();
    }
}

static void check_body(const char *body, size_t len)
{
    struct http_conn conn = {0};
    struct http_request req = {.method = "POST", .path = "/generate", .body = body, .body_len = len, .conn = &conn};
    json_t *obj = cinfer_http_parse_json_object(&req);
    if (obj) {
        if (conn.replies || !json_is_object(obj))
            abort();
        struct http_buffer out = {0};
        if (cinfer_http_sse_event(&out, json_incref(obj)) != 0)
            abort();
        if (out.len < 8 || memcmp(out.data, "data: ", 6) || memcmp(out.data + out.len - 2, "\n\n", 2) ||
            memchr(out.data, '\n', out.len - 2))
            abort();
        json_t *back = json_loadb(out.data + 6, out.len - 8, JSON_DECODE_ANY, NULL);
        if (!back || !json_equal(back, obj))
            abort();
        json_decref(back);
        free(out.data);
        json_decref(obj);
        return;
    }
    if (conn.replies != 1 || conn.status != 400)
        abort();
    if (!strncmp(conn.message, "malformed JSON at line ", 23) &&
        json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) != NULL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t line_len = nl ? (size_t)(nl - text) : size;
    char *line = strndup(text, line_len); /* stops at a NUL, as a C header value would */
    if (!line)
        return 0;
    check_auth(line);
    static const char *const methods[] = {"GET", "POST", "HEAD", "DELETE", "PUT", "OPTIONS"};
    check_route(line, methods[size % 6]);
    if (nl) {
        /* The body as the transport hands it over: NUL-terminated after its bytes. */
        size_t body_len = size - line_len - 1;
        char *body = malloc(body_len + 1);
        if (body) {
            memcpy(body, nl + 1, body_len);
            body[body_len] = '\0';
            check_body(body, body_len);
            free(body);
        }
    }
    free(line);
    return 0;
}
