/* http/http_server.c — the HTTP server on libmicrohttpd: start, the per-request state
 * machine, stop.
 *
 * MHD runs a thread per connection, so a handler may block (a generation) without
 * holding up anyone else. A request is screened when its headers arrive — API key,
 * route, method, declared body size — and refused at once when it fails, before any
 * of its body is read; the body is then counted as it arrives (a chunked body has no
 * size to declare) and refused with 413 as soon as it passes the limit. The handler
 * runs once, after the whole body is in, on the connection's thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cinfer/chat_template.h"
#include "cinfer/http.h"
#include "cinfer/tokenizer.h"
#include "chat/output_parsers.h"
#include "http/http_transport.h"
#include "http/native_api.h"
#include "util/log.h"

#define IDLE_CONNECTION_TIMEOUT_S 60u      /* a connection waiting for its (next) request */
#define MAX_SIDE_FILE_BYTES (16u << 20)    /* PEM files and chat templates */

/* ---- libmicrohttpd's messages go to our log ------------------------------------------ */

static __thread char *start_error;      /* while starting: where MHD's last message goes */
static __thread size_t start_error_bytes;

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (start_error)
        snprintf(start_error, start_error_bytes, "%s", line);
    cinfer_log(CINFER_LOG_SEV_WARNING, "http: %s", line);
}

/* ---- one request ---------------------------------------------------------------------- */

static void dispatch(struct http_conn *c, const char *url, const char *method)
{
    /* The idle timeout is for connections that wait for a request; one being answered
     * may take as long as its generation does (MHD would otherwise cut a stream whose
     * next event is slow to come). It comes back when the request completes. */
    MHD_set_connection_option(c->mhd, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    struct http_request req = {.method = method,
                               .path = url,
                               .body = c->body.data ? c->body.data : "",
                               .body_len = c->body.len,
                               .ctx = &c->server->ctx,
                               .conn = c};
    c->route->handler(&req);
    if (!c->answered)
        cinfer_http_reply_error(c, 500, "internal_error", NULL, "the handler of %s %s gave no answer", method, url);
}

/* declared: the Content-Length text, or NULL for a body that grew past the limit. */
static void reply_too_large(struct http_conn *c, const char *declared)
{
    long long limit = (long long)c->server->args.max_request_body_bytes;
    if (declared)
        cinfer_http_reply_error(c, 413, "request_too_large", NULL,
                                "the request body of %s bytes is larger than server.max_request_body_bytes "
                                "(%lld bytes)", declared, limit);
    else
        cinfer_http_reply_error(c, 413, "request_too_large", NULL,
                                "the request body is larger than server.max_request_body_bytes (%lld bytes)", limit);
}

static int auth_ok(struct MHD_Connection *mhd, const char *api_key)
{
    return cinfer_http_auth_header_ok(MHD_lookup_connection_value(mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                                      api_key);
}

/* Decides from the headers alone; returns 1 when it answered (a refusal). */
static int screen(struct http_conn *c, const char *url, const char *method)
{
    struct cinfer_http_server *srv = c->server;
    if (atomic_load(&srv->stopping)) {
        cinfer_http_reply_error(c, 503, "service_unavailable", NULL, "the server is stopping");
        return 1;
    }
    int path_known = 0;
    char allow[128];
    const struct http_route *route = cinfer_http_route_find(url, method, &path_known, allow, sizeof allow);
    int needs_auth = route ? route->needs_auth : 1;
    if (needs_auth && !auth_ok(c->mhd, srv->args.api_key)) {
        int sent = MHD_lookup_connection_value(c->mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION) != NULL;
        cinfer_http_reply_error_with_header(c, 401, "authentication_error", MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer",
                                            sent ? "invalid API key in the Authorization header"
                                          : "missing API key: send the header \"Authorization: Bearer KEY\"");
        return 1;
    }
    if (!route && path_known) {
        cinfer_http_reply_error_with_header(c, 405, "invalid_request_error", MHD_HTTP_HEADER_ALLOW, allow,
                                            "method %s is not allowed on %s (allowed: %s)", method, url, allow);
        return 1;
    }
    if (!route) {
        cinfer_http_reply_error(c, 404, "not_found_error", NULL, "no endpoint %s %s", method, url);
        return 1;
    }
    const char *length = MHD_lookup_connection_value(c->mhd, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length) {
        char *end;
        errno = 0;
        unsigned long long declared = strtoull(length, &end, 10);
        if (errno == ERANGE || (end != length && declared > (unsigned long long)srv->args.max_request_body_bytes)) {
            reply_too_large(c, length);
            return 1;
        }
    }
    c->route = route;
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mhd, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    struct http_conn *c = *con_cls;
    if (!c) {
        /* The headers are in; the body (if any) comes in later calls. */
        c = cinfer_http_conn_new(cls, mhd);
        if (!c)
            return MHD_NO;
        *con_cls = c;
        atomic_fetch_add(&c->server->requests_open, 1);
        screen(c, url, method);
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        size_t limit = (size_t)c->server->args.max_request_body_bytes;
        *upload_data_size = 0;
        if (c->answered)
            return MHD_YES; /* refused already: the rest is read and dropped */
        if (c->body_too_large) {
            /* libmicrohttpd 0.9 takes a response only before or after the body, so the
             * 413 waits for the end; a sender that keeps going twice past the limit
             * loses its connection instead. */
            c->dropped_bytes += n;
            return c->dropped_bytes > limit ? MHD_NO : MHD_YES;
        }
        if (c->body.len + n > limit) {
            c->body_too_large = 1;
            free(c->body.data);
            c->body = (struct http_buffer){0};
            reply_too_large(c, NULL); /* taken at once if MHD allows it, else at the end */
            return MHD_YES;
        }
        if (cinfer_http_buffer_append(&c->body, upload_data, n) != CINFER_OK) {
            cinfer_log(CINFER_LOG_SEV_ERROR, "http: out of memory reading a request body of %zu bytes",
                       c->body.len + n);
            return MHD_NO; /* no memory to answer with either: close the connection */
        }
        return MHD_YES;
    }
    /* The whole request is in. */
    if (c->answered)
        return MHD_YES;
    if (c->body_too_large) {
        reply_too_large(c, NULL);
        return c->answered ? MHD_YES : MHD_NO;
    }
    if (!c->route)
        return MHD_NO; /* screened out but the refusal could not be queued */
    dispatch(c, url, method);
    c->dispatched = 1;
    c->route = NULL; /* dispatched: never again, even if MHD calls once more */
    return c->answered ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *mhd, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    struct http_conn *c = *con_cls;
    if (!c)
        return;
    struct cinfer_http_server *srv = c->server;
    if (c->dispatched)
        MHD_set_connection_option(mhd, MHD_CONNECTION_OPTION_TIMEOUT, IDLE_CONNECTION_TIMEOUT_S);
    cinfer_http_conn_free(&c);
    *con_cls = NULL;
    /* A burst of connections leaves freed memory in glibc's per-thread arenas (each
     * connection has its own thread); once no request is open, hand it back to the
     * system so the server's footprint returns to its idle size. */
    if (atomic_fetch_sub(&srv->requests_open, 1) == 1)
        malloc_trim(0);
}

/* ---- start ---------------------------------------------------------------------------- */

static int read_side_file(const char *path, const char *key, char **out, size_t *out_len, struct cinfer_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot read the %s file: %s", path, key, strerror(errno));
    char *data = malloc(MAX_SIDE_FILE_BYTES + 1);
    size_t n = data ? fread(data, 1, MAX_SIDE_FILE_BYTES + 1, f) : 0;
    int failed = ferror(f);
    fclose(f);
    if (!data)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reading %s", path);
    if (failed || n > MAX_SIDE_FILE_BYTES) {
        free(data);
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot read the %s file: %s", path, key,
                                failed ? "read error" : "larger than 16 MiB");
    }
    data[n] = '\0';
    *out = data;
    if (out_len)
        *out_len = n;
    return CINFER_OK;
}

/* The served name: the flag, else the base name of the model folder or file. */
static int choose_model_name(struct cinfer_http_server *srv, struct cinfer_engine *engine, struct cinfer_error *err)
{
    if (srv->args.served_model_name) {
        srv->model_name = strdup(srv->args.served_model_name);
    } else {
        struct cinfer_server_info info;
        const char *path = srv->args.model_path;
        if (!path && cinfer_engine_server_info(engine, &info, err) == CINFER_OK)
            path = info.model_path;
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", path ? path : "default");

        size_t n = strlen(copy);
        while (n > 1 && copy[n - 1] == '/')
            copy[--n] = '\0';
        const char *slash = strrchr(copy, '/');
        srv->model_name = strdup(slash && slash[1] ? slash + 1 : copy);
    }
    return srv->model_name ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory");
}

/* --chat-template FILE must work; the model's own template may fail (a warning, and
 * chat requests are refused later with a reason). */
static int compile_chat_template(struct cinfer_http_server *srv, struct cinfer_error *err)
{
    const char *file = srv->args.chat_template;
    if (file) {
        char *source = NULL;
        size_t len = 0;
        int rc = read_side_file(file, "tokenizer.chat_template (--chat-template)", &source, &len, err);
        if (rc)
            return rc;
        rc = cinfer_chat_template_compile(source, len, file, &srv->chat_template, err);
        free(source);
        if (rc)
            return cinfer_error_prefix(err, "--chat-template %s", file);
        return CINFER_OK;
    }
    const struct cinfer_tokenizer_ctx *tok = srv->ctx.tokenizer;
    if (!tok)
        return CINFER_OK;
    struct cinfer_tokenizer_info info = {0};
    tok->ops->info(tok->tok, &info);
    if (!info.chat_template) {
        cinfer_log(CINFER_LOG_SEV_WARNING, "http: the model has no chat template: /v1/chat/completions will refuse "
                                           "requests (give one with --chat-template FILE)");
        return CINFER_OK;
    }
    struct cinfer_error why = {0};
    if (cinfer_chat_template_compile(info.chat_template, strlen(info.chat_template), "the model's chat_template",
                                     &srv->chat_template, &why) != CINFER_OK)
        cinfer_log(CINFER_LOG_SEV_WARNING,
                   "http: the model's chat template cannot be used (%s): /v1/chat/completions will refuse requests "
                   "(give one with --chat-template FILE)",
                   why.message);
    return CINFER_OK;
}

/* --tool-call-parser, or the format the chat template teaches; --reasoning-parser. */
static void choose_output_parsers(struct cinfer_http_server *srv)
{
    static const int tools[] = {[CINFER_TOOL_PARSER_NONE] = CINFER_TOOLS_NONE,
                                [CINFER_TOOL_PARSER_QWEN25] = CINFER_TOOLS_HERMES,
                                [CINFER_TOOL_PARSER_LLAMA3] = CINFER_TOOLS_LLAMA3,
                                [CINFER_TOOL_PARSER_MISTRAL] = CINFER_TOOLS_MISTRAL};
    int choice = srv->args.tool_call_parser;
    if (choice > CINFER_TOOL_PARSER_AUTO && choice <= CINFER_TOOL_PARSER_MISTRAL) {
        srv->ctx.tool_format = tools[choice];
    } else {
        const char *source = NULL;
        struct cinfer_tokenizer_info info = {0};
        if (srv->ctx.tokenizer) {
            srv->ctx.tokenizer->ops->info(srv->ctx.tokenizer->tok, &info);
            source = info.chat_template;
        }
        if (srv->args.chat_template) {
            char *text = NULL;
            size_t len = 0;
            struct cinfer_error ignored = {0};
            if (read_side_file(srv->args.chat_template, "tokenizer.chat_template", &text, &len, &ignored) == 0) {
                srv->ctx.tool_format = (int)cinfer_tool_format_of_template(text);
                free(text);
                source = NULL;
            }
        }
        if (source)
            srv->ctx.tool_format = (int)cinfer_tool_format_of_template(source);
    }
    srv->ctx.reasoning_format = srv->args.reasoning_parser == CINFER_REASONING_PARSER_QWEN3 ? CINFER_REASONING_QWEN3
                              : srv->args.reasoning_parser == CINFER_REASONING_PARSER_DEEPSEEK_R1
                                  ? CINFER_REASONING_DEEPSEEK_R1
                                  : CINFER_REASONING_NONE;
    cinfer_log(CINFER_LOG_SEV_INFO, "http: tool calls read as %s, reasoning parser %s",
               cinfer_tool_format_name((enum cinfer_tool_format)srv->ctx.tool_format),
               srv->ctx.reasoning_format == CINFER_REASONING_QWEN3 ? "qwen3"
               : srv->ctx.reasoning_format == CINFER_REASONING_DEEPSEEK_R1 ? "deepseek-r1" : "none");
}

static int load_tls(struct cinfer_http_server *srv, struct cinfer_error *err)
{
    if (!srv->args.ssl_certfile && !srv->args.ssl_keyfile)
        return CINFER_OK;
    if (!srv->args.ssl_certfile || !srv->args.ssl_keyfile)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "TLS needs both server.ssl_certfile (--ssl-certfile) and server.ssl_keyfile "
                                "(--ssl-keyfile)");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "--ssl-certfile is set but this libmicrohttpd was built without TLS");
    int rc = read_side_file(srv->args.ssl_certfile, "server.ssl_certfile (--ssl-certfile)", &srv->tls_cert_pem, NULL,
                            err);
    if (!rc)
        rc = read_side_file(srv->args.ssl_keyfile, "server.ssl_keyfile (--ssl-keyfile)", &srv->tls_key_pem, NULL,
                            err);
    if (!rc && !strstr(srv->tls_cert_pem, "-----BEGIN CERTIFICATE-----"))
        rc = cinfer_error_set(err, CINFER_ERR_PARSE, "%s: server.ssl_certfile (--ssl-certfile): expected a PEM "
                                                     "certificate (-----BEGIN CERTIFICATE-----), found none",
                              srv->args.ssl_certfile);
    if (!rc && !strstr(srv->tls_key_pem, "PRIVATE KEY-----"))
        rc = cinfer_error_set(err, CINFER_ERR_PARSE, "%s: server.ssl_keyfile (--ssl-keyfile): expected a PEM private "
                                                     "key (-----BEGIN PRIVATE KEY-----), found none",
                              srv->args.ssl_keyfile);
    return rc;
}

/* host -> the address to bind; numeric or a name ("localhost"). */
static int resolve_host(const char *host, int port, struct sockaddr_storage *addr, int *is_ipv6,
                        struct cinfer_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc || !res)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "server.host (--host) \"%s\": cannot resolve it: %s", host,
                                gai_strerror(rc));
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *is_ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return CINFER_OK;
}

static void server_free(struct cinfer_http_server *srv)
{
    if (srv->daemon)
        MHD_stop_daemon(srv->daemon);
    cinfer_http_metrics_free(&srv->ctx.metrics);
    cinfer_chat_template_free(&srv->chat_template);
    free(srv->model_name);
    free(srv->tls_cert_pem);
    free(srv->tls_key_pem);
    cinfer_server_args_free(&srv->args);
    free(srv);
}

static int start_daemon(struct cinfer_http_server *srv, struct cinfer_error *err)
{
    struct sockaddr_storage addr;
    int is_ipv6 = 0;
    int rc = resolve_host(srv->args.host, srv->args.port, &addr, &is_ipv6, err);
    if (rc)
        return rc;
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                         MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (is_ipv6) {
        /* "::" means every address, IPv4 included; a specific IPv6 address is that one only. */
        struct in6_addr any = IN6ADDR_ANY_INIT;
        flags |= memcmp(&((struct sockaddr_in6 *)&addr)->sin6_addr, &any, sizeof any) == 0 ? MHD_USE_DUAL_STACK
                                                                                              : MHD_USE_IPv6;
    }
    struct MHD_OptionItem options[12];
    int n = 0;
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &addr};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, srv->args.max_connections, NULL};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, IDLE_CONNECTION_TIMEOUT_S, NULL};
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL};
    if (srv->tls_cert_pem) {
        flags |= MHD_USE_TLS;
        options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert_pem};
        options[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key_pem};
    }
    options[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    char why[512] = "";
    start_error = why;
    start_error_bytes = sizeof why;
    /* The logger first, so that MHD's complaints about the other options reach it. */
    srv->daemon = MHD_start_daemon(flags, (uint16_t)srv->args.port, NULL, NULL, on_request, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_ARRAY, options,
                                   MHD_OPTION_END);
    start_error = NULL;
    if (!srv->daemon)
        return cinfer_error_set(err, CINFER_ERR_IO, "cannot start the HTTP server on %s port %d%s: %s",
                                srv->args.host, srv->args.port, srv->tls_cert_pem ? " with TLS" : "",
                                why[0] ? why : "libmicrohttpd refused (see the log)");
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : srv->args.port;
    return CINFER_OK;
}

int cinfer_http_server_start(struct cinfer_engine *engine, const struct cinfer_server_args *args,
                             struct cinfer_http_server **out, struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_http_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory starting the HTTP server");
    int rc = cinfer_server_args_copy(&srv->args, args, err);
    if (rc) {
        free(srv);
        return rc;
    }
    srv->ctx.engine = engine;
    cinfer_native_engine_limits_forget(engine);
    srv->ctx.args = &srv->args;
    srv->ctx.tokenizer = cinfer_engine_tokenizer(engine);
    srv->ctx.created_unix_s = (int64_t)time(NULL);
    rc = cinfer_http_metrics_new(&srv->ctx.metrics);
    if (rc)
        cinfer_error_set(err, rc, "out of memory starting the HTTP server");
    if (!rc)
        rc = choose_model_name(srv, engine, err);
    if (!rc)
        rc = compile_chat_template(srv, err);
    if (!rc)
        rc = load_tls(srv, err);
    if (!rc) {
        srv->ctx.model_name = srv->model_name;
        srv->ctx.chat_template = srv->chat_template;
        choose_output_parsers(srv);
        rc = start_daemon(srv, err);
    }
    if (rc) {
        server_free(srv);
        return rc;
    }
    *out = srv;
    return CINFER_OK;
}

int cinfer_http_server_port(const struct cinfer_http_server *srv)
{
    return srv->port;
}

const char *cinfer_http_server_model_name(const struct cinfer_http_server *srv)
{
    return srv->model_name;
}

void cinfer_http_server_stop(struct cinfer_http_server **srvp)
{
    if (!srvp || !*srvp)
        return;
    struct cinfer_http_server *srv = *srvp;
    /* Blocked handlers and streams see this within one wait slice and give up, so the
     * connection threads MHD joins all end. */
    atomic_store(&srv->stopping, 1);
    server_free(srv);
    *srvp = NULL;
}
