/* fuzz_output_parsers: the reasoning and tool-call parsers (core/chat/output_parsers.c)
 * on arbitrary model output. The first byte picks the formats (tool format, reasoning
 * format, forced) and a split seed; the text is fed whole and again in pieces cut by
 * the seed, and both runs must give the same reasoning, content and calls (a stream may
 * cut anywhere). No input may crash, leak or read out of bounds, and nothing may be
 * lost: without a tool format the content and reasoning together hold every byte
 * that is not whitespace around the think markers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_parsers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *join(const json_t *a)
{
    size_t n = 0, i;
    const json_t *p;
    json_array_foreach(a, i, p) n += json_string_length(p);
    char *s = calloc(n + 1, 1);
    size_t at = 0;
    json_array_foreach(a, i, p) {
        memcpy(s + at, json_string_value(p), json_string_length(p));
        at += json_string_length(p);
    }
    return s;
}

static void run(uint8_t mode, const char *text, size_t len, uint32_t seed, char **r, char **c, char **calls)
{
    struct cinfer_reasoning_parser rp;
    struct cinfer_tool_parser tp;
    cinfer_reasoning_parser_init(&rp, (enum cinfer_reasoning_format)(mode % 3));
    cinfer_tool_parser_init(&tp, (enum cinfer_tool_format)((mode / 3) % 4), (mode / 12) & 1, "call_");
    json_t *rs = json_array(), *cs = json_array(), *cl = json_array();
    size_t from = 0;
    while (from <= len) {
        size_t step = seed ? 1 + (seed % 7) : len - from;
        seed = seed * 1103515245u + 12345u;
        size_t to = from + step > len ? len : from + step;
        int last = to == len;
        json_t *answer = json_array();
        if (cinfer_reasoning_parser_feed(&rp, text + from, to - from, last, rs, answer))
            abort();
        size_t n = json_array_size(answer);
        for (size_t i = 0; i < n; i++)
            if (cinfer_tool_parser_feed(&tp, json_string_value(json_array_get(answer, i)),
                                        json_string_length(json_array_get(answer, i)), last && i + 1 == n, cs, cl))
                abort();
        if (last && n == 0 && cinfer_tool_parser_feed(&tp, "", 0, 1, cs, cl))
            abort();
        json_decref(answer);
        if (last)
            break;
        from = to;
    }
    *r = join(rs);
    *c = join(cs);
    json_t *merged = cinfer_tool_calls_merge(cl); /* the deltas differ with the cuts; the calls may not */
    *calls = merged ? json_dumps(merged, JSON_COMPACT) : strdup("null");
    json_decref(merged);
    json_decref(rs);
    json_decref(cs);
    json_decref(cl);
    cinfer_reasoning_parser_free(&rp);
    cinfer_tool_parser_free(&tp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 8192)
        return 0;
    uint8_t mode = data[0];
    uint32_t seed = data[1] | 1u;
    /* the parsers take the detokenizer's text: valid UTF-8; make it so */
    size_t len = size - 2;
    char *text = malloc(len + 1);
    if (!text)
        return 0;
    for (size_t i = 0; i < len; i++)
        text[i] = (char)(data[2 + i] & 0x7F ? data[2 + i] & 0x7F : ' ');
    text[len] = '\0';
    char *r1, *c1, *k1, *r2, *c2, *k2;
    run(mode, text, len, 0, &r1, &c1, &k1);
    run(mode, text, len, seed, &r2, &c2, &k2);
    if (strcmp(r1, r2) || strcmp(c1, c2) || strcmp(k1, k2))
        abort(); /* the result depends on where the deltas fell */
    free(r1), free(c1), free(k1), free(r2), free(c2), free(k2);
    free(text);
    return 0;
}
