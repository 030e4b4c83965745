/* Reading a chat model's output back into OpenAI's message fields: the reasoning of
 * <think> models apart from the answer (reasoning_content), and tool calls in the
 * formats the supported families' chat templates teach (tool_calls). Both take the
 * text as it streams, in deltas of any size (a marker may be split across deltas), and
 * hand out what is settled: text that could still be the start of a marker is held
 * back until it is known. Model output is outside data: every input is handled, and
 * fuzz/fuzz_output_parsers.c checks it. */
#ifndef CINFER_CHAT_OUTPUT_PARSERS_H
#define CINFER_CHAT_OUTPUT_PARSERS_H

#include <stddef.h>

#include <jansson.h>

/* ---- reasoning ------------------------------------------------------------------- */

enum cinfer_reasoning_format {
    CINFER_REASONING_NONE = 0,
    CINFER_REASONING_QWEN3 = 1,       /* "<think>...</think>" when the output starts with <think> */
    CINFER_REASONING_DEEPSEEK_R1 = 2, /* reasoning until "</think>" (the template opened <think>) */
};

struct cinfer_reasoning_parser {
    enum cinfer_reasoning_format format;
    int state;          /* 0 deciding, 1 reasoning, 2 answer */
    int skip_ws;        /* drop whitespace at the start of the part just begun */
    char *held;         /* text that may be part of a marker */
    size_t n_held;
};

void cinfer_reasoning_parser_init(struct cinfer_reasoning_parser *p, enum cinfer_reasoning_format format);
/* Appends the settled reasoning and answer text of text[0..len) to the two arrays of
 * strings (either may be NULL when that output is not wanted); last: the output is
 * complete, release everything. 0, or -1 out of memory. */
int cinfer_reasoning_parser_feed(struct cinfer_reasoning_parser *p, const char *text, size_t len, int last,
                                 json_t *reasoning, json_t *answer);
void cinfer_reasoning_parser_free(struct cinfer_reasoning_parser *p);

/* ---- tool calls ------------------------------------------------------------------ */

enum cinfer_tool_format {
    CINFER_TOOLS_NONE = 0,
    CINFER_TOOLS_HERMES = 1,  /* <tool_call>{"name", "arguments"}</tool_call> (Qwen 2.5, Qwen3, Hermes) */
    CINFER_TOOLS_LLAMA3 = 2,  /* {"name", "parameters"} as the whole output, ";"-separated, optional <|python_tag|> */
    CINFER_TOOLS_MISTRAL = 3, /* [TOOL_CALLS][{"name", "arguments"}, ...]; the bare array too when it opens
                               * the output (the control token is skipped from the text) */
};
/* The format a chat template teaches, from its text; NONE when it shows none. */
enum cinfer_tool_format cinfer_tool_format_of_template(const char *template_text);
const char *cinfer_tool_format_name(enum cinfer_tool_format f);

struct cinfer_tool_parser {
    enum cinfer_tool_format format;
    int state;          /* 0 text, 1 inside a call, 2 after a call (separator or end), 3 passing text on,
                         * 5 a call's arguments, 6 the rest of its object, 7 the next item of an array */
    int in_array;       /* Mistral: the calls read are items of an array still open */
    int at_start;       /* no text settled yet (llama3 calls must start the output) */
    int forced;         /* the request forced a call */
    int marker_taken;   /* the call being read opened with its marker (given back if it is no call) */
    int text_since_call; /* text was settled after the last call (spaces then are text too) */
    /* streaming a call's arguments as they come: the scan of the arguments value, then
     * of the rest of the call object */
    int depth, in_string, escaped, value_started;
    char *buf;          /* text not yet settled */
    size_t n_buf, cap_buf;
    int n_calls;
    char id_prefix[48]; /* ids are id_prefix + index */
};
void cinfer_tool_parser_init(struct cinfer_tool_parser *p, enum cinfer_tool_format format, int forced,
                             const char *id_prefix);
/* Feeds text[0..len): settled plain text is appended to content (an array of strings)
 * and tool calls to calls as OpenAI streams them: a call's first delta {"index", "id",
 * "type": "function", "function": {"name", "arguments": ""}} as soon as its name is
 * read, then {"index", "function": {"arguments": piece}} deltas whose pieces join to the
 * arguments' JSON text as the model wrote it (cinfer_tool_calls_merge joins them). last:
 * release everything (text of a call that turned out to be none is returned as text).
 * 0, or -1 out of memory. */
int cinfer_tool_parser_feed(struct cinfer_tool_parser *p, const char *text, size_t len, int last, json_t *content,
                            json_t *calls);
void cinfer_tool_parser_free(struct cinfer_tool_parser *p);
/* The deltas of cinfer_tool_parser_feed joined into whole calls ({"index", "id", "type",
 * "function": {"name", "arguments"}}), a new array; NULL out of memory. */
json_t *cinfer_tool_calls_merge(const json_t *deltas);

#endif
