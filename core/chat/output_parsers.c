/* Reasoning and tool calls out of a model's streamed output (output_parsers.h). */
#include "chat/output_parsers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int emit(json_t *to, const char *s, size_t n)
{
    if (!to || n == 0)
        return 0;
    json_t *v = json_stringn(s, n);
    if (!v) { /* not UTF-8 (cannot happen: the detokenizer hands out complete characters) */
        char *fixed = malloc(n + 1);
        if (!fixed)
            return -1;
        for (size_t i = 0; i < n; i++)
            fixed[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
        v = json_stringn(fixed, n);
        free(fixed);
    }
    return v && json_array_append_new(to, v) == 0 ? 0 : -1;
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of marker. */
static size_t partial_suffix(const char *s, size_t n, const char *marker)
{
    size_t m = strlen(marker);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, marker, k) == 0)
            return k;
    return 0;
}

static const char *find(const char *s, size_t n, const char *marker)
{
    return memmem(s, n, marker, strlen(marker));
}

static size_t skip_space(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
        i++;
    return i;
}

/* ---- reasoning ------------------------------------------------------------------- */

#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"

void cinfer_reasoning_parser_init(struct cinfer_reasoning_parser *p, enum cinfer_reasoning_format format)
{
    memset(p, 0, sizeof *p);
    p->format = format;
    p->state = format == CINFER_REASONING_NONE ? 2 : 0;
    p->held = malloc(16); /* never NULL once fed: feed fails if this did */
}

void cinfer_reasoning_parser_free(struct cinfer_reasoning_parser *p)
{
    free(p->held);
    memset(p, 0, sizeof *p);
}

static void drop(char **buf, size_t *n, size_t k)
{
    memmove(*buf, *buf + k, *n - k);
    *n -= k;
}

int cinfer_reasoning_parser_feed(struct cinfer_reasoning_parser *p, const char *text, size_t len, int last,
                                 json_t *reasoning, json_t *answer)
{
    if (!p->held)
        return -1;
    if (len) {
        char *g = realloc(p->held, p->n_held + len);
        if (!g)
            return -1;
        p->held = g;
        memcpy(p->held + p->n_held, text, len);
        p->n_held += len;
    }
    for (;;) {
        if (p->skip_ws) {
            size_t k = skip_space(p->held, p->n_held);
            drop(&p->held, &p->n_held, k);
            if (p->n_held == 0 && !last)
                return 0;
            p->skip_ws = 0;
        }
        if (p->state == 0) {
            size_t lead = skip_space(p->held, p->n_held);
            size_t m = strlen(THINK_OPEN), have = p->n_held - lead;
            if (have >= m && memcmp(p->held + lead, THINK_OPEN, m) == 0) {
                drop(&p->held, &p->n_held, lead + m);
                p->state = 1;
                p->skip_ws = 1;
                continue;
            }
            if (!last && memcmp(p->held + lead, THINK_OPEN, have < m ? have : m) == 0)
                return 0; /* could still be <think> */
            /* no <think>: Qwen3 answered without reasoning; R1's template opened it */
            p->state = p->format == CINFER_REASONING_DEEPSEEK_R1 ? 1 : 2;
            continue;
        }
        if (p->state == 1) {
            const char *close = find(p->held, p->n_held, THINK_CLOSE);
            if (close) {
                size_t k = (size_t)(close - p->held);
                if (emit(reasoning, p->held, k))
                    return -1;
                drop(&p->held, &p->n_held, k + strlen(THINK_CLOSE));
                p->state = 2;
                p->skip_ws = 1;
                continue;
            }
            size_t keep = last ? 0 : partial_suffix(p->held, p->n_held, THINK_CLOSE);
            if (emit(reasoning, p->held, p->n_held - keep))
                return -1;
            drop(&p->held, &p->n_held, p->n_held - keep);
            return 0;
        }
        if (emit(answer, p->held, p->n_held))
            return -1;
        p->n_held = 0;
        return 0;
    }
}

/* ---- tool calls ------------------------------------------------------------------ */

enum cinfer_tool_format cinfer_tool_format_of_template(const char *t)
{
    if (!t)
        return CINFER_TOOLS_NONE;
    if (strstr(t, "<tool_call>"))
        return CINFER_TOOLS_HERMES;
    if (strstr(t, "[TOOL_CALLS]"))
        return CINFER_TOOLS_MISTRAL;
    if (strstr(t, "<|python_tag|>") || (strstr(t, "ipython") && strstr(t, "\"parameters\"")))
        return CINFER_TOOLS_LLAMA3;
    return CINFER_TOOLS_NONE;
}

const char *cinfer_tool_format_name(enum cinfer_tool_format f)
{
    switch (f) {
    case CINFER_TOOLS_HERMES: return "hermes";
    case CINFER_TOOLS_LLAMA3: return "llama3";
    case CINFER_TOOLS_MISTRAL: return "mistral";
    case CINFER_TOOLS_NONE: break;
    }
    return "none";
}

void cinfer_tool_parser_init(struct cinfer_tool_parser *p, enum cinfer_tool_format format, int forced,
                             const char *id_prefix)
{
    memset(p, 0, sizeof *p);
    p->format = format;
    p->forced = forced;
    p->at_start = 1;
    p->state = format == CINFER_TOOLS_NONE ? 3 : 0;
    snprintf(p->id_prefix, sizeof p->id_prefix, "%s", id_prefix ? id_prefix : "call_");
    p->buf = malloc(16); /* never NULL once fed: feed fails if this did */
    p->cap_buf = p->buf ? 16 : 0;
}

void cinfer_tool_parser_free(struct cinfer_tool_parser *p)
{
    free(p->buf);
    memset(p, 0, sizeof *p);
}

/* Where the JSON value at s[0] ('{' or '[') ends: its length, 0 when it is not complete
 * yet, -1 when s does not start one. */
static long json_value_end(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (s[0] != '{' && s[0] != '[')
        return -1;
    int depth = 0, in_string = 0, escaped = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_string) {
            if (escaped)
                escaped = 0;
            else if (c == '\\')
                escaped = 1;
            else if (c == '"')
                in_string = 0;
            continue;
        }
        if (c == '"')
            in_string = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0)
                return (long)(i + 1);
            if (depth > 10000)
                return -1;
        }
    }
    return 0;
}

/* A call's first delta: its index, id, type and name. */
static int start_call(struct cinfer_tool_parser *p, const char *name, size_t name_len, json_t *calls)
{
    char id[80];
    snprintf(id, sizeof id, "%s%d", p->id_prefix, p->n_calls);
    json_t *n = json_stringn(name, name_len);
    json_t *d = n ? json_pack("{s:i, s:s, s:s, s:{s:o, s:s}}", "index", p->n_calls, "id", id, "type", "function",
                              "function", "name", n, "arguments", "")
                  : NULL;
    if (!d || (calls && json_array_append_new(calls, d)))
        return -1;
    if (!calls)
        json_decref(d);
    p->n_calls++;
    return 0;
}

static int args_delta(struct cinfer_tool_parser *p, const char *s, size_t n, json_t *calls)
{
    if (n == 0 || !calls)
        return 0;
    json_t *t = json_stringn(s, n);
    json_t *d = t ? json_pack("{s:i, s:{s:o}}", "index", p->n_calls - 1, "function", "arguments", t) : NULL;
    return d && json_array_append_new(calls, d) == 0 ? 0 : -1;
}

json_t *cinfer_tool_calls_merge(const json_t *deltas)
{
    json_t *calls = json_array();
    size_t i;
    const json_t *d;
    json_array_foreach(deltas, i, d) {
        if (!calls)
            return NULL;
        if (json_object_get(d, "id")) {
            json_t *c = json_deep_copy(d);
            if (!c || json_array_append_new(calls, c)) {
                json_decref(calls);
                return NULL;
            }
            continue;
        }
        json_t *c = json_array_get(calls, (size_t)json_integer_value(json_object_get(d, "index")));
        json_t *fn = json_object_get(c, "function");
        const json_t *piece = json_object_get(json_object_get(d, "function"), "arguments");
        if (!fn || !piece)
            continue;
        const json_t *have = json_object_get(fn, "arguments");
        size_t a = json_string_length(have), b = json_string_length(piece);
        char *s = malloc(a + b + 1);
        if (!s) {
            json_decref(calls);
            return NULL;
        }
        memcpy(s, json_string_value(have), a);
        memcpy(s + a, json_string_value(piece), b);
        json_object_set_new(fn, "arguments", json_stringn(s, a + b));
        free(s);
    }
    return calls;
}

/* `{"name": "NAME", "arguments": ` (or "parameters") at s: the length up to where the
 * arguments' value starts, with the name; 0 when s may still become that, -1 when it
 * is something else (then the call is read whole). */
static long call_head(const char *s, size_t n, const char **name, size_t *name_len)
{
    size_t i = skip_space(s, n);
    const char *parts[] = {"{", "\"name\"", ":", "\""};
    for (int k = 0; k < 4; k++) {
        size_t m = strlen(parts[k]);
        if (n - i < m)
            return memcmp(s + i, parts[k], n - i) == 0 ? 0 : -1;
        if (memcmp(s + i, parts[k], m) != 0)
            return -1;
        i += m;
        if (k < 3)
            i += skip_space(s + i, n - i);
    }
    *name = s + i;
    while (i < n && s[i] != '"') {
        if (s[i] == '\\')
            return -1; /* an escaped name: read the call whole */
        i++;
    }
    if (i == n)
        return 0;
    *name_len = (size_t)(s + i - *name);
    i++;
    i += skip_space(s + i, n - i);
    if (i == n)
        return 0;
    if (s[i] != ',')
        return -1;
    i++;
    i += skip_space(s + i, n - i);
    static const char *const keys[] = {"\"arguments\"", "\"parameters\""};
    int matched = -1;
    for (int k = 0; k < 2 && matched < 0; k++) {
        size_t m = strlen(keys[k]), have = n - i < m ? n - i : m;
        if (memcmp(s + i, keys[k], have) == 0) {
            if (have < m)
                return 0;
            matched = k;
            i += m;
        }
    }
    if (matched < 0)
        return -1;
    i += skip_space(s + i, n - i);
    if (i == n)
        return 0;
    if (s[i] != ':')
        return -1;
    i++;
    i += skip_space(s + i, n - i);
    if (i == n)
        return 0; /* the value's first byte decides how it is read */
    if (s[i] != '{' && s[i] != '[')
        return -1; /* a string or scalar: read the call whole */
    return (long)i;
}

/* Scans s[0..n) on from the parser's scan state; returns how many bytes belong to the
 * value (or object) being scanned, and sets *done when it ended there. */
static size_t scan(struct cinfer_tool_parser *p, const char *s, size_t n, int *done)
{
    *done = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (p->in_string) {
            if (p->escaped)
                p->escaped = 0;
            else if (c == '\\')
                p->escaped = 1;
            else if (c == '"')
                p->in_string = 0;
            continue;
        }
        if (c == '"')
            p->in_string = 1;
        else if (c == '{' || c == '[')
            p->depth++;
        else if ((c == '}' || c == ']') && --p->depth == 0) {
            *done = 1;
            return i + 1;
        }
    }
    return n;
}

/* One call object into calls (its two deltas); 0, 1 when obj is not a call, -1 out of
 * memory. */
static int add_call(struct cinfer_tool_parser *p, const json_t *obj, json_t *calls)
{
    const char *name = json_string_value(json_object_get(obj, "name"));
    if (!json_is_object(obj) || !name)
        return 1;
    const json_t *args = json_object_get(obj, "arguments");
    if (!args)
        args = json_object_get(obj, "parameters");
    char *arg_text = !args ? strdup("{}") : json_is_string(args) ? strdup(json_string_value(args))
                                                                 : json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!arg_text)
        return -1;
    int rc = start_call(p, name, strlen(name), calls) || args_delta(p, arg_text, strlen(arg_text), calls) ? -1 : 0;
    free(arg_text);
    return rc;
}

static int buf_append(struct cinfer_tool_parser *p, const char *s, size_t n)
{
    if (p->n_buf + n > p->cap_buf) {
        size_t cap = (p->n_buf + n) * 2 + 64;
        char *g = realloc(p->buf, cap);
        if (!g)
            return -1;
        p->buf = g;
        p->cap_buf = cap;
    }
    memcpy(p->buf + p->n_buf, s, n);
    p->n_buf += n;
    return 0;
}

static int settle_text(struct cinfer_tool_parser *p, json_t *content, size_t k)
{
    if (k && emit(content, p->buf, k))
        return -1;
    if (k)
        p->at_start = 0;
    if (k && content)
        p->text_since_call = 1;
    memmove(p->buf, p->buf + k, p->n_buf - k);
    p->n_buf -= k;
    return 0;
}

static const char *open_marker(enum cinfer_tool_format f)
{
    return f == CINFER_TOOLS_HERMES ? "<tool_call>" : f == CINFER_TOOLS_MISTRAL ? "[TOOL_CALLS]" : "<|python_tag|>";
}

int cinfer_tool_parser_feed(struct cinfer_tool_parser *p, const char *text, size_t len, int last, json_t *content,
                            json_t *calls)
{
    if (!p->buf)
        return -1;
    if (len && buf_append(p, text, len))
        return -1;
    for (;;) {
        if (p->state == 3) { /* plain text from here on */
            return settle_text(p, content, p->n_buf);
        }
        if (p->state == 0) {
            const char *marker = open_marker(p->format);
            size_t lead = skip_space(p->buf, p->n_buf);
            size_t have_m = p->n_buf - lead, m_len = strlen(marker);
            int marker_like = memcmp(p->buf + lead, marker, have_m < m_len ? have_m : m_len) == 0;
            if (p->format == CINFER_TOOLS_MISTRAL && p->at_start && marker_like && have_m < m_len && !last &&
                have_m > 0)
                return 0; /* "[T...": the marker or a bare array, not known yet */
            int bare = p->at_start && lead < p->n_buf &&
                       ((p->format == CINFER_TOOLS_LLAMA3 && p->buf[lead] == '{') ||
                        /* Mistral's [TOOL_CALLS] is a control token: skip_special_tokens
                         * takes it out of the text, leaving the array */
                        (p->format == CINFER_TOOLS_MISTRAL && p->buf[lead] == '[' && !marker_like));
            if (bare) {
                if (settle_text(p, NULL, lead))
                    return -1;
                p->marker_taken = 0;
                p->state = 1;
                continue;
            }
            int between = p->n_calls > 0 && !p->text_since_call; /* only spaces since the last call */
            if (between && lead == p->n_buf) { /* spaces after a call: dropped before the next or the end */
                if (last)
                    return settle_text(p, NULL, lead);
                return 0;
            }
            if (between && !last) { /* spaces then the start of the next marker: wait */
                size_t have = p->n_buf - lead, m = strlen(marker);
                if (have < m && memcmp(p->buf + lead, marker, have) == 0)
                    return 0;
            }
            const char *at = find(p->buf, p->n_buf, marker);
            if (p->format == CINFER_TOOLS_LLAMA3 && at && (size_t)(at - p->buf) != lead)
                at = NULL; /* Llama's calls are the whole output */
            if (at && between && lead && (size_t)(at - p->buf) == lead) { /* spaces between two calls */
                if (settle_text(p, NULL, lead))
                    return -1;
                at = p->buf;
            }
            if (at) {
                size_t k = (size_t)(at - p->buf);
                if (settle_text(p, content, p->format == CINFER_TOOLS_LLAMA3 ? 0 : k))
                    return -1;
                if (p->format == CINFER_TOOLS_LLAMA3)
                    settle_text(p, NULL, k);
                settle_text(p, NULL, strlen(marker));
                p->marker_taken = 1;
                p->state = 1;
                continue;
            }
            if (p->format == CINFER_TOOLS_LLAMA3) {
                /* only at the very start: wait while it can still become a call */
                size_t have = p->n_buf - lead, m = strlen(marker);
                if (p->at_start && !last &&
                    (have == 0 || memcmp(p->buf + lead, marker, have < m ? have : m) == 0))
                    return 0;
                p->state = 3;
                continue;
            }
            size_t keep = last ? 0 : partial_suffix(p->buf, p->n_buf, marker);
            if (!last && p->at_start && p->format == CINFER_TOOLS_MISTRAL && lead == p->n_buf)
                keep = p->n_buf; /* only spaces so far: a bare array may follow */
            return settle_text(p, content, p->n_buf - keep);
        }
        if (p->state == 5 || p->state == 6) {
            /* 5: the arguments value, handed on as it comes; 6: the rest of the call object */
            int done;
            if (p->state == 5 && !p->value_started) {
                p->value_started = 1;
                p->depth = 0;
                p->in_string = p->escaped = 0;
            }
            size_t k = scan(p, p->buf, p->n_buf, &done);
            if (p->state == 5 && args_delta(p, p->buf, k, calls))
                return -1;
            settle_text(p, NULL, k);
            if (done && p->state == 5) {
                p->state = 6;
                p->depth = 1; /* inside the call object: its closing brace ends the call */
                continue;
            }
            if (done || last) {
                p->state = 2;
                continue;
            }
            return 0;
        }
        if (p->state == 1 || p->state == 7) {
            /* a call that opens with its name: start it now and stream the arguments;
             * Mistral's calls are the items of an array, each streamed so too */
            size_t lead = skip_space(p->buf, p->n_buf), open = lead;
            int try_head = 1;
            if (p->format == CINFER_TOOLS_MISTRAL && p->state == 1) {
                if (lead == p->n_buf && !last)
                    return 0;
                try_head = lead < p->n_buf && p->buf[lead] == '[';
                open = lead + 1;
            }
            const char *name = NULL;
            size_t name_len = 0;
            long head = try_head ? call_head(p->buf + open, p->n_buf - open, &name, &name_len) : -1;
            if (head == 0 && !last)
                return 0;
            if (head > 0) {
                if (start_call(p, name, name_len, calls))
                    return -1;
                p->at_start = 0;
                p->text_since_call = 0;
                p->in_array = p->format == CINFER_TOOLS_MISTRAL;
                settle_text(p, NULL, open + (size_t)head);
                p->state = 5;
                p->value_started = 0;
                continue;
            }
        }
        if (p->state == 7) { /* an item of Mistral's array that does not open with its name: read whole */
            size_t lead = skip_space(p->buf, p->n_buf);
            long end = json_value_end(p->buf + lead, p->n_buf - lead);
            if (end == 0 && !last)
                return 0;
            json_t *v = end > 0 ? json_loadb(p->buf + lead, (size_t)end, 0, NULL) : NULL;
            int rc = v ? add_call(p, v, calls) : 1;
            json_decref(v);
            if (rc < 0)
                return -1;
            if (rc > 0) { /* the rest is text */
                p->in_array = 0;
                p->state = 3;
                continue;
            }
            settle_text(p, NULL, lead + (size_t)end);
            p->state = 2;
            continue;
        }
        if (p->state == 1) {
            size_t lead = skip_space(p->buf, p->n_buf);
            long end = json_value_end(p->buf + lead, p->n_buf - lead);
            if (end == 0 && !last)
                return 0;
            json_t *v = end > 0 ? json_loadb(p->buf + lead, (size_t)end, 0, NULL) : NULL;
            int rc = 1;
            if (v && json_is_array(v) && p->format == CINFER_TOOLS_MISTRAL) {
                size_t i;
                json_t *o;
                rc = json_array_size(v) ? 0 : 1;
                json_array_foreach(v, i, o) if (rc == 0) rc = add_call(p, o, calls);
            } else if (v) {
                rc = add_call(p, v, calls);
            }
            json_decref(v);
            if (rc < 0)
                return -1;
            if (rc > 0) { /* not a call after all: its text goes back to the content */
                const char *marker = open_marker(p->format);
                if (p->marker_taken && emit(content, marker, strlen(marker)))
                    return -1;
                p->state = 3;
                continue;
            }
            p->at_start = 0;
            p->text_since_call = 0;
            settle_text(p, NULL, lead + (size_t)end);
            p->state = 2;
            continue;
        }
        /* state 2: after a call */
        size_t lead = skip_space(p->buf, p->n_buf);
        if (p->format == CINFER_TOOLS_HERMES) {
            const char *close = "</tool_call>";
            size_t m = strlen(close), have = p->n_buf - lead;
            if (have >= m && memcmp(p->buf + lead, close, m) == 0) {
                settle_text(p, NULL, lead + m);
                p->state = 0;
                continue;
            }
            if (!last && memcmp(p->buf + lead, close, have < m ? have : m) == 0)
                return 0;
            p->state = 0;
            continue;
        }
        if (p->format == CINFER_TOOLS_MISTRAL && p->in_array) { /* the next item, or the array's end */
            if (lead == p->n_buf && !last)
                return 0;
            if (lead < p->n_buf && p->buf[lead] == ',') {
                settle_text(p, NULL, lead + 1);
                p->state = 7;
                continue;
            }
            p->in_array = 0;
            if (lead < p->n_buf && p->buf[lead] == ']') {
                settle_text(p, NULL, lead + 1);
                continue;
            }
        }
        if (p->format == CINFER_TOOLS_LLAMA3) {
            if (lead < p->n_buf && p->buf[lead] == ';') {
                settle_text(p, NULL, lead + 1);
                p->state = 1;
                continue;
            }
        }
        if (lead == p->n_buf && !last)
            return 0; /* spaces after the calls: dropped if nothing else follows */
        settle_text(p, NULL, lead);
        p->state = 3;
    }
}
