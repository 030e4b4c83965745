/* libFuzzer target for the chat-template renderer: any bytes as a template, compiled
 * and rendered with a fixed chat context under small bounds; an input that starts with
 * '{' is a context instead (the JSON an HTTP request turns into), rendered by a fixed
 * template that walks, prints and serializes it. It must never crash, leak or run
 * away: every input renders or fails with a message naming the place. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "cinfer/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char context[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9\\ud83d\\ude00 {{x}}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>r</think>ok\", \"reasoning_content\": \"r\","
    "  \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"{\\\"r\\\": 1}\"},"
    " {\"role\": \"user\", \"content\": \"\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false, \"bos_token\": \"<s>\","
    " \"eos_token\": \"</s>\", \"date_string\": \"26 Jul 2024\", \"n\": 3, \"f\": -0.5,"
    " \"obj\": {\"2\": \"two\", \"b\": {}, \"1\": []}}";

static const char probe_template[] =
    "{{ messages|tojson }}{{ tools|tojson(indent=2, sort_keys=true) }}{% for m in messages %}"
    "{{ m.role }}{{ m.content }}{{ m.content|length if m.content is string }}"
    "{% for c in m.tool_calls if m.tool_calls is iterable %}{{ c.function.arguments|tojson }}{% endfor %}"
    "{% if m is mapping %}{% for k, v in m|items %}{{ k }}={{ v }};{% endfor %}{% endif %}{% endfor %}"
    "{{ obj|dictsort if obj is mapping }}{{ n + 1 if n is number }}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cinfer_chat_template *t = NULL;
    struct cinfer_error err = {0};
    const char *source = (const char *)data, *ctx = context;
    size_t source_len = size, ctx_len = sizeof(context) - 1;
    if (size > 0 && data[0] == '{') {
        source = probe_template;
        source_len = sizeof(probe_template) - 1;
        ctx = (const char *)data;
        ctx_len = size;
    }
    if (cinfer_chat_template_compile(source, source_len, "fuzz.jinja", &t, &err) != 0) {
        if (t || err.message[0] == 0)
            __builtin_trap(); /* a failure leaves nothing behind and explains itself */
        return 0;
    }
    struct jinja_limits lim;
    cinfer_jinja_default_limits(&lim);
    lim.max_output_bytes = 1u << 20;
    lim.max_memory_bytes = 32u << 20;
    lim.max_steps = 200000;
    lim.max_depth = 120;
    char *out = NULL;
    size_t out_len = 0;
    err.message[0] = 0;
    if (cinfer_jinja_render_with_limits(t, ctx, ctx_len, &lim, &out, &out_len, &err) == 0) {
        if (!out || out_len > lim.max_output_bytes || out[out_len] != 0)
            __builtin_trap();
        free(out);
    } else if (out || err.message[0] == 0) {
        __builtin_trap();
    }
    cinfer_chat_template_free(&t);
    if (t)
        __builtin_trap();
    return 0;
}
