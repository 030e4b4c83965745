/* The OpenAI-compatible API through the official OpenAI client (npm "openai", under
 * node): an engine on models/default and HTTP servers in this process (one open, one
 * wanting an API key, one with a chat template of our own), references computed with
 * the engine's C API (greedy text, ids and logprobs of two prompts; chat prompts as
 * their templates write them, by hand, and their greedy replies), then
 * tests/reference/openai_client/openai_api.mjs asserts what the client returns against
 * them: completions and chat, streaming and not, n > 1, seeds, logprobs in both
 * shapes, stop strings, usage, logit bias, a departing client, and every error as the
 * client raises it (400 naming the field, an empty prompt, 400 for a prompt past the KV
 * cache of a second engine whose cache is smaller than its context, 404, 401, 503 for
 * a full queue and, last, a killed scheduler). And on stories260K (a second engine, with
 * a chat template of our own) and the default model, completion and chat texts read on
 * from the prompt: they equal decode(prompt + output) past decode(prompt), by the
 * tokenizer's decode() of the C API's greedy ids, JSON and streamed, with stop strings.
 * And the Llama 3.x and Mistral tool-call parsers, each behind a server with its
 * family's chat template (Llama 3.2, Mistral v0.3) on an engine with a longer context:
 * the conversation with tools rendered as written out here by hand, and calls parsed
 * into tool_calls (JSON and streamed) from outputs fixed by tool_choice's grammar or,
 * as recorded text of the family's format, by an ebnf. Exits 77 (skip) where node or the package is absent (the fixture
 * test_http_openai_client_setup says why). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cinfer/chat_template.h"
#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/http.h"
#include "cinfer/tokenizer.h"
#include "support/engine_fixture.h"
#include "support/run_command.h"
#include "support/runner.h"
#include "support/text_after_prompt.h"
#include "support/tmp_dir.h"

#define SKIP_EXIT_CODE 77
#define CLIENT_DIR CINFER_BINARY_DIR "/openai-client"
#define MODEL CINFER_SOURCE_DIR "/models/default"
#define MAX_TOKENS 12
#define API_KEY "sk-cinfer-test-key"

static const char *const prompts[] = {"In the beginning", "And the LORD said unto Moses,"};

/* The conversation of the chat checks, and what models/default's chat_template
 * (tokenizer_config.json) makes of it, written out by hand: a system message as its
 * text and a newline, a user turn as "Question: ...\n", then the generation prompt. */
static const char *const chat_system = "Speak as the scriptures.";
static const char *const chat_user = "Who made the heaven and the earth?";
static const char *const chat_rendered =
    "Speak as the scriptures.\nQuestion: Who made the heaven and the earth?\nAnswer:";
/* continue_final_message with an assistant turn "And God" last: the template writes
 * "Answer: And God<|endoftext|>" and the rendering is cut after the message's text */
static const char *const chat_continue = "And God";
static const char *const chat_continued =
    "Speak as the scriptures.\nQuestion: Who made the heaven and the earth?\nAnswer: And God";

/* A template of our own (given with --chat-template) that shows what reaches it:
 * bos_token, the tools' names, every message's role and content, a
 * chat_template_kwargs variable and the generation prompt. */
static const char *const own_template =
    "{{ bos_token }}{% if tools %}{% for t in tools %}{{ 'tool ' + t.function.name + '\n' }}{% endfor %}{% endif %}"
    "{% for m in messages %}{{ m.role + ': ' + m.content + '\n' }}{% endfor %}"
    "{% if enable_thinking %}{{ 'think\n' }}{% else %}{{ 'nothink\n' }}{% endif %}"
    "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}";
/* What it makes of the request in openai_api.mjs ("developer" becomes "system", text
 * parts are joined by a newline), with the tools and without (tool_choice "none"). */
static const char *const own_rendered =
    "<|endoftext|>tool get_weather\nsystem: Be brief.\nuser: Hi\nthere\nthink\nassistant:";
static const char *const own_rendered_no_tools = "<|endoftext|>system: Be brief.\nuser: Hi\nthere\nthink\nassistant:";

static json_t *ids_json(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static char *decode(const struct cinfer_tokenizer_ctx *tok, const int32_t *ids, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    struct cinfer_error err = {0};
    ck_assert_msg(tok->ops->decode(tok->tok, ids, n, 0, &text, &len, &err) == 0, "%s", err.message);
    return text;
}

/* Greedy output of the C API for ids, with logprobs. */
static void greedy(struct cinfer_engine *e, const int32_t *ids, size_t n, struct cinfer_generate_result *out)
{
    struct cinfer_generate_request req = {.input_ids = ids, .n_input_ids = n};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.max_new_tokens = MAX_TOKENS;
    req.sampling.logprobs = 1;
    req.sampling.top_logprobs = 2;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_generate(e, &req, out, &err) == 0, "%s", err.message);
    ck_assert_int_gt((int)out->n_output_ids, 0);
}

static json_t *prompt_reference(struct cinfer_engine *e, const struct cinfer_tokenizer_ctx *tok, const char *text)
{
    struct cinfer_token_ids ids = {0};
    struct cinfer_error err = {0};
    /* a completions text prompt is tokenized as the engine tokenizes one */
    ck_assert_msg(tok->ops->encode(tok->tok, text, strlen(text), 1, &ids, &err) == 0, "%s", err.message);
    struct cinfer_generate_result r;
    greedy(e, ids.ids, ids.len, &r);
    json_t *logprobs = json_array();
    for (size_t i = 0; i < r.n_logprobs; i++)
        json_array_append_new(logprobs, json_real(r.logprobs[i].logprob));
    char *first = decode(tok, r.output_ids, 1);
    json_t *ref = json_pack("{s:s, s:o, s:i, s:s#, s:o, s:o, s:s}", "text", text, "ids", ids_json(ids.ids, ids.len),
                            "promptTokens", (int)ids.len, "greedyText", r.text, (int)r.text_len, "greedyIds",
                            ids_json(r.output_ids, r.n_output_ids), "logprobs", logprobs, "firstTokenText", first);
    ck_assert_ptr_nonnull(ref);
    printf("reference: %s -> %s (%zu tokens)\n", text, r.text, r.n_output_ids);
    free(first);
    cinfer_generate_result_free(&r);
    cinfer_token_ids_free(&ids);
    return ref;
}

/* 1 when the model's template compiles and renders our conversation exactly as
 * written out by hand; 0 while the renderer is not built. */
static int renderer_available(const struct cinfer_tokenizer_ctx *tok)
{
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    ck_assert_ptr_nonnull(info.chat_template);
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_chat_template_compile(info.chat_template, strlen(info.chat_template), "models/default", &t, &err);
    if (rc == CINFER_ERR_UNSUPPORTED) {
        printf("chat: the template renderer is not built (%s): chat is checked for its refusal only\n", err.message);
        return 0;
    }
    ck_assert_msg(rc == 0, "%s", err.message);
    json_t *vars = json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:b, s:s, s:s}", "messages", "role", "system", "content",
                             chat_system, "role", "user", "content", chat_user, "add_generation_prompt", 1,
                             "bos_token", "<|endoftext|>", "eos_token", "<|endoftext|>");
    char *vars_text = json_dumps(vars, JSON_COMPACT);
    char *out = NULL;
    size_t len = 0;
    ck_assert_msg(cinfer_chat_template_render(t, vars_text, strlen(vars_text), &out, &len, &err) == 0, "%s",
                  err.message);
    ck_assert_str_eq(out, chat_rendered);
    free(out);
    free(vars_text);
    json_decref(vars);
    cinfer_chat_template_free(&t);
    return 1;
}

/* Tokenizes a rendered chat prompt as the server must: chat templates write their own
 * special tokens, so nothing is added, and their text becomes their ids. */
static void encode_rendered(const struct cinfer_tokenizer_ctx *tok, const char *text, struct cinfer_token_ids *ids)
{
    struct cinfer_error err = {0};
    ck_assert_msg(tok->ops->encode(tok->tok, text, strlen(text), 0, ids, &err) == 0, "%s", err.message);
}

/* {"promptTokens": n, "greedyText": ..., "greedyIds": [...]} of a rendered prompt */
static json_t *rendered_reference(struct cinfer_engine *e, const struct cinfer_tokenizer_ctx *tok, const char *text)
{
    struct cinfer_token_ids ids = {0};
    encode_rendered(tok, text, &ids);
    struct cinfer_generate_result r;
    greedy(e, ids.ids, ids.len, &r);
    json_t *ref = json_pack("{s:i, s:s#, s:o}", "promptTokens", (int)ids.len, "greedyText", r.text, (int)r.text_len,
                            "greedyIds", ids_json(r.output_ids, r.n_output_ids));
    ck_assert_ptr_nonnull(ref);
    printf("reference: %.40s... -> %s (%zu tokens)\n", text, r.text, r.n_output_ids);
    cinfer_generate_result_free(&r);
    cinfer_token_ids_free(&ids);
    return ref;
}

static json_t *chat_reference(struct cinfer_engine *e, const struct cinfer_tokenizer_ctx *tok)
{
    json_t *ref = rendered_reference(e, tok, chat_rendered);
    json_object_set_new(ref, "renderer", json_boolean(renderer_available(tok)));
    json_object_set_new(ref, "messages",
                        json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", chat_system, "role", "user",
                                  "content", chat_user));
    json_object_set_new(ref, "continueWith", json_string(chat_continue));
    json_object_set_new(ref, "continued", rendered_reference(e, tok, chat_continued));

    /* our own template: bos_token's text becomes the BOS id once, not twice */
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    struct cinfer_token_ids ids = {0};
    encode_rendered(tok, own_rendered, &ids);
    ck_assert_int_ge((int)ids.len, 2);
    ck_assert_int_eq(ids.ids[0], info.bos_id);
    ck_assert_int_ne(ids.ids[1], info.bos_id);
    cinfer_token_ids_free(&ids);
    json_t *own = rendered_reference(e, tok, own_rendered);
    json_t *no_tools = rendered_reference(e, tok, own_rendered_no_tools);
    json_object_set_new(own, "promptTokensNoTools", json_object_get(no_tools, "promptTokens"));
    json_incref(json_object_get(no_tools, "promptTokens"));
    json_decref(no_tools);
    json_object_set_new(ref, "ownTemplate", own);
    return ref;
}

/* ---- the output after its prompt (issue 15) ------------------------------------------- */

/* {"stop", "expected"}: the stop string and the text that must come back with it. */
static json_t *stop_reference(const char *text, const char *stop)
{
    const char *at = strstr(text, stop);
    ck_assert_ptr_nonnull(at);
    return json_pack("{s:s, s:s%}", "stop", stop, "expected", text, (size_t)(at - text));
}

/* {"text", "promptTokens", "expected", "stops"} of prompt text whose ids are
 * encode(text, add_special); expected is decode(prompt + output) past decode(prompt) of
 * the C API's greedy ids, stops the output's first word (with its leading space) and a
 * later one. */
static json_t *boundary_reference(struct cinfer_engine *e, const struct cinfer_tokenizer_ctx *tok, const char *key,
                                  const char *text, const char *rendered, int add_special)
{
    struct cinfer_token_ids ids = {0};
    struct cinfer_error err = {0};
    ck_assert_msg(tok->ops->encode(tok->tok, rendered, strlen(rendered), add_special, &ids, &err) == 0, "%s",
                  err.message);
    struct cinfer_generate_result r;
    greedy(e, ids.ids, ids.len, &r);
    char *want = cinfer_test_text_after_prompt(tok, ids.ids, ids.len, r.output_ids, r.n_output_ids, 1);
    json_t *stops = json_array();
    char stop[32];
    size_t n = strcspn(want + 1, " ,.") + 1;
    if (n < sizeof stop && want[0]) {
        memcpy(stop, want, n);
        stop[n] = '\0';
        json_array_append_new(stops, stop_reference(want, stop));
        const char *later = strchr(want + n, ' ');
        if (later && strlen(later) > 4) {
            memcpy(stop, later, 4);
            stop[4] = '\0';
            json_array_append_new(stops, stop_reference(want, stop));
        }
    }
    json_t *ref = json_pack("{s:s, s:i, s:s, s:o}", key, text, "promptTokens", (int)ids.len, "expected", want,
                            "stops", stops);
    ck_assert_ptr_nonnull(ref);
    printf("boundary reference: \"%s\" -> \"%s\"\n", rendered, want);
    free(want);
    cinfer_generate_result_free(&r);
    cinfer_token_ids_free(&ids);
    return ref;
}

/* The boundary checks of one model for openai_api.mjs: completions of its prompts and,
 * with a renderer, chat replies to them as the user's message, rendered here by hand:
 * stories260K's template of our own writes bos_token and the contents, the default
 * model's "Question: ...\nAnswer:". */
static json_t *boundary_model_reference(struct cinfer_engine *e, const struct cinfer_test_boundary_model *m,
                                        const char *base_url, const char *model_name, int renderer)
{
    const struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(e);
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    json_t *completions = json_array(), *chat = json_array();
    for (int p = 0; p < CINFER_TEST_BOUNDARY_PROMPTS; p++) {
        json_array_append_new(completions, boundary_reference(e, tok, "text", m->prompts[p], m->prompts[p], 1));
        if (!renderer)
            continue;
        char rendered[256];
        if (m->chat_template)
            snprintf(rendered, sizeof rendered, "%s%s", tok->ops->id_to_piece(tok->tok, info.bos_id), m->prompts[p]);
        else
            snprintf(rendered, sizeof rendered, "Question: %s\nAnswer:", m->prompts[p]);
        json_array_append_new(chat, boundary_reference(e, tok, "content", m->prompts[p], rendered, 0));
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", m->name, "baseURL", base_url, "model", model_name,
                     "prompts", completions, "chat", chat);
}

static struct cinfer_http_server *start_server_with(struct cinfer_engine *e, const char *api_key,
                                                    const char *chat_template, int tool_call_parser,
                                                    int reasoning_parser)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, MODEL);
    free(args.host);
    args.host = strdup("127.0.0.1");
    args.port = 0;
    if (api_key)
        args.api_key = strdup(api_key);
    if (chat_template)
        args.chat_template = strdup(chat_template);
    args.tool_call_parser = tool_call_parser;
    args.reasoning_parser = reasoning_parser;
    struct cinfer_http_server *srv = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_http_server_start(e, &args, &srv, &err) == 0, "server start: %s", err.message);
    cinfer_server_args_free(&args);
    return srv;
}

static struct cinfer_http_server *start_server(struct cinfer_engine *e, const char *api_key, const char *chat_template)
{
    /* tool calls read in Qwen's format and <think> reasoning split off: outputs fixed
     * by constraints show both (the small model's template teaches neither) */
    return start_server_with(e, api_key, chat_template, CINFER_TOOL_PARSER_QWEN25, CINFER_REASONING_PARSER_QWEN3);
}

/* ---- tool-call parsers (issue 21) ----------------------------------------------------- */

/* The tools and the conversation of the tool checks in openai_api.mjs. */
static const char *const tools_text =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 16}, "
    "\"unit\": {\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\", \"unit\"], "
    "\"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": \"a + b\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": "
    "\"integer\"}}, \"required\": [\"a\", \"b\"], \"additionalProperties\": false}}}]";
static const char *const tool_user = "What is the weather in Paris?";
/* Llama 3.2's template writes today's date unless given one */
static const char *const tool_date = "26 Jul 2024";

/* What Llama 3.2's template makes of the conversation, written out by hand: the tools
 * go in the first user message, each as JSON indented by 4 (jansson writes them). */
static char *llama3_rendered(const char *bos, const json_t *tools)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s<|start_header_id|>system<|end_header_id|>\n\n%sCutting Knowledge Date: December 2023\n"
               "Today Date: %s\n\n<|eot_id|>", bos, tools ? "Environment: ipython\n" : "", tool_date);
    if (tools) {
        fputs("<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON "
              "for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the "
              "format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not "
              "use variables.\n\n", f);
        size_t i;
        const json_t *t;
        json_array_foreach(tools, i, t) {
            char *text = json_dumps(t, JSON_INDENT(4));
            fprintf(f, "%s\n\n", text);
            free(text);
        }
        fprintf(f, "%s<|eot_id|>", tool_user);
    } else {
        fprintf(f, "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>", tool_user);
    }
    fputs("<|start_header_id|>assistant<|end_header_id|>\n\n", f);
    fclose(f);
    return out;
}

/* What Mistral v0.3's template makes of it: [AVAILABLE_TOOLS] [...] before the last user
 * message, each tool's function as {"type": "function", "function": {...}} on one line. */
static char *mistral_rendered(const char *bos, const json_t *tools)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert_ptr_nonnull(f);
    fputs(bos, f);
    if (tools) {
        fputs("[AVAILABLE_TOOLS] [", f);
        size_t i;
        const json_t *t;
        json_array_foreach(tools, i, t) {
            char *fn = json_dumps(json_object_get(t, "function"), 0); /* ", " and ": " between items */
            fprintf(f, "%s{\"type\": \"function\", \"function\": %s}", i ? ", " : "", fn);
            free(fn);
        }
        fputs("][/AVAILABLE_TOOLS]", f);
    }
    fprintf(f, "[INST] %s[/INST]", tool_user);
    fclose(f);
    return out;
}

/* The token count of a rendering, after checking that the template file renders the
 * same with cinfer's renderer (as the server will). */
static int rendered_tokens(const struct cinfer_tokenizer_ctx *tok, const char *template_path, const char *bos,
                           const char *eos, const json_t *tools, const char *want)
{
    FILE *f = fopen(template_path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", template_path);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_chat_template_compile(text, len, template_path, &t, &err) == 0, "%s", err.message);
    json_t *vars = json_pack("{s:[{s:s, s:s}], s:b, s:s, s:s, s:s}", "messages", "role", "user", "content", tool_user,
                             "add_generation_prompt", 1, "bos_token", bos, "eos_token", eos, "date_string", tool_date);
    if (tools)
        json_object_set(vars, "tools", (json_t *)tools);
    char *vars_text = json_dumps(vars, JSON_COMPACT);
    char *out = NULL;
    size_t out_len = 0;
    ck_assert_msg(cinfer_chat_template_render(t, vars_text, strlen(vars_text), &out, &out_len, &err) == 0, "%s: %s",
                  template_path, err.message);
    ck_assert_msg(strcmp(out, want) == 0, "%s renders\n%s\nnot, as written by hand,\n%s", template_path, out, want);
    struct cinfer_token_ids ids = {0};
    encode_rendered(tok, want, &ids);
    int n = (int)ids.len;
    cinfer_token_ids_free(&ids);
    free(out);
    free(vars_text);
    json_decref(vars);
    cinfer_chat_template_free(&t);
    return n;
}

/* A server on e with a family's chat template and its tool-call parser, and what
 * openai_api.mjs needs to check it: {name, baseURL, model, argumentsKey, promptTokens,
 * promptTokensNoTools}. */
static json_t *tool_parser_reference(struct cinfer_engine *e, const char *name, const char *template_file,
                                     int parser, char *(*render)(const char *, const json_t *),
                                     const json_t *tools, struct cinfer_http_server **srv)
{
    const struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(e);
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    char bos[64], eos[64];
    snprintf(bos, sizeof bos, "%s", tok->ops->id_to_piece(tok->tok, info.bos_id));
    snprintf(eos, sizeof eos, "%s", tok->ops->id_to_piece(tok->tok, info.eos_id));
    char path[512];
    snprintf(path, sizeof path, "%s/chat_templates/%s", CINFER_TEST_DATA_DIR, template_file);
    char *with = render(bos, tools), *without = render(bos, NULL);
    int n_with = rendered_tokens(tok, path, bos, eos, tools, with);
    int n_without = rendered_tokens(tok, path, bos, eos, NULL, without);
    free(with);
    free(without);
    *srv = start_server_with(e, NULL, path, parser, CINFER_REASONING_PARSER_NONE);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", cinfer_http_server_port(*srv));
    printf("%s: %s renders %d prompt tokens with the tools, %d without\n", name, template_file, n_with, n_without);
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i}", "name", name, "baseURL", url, "model",
                     cinfer_http_server_model_name(*srv), "argumentsKey",
                     parser == CINFER_TOOL_PARSER_LLAMA3 ? "parameters" : "arguments", "promptTokens", n_with,
                     "promptTokensNoTools", n_without);
}

START_TEST(official_client_sees_the_engine_answers)
{
    struct cinfer_server_args args;
    cinfer_test_engine_args(&args, MODEL);
    args.kv_cache_bytes = 16ll << 20;
    /* a small queue, so that n = 128 choices overflow it (503) */
    args.max_running_requests = 16;
    args.max_queued_requests = 16;
    struct cinfer_engine *e = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_create(&args, NULL, &e, &err) == 0, "engine: %s", err.message);
    cinfer_server_args_free(&args);
    const struct cinfer_tokenizer_ctx *tok = cinfer_engine_tokenizer(e);
    ck_assert_ptr_nonnull(tok);
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    struct cinfer_server_info server_info;
    ck_assert_msg(cinfer_engine_server_info(e, &server_info, &err) == 0, "%s", err.message);
    /* a second engine whose KV cache (128 tokens of models/default) is smaller than
     * its context (256) */
    cinfer_test_engine_args(&args, MODEL);
    args.kv_cache_bytes = 256 << 10;
    args.kv_cache_dtype = CINFER_KV_CACHE_DTYPE_F32; /* the budget in f32 tokens */
    struct cinfer_engine *small_kv = NULL;
    ck_assert_msg(cinfer_engine_create(&args, NULL, &small_kv, &err) == 0, "small-KV engine: %s", err.message);
    cinfer_server_args_free(&args);
    struct cinfer_server_info small_info;
    ck_assert_msg(cinfer_engine_server_info(small_kv, &small_info, &err) == 0, "%s", err.message);
    ck_assert_int_lt(small_info.max_total_tokens + 4, small_info.max_request_len);

    json_t *refs = json_array();
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++)
        json_array_append_new(refs, prompt_reference(e, tok, prompts[i]));
    json_t *chat = chat_reference(e, tok);
    int renderer = json_is_true(json_object_get(chat, "renderer"));

    cinfer_test_make_tmp_dir("http-openai");
    char template_path[512];
    snprintf(template_path, sizeof template_path, "%s", cinfer_test_tmp_path("own.jinja"));
    FILE *tf = fopen(template_path, "w");
    ck_assert_ptr_nonnull(tf);
    fputs(own_template, tf);
    fclose(tf);

    struct cinfer_http_server *open_srv = start_server(e, NULL, NULL);
    struct cinfer_http_server *keyed_srv = start_server(e, API_KEY, NULL);
    struct cinfer_http_server *own_srv = renderer ? start_server(e, NULL, template_path) : NULL;
    struct cinfer_http_server *small_srv = start_server(small_kv, NULL, NULL);
    char base[64], keyed[64], own[64] = "";
    snprintf(base, sizeof base, "http://127.0.0.1:%d/v1", cinfer_http_server_port(open_srv));
    snprintf(keyed, sizeof keyed, "http://127.0.0.1:%d/v1", cinfer_http_server_port(keyed_srv));
    if (own_srv)
        snprintf(own, sizeof own, "http://127.0.0.1:%d/v1", cinfer_http_server_port(own_srv));
    json_object_set_new(json_object_get(chat, "ownTemplate"), "baseURL", json_string(own));

    /* The boundary models: the default one is this engine (served by open_srv);
     * stories260K gets an engine and a server of its own, with a chat template. */
    struct cinfer_test_boundary_model models[2];
    int n_models = cinfer_test_boundary_models(models);
    struct cinfer_engine *other = NULL;
    struct cinfer_http_server *other_srv = NULL;
    json_t *boundary = json_array();
    for (int m = 0; m < n_models; m++) {
        if (!models[m].chat_template) {
            json_array_append_new(boundary, boundary_model_reference(e, &models[m], base,
                                                                     cinfer_http_server_model_name(open_srv), renderer));
            continue;
        }
        struct cinfer_server_args margs;
        cinfer_test_engine_args(&margs, models[m].path);
        ck_assert_msg(cinfer_engine_create(&margs, NULL, &other, &err) == 0, "engine on %s: %s", models[m].path,
                      err.message);
        cinfer_server_args_free(&margs);
        char path[512];
        snprintf(path, sizeof path, "%s", cinfer_test_tmp_path("boundary.jinja"));
        FILE *bf = fopen(path, "w");
        ck_assert_ptr_nonnull(bf);
        fputs(models[m].chat_template, bf);
        fclose(bf);
        struct cinfer_server_args sargs;
        cinfer_test_engine_args(&sargs, models[m].path);
        free(sargs.host);
        sargs.host = strdup("127.0.0.1");
        sargs.port = 0;
        sargs.chat_template = strdup(path);
        ck_assert_msg(cinfer_http_server_start(other, &sargs, &other_srv, &err) == 0, "server start: %s", err.message);
        cinfer_server_args_free(&sargs);
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", cinfer_http_server_port(other_srv));
        json_array_append_new(boundary, boundary_model_reference(other, &models[m], url,
                                                                 cinfer_http_server_model_name(other_srv), renderer));
    }

    /* The Llama 3.x and Mistral tool-call parsers, each behind a server with its
     * family's chat template, on an engine whose context holds their long tool prompts
     * (the constraints, not the model, fix the calls) */
    json_error_t tools_err;
    json_t *tools = json_loads(tools_text, 0, &tools_err);
    ck_assert_msg(tools != NULL, "tools_text: %s", tools_err.text);
    struct cinfer_engine *tool_engine = NULL;
    struct cinfer_http_server *llama3_srv = NULL, *mistral_srv = NULL;
    json_t *tool_parsers = json_array();
    if (renderer) {
        cinfer_test_engine_args(&args, MODEL);
        args.context_length = 2048;
        ck_assert_msg(cinfer_engine_create(&args, NULL, &tool_engine, &err) == 0, "tool engine: %s", err.message);
        cinfer_server_args_free(&args);
        json_array_append_new(tool_parsers, tool_parser_reference(tool_engine, "llama3", "llama3_2.jinja",
                                                                  CINFER_TOOL_PARSER_LLAMA3, llama3_rendered, tools,
                                                                  &llama3_srv));
        json_array_append_new(tool_parsers, tool_parser_reference(tool_engine, "mistral", "mistral_v0_3.jinja",
                                                                  CINFER_TOOL_PARSER_MISTRAL, mistral_rendered, tools,
                                                                  &mistral_srv));
    }
    int n_tool_parsers = (int)json_array_size(tool_parsers);

    char small_base[64];
    snprintf(small_base, sizeof small_base, "http://127.0.0.1:%d/v1", cinfer_http_server_port(small_srv));
    json_t *cfg = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:o, s:{s:s, s:I}, s:o}", "baseURL", base,
                            "keyedBaseURL", keyed, "apiKey", API_KEY, "model", cinfer_http_server_model_name(open_srv),
                            "maxModelLen", server_info.max_request_len, "maxTokens", MAX_TOKENS, "vocabSize",
                            (int)info.vocab_size, "prompts", refs, "chat", chat, "smallKv", "baseURL", small_base,
                            "kvTokens", (json_int_t)small_info.max_total_tokens, "boundary", boundary);
    ck_assert_ptr_nonnull(cfg);
    json_object_set_new(cfg, "tools", tools);
    json_object_set_new(cfg, "toolMessages", json_pack("[{s:s, s:s}]", "role", "user", "content", tool_user));
    json_object_set_new(cfg, "toolDate", json_string(tool_date));
    json_object_set_new(cfg, "toolParsers", tool_parsers);
    const char *cfg_path = cinfer_test_tmp_path("config.json");
    ck_assert_int_eq(json_dump_file(cfg, cfg_path, JSON_INDENT(1)), 0);
    json_decref(cfg);

    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd %s && CINFER_OPENAI_CONFIG=%s node openai_api.mjs", CLIENT_DIR, cfg_path);
    static char out[1 << 18];
    int rc = cinfer_test_run(cmd, out, sizeof out);
    fputs(out, stdout);

    cinfer_http_server_stop(&mistral_srv);
    cinfer_http_server_stop(&llama3_srv);
    cinfer_engine_shutdown(&tool_engine, 1000);
    cinfer_http_server_stop(&small_srv);
    cinfer_engine_shutdown(&small_kv, 1000);
    cinfer_http_server_stop(&other_srv);
    cinfer_engine_shutdown(&other, 1000);
    cinfer_http_server_stop(&own_srv);
    cinfer_http_server_stop(&keyed_srv);
    cinfer_http_server_stop(&open_srv);
    ck_assert_ptr_null(open_srv);
    cinfer_engine_shutdown(&e, 1000);
    cinfer_test_remove_tmp_dir();

    /* the summary is the last line */
    size_t len = strlen(out);
    while (len && out[len - 1] == '\n')
        out[--len] = '\0';
    const char *last = strrchr(out, '\n');
    json_error_t jerr;
    json_t *summary = json_loads(last ? last + 1 : out, 0, &jerr);
    ck_assert_msg(summary, "the script ended without its summary (exit %d): %s", rc, jerr.text);
    int passed = (int)json_integer_value(json_object_get(summary, "passed"));
    size_t failed = json_array_size(json_object_get(summary, "failed"));
    /* 11 of them structured output, tools, reasoning and cached tokens; 4 per tool-call
     * parser past Qwen's */
    int expected = (renderer ? 33 : 26) + 11 + n_models * (renderer ? 2 : 1) + 4 * n_tool_parsers;
    printf("openai client: %d checks passed, %zu failed (expected %d)\n", passed, failed, expected);
    json_decref(summary);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq((int)failed, 0);
    ck_assert_int_eq(passed, expected);
}
END_TEST

static Suite *suite_http_openai(void)
{
    Suite *s = suite_create("http_openai");
    TCase *tc = tcase_create("official_client");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, official_client_sees_the_engine_answers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* check's forked child leaves without flushing */
    FILE *f = fopen(CLIENT_DIR "/SKIP", "r");
    if (f || access(CLIENT_DIR "/openai_api.mjs", R_OK) != 0) {
        char why[512] = "the fixture test_http_openai_client_setup has not run";
        if (f) {
            if (!fgets(why, sizeof why, f))
                snprintf(why, sizeof why, "%s/SKIP is empty", CLIENT_DIR);
            fclose(f);
        }
        printf("test_http_openai: SKIP: %s\n", why);
        return SKIP_EXIT_CODE;
    }
    return cinfer_test_run_suite(suite_http_openai());
}
