/* SGLang's native API of the HTTP server, driven with the curl binary against an engine
 * on the default model and a server in this process (port 0):
 *   - /generate greedy text and ids equal cinfer_engine_generate's for the same prompt;
 *   - streaming is byte-exact SSE: Content-Type text/event-stream, chunked, every event
 *     "data: <one JSON object>\n\n" and nothing else, ending "data: [DONE]\n\n"; the
 *     cumulative text grows by extension and ends equal to the blocking answer;
 *   - /v1/tokenize equals the tokenizer's ids, /v1/detokenize gives the text back;
 *   - on stories260K and the default model, /generate's text (JSON and streamed, from a
 *     text or ids, with stop strings) is /v1/detokenize of prompt + output past
 *     /v1/detokenize of the prompt: the output reads on from the prompt;
 *   - /get_server_info, /health_generate, /flush_cache (400 while a request runs);
 *   - /abort_request by rid ends a long stream with finish_reason abort, pages freed;
 *   - a client that disconnects (curl killed) aborts its request: within 1 s nothing runs
 *     and the KV pages are back at their baseline;
 *   - errors, each with its status and OpenAI's error shape: malformed JSON (position),
 *     wrong type and out of range (the field), an empty prompt (400), prompt too long
 *     for the context (the numbers) and, within it, for the KV cache (400, the
 *     scheduler's refusal by its code, streaming or not), queue full (503
 *     server_overloaded), engine down (scheduler killed: 503 service_unavailable), body
 *     too large (413), wrong method (405), unknown path (404). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/http.h"
#include "cinfer/tokenizer.h"
#include "support/engine_fixture.h"
#include "support/runner.h"
#include "support/text_after_prompt.h"
#include "support/tmp_dir.h"

extern char **environ;

#define MODEL CINFER_SOURCE_DIR "/models/default"
/* The default model was trained on 256 positions; RoPE runs on past them, so the
 * context is raised to make requests long enough to abort in flight. */
#define CONTEXT 2048
#define LONG_TOKENS 2000
#define QUEUE_TOKENS 300

static struct cinfer_engine *engine;
static struct cinfer_http_server *server;
static int port;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int keep_prefix_cache; /* a test that reads cached_tokens turns the prefix cache on */

/* An engine on model_path (context_length 0: the model's) and a server in front of it. */
static void start_on(const char *model_path, int context_length, int max_running, int max_queued,
                     long long kv_cache_bytes)
{
    cinfer_test_make_tmp_dir("http-native");
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_server_args_init(&args, &err), 0);
    free(args.model_path);
    args.model_path = strdup(model_path);
    args.kv_cache_bytes = kv_cache_bytes;
    args.start_timeout_ms = 30000;
    args.log_level = CINFER_LOG_ERROR;
    args.num_threads = 1;
    args.context_length = context_length;
    args.port = 0;
    args.max_request_body_bytes = 64 << 10;
    args.disable_radix_cache = !keep_prefix_cache; /* so freed pages are free, not kept for prefix reuse */
    if (max_running)
        args.max_running_requests = max_running;
    if (max_queued)
        args.max_queued_requests = max_queued;
    ck_assert_msg(cinfer_engine_create(&args, NULL, &engine, &err) == 0, "engine: %s", err.message);
    ck_assert_msg(cinfer_http_server_start(engine, &args, &server, &err) == 0, "server: %s", err.message);
    port = cinfer_http_server_port(server);
    ck_assert_int_gt(port, 0);
    cinfer_server_args_free(&args);
}

static void start(int max_running, int max_queued)
{
    start_on(MODEL, CONTEXT, max_running, max_queued, 16ll << 20);
}

static void start_kv(int max_running, int max_queued, long long kv_cache_bytes)
{
    start_on(MODEL, CONTEXT, max_running, max_queued, kv_cache_bytes);
}

static void stop(void)
{
    cinfer_http_server_stop(&server);
    cinfer_engine_shutdown(&engine, 2000);
    cinfer_test_remove_tmp_dir();
}

/* ---- curl -------------------------------------------------------------------------- */
struct reply {
    int status;
    char *headers;
    char *body;
    json_t *json; /* the body parsed, when it is JSON */
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

static void reply_free(struct reply *r)
{
    free(r->headers);
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* curl -X method path [--data-binary body]; the status, headers and body. */
static struct reply curl_raw(const char *method, const char *path, const char *body, size_t body_len)
{
    char req[256], hdr[256], out[256];
    snprintf(req, sizeof req, "%s", cinfer_test_tmp_path("req.json"));
    snprintf(hdr, sizeof hdr, "%s", cinfer_test_tmp_path("headers.txt"));
    snprintf(out, sizeof out, "%s", cinfer_test_tmp_path("body.txt"));
    unlink(hdr);
    unlink(out);
    char data[512] = "";
    if (body) {
        write_file(req, body, body_len);
        snprintf(data, sizeof data, "-H 'Content-Type: application/json' --data-binary @%s", req);
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "curl -sS -N -o %s -D %s -w '%%{http_code}' -X %s %s http://127.0.0.1:%d%s", out, hdr,
             method, data, port, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char code[16] = "";
    ck_assert_ptr_nonnull(fgets(code, sizeof code, p));
    int rc = pclose(p);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "curl failed (%d): %s", rc, cmd);
    struct reply r = {.status = atoi(code), .headers = slurp(hdr), .body = slurp(out)};
    json_error_t jerr;
    r.json = json_loads(r.body, 0, &jerr);
    return r;
}

static struct reply curl(const char *method, const char *path, const char *body)
{
    return curl_raw(method, path, body, body ? strlen(body) : 0);
}

/* An OpenAI-shaped error with this status whose message contains each of words (NULL-ended). */
static void assert_error(const struct reply *r, int status, const char *type, const char *param,
                         const char *const *words)
{
    ck_assert_msg(r->status == status, "status %d, expected %d: %s", r->status, status, r->body);
    json_t *e = json_object_get(r->json, "error");
    ck_assert_msg(json_is_object(e), "no error object in %s", r->body);
    const char *msg = json_string_value(json_object_get(e, "message"));
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_eq(json_string_value(json_object_get(e, "type")), type);
    if (param)
        ck_assert_msg(json_is_string(json_object_get(e, "param")) &&
                          strcmp(json_string_value(json_object_get(e, "param")), param) == 0,
                      "param is not %s in %s", param, r->body);
    ck_assert_msg(json_object_get(e, "code") != NULL, "no code member in %s", r->body);
    for (; words && *words; words++)
        ck_assert_msg(strstr(msg, *words), "\"%s\" not in the message \"%s\"", *words, msg);
}

static struct cinfer_server_info server_info(void)
{
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_server_info(engine, &info, &err) == 0, "%s", err.message);
    return info;
}

/* A curl streaming /generate left running in the background, its output in a file. */
struct background {
    pid_t pid;
    char out[256];
};

static struct background curl_background(const char *name, const char *body)
{
    struct background b;
    char req[256];
    snprintf(req, sizeof req, "%s", cinfer_test_tmp_path(name));
    strcat(req, ".json");
    write_file(req, body, strlen(body));
    snprintf(b.out, sizeof b.out, "%s.out", cinfer_test_tmp_path(name));
    char url[64], data[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/generate", port);
    snprintf(data, sizeof data, "@%s", req);
    char *argv[] = {"curl", "-sS", "-N", "-o", b.out, "-H", "Content-Type: application/json", "--data-binary", data,
                    url, NULL};
    ck_assert_int_eq(posix_spawnp(&b.pid, "curl", NULL, NULL, argv, environ), 0);
    return b;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : 0;
}

static void wait_first_bytes(const struct background *b)
{
    double deadline = now_s() + 20;
    while (file_size(b->out) == 0 && now_s() < deadline)
        usleep(2000);
    ck_assert_msg(file_size(b->out) > 0, "no bytes from the stream within 20 s");
}

static int wait_exit(struct background *b)
{
    int status;
    ck_assert_int_eq(waitpid(b->pid, &status, 0), b->pid);
    return status;
}

static const char long_stream[] =
    "{\"text\": \"In the beginning\", \"stream\": true, \"rid\": \"%s\","
    " \"sampling_params\": {\"max_new_tokens\": %d, \"ignore_eos\": true, \"temperature\": 0}}";

/* The events of an SSE body, checked byte by byte: a JSON object per event, [DONE] last. */
static json_t *sse_events(const char *body)
{
    json_t *events = json_array();
    const char *p = body;
    int done = 0;
    while (*p) {
        ck_assert_msg(!done, "bytes after data: [DONE]: \"%.60s\"", p);
        ck_assert_msg(strncmp(p, "data: ", 6) == 0, "an event does not start with \"data: \": \"%.60s\"", p);
        const char *end = strstr(p, "\n\n");
        ck_assert_msg(end != NULL, "an event without its blank line: \"%.60s\"", p);
        ck_assert_msg(!memchr(p, '\n', (size_t)(end - p)) && !memchr(p, '\r', (size_t)(end - p)),
                      "an event of more than one line: \"%.*s\"", (int)(end - p), p);
        if ((size_t)(end - p) == 12 && strncmp(p, "data: [DONE]", 12) == 0) {
            done = 1;
        } else {
            json_error_t jerr;
            json_t *ev = json_loadb(p + 6, (size_t)(end - p - 6), 0, &jerr);
            ck_assert_msg(json_is_object(ev), "event is not one JSON object: \"%.*s\"", (int)(end - p), p);
            json_array_append_new(events, ev);
        }
        p = end + 2;
    }
    ck_assert_msg(done, "the stream does not end with data: [DONE]");
    return events;
}

static long long metric(const char *line_prefix)
{
    struct reply r = curl("GET", "/metrics", NULL);
    ck_assert_int_eq(r.status, 200);
    const char *at = strstr(r.body, line_prefix);
    long long v = at ? atoll(at + strlen(line_prefix)) : -1;
    reply_free(&r);
    return v;
}

static const json_t *last_event(const json_t *events)
{
    return json_array_get(events, json_array_size(events) - 1);
}

/* ---- tests ------------------------------------------------------------------------- */
START_TEST(generate_equals_the_engine_and_streams_sse)
{
    start(0, 0);
    const char *prompt = "And God said";
    struct cinfer_generate_request g = {.prompt = prompt};
    cinfer_sampling_params_init(&g.sampling);
    g.sampling.temperature = 0;
    g.sampling.max_new_tokens = 24;
    struct cinfer_generate_result ref;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_generate(engine, &g, &ref, &err) == 0, "%s", err.message);

    struct reply r = curl("POST", "/generate",
                          "{\"text\": \"And God said\", \"sampling_params\": {\"max_new_tokens\": 24, \"temperature\": 0}}");
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    ck_assert_ptr_nonnull(strstr(r.headers, "application/json"));
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "text")), ref.text);
    const json_t *ids = json_object_get(r.json, "output_ids");
    ck_assert_uint_eq(json_array_size(ids), ref.n_output_ids);
    for (size_t i = 0; i < ref.n_output_ids; i++)
        ck_assert_int_eq(json_integer_value(json_array_get(ids, i)), ref.output_ids[i]);
    const json_t *meta = json_object_get(r.json, "meta_info");
    ck_assert_int_eq(json_integer_value(json_object_get(meta, "prompt_tokens")), ref.prompt_tokens);
    ck_assert_int_eq(json_integer_value(json_object_get(meta, "completion_tokens")), ref.completion_tokens);
    ck_assert_uint_eq(json_string_length(json_object_get(meta, "id")), 32);
    ck_assert(json_real_value(json_object_get(meta, "e2e_latency")) > 0);
    const json_t *fr = json_object_get(meta, "finish_reason");
    ck_assert_str_eq(json_string_value(json_object_get(fr, "type")),
                     ref.finish_reason == CINFER_FINISH_LENGTH ? "length" : "stop");
    if (ref.finish_reason == CINFER_FINISH_LENGTH)
        ck_assert_int_eq(json_integer_value(json_object_get(fr, "length")), 24);
    printf("generate: %d prompt tokens, %d completion tokens, \"%s\"\n", ref.prompt_tokens, ref.completion_tokens,
           ref.text);

    /* The same as a stream. */
    struct reply s = curl("POST", "/generate",
                          "{\"text\": \"And God said\", \"stream\": true, \"rid\": \"stream-1\","
                          " \"sampling_params\": {\"max_new_tokens\": 24, \"temperature\": 0}}");
    ck_assert_msg(s.status == 200, "%d %s", s.status, s.body);
    ck_assert_msg(strstr(s.headers, "Content-Type: text/event-stream") || strstr(s.headers,
                                                                                 "content-type: text/event-stream"),
                  "headers: %s", s.headers);
    ck_assert_msg(strcasestr(s.headers, "Transfer-Encoding: chunked"), "not chunked: %s", s.headers);
    json_t *events = sse_events(s.body);
    ck_assert_uint_ge(json_array_size(events), 2);
    const char *before = "";
    for (size_t i = 0; i < json_array_size(events); i++) {
        const json_t *ev = json_array_get(events, i);
        const char *text = json_string_value(json_object_get(ev, "text"));
        ck_assert_ptr_nonnull(text);
        ck_assert_msg(strncmp(text, before, strlen(before)) == 0, "event %zu does not extend the text before it", i);
        before = text;
        const json_t *m = json_object_get(ev, "meta_info");
        ck_assert_str_eq(json_string_value(json_object_get(m, "id")), "stream-1");
        int last = i + 1 == json_array_size(events);
        ck_assert_msg(last == !json_is_null(json_object_get(m, "finish_reason")),
                      "finish_reason must be null until the last event (event %zu)", i);
    }
    ck_assert_str_eq(before, ref.text);
    printf("stream: %zu events, %zu bytes\n", json_array_size(events), strlen(s.body));
    json_decref(events);
    reply_free(&s);
    reply_free(&r);
    char *ref_text = strdup(ref.text);
    cinfer_generate_result_free(&ref);

    /* Logprobs as SGLang writes them: [logprob, id, text] per output token, the greedy
     * choice first among its alternatives. */
    r = curl("POST", "/generate",
             "{\"text\": \"And God said\", \"return_logprob\": true, \"top_logprobs_num\": 3,"
             " \"return_text_in_logprobs\": true, \"sampling_params\": {\"max_new_tokens\": 6, \"temperature\": 0}}");
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    meta = json_object_get(r.json, "meta_info");
    const json_t *lps = json_object_get(meta, "output_token_logprobs");
    const json_t *tops = json_object_get(meta, "output_top_logprobs");
    ids = json_object_get(r.json, "output_ids");
    ck_assert_uint_eq(json_array_size(lps), json_array_size(ids));
    ck_assert_uint_eq(json_array_size(tops), json_array_size(ids));
    struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(engine);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        const json_t *lp = json_array_get(lps, i);
        int32_t id = (int32_t)json_integer_value(json_array_get(ids, i));
        ck_assert_int_eq(json_integer_value(json_array_get(lp, 1)), id);
        ck_assert(json_real_value(json_array_get(lp, 0)) <= 0);
        char *piece = NULL;
        size_t piece_len = 0;
        ck_assert_int_eq(tok->ops->decode(tok->tok, &id, 1, 0, &piece, &piece_len, &err), 0);
        ck_assert_str_eq(json_string_value(json_array_get(lp, 2)), piece);
        free(piece);
        const json_t *top = json_array_get(tops, i);
        ck_assert_uint_eq(json_array_size(top), 3);
        ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(top, 0), 1)), id);
        ck_assert(json_real_value(json_array_get(json_array_get(top, 0), 0)) >=
                  json_real_value(json_array_get(json_array_get(top, 1), 0)));
    }
    reply_free(&r);

    /* A stop string: matched, and trimmed from the text unless no_stop_trim. */
    for (int keep = 0; keep < 2; keep++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"text\": \"And God said\", \"sampling_params\": {\"max_new_tokens\": 24, \"temperature\": 0,"
                 " \"stop\": [\"LORD\"], \"no_stop_trim\": %s}}", keep ? "true" : "false");
        r = curl("POST", "/generate", body);
        ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
        fr = json_object_get(json_object_get(r.json, "meta_info"), "finish_reason");
        ck_assert_str_eq(json_string_value(json_object_get(fr, "type")), "stop");
        ck_assert_str_eq(json_string_value(json_object_get(fr, "matched")), "LORD");
        /* the greedy text up to the first "LORD" (with it when kept) */
        const char *at = strstr(ref_text, "LORD");
        ck_assert_msg(at != NULL, "the greedy text has no \"LORD\": %s", ref_text);
        ck_assert_str_eq(json_string_value(json_object_get(r.json, "text")),
                         strndupa(ref_text, (size_t)(at - ref_text) + (keep ? 4 : 0)));
        reply_free(&r);
    }
    free(ref_text);

    struct reply one;
    /* A list of prompts with n = 2 and a seed: four answers, each choice reproducible alone. */
    r = curl("POST", "/generate",
             "{\"text\": [\"And God said\", \"The LORD is\"], \"sampling_params\": {\"max_new_tokens\": 8, \"n\": 2,"
             " \"temperature\": 0.9, \"sampling_seed\": 7}}");
    ck_assert_msg(r.status == 200 && json_array_size(r.json) == 4, "%d %s", r.status, r.body);
    /* one rid for a whole list names all of it */
    one = curl("POST", "/generate",
               "{\"text\": [\"a\", \"b\"], \"rid\": \"both\", \"sampling_params\": {\"max_new_tokens\": 2}}");
    ck_assert_msg(one.status == 200 && json_array_size(one.json) == 2, "%d %s", one.status, one.body);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(one.json, 1), "meta_info"),
                                                       "id")),
                     "both");
    reply_free(&one);
    one = curl("POST", "/generate",
                            "{\"text\": \"The LORD is\", \"sampling_params\": {\"max_new_tokens\": 8,"
                            " \"temperature\": 0.9, \"sampling_seed\": 8}}");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(r.json, 3), "index")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(r.json, 3), "text")),
                     json_string_value(json_object_get(one.json, "text")));
    reply_free(&one);
    /* The same list streamed: events of the four interleave, each ends as its blocking answer. */
    s = curl("POST", "/generate",
             "{\"text\": [\"And God said\", \"The LORD is\"], \"stream\": true, \"sampling_params\":"
             " {\"max_new_tokens\": 8, \"n\": 2, \"temperature\": 0.9, \"sampling_seed\": 7}}");
    ck_assert_msg(s.status == 200, "%d %s", s.status, s.body);
    events = sse_events(s.body);
    const char *final_text[4] = {NULL};
    int switches = 0, prev_index = -1;
    for (size_t i = 0; i < json_array_size(events); i++) {
        const json_t *ev = json_array_get(events, i);
        int index = (int)json_integer_value(json_object_get(ev, "index"));
        ck_assert(index >= 0 && index < 4);
        switches += prev_index >= 0 && index != prev_index;
        prev_index = index;
        if (!json_is_null(json_object_get(json_object_get(ev, "meta_info"), "finish_reason")))
            final_text[index] = json_string_value(json_object_get(ev, "text"));
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(final_text[i], "choice %d never finished", i);
        ck_assert_str_eq(final_text[i], json_string_value(json_object_get(json_array_get(r.json, (size_t)i), "text")));
    }
    ck_assert_msg(switches > 4, "the four streams did not interleave (%d switches)", switches);
    printf("stream of a list: %zu events, %d switches between the 4 generations\n", json_array_size(events), switches);
    json_decref(events);
    reply_free(&s);
    reply_free(&r);
    stop();
}
END_TEST

/* ---- the output after its prompt (issue 15) ------------------------------------------- */

/* POSTs body (taken) to path; the reply's JSON, which must come with 200. */
static json_t *post(const char *path, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct reply r = curl("POST", path, text);
    free(text);
    ck_assert_msg(r.status == 200 && r.json, "%s: %d %s", path, r.status, r.body);
    json_t *j = json_incref(r.json);
    reply_free(&r);
    return j;
}

/* /v1/detokenize of prompt ids + output ids, special tokens skipped as generation does. */
static char *detokenize(const json_t *prompt_ids, const json_t *output_ids)
{
    json_t *all = json_deep_copy(prompt_ids);
    if (output_ids)
        json_array_extend(all, (json_t *)output_ids); /* only read */
    json_t *j = post("/v1/detokenize", json_pack("{s:o, s:b}", "tokens", all, "skip_special_tokens", 1));
    char *text = strdup(json_string_value(json_object_get(j, "text")));
    json_decref(j);
    return text;
}

/* The text /generate must give for these output ids: the HTTP API's own decodes. */
static char *text_after(const json_t *prompt_ids, const json_t *output_ids)
{
    char *prompt_text = detokenize(prompt_ids, NULL), *all_text = detokenize(prompt_ids, output_ids);
    char *rest = cinfer_test_text_past(prompt_text, all_text);
    free(prompt_text);
    free(all_text);
    return rest;
}

/* /generate of prompt (a text, or ids when prompt_ids is given) with stop (or none),
 * JSON and streamed: both texts equal what the returned ids decode to after the prompt,
 * cut before stop. Returns the JSON answer's text (malloc'd). */
static char *generate_checked(const char *prompt, const json_t *prompt_ids, int as_ids, const char *stop)
{
    char *first = NULL;
    for (int stream = 0; stream <= 1; stream++) {
        json_t *sp = json_pack("{s:i, s:f}", "max_new_tokens", 16, "temperature", 0.0);
        if (stop)
            json_object_set_new(sp, "stop", json_pack("[s]", stop));
        json_t *body = json_pack("{s:o, s:b}", "sampling_params", sp, "stream", stream);
        json_object_set_new(body, as_ids ? "input_ids" : "text", as_ids ? json_deep_copy(prompt_ids) : json_string(prompt));
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        struct reply r = curl("POST", "/generate", text);
        free(text);
        ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
        json_t *events = stream ? sse_events(r.body) : NULL;
        const json_t *answer = stream ? last_event(events) : r.json;
        const char *got = json_string_value(json_object_get(answer, "text"));
        ck_assert_ptr_nonnull(got);
        char *want = text_after(prompt_ids, json_object_get(answer, "output_ids"));
        const json_t *fr = json_object_get(json_object_get(answer, "meta_info"), "finish_reason");
        if (stop) {
            char *at = strstr(want, stop);
            ck_assert_msg(at, "the output \"%s\" has no \"%s\"", want, stop);
            *at = '\0';
            ck_assert_str_eq(json_string_value(json_object_get(fr, "matched")), stop);
        }
        ck_assert_msg(!strcmp(got, want), "\"%s\"%s%s: /generate%s gave \"%s\", the decodes say \"%s\"", prompt,
                      as_ids ? " as ids" : "", stop ? " with a stop string" : "", stream ? " (streamed)" : "", got, want);
        if (!first)
            first = strdup(got);
        free(want);
        json_decref(events);
        reply_free(&r);
    }
    return first;
}

START_TEST(generate_text_reads_on_from_the_prompt)
{
    struct cinfer_test_boundary_model models[2];
    int n_models = cinfer_test_boundary_models(models);
    for (int m = 0; m < n_models; m++) {
        start_on(models[m].path, 0, 0, 0, 16ll << 20);
        for (int p = 0; p < CINFER_TEST_BOUNDARY_PROMPTS; p++) {
            const char *prompt = models[m].prompts[p];
            json_t *tok = post("/v1/tokenize", json_pack("{s:s, s:b}", "prompt", prompt, "add_special_tokens", 1));
            const json_t *prompt_ids = json_object_get(tok, "tokens");
            char *text = generate_checked(prompt, prompt_ids, 0, NULL);
            printf("%s: /generate \"%s\" -> \"%s\"\n", models[m].name, prompt, text);
            free(generate_checked(prompt, prompt_ids, 1, NULL));
            /* the output's first word, its leading space with it: the text ends before it */
            char stop[32];
            size_t n = strcspn(text + 1, " ,.") + 1;
            ck_assert_uint_lt(n, sizeof stop);
            memcpy(stop, text, n);
            stop[n] = '\0';
            free(generate_checked(prompt, prompt_ids, 0, stop));
            /* a later word */
            const char *later = strchr(text + n, ' ');
            if (later && strlen(later) > 4) {
                memcpy(stop, later, 4);
                stop[4] = '\0';
                free(generate_checked(prompt, prompt_ids, 0, stop));
            }
            free(text);
            json_decref(tok);
        }
        stop();
    }
}
END_TEST

START_TEST(tokenize_detokenize_info_health)
{
    start(0, 0);
    struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(engine);
    ck_assert_ptr_nonnull(tok);
    const char *text = "In the beginning God created the heaven and the earth.";
    struct cinfer_token_ids ids = {0};
    struct cinfer_error err = {0};
    ck_assert_int_eq(tok->ops->encode(tok->tok, text, strlen(text), 1, &ids, &err), 0);
    char body[512];
    snprintf(body, sizeof body, "{\"prompt\": \"%s\", \"add_special_tokens\": true}", text);
    struct reply r = curl("POST", "/v1/tokenize", body);
    ck_assert_msg(r.status == 200, "%s", r.body);
    const json_t *tokens = json_object_get(r.json, "tokens");
    ck_assert_uint_eq(json_array_size(tokens), ids.len);
    printf("tokenize: %zu ids as the tokenizer's\n", ids.len);
    for (size_t i = 0; i < ids.len; i++)
        ck_assert_int_eq(json_integer_value(json_array_get(tokens, i)), ids.ids[i]);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "count")), (int)ids.len);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "max_model_len")), CONTEXT);
    char *dump = json_dumps(tokens, JSON_COMPACT);
    snprintf(body, sizeof body, "{\"tokens\": %s}", dump);
    free(dump);
    reply_free(&r);
    r = curl("POST", "/v1/detokenize", body);
    ck_assert_msg(r.status == 200, "%s", r.body);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "text")), text);
    reply_free(&r);
    cinfer_token_ids_free(&ids);

    r = curl("POST", "/v1/detokenize", "{\"tokens\": [5, 99999]}");
    assert_error(&r, 400, "invalid_request_error", "tokens", (const char *const[]){"99999", "[0, 3072)", "tokens[1]",
                 NULL});
    reply_free(&r);

    r = curl("GET", "/get_server_info", NULL);
    ck_assert_msg(r.status == 200, "%s", r.body);
    struct cinfer_server_info info = server_info();
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "model_path")), MODEL);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "max_request_len")), CONTEXT);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "vocab_size")), 3072);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "kv_pages_total")), info.kv_pages_total);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "running_requests")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(r.json, "worker_pids")), (size_t)info.n_workers);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(r.json, "worker_pids"), 1)),
                     cinfer_test_worker_pids(engine).pid[1]);
    const json_t *sargs = json_object_get(r.json, "server_args");
    ck_assert_int_eq(json_integer_value(json_object_get(sargs, "max_request_body_bytes")), 64 << 10);
    ck_assert(json_is_true(json_object_get(sargs, "disable_radix_cache")));
    reply_free(&r);

    r = curl("GET", "/health_generate", NULL);
    ck_assert_msg(r.status == 200, "%s", r.body);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "generated_tokens")), 1);
    reply_free(&r);
    stop();
}
END_TEST

/* SGLang's json_schema on /generate: every output of a batch with n > 1 parses and
 * keeps the schema's rules (checked here with jansson); meta_info.cached_tokens says
 * how much of a repeated prompt the prefix cache held. */
START_TEST(constrained_generate_and_cached_tokens)
{
    keep_prefix_cache = 1;
    start(0, 0);
    keep_prefix_cache = 0;
    struct reply r = curl("POST", "/generate",
                          "{\"text\": [\"And God said\", \"In the beginning\"], \"sampling_params\": {\"n\": 2, "
                          "\"temperature\": 1, \"seed\": 4, \"max_new_tokens\": 300, \"json_schema\": {\"type\": "
                          "\"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}, \"n\": {\"type\": \"integer\", "
                          "\"minimum\": 10, \"maximum\": 99}}, \"required\": [\"ok\", \"n\"]}}}");
    ck_assert_msg(r.status == 200 && json_is_array(r.json), "%d %s", r.status, r.body);
    ck_assert_uint_eq(json_array_size(r.json), 4);
    size_t i;
    json_t *g;
    json_array_foreach(r.json, i, g) {
        const char *text = json_string_value(json_object_get(g, "text"));
        json_error_t jerr;
        json_t *v = json_loads(text, 0, &jerr);
        ck_assert_msg(json_is_object(v), "output %zu is not a JSON object: %s", i, text);
        ck_assert(json_is_boolean(json_object_get(v, "ok")));
        json_int_t n = json_integer_value(json_object_get(v, "n"));
        ck_assert_msg(json_is_integer(json_object_get(v, "n")) && n >= 10 && n <= 99, "%s", text);
        ck_assert_uint_eq(json_object_size(v), 2);
        printf("json_schema output %zu: %s\n", i, text);
        json_decref(v);
    }
    reply_free(&r);

    const char *body = "{\"text\": \"And God said unto Moses, and the LORD spake unto Aaron, saying, Speak unto the "
                       "children of Israel, and say unto them, When any man of you bring an offering unto the LORD\", "
                       "\"sampling_params\": {\"max_new_tokens\": 1}}";
    r = curl("POST", "/generate", body);
    reply_free(&r);
    r = curl("POST", "/generate", body);
    json_t *meta = json_object_get(r.json, "meta_info");
    json_int_t cached = json_integer_value(json_object_get(meta, "cached_tokens"));
    json_int_t prompt = json_integer_value(json_object_get(meta, "prompt_tokens"));
    printf("cached_tokens: %lld of %lld prompt tokens on the second request\n", (long long)cached, (long long)prompt);
    ck_assert_msg(cached > 0 && cached < prompt, "%s", r.body);
    reply_free(&r);
}
END_TEST

START_TEST(abort_by_rid_and_by_disconnect)
{
    start(0, 0);
    struct cinfer_server_info base = server_info();
    ck_assert_int_gt(base.kv_pages_free, 0);
    char body[512];

    /* A long stream, aborted by its rid. */
    snprintf(body, sizeof body, long_stream, "long-abort", LONG_TOKENS);
    struct background b = curl_background("abort", body);
    wait_first_bytes(&b);
    struct reply r = curl("POST", "/generate", "{\"text\": \"a\", \"rid\": \"long-abort\"}");
    assert_error(&r, 400, "invalid_request_error", "rid", (const char *const[]){"already in flight", NULL});
    reply_free(&r);
    r = curl("POST", "/flush_cache", NULL); /* a request is running: refused, with the reason */
    assert_error(&r, 400, "invalid_request_error", NULL, (const char *const[]){"not flushed", "1 requests are running",
                 NULL});
    printf("flush_cache while running: %s\n", json_string_value(json_object_get(json_object_get(r.json, "error"),
                                                                                "message")));
    reply_free(&r);
    r = curl("POST", "/abort_request", "{\"rid\": \"long-abort\"}");
    ck_assert_msg(r.status == 200 && json_integer_value(json_object_get(r.json, "aborted")) == 1, "%s", r.body);
    reply_free(&r);
    ck_assert_int_eq(wait_exit(&b), 0);
    char *out = slurp(b.out);
    json_t *events = sse_events(out);
    const json_t *meta = json_object_get(last_event(events), "meta_info");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(meta, "finish_reason"), "type")), "abort");
    int generated = (int)json_integer_value(json_object_get(meta, "completion_tokens"));
    ck_assert_int_lt(generated, LONG_TOKENS);
    ck_assert_int_eq(generated, (int)json_array_size(json_object_get(last_event(events), "output_ids")));
    ck_assert_int_gt(json_integer_value(json_object_get(meta, "prompt_tokens")), 0);
    printf("abort_request: stopped after %d of %d tokens\n", generated, LONG_TOKENS);
    json_decref(events);
    free(out);
    double deadline = now_s() + 2;
    struct cinfer_server_info info = server_info();
    while ((info.running_requests || info.kv_pages_free != base.kv_pages_free) && now_s() < deadline)
        info = server_info();
    ck_assert_int_eq(info.running_requests, 0);
    ck_assert_int_eq(info.kv_pages_free, base.kv_pages_free);
    r = curl("POST", "/flush_cache", NULL);
    ck_assert_msg(r.status == 200, "%s", r.body);
    reply_free(&r);

    /* A long stream whose client is killed after its first bytes. */
    long long aborted_before = metric("cinfer_requests_total{finish_reason=\"abort\"} ");
    snprintf(body, sizeof body, long_stream, "long-disconnect", LONG_TOKENS);
    b = curl_background("disconnect", body);
    wait_first_bytes(&b);
    info = server_info();
    ck_assert_int_eq(info.running_requests, 1);
    ck_assert_int_lt(info.kv_pages_free, base.kv_pages_free);
    kill(b.pid, SIGKILL);
    double killed = now_s();
    wait_exit(&b);
    do
        info = server_info();
    while ((info.running_requests || info.kv_pages_free != base.kv_pages_free) && now_s() < killed + 1.0);
    double took = now_s() - killed;
    ck_assert_msg(info.running_requests == 0 && info.kv_pages_free == base.kv_pages_free,
                  "1 s after the client went: %d running, %d pages free (baseline %d)", info.running_requests,
                  info.kv_pages_free, base.kv_pages_free);
    ck_assert_int_eq(metric("cinfer_requests_total{finish_reason=\"abort\"} "), aborted_before + 1);
    printf("disconnect: running 0 and %d pages free again %.0f ms after curl was killed\n", info.kv_pages_free,
           took * 1000);
    stop();
}
END_TEST

START_TEST(errors_have_status_and_shape)
{
    start_kv(0, 0, 1ll << 20); /* 512 KV tokens of the default model, in a context of 2048 */
    struct reply r = curl("POST", "/generate", "{\"text\": \"a\",\n \"sampling_params\": {\"max_new_tokens\": }}");
    assert_error(&r, 400, "invalid_request_error", NULL, (const char *const[]){"line 2", "column", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"temperature\": \"hot\"}}");
    assert_error(&r, 400, "invalid_request_error", "temperature", (const char *const[]){"temperature", "a string",
                 NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": 5}");
    assert_error(&r, 400, "invalid_request_error", "text", (const char *const[]){"text", "an integer", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"top_p\": 1.5}}");
    assert_error(&r, 400, "invalid_request_error", "top_p", (const char *const[]){"top_p", "[0, 1]", "1.5", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"max_new_tokens\": -3}}");
    assert_error(&r, 400, "invalid_request_error", "max_new_tokens", (const char *const[]){"max_new_tokens", "-3",
                 NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"regex\": \"(a)\\\\1\"}}");
    assert_error(&r, 400, "invalid_request_error", "regex", (const char *const[]){"backreferences", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"json_schema\": {\"type\": \"object\", "
             "\"properties\": {\"a\": {\"not\": {}}}}}}");
    assert_error(&r, 400, "invalid_request_error", "json_schema",
                 (const char *const[]){"#/properties/a", "keyword 'not'", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"regex\": \"a\", \"ebnf\": \"root ::= \\\"a\\\"\"}}");
    assert_error(&r, 400, "invalid_request_error", "ebnf", (const char *const[]){"at most one", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"text\": \"a\", \"sampling_params\": {\"temprature\": 1}}");
    assert_error(&r, 400, "invalid_request_error", "temprature", (const char *const[]){"not a sampling parameter",
                 NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"input_ids\": [1, 2, 5000]}");
    assert_error(&r, 400, "invalid_request_error", "input_ids", (const char *const[]){"5000", "[0, 3072)", NULL});
    reply_free(&r);

    /* A prompt longer than the context. */
    static char text[6 * CONTEXT + 64] = "{\"text\": \"";
    for (int i = 0; i < CONTEXT + 100; i++)
        strcat(text, " and");
    strcat(text, "\"}");
    r = curl("POST", "/generate", text);
    assert_error(&r, 400, "invalid_request_error", "text", (const char *const[]){"2148 tokens", "2048 tokens", NULL});
    reply_free(&r);

    /* Within the context but longer than the KV cache: the scheduler refuses it, and
     * its code (CONTEXT_LENGTH) makes the status, streaming or not. */
    struct cinfer_server_info info;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_engine_server_info(engine, &info, &err), 0);
    ck_assert_int_lt(info.max_total_tokens + 1, CONTEXT);
    char ids[8 * CONTEXT + 64];
    int at = snprintf(ids, sizeof ids, "{\"input_ids\": [1");
    for (int i = 1; i < (int)info.max_total_tokens + 8; i++)
        at += snprintf(ids + at, sizeof ids - (size_t)at, ", %d", 1 + i % 50);
    snprintf(ids + at, sizeof ids - (size_t)at, "]}");
    char kv_words[64];
    snprintf(kv_words, sizeof kv_words, "the KV cache of %lld tokens", (long long)info.max_total_tokens);
    r = curl("POST", "/generate", ids);
    assert_error(&r, 400, "invalid_request_error", NULL, (const char *const[]){"does not fit", kv_words, NULL});
    printf("past the KV cache: %d %s\n", r.status, json_string_value(json_object_get(json_object_get(r.json, "error"),
                                                                                     "message")));
    reply_free(&r);
    snprintf(ids + at, sizeof ids - (size_t)at, "], \"stream\": true}");
    r = curl("POST", "/generate", ids);
    assert_error(&r, 400, "invalid_request_error", NULL, (const char *const[]){"does not fit", kv_words, NULL});
    reply_free(&r);

    /* An empty prompt, as text or as ids. */
    r = curl("POST", "/generate", "{\"text\": \"\"}");
    assert_error(&r, 400, "invalid_request_error", "text", (const char *const[]){"no tokens", NULL});
    reply_free(&r);
    r = curl("POST", "/generate", "{\"input_ids\": []}");
    assert_error(&r, 400, "invalid_request_error", "input_ids", (const char *const[]){"empty", NULL});
    reply_free(&r);

    /* 100 KiB against a limit of 64 KiB: refused before parsing. */
    size_t big = 100 << 10;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = '\0';
    r = curl_raw("POST", "/generate", huge, big);
    assert_error(&r, 413, "request_too_large", NULL, NULL);
    reply_free(&r);
    free(huge);

    r = curl("GET", "/generate", NULL);
    assert_error(&r, 405, "invalid_request_error", NULL, NULL);
    ck_assert_msg(strcasestr(r.headers, "Allow: POST"), "no Allow header: %s", r.headers);
    reply_free(&r);
    r = curl("POST", "/no/such/path", "{}");
    assert_error(&r, 404, "not_found_error", NULL, (const char *const[]){"/no/such/path", NULL});
    reply_free(&r);
    r = curl("POST", "/abort_request", "{}");
    assert_error(&r, 400, "invalid_request_error", "rid", NULL);
    reply_free(&r);
    stop();
}
END_TEST

START_TEST(queue_full_then_engine_down)
{
    start(1, 1);
    /* One runs, one waits, the rest are refused while the first still generates. */
    enum { N = 6 };
    struct background b[N];
    char body[512];
    for (int i = 0; i < N; i++) {
        char rid[32], name[32];
        snprintf(rid, sizeof rid, "q%d", i);
        snprintf(name, sizeof name, "queue%d", i);
        snprintf(body, sizeof body, long_stream, rid, QUEUE_TOKENS);
        b[i] = curl_background(name, body);
    }
    int completed = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(wait_exit(&b[i]), 0);
        char *out = slurp(b[i].out);
        json_error_t jerr;
        json_t *j = json_loads(out, 0, &jerr);
        if (j) {
            ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
                             "server_overloaded");
            ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
                                         "queue full"));
            refused++;
        } else {
            json_t *events = sse_events(out);
            ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(last_event(events), "meta_info"),
                                                                "completion_tokens")),
                             QUEUE_TOKENS);
            json_decref(events);
            completed++;
        }
        json_decref(j);
        free(out);
    }
    printf("queue full: %d completed, %d refused with 503 server_overloaded\n", completed, refused);
    ck_assert_int_ge(completed, 2);
    ck_assert_int_ge(refused, 1);
    /* the 503 itself, with its status, for one more request while two are in */
    snprintf(body, sizeof body, long_stream, "hold-1", LONG_TOKENS);
    struct background h1 = curl_background("hold1", body);
    wait_first_bytes(&h1);
    snprintf(body, sizeof body, long_stream, "hold-2", LONG_TOKENS);
    struct background h2 = curl_background("hold2", body);
    double deadline = now_s() + 5;
    while (server_info().queued_requests < 1 && now_s() < deadline)
        usleep(2000);
    struct reply r = curl("POST", "/generate", "{\"text\": \"a\", \"stream\": true}");
    assert_error(&r, 503, "server_overloaded", NULL, (const char *const[]){"queue full", NULL});
    reply_free(&r);
    wait_exit(&h1);
    wait_exit(&h2);

    /* The scheduler killed: a stream in flight ends with an error event and [DONE];
     * generation answers 503 afterwards, as do the health checks. */
    snprintf(body, sizeof body, long_stream, "doomed", LONG_TOKENS);
    struct background doomed = curl_background("doomed", body);
    wait_first_bytes(&doomed);
    r = curl("GET", "/get_server_info", NULL);
    const json_t *pids = json_object_get(r.json, "worker_pids");
    ck_assert_uint_ge(json_array_size(pids), 2);
    pid_t scheduler = (pid_t)json_integer_value(json_array_get(pids, 1)); /* detokenizer first, then scheduler tp0 */
    reply_free(&r);
    ck_assert_int_gt(scheduler, 0);
    kill(scheduler, SIGKILL);
    ck_assert_int_eq(wait_exit(&doomed), 0);
    char *out = slurp(doomed.out);
    json_t *events = sse_events(out);
    const json_t *error = json_object_get(last_event(events), "error");
    ck_assert_msg(json_is_object(error), "the stream cut by the dead scheduler does not end with an error event: %s",
                  out);
    ck_assert_str_eq(json_string_value(json_object_get(error, "type")), "service_unavailable");
    printf("engine down mid-stream: %zu events, then %s\n", json_array_size(events) - 1,
           json_string_value(json_object_get(error, "message")));
    json_decref(events);
    free(out);
    deadline = now_s() + 10;
    for (;;) {
        r = curl("POST", "/generate", "{\"text\": \"a\"}");
        if (r.status == 503 || now_s() > deadline)
            break;
        reply_free(&r);
        usleep(50000);
    }
    assert_error(&r, 503, "service_unavailable", NULL, NULL);
    printf("engine down: %s\n", json_string_value(json_object_get(json_object_get(r.json, "error"), "message")));
    reply_free(&r);
    r = curl("GET", "/health_generate", NULL);
    assert_error(&r, 503, "service_unavailable", NULL, NULL);
    reply_free(&r);
    r = curl("GET", "/health", NULL);
    ck_assert_int_eq(r.status, 503);
    reply_free(&r);
    stop();
}
END_TEST

static Suite *suite_http_native(void)
{
    Suite *s = suite_create("http_native");
    TCase *t = tcase_create("native");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, generate_equals_the_engine_and_streams_sse);
    tcase_add_test(t, tokenize_detokenize_info_health);
    tcase_add_test(t, constrained_generate_and_cached_tokens);
    tcase_add_test(t, generate_text_reads_on_from_the_prompt);
    tcase_add_test(t, abort_by_rid_and_by_disconnect);
    tcase_add_test(t, errors_have_status_and_shape);
    tcase_add_test(t, queue_full_then_engine_down);
    suite_add_tcase(s, t);
    return s;
}

CINFER_TEST_MAIN(suite_http_native)
