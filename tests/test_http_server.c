/* The HTTP server's transport, driven from outside with the curl binary (and a raw
 * socket where a client must hang up at an exact moment): /health; 404, 405 with Allow
 * and 401 in OpenAI's error shape; 413 for bodies over the limit, declared or chunked,
 * and the server still serving afterwards; 400 with the position of malformed JSON;
 * HTTPS with a certificate made by the openssl CLI; --chat-template FILE used for chat
 * (the prompt's token count is the engine tokenizer's on the text it must render) and
 * a file that does not compile stopping the start; /metrics as valid Prometheus text
 * whose counters agree with what /generate reported; a client that hangs up mid-stream
 * aborts its request at once; /health turns 503 when the scheduler is killed; and
 * `cinfer serve` as a process: its listening line, SIGTERM, exit 0, nothing left. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/http.h"
#include "cinfer/tokenizer.h"
#include "http/http_server.h"
#include "support/engine_fixture.h"
#include "support/procs.h"
#include "support/runner.h"
#include "support/serve_process.h"
#include "support/tmp_dir.h"

static const char *model;

struct server {
    struct cinfer_engine *engine;
    struct cinfer_http_server *http;
    int port;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void setup(void)
{
    model = cinfer_test_engine_model();
    cinfer_test_make_tmp_dir("test_http_server");
}

static void teardown(void)
{
    cinfer_test_remove_tmp_dir();
}

/* An engine and a server on a free port; tweak (may be NULL) adjusts the settings. */
static void start(struct server *s, void (*tweak)(struct cinfer_server_args *))
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.port = 0;
    if (tweak)
        tweak(&args);
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &s->engine, &err) == 0, "engine: %s", err.message);
    ck_assert_msg(cinfer_http_server_start(s->engine, &args, &s->http, &err) == 0, "server: %s", err.message);
    s->port = cinfer_http_server_port(s->http);
    ck_assert_int_gt(s->port, 0);
    cinfer_server_args_free(&args);
}

static void stop(struct server *s)
{
    cinfer_http_server_stop(&s->http);
    ck_assert_ptr_null(s->http);
    cinfer_engine_shutdown(&s->engine, 1000);
}

/* ---- curl ------------------------------------------------------------------------------ */

struct reply {
    int status;
    char body[65536];
    char headers[8192];
};

/* Runs curl with the given arguments (URL included; "PORT" in them is not expanded:
 * callers format it in). Fills the status, the body and the response headers. */
static void curl(struct reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void curl(struct reply *r, const char *fmt, ...)
{
    char args[4096], cmd[5000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    const char *head = cinfer_test_tmp_path("headers.txt");
    const char *body = cinfer_test_tmp_path("body.txt");
    snprintf(cmd, sizeof cmd, "curl -sS --max-time 60 -D '%s' -o '%s' -w '%%{http_code}' %s", head, body, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char status[16] = "";
    size_t n = fread(status, 1, sizeof status - 1, p);
    status[n] = '\0';
    int rc = pclose(p);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "curl %s failed (status %d)", args, rc);
    r->status = atoi(status);
    FILE *f = fopen(body, "rb");
    n = f ? fread(r->body, 1, sizeof r->body - 1, f) : 0;
    r->body[n] = '\0';
    if (f)
        fclose(f);
    f = fopen(head, "rb");
    n = f ? fread(r->headers, 1, sizeof r->headers - 1, f) : 0;
    r->headers[n] = '\0';
    if (f)
        fclose(f);
}

/* Asserts OpenAI's error shape: {"error": {"message": str, "type": type, "param", "code"}}
 * and that the message holds want (when not NULL). */
static void assert_error(const struct reply *r, int status, const char *type, const char *want)
{
    ck_assert_msg(r->status == status, "expected %d, got %d: %s", status, r->status, r->body);
    json_error_t jerr;
    json_t *j = json_loads(r->body, 0, &jerr);
    ck_assert_msg(j != NULL, "error body is not JSON: %s", r->body);
    json_t *e = json_object_get(j, "error");
    ck_assert_msg(json_is_object(e), "no error object: %s", r->body);
    ck_assert_str_eq(json_string_value(json_object_get(e, "type")), type);
    const char *message = json_string_value(json_object_get(e, "message"));
    ck_assert_ptr_nonnull(message);
    ck_assert_msg(json_object_get(e, "param") != NULL && json_object_get(e, "code") != NULL,
                  "param and code must be present: %s", r->body);
    if (want)
        ck_assert_msg(strstr(message, want) != NULL, "message \"%s\" lacks \"%s\"", message, want);
    json_decref(j);
}

static int has_header(const struct reply *r, const char *line)
{
    return strcasestr(r->headers, line) != NULL;
}

/* ---- the cases ------------------------------------------------------------------------- */

START_TEST(health_not_found_and_method)
{
    if (!model)
        return;
    struct server s;
    start(&s, NULL);
    struct reply r;
    curl(&r, "http://127.0.0.1:%d/health", s.port);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "");

    curl(&r, "http://127.0.0.1:%d/v2/nothing", s.port);
    assert_error(&r, 404, "not_found_error", "/v2/nothing");

    curl(&r, "-X DELETE http://127.0.0.1:%d/v1/models", s.port);
    assert_error(&r, 405, "invalid_request_error", "DELETE");
    ck_assert_msg(has_header(&r, "\nAllow: GET\r"), "405 without Allow: GET:\n%s", r.headers);

    curl(&r, "-X GET http://127.0.0.1:%d/generate", s.port);
    assert_error(&r, 405, "invalid_request_error", NULL);
    ck_assert_msg(has_header(&r, "\nAllow: POST\r"), "405 without Allow: POST:\n%s", r.headers);

    /* Malformed JSON: the position and jansson's words. */
    curl(&r, "-H 'Content-Type: application/json' --data-binary '{\"text\": \"hi\",\n \"x\": }' "
             "http://127.0.0.1:%d/generate",
         s.port);
    assert_error(&r, 400, "invalid_request_error", "malformed JSON at line 2, column 7: unexpected token near '}'");
    curl(&r, "--data-binary '[1, 2]' http://127.0.0.1:%d/generate", s.port);
    assert_error(&r, 400, "invalid_request_error", "expected a JSON object as the request body, found an array");
    stop(&s);
}
END_TEST

static void with_key(struct cinfer_server_args *args)
{
    args->api_key = strdup("sk-test-0123456789");
}

START_TEST(api_key_is_checked_everywhere_but_health)
{
    if (!model)
        return;
    struct server s;
    start(&s, with_key);
    struct reply r;
    curl(&r, "http://127.0.0.1:%d/metrics", s.port);
    assert_error(&r, 401, "authentication_error", "missing API key");
    ck_assert_msg(has_header(&r, "WWW-Authenticate: Bearer"), "401 without WWW-Authenticate:\n%s", r.headers);
    curl(&r, "-H 'Authorization: Bearer sk-test-012345678' http://127.0.0.1:%d/metrics", s.port); /* one short */
    assert_error(&r, 401, "authentication_error", "invalid API key");
    curl(&r, "-H 'Authorization: Bearer sk-test-0123456789x' http://127.0.0.1:%d/metrics", s.port); /* one long */
    assert_error(&r, 401, "authentication_error", "invalid API key");
    curl(&r, "-H 'Authorization: Basic sk-test-0123456789' http://127.0.0.1:%d/metrics", s.port);
    assert_error(&r, 401, "authentication_error", NULL);
    /* Unknown paths need the key too: nothing is learnt about the routes without it. */
    curl(&r, "http://127.0.0.1:%d/v2/nothing", s.port);
    assert_error(&r, 401, "authentication_error", NULL);
    curl(&r, "--data-binary '{}' http://127.0.0.1:%d/generate", s.port);
    assert_error(&r, 401, "authentication_error", NULL);

    curl(&r, "-H 'Authorization: Bearer sk-test-0123456789' http://127.0.0.1:%d/metrics", s.port);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "# TYPE cinfer_requests_total counter"));
    curl(&r, "http://127.0.0.1:%d/health", s.port);
    ck_assert_int_eq(r.status, 200);
    stop(&s);
}
END_TEST

static void small_body_limit(struct cinfer_server_args *args)
{
    args->max_request_body_bytes = 1024;
}

START_TEST(bodies_over_the_limit_get_413)
{
    if (!model)
        return;
    struct server s;
    start(&s, small_body_limit);
    const char *big = cinfer_test_tmp_path("big.json");
    FILE *f = fopen(big, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"text\": \"", f);
    for (int i = 0; i < 4000; i++)
        fputc('a', f);
    fputs("\"}", f);
    fclose(f);
    struct reply r;
    /* Declared by Content-Length: refused from the headers. */
    curl(&r, "--data-binary @%s http://127.0.0.1:%d/generate", big, s.port);
    assert_error(&r, 413, "request_too_large", "larger than server.max_request_body_bytes (1024 bytes)");
    ck_assert_msg(strstr(r.body, "of 4012 bytes") != NULL, "413 does not give the declared size: %s", r.body);
    /* Chunked: counted as it arrives. */
    curl(&r, "-H 'Transfer-Encoding: chunked' --data-binary @%s http://127.0.0.1:%d/generate", big, s.port);
    assert_error(&r, 413, "request_too_large", "(1024 bytes)");
    /* Exactly at the limit is fine (it then fails as JSON, which proves it was read). */
    f = fopen(big, "w");
    for (int i = 0; i < 1024; i++)
        fputc(' ', f);
    fclose(f);
    curl(&r, "--data-binary @%s http://127.0.0.1:%d/generate", big, s.port);
    assert_error(&r, 400, "invalid_request_error", "malformed JSON");
    /* Still serving. */
    curl(&r, "http://127.0.0.1:%d/health", s.port);
    ck_assert_int_eq(r.status, 200);
    curl(&r, "--data-binary '{\"text\": \"Once upon a time\", \"sampling_params\": {\"max_new_tokens\": 4}}' "
             "http://127.0.0.1:%d/generate",
         s.port);
    ck_assert_msg(r.status == 200, "generate after 413: %d %s", r.status, r.body);
    stop(&s);
}
END_TEST

/* ---- TLS --------------------------------------------------------------------------------- */

static char cert_path[400], key_path[400];

static void with_tls(struct cinfer_server_args *args)
{
    args->ssl_certfile = strdup(cert_path);
    args->ssl_keyfile = strdup(key_path);
}

START_TEST(https_with_a_self_signed_certificate)
{
    if (!model)
        return;
    snprintf(cert_path, sizeof cert_path, "%s", cinfer_test_tmp_path("cert.pem"));
    snprintf(key_path, sizeof key_path, "%s", cinfer_test_tmp_path("key.pem"));
    char cmd[1200], out[4096];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '%s' -out '%s' 2>&1",
             key_path, cert_path);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    ck_assert_msg(pclose(p) == 0, "openssl failed: %s", out);

    struct server s;
    start(&s, with_tls);
    struct reply r;
    curl(&r, "--cacert '%s' https://127.0.0.1:%d/health", cert_path, s.port);
    ck_assert_int_eq(r.status, 200);
    curl(&r, "--cacert '%s' https://127.0.0.1:%d/v2/nothing", cert_path, s.port);
    assert_error(&r, 404, "not_found_error", NULL);
    /* Without the CA curl refuses the certificate (exit 60): it is really TLS. */
    snprintf(cmd, sizeof cmd, "curl -sS -o /dev/null https://127.0.0.1:%d/health 2>/dev/null", s.port);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 60, "curl without the CA: %d", rc);
    stop(&s);

    /* A missing key file is named. */
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.port = 0;
    args.ssl_certfile = strdup(cert_path);
    args.ssl_keyfile = strdup("/nonexistent/key.pem");
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_create(&args, NULL, &s.engine, &err), 0);
    ck_assert_int_eq(cinfer_http_server_start(s.engine, &args, &s.http, &err), CINFER_ERR_IO);
    ck_assert_ptr_null(s.http);
    ck_assert_str_eq(err.message, "/nonexistent/key.pem: cannot read the server.ssl_keyfile (--ssl-keyfile) file: "
                                  "No such file or directory");
    cinfer_engine_shutdown(&s.engine, 1000);
    cinfer_server_args_free(&args);
}
END_TEST

/* ---- --chat-template ------------------------------------------------------------------ */

static char template_path[400];

static void with_template(struct cinfer_server_args *args)
{
    args->chat_template = strdup(template_path);
}

START_TEST(chat_template_file_overrides_the_model)
{
    if (!model)
        return;
    /* A template of our own: the prompt is exactly its text. */
    snprintf(template_path, sizeof template_path, "%s", cinfer_test_tmp_path("chat.jinja"));
    FILE *f = fopen(template_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}[assistant]", f);
    fclose(f);
    struct server s;
    start(&s, with_template);
    struct reply r;
    curl(&r, "-H 'Content-Type: application/json' --data-binary '{\"model\": \"%s\", \"max_tokens\": 2, "
             "\"messages\": [{\"role\": \"user\", \"content\": \"Once upon a time\"}]}' "
             "http://127.0.0.1:%d/v1/chat/completions",
         cinfer_http_server_model_name(s.http), s.port);
    ck_assert_msg(r.status == 200, "%d %.2000s", r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    int prompt_tokens = (int)json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
    json_decref(j);
    /* The reference: the engine's own tokenizer on the text the template must give. */
    const char *rendered = "[user] Once upon a time\n[assistant]";
    const struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(s.engine);
    struct cinfer_token_ids ids = {0};
    struct cinfer_error err = {0};
    ck_assert_int_eq(tok->ops->encode(tok->tok, rendered, strlen(rendered), 0, &ids, &err), 0);
    ck_assert_msg(prompt_tokens == (int)ids.len, "usage.prompt_tokens %d, the rendered text has %zu tokens",
                  prompt_tokens, ids.len);
    cinfer_token_ids_free(&ids);
    stop(&s);

    /* A file that does not compile stops the start, naming the file and the place. */
    f = fopen(template_path, "w");
    fputs("{% for m in messages %}{{ m.content }}", f);
    fclose(f);
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, model);
    args.port = 0;
    with_template(&args);
    ck_assert_int_eq(cinfer_engine_create(&args, NULL, &s.engine, &err), 0);
    ck_assert_int_ne(cinfer_http_server_start(s.engine, &args, &s.http, &err), 0);
    ck_assert_ptr_null(s.http);
    char want[1000];
    snprintf(want, sizeof want, "--chat-template %s: %s:1:4: ", template_path, template_path);
    ck_assert_msg(!strncmp(err.message, want, strlen(want)), "%s", err.message);
    cinfer_engine_shutdown(&s.engine, 1000);
    cinfer_server_args_free(&args);
}
END_TEST

/* ---- /metrics ---------------------------------------------------------------------------- */

/* The value of the sample whose name and labels are exactly series; -1 if absent. */
static double sample(const char *text, const char *series)
{
    size_t len = strlen(series);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, series, len) && line[len] == ' ')
            return strtod(line + len + 1, NULL);
    return -1;
}

/* Every sample belongs to a family declared by # TYPE (histograms through _bucket,
 * _sum, _count), each value parses, buckets are cumulative and +Inf equals _count. */
static void assert_prometheus_text(const char *text)
{
    char families[64][96], types[64][16]; /* name and type of each # TYPE line */
    int n_families = 0;
    char *copy = strdup(text);
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "# HELP ", 7))
            continue;
        if (!strncmp(line, "# TYPE ", 7)) {
            ck_assert_int_lt(n_families, 64);
            ck_assert_int_eq(sscanf(line + 7, "%95s %15s", families[n_families], types[n_families]), 2);
            n_families++;
            continue;
        }
        ck_assert_msg(line[0] != '#', "unexpected comment: %s", line);
        char name[128];
        size_t name_len = strcspn(line, "{ ");
        ck_assert_int_lt(name_len, sizeof name);
        memcpy(name, line, name_len);
        name[name_len] = '\0';
        const char *value = strrchr(line, ' ');
        ck_assert_ptr_nonnull(value);
        char *end;
        strtod(value + 1, &end);
        ck_assert_msg(*end == '\0', "value does not parse: %s", line);
        int found = 0;
        for (int f = 0; f < n_families && !found; f++) {
            if (!strcmp(name, families[f]))
                found = strcmp(types[f], "histogram") != 0;
            static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
            for (int k = 0; k < 3 && !strcmp(types[f], "histogram"); k++) {
                size_t fl = strlen(families[f]);
                if (!strncmp(name, families[f], fl) && !strcmp(name + fl, suffixes[k]))
                    found = 1;
            }
        }
        ck_assert_msg(found, "sample of an undeclared family: %s", line);
    }
    free(copy);
    for (int f = 0; f < n_families; f++) {
        if (strcmp(types[f], "histogram"))
            continue;
        char prefix[160];
        snprintf(prefix, sizeof prefix, "%.96s_bucket{le=\"", families[f]);
        double last = -1;
        int buckets = 0;
        const char *inf_line = NULL;
        for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
            const char *v = strchr(p, ' ');
            double x = strtod(v + 1, NULL);
            ck_assert_msg(x >= last, "%s: buckets are not cumulative", families[f]);
            last = x;
            buckets++;
            if (!strncmp(p + strlen(prefix), "+Inf\"}", 6))
                inf_line = p;
        }
        ck_assert_msg(buckets >= 2 && inf_line, "%s: no +Inf bucket", families[f]);
        char count[160];
        snprintf(count, sizeof count, "%.96s_count", families[f]);
        ck_assert_msg(sample(text, count) == last, "%s: +Inf bucket %g but _count %g", families[f], last,
                      sample(text, count));
    }
}

START_TEST(metrics_are_prometheus_text_and_count_generations)
{
    if (!model)
        return;
    struct server s;
    start(&s, NULL);
    struct reply r;
    curl(&r, "http://127.0.0.1:%d/metrics", s.port);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(has_header(&r, "Content-Type: text/plain; version=0.0.4"), "%s", r.headers);
    assert_prometheus_text(r.body);
    ck_assert(sample(r.body, "cinfer_generation_tokens_total") == 0);
    ck_assert(sample(r.body, "cinfer_num_running_reqs") == 0);

    curl(&r, "--data-binary '{\"text\": \"Once upon a time\", \"sampling_params\": {\"max_new_tokens\": 12, "
             "\"temperature\": 0, \"ignore_eos\": true}}' http://127.0.0.1:%d/generate",
         s.port);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *meta = json_object_get(j, "meta_info");
    int prompt_tokens = (int)json_integer_value(json_object_get(meta, "prompt_tokens"));
    int completion_tokens = (int)json_integer_value(json_object_get(meta, "completion_tokens"));
    ck_assert_int_eq(completion_tokens, 12);
    ck_assert_int_gt(prompt_tokens, 0);
    json_decref(j);

    curl(&r, "http://127.0.0.1:%d/metrics", s.port);
    assert_prometheus_text(r.body);
    ck_assert_msg(sample(r.body, "cinfer_prompt_tokens_total") == prompt_tokens, "%.3000s", r.body);
    ck_assert(sample(r.body, "cinfer_generation_tokens_total") == completion_tokens);
    ck_assert(sample(r.body, "cinfer_requests_total{finish_reason=\"length\"}") == 1);
    ck_assert(sample(r.body, "cinfer_requests_total{finish_reason=\"abort\"}") == 0);
    ck_assert(sample(r.body, "cinfer_time_to_first_token_seconds_count") == 1);
    ck_assert(sample(r.body, "cinfer_e2e_request_latency_seconds_count") == 1);
    /* One gap per token after the first chunk's: between 1 and 11 for 12 tokens. */
    double itl = sample(r.body, "cinfer_inter_token_latency_seconds_count");
    ck_assert_msg(itl >= 1 && itl <= completion_tokens - 1, "inter-token count %g", itl);
    ck_assert(sample(r.body, "cinfer_time_to_first_token_seconds_sum") <=
              sample(r.body, "cinfer_e2e_request_latency_seconds_sum"));
    ck_assert(sample(r.body, "cinfer_num_running_reqs") == 0);
    double usage = sample(r.body, "cinfer_kv_cache_usage_ratio");
    ck_assert_msg(usage >= 0 && usage <= 1, "kv usage %g", usage);
    double hit = sample(r.body, "cinfer_cache_hit_rate");
    ck_assert_msg(hit >= 0 && hit <= 1, "hit rate %g", hit);
    stop(&s);
}
END_TEST

/* ---- a client that hangs up ----------------------------------------------------------- */

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Opens a stream, reads up to its first event and hangs up. */
static void stream_and_hang_up(int port)
{
    const char *body = "{\"text\": \"Once upon a time\", \"stream\": true, \"sampling_params\": "
                       "{\"max_new_tokens\": 100000, \"ignore_eos\": true}}";
    char request[1024];
    snprintf(request, sizeof request,
             "POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    int fd = connect_to(port);
    ck_assert_int_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    char buf[4096];
    size_t got = 0;
    double deadline = now_s() + 30;
    while (!memmem(buf, got, "data: ", 6) && now_s() < deadline && got + 1 < sizeof buf) {
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    ck_assert_msg(memmem(buf, got, "200 OK", 6) && memmem(buf, got, "text/event-stream", 17), "%.*s",
                  (int)(got < 1000 ? got : 1000), buf);
    close(fd);
}

START_TEST(a_client_that_hangs_up_aborts_its_request)
{
    if (!model)
        return;
    struct server s;
    start(&s, NULL);
    /* The small model writes its whole context in a fraction of a second, so on a busy
     * machine the stream may end before the hang-up reaches the server: that attempt
     * finishes with "length" and another is made. */
    struct reply r;
    double aborted_after = -1;
    int attempts = 0;
    while (aborted_after < 0 && attempts < 5) {
        attempts++;
        stream_and_hang_up(s.port);
        double closed = now_s();
        while (now_s() - closed < 5) {
            curl(&r, "http://127.0.0.1:%d/metrics", s.port);
            double aborts = sample(r.body, "cinfer_requests_total{finish_reason=\"abort\"}");
            double lengths = sample(r.body, "cinfer_requests_total{finish_reason=\"length\"}");
            if (aborts == 1 && sample(r.body, "cinfer_num_running_reqs") == 0) {
                aborted_after = now_s() - closed;
                break;
            }
            if (aborts + lengths == attempts)
                break; /* finished before the hang-up was seen */
            usleep(5000);
        }
    }
    ck_assert_msg(aborted_after >= 0, "no abort in %d attempts: abort %g, length %g, running %g, generated %g",
                  attempts, sample(r.body, "cinfer_requests_total{finish_reason=\"abort\"}"),
                  sample(r.body, "cinfer_requests_total{finish_reason=\"length\"}"),
                  sample(r.body, "cinfer_num_running_reqs"), sample(r.body, "cinfer_generation_tokens_total"));
    /* Curl's own turnaround is in the figure; the server's slice is 50 ms. */
    printf("hang-up to abort seen in /metrics: %.0f ms (attempt %d)\n", aborted_after * 1000, attempts);
    ck_assert_msg(aborted_after < 1.0, "abort took %.3f s", aborted_after);
    stop(&s);
}
END_TEST

/* ---- health follows the workers ------------------------------------------------------- */

START_TEST(health_turns_503_when_the_scheduler_dies)
{
    if (!model)
        return;
    struct server s;
    start(&s, NULL);
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_server_info(s.engine, &info, &err), 0);
    ck_assert_int_ge(info.n_workers, 2);
    pid_t scheduler = cinfer_test_worker_pids(s.engine).pid[1]; /* detokenizer first, then scheduler tp0 */
    struct reply r;
    curl(&r, "http://127.0.0.1:%d/health", s.port);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(kill(scheduler, SIGKILL), 0);
    double t0 = now_s();
    do {
        usleep(20000);
        curl(&r, "http://127.0.0.1:%d/health", s.port);
    } while (r.status == 200 && now_s() - t0 < 15);
    assert_error(&r, 503, "service_unavailable", NULL);
    printf("kill -9 of the scheduler to /health 503: %.0f ms\n", (now_s() - t0) * 1000);
    curl(&r, "--data-binary '{\"text\": \"Once upon a time\"}' http://127.0.0.1:%d/generate", s.port);
    assert_error(&r, 503, "service_unavailable", NULL);
    stop(&s);
}
END_TEST

/* ---- engine errors as statuses ------------------------------------------------------- */

START_TEST(engine_errors_map_to_statuses)
{
    /* The code alone decides; the words never do. Each message below is one that
     * another code's case once matched on, so a mapping that still read them fails. */
    static const struct {
        int code;
        const char *message;
        int status;
        const char *type;
    } cases[] = {
        {CINFER_ERR_OVERLOADED, "queue full: 4 requests are waiting (max_queued_requests 4)", 503, "server_overloaded"},
        {CINFER_ERR_OVERLOADED, "", 503, "server_overloaded"},
        {CINFER_ERR_CONTEXT_LENGTH, "prompt of 900 tokens does not fit the KV cache of 512 tokens", 400,
         "invalid_request_error"},
        {CINFER_ERR_CONTEXT_LENGTH, "the engine lost a worker", 400, "invalid_request_error"},
        {CINFER_ERR_INVALID_ARGUMENT, "the prompt tokenizes to no tokens", 400, "invalid_request_error"},
        {CINFER_ERR_RANGE, "sampling.temperature is -1, expected >= 0", 400, "invalid_request_error"},
        {CINFER_ERR_PARSE, "x", 400, "invalid_request_error"},
        {CINFER_ERR_UNSUPPORTED, "x", 400, "invalid_request_error"},
        {CINFER_ERR_STATE, "cannot flush the prefix cache while 1 requests are running and 0 waiting", 400,
         "invalid_request_error"},
        {CINFER_ERR_NOT_FOUND, "x", 404, "not_found_error"},
        {CINFER_ERR_CHILD, "the engine lost a worker: scheduler tp0 was killed by signal 9", 503,
         "service_unavailable"},
        {CINFER_ERR_CHILD, "queue full: 4 requests are waiting (max_queued_requests 4)", 503, "service_unavailable"},
        {CINFER_ERR_CHILD, "prompt of 300 tokens leaves no room for output in the context length of 256 tokens", 503,
         "service_unavailable"},
        {CINFER_ERR_UNAVAILABLE, "the engine is shutting down", 503, "service_unavailable"},
        {CINFER_ERR_TIMEOUT, "RPC 'server_info': scheduler tp0 did not answer within 5000 ms", 503,
         "service_unavailable"},
        {CINFER_ERR_IO, "request 7 aborted: the client closed the connection", 499, "internal_error"},
        {CINFER_ERR_NOMEM, "out of memory retracting the request", 500, "internal_error"},
        {CINFER_ERR_INTERNAL, "queue full", 500, "internal_error"},
        {CINFER_ERR_CONFIG, "x", 500, "internal_error"},
        {-1000, "queue full", 500, "internal_error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cinfer_error err = {.code = cases[i].code};
        snprintf(err.message, sizeof err.message, "%s", cases[i].message);
        const char *type = NULL;
        ck_assert_msg(cinfer_http_engine_error_status(&err, &type) == cases[i].status, "case %zu (code %d)", i,
                      cases[i].code);
        ck_assert_str_eq(type, cases[i].type);
    }
    /* Every code of the enum has a status: 4xx for the caller's faults, 5xx otherwise. */
    for (int code = -1; code >= CINFER_STATUS_MIN; code--) {
        struct cinfer_error err = {.code = code};
        const char *type = NULL;
        int status = cinfer_http_engine_error_status(&err, &type);
        ck_assert_msg(status >= 400 && status < 600 && type, "code %d: %d", code, status);
    }
}
END_TEST

/* ---- cinfer serve ------------------------------------------------------------------------- */

START_TEST(cinfer_serve_runs_until_sigterm)
{
    if (!model)
        return;
    char *const argv[] = {CINFER_BINARY_DIR "/bin/cinfer", "serve", "--model", (char *)model, "--port", "0",
                          "--kv-cache-bytes", "64M", "--num-threads", "1", "--served-model-name", "tiny-test", NULL};
    int err_fd;
    pid_t pid = cinfer_test_spawn_serve(argv, &err_fd);
    char log[16384], name[256] = "";
    int port = cinfer_test_read_listening_line(err_fd, log, sizeof log, name, sizeof name);
    ck_assert_msg(port > 0, "no listening line:\n%s", log);
    ck_assert_str_eq(name, "tiny-test");
    pid_t children[16];
    int n_children = cinfer_test_children_of(pid, children, 16);
    ck_assert_int_ge(n_children, 2); /* scheduler and detokenizer */

    struct reply r;
    curl(&r, "http://127.0.0.1:%d/health", port);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int code = cinfer_test_wait_exit(pid, 60);
    ck_assert_msg(code == 0, "cinfer serve exited with %d", code);
    ck_assert_int_eq(cinfer_test_wait_gone(children, n_children, 5000), 0);
    close(err_fd);
}
END_TEST

START_TEST(cinfer_serve_start_up_errors_exit_1)
{
    if (!model)
        return;
    char *const argv[] = {CINFER_BINARY_DIR "/bin/cinfer", "serve", "--model", (char *)model, "--port", "0",
                          "--kv-cache-bytes", "64M", "--num-threads", "1", "--ssl-certfile", "/nonexistent/cert.pem",
                          "--ssl-keyfile", "/nonexistent/key.pem", NULL};
    int err_fd;
    pid_t pid = cinfer_test_spawn_serve(argv, &err_fd);
    char log[16384];
    cinfer_test_read_to_eof(err_fd, log, sizeof log);
    close(err_fd);
    ck_assert_int_eq(cinfer_test_wait_exit(pid, 60), 1);
    ck_assert_msg(strstr(log, "cinfer serve: /nonexistent/cert.pem: cannot read the server.ssl_certfile "
                              "(--ssl-certfile) file: No such file or directory") != NULL,
                  "%s", log);
    /* stderr reached EOF: every process that held it (the workers too) is gone. */

    /* Half a TLS configuration is refused before anything starts. */
    char *const half[] = {CINFER_BINARY_DIR "/bin/cinfer", "serve", "--ssl-certfile", "/tmp/x.pem", NULL};
    pid = cinfer_test_spawn_serve(half, &err_fd);
    cinfer_test_read_to_eof(err_fd, log, sizeof log);
    close(err_fd);
    ck_assert_int_eq(cinfer_test_wait_exit(pid, 30), 1);
    ck_assert_msg(strstr(log, "server.ssl_certfile (--ssl-certfile) is set but server.ssl_keyfile (--ssl-keyfile) "
                              "is not") != NULL,
                  "%s", log);
}
END_TEST

static Suite *suite_http_server(void)
{
    Suite *s = suite_create("http_server");
    TCase *tc = tcase_create("transport");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, health_not_found_and_method);
    tcase_add_test(tc, api_key_is_checked_everywhere_but_health);
    tcase_add_test(tc, bodies_over_the_limit_get_413);
    tcase_add_test(tc, https_with_a_self_signed_certificate);
    tcase_add_test(tc, chat_template_file_overrides_the_model);
    tcase_add_test(tc, metrics_are_prometheus_text_and_count_generations);
    tcase_add_test(tc, a_client_that_hangs_up_aborts_its_request);
    tcase_add_test(tc, health_turns_503_when_the_scheduler_dies);
    tcase_add_test(tc, engine_errors_map_to_statuses);
    tcase_add_test(tc, cinfer_serve_runs_until_sigterm);
    tcase_add_test(tc, cinfer_serve_start_up_errors_exit_1);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_http_server)
