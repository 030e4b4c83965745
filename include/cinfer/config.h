/* cinfer/config.h — the server arguments: every setting of an engine, read from a
 * libconfig file and overridden by command-line flags.
 *
 * One table of options (core/config/options.c) drives the file reader, the flag
 * parser, the defaults, --help, `cinfer config` and docs/configuration.md, so a
 * setting is declared once. Each option has a key "section.name" in the file and a
 * flag "--name-with-dashes" on the command line (SGLang's flag names where SGLang has
 * one); a flag wins over the file, the file over the default.
 *
 * Typical use in a command:
 *
 *     struct cinfer_server_args args;
 *     char **rest = calloc(argc, sizeof *rest);   // what is not a server flag
 *     int n_rest;
 *     static const struct cinfer_command_flag mine[] = {{"--max-new-tokens", 1}, {NULL, 0}};
 *     if (cinfer_server_args_parse_command_line(&args, argc, argv, mine, rest, &n_rest, &err))
 *         ... print err.message, exit 1 ...
 *     ... rest holds the prompt and --max-new-tokens N, in their order ...
 *     cinfer_server_args_free(&args);
 */
#ifndef CINFER_CONFIG_H
#define CINFER_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A list of strings (hosts). items is NULL-terminated, so it can be passed where a
 * `const char *const *` list is expected; NULL when the list is empty. */
struct cinfer_string_list {
    char **items;
    int count;
};

enum cinfer_weight_dtype {
    CINFER_WEIGHT_DTYPE_AUTO = 0, /* compute in the checkpoint's own type */
    CINFER_WEIGHT_DTYPE_F32 = 1,
    CINFER_WEIGHT_DTYPE_F16 = 2,
    CINFER_WEIGHT_DTYPE_BF16 = 3,
};

/* scheduler.kv_cache_dtype (--kv-cache-dtype, SGLang's flag): the KV cache's element type. */
enum cinfer_kv_cache_dtype {
    CINFER_KV_CACHE_DTYPE_AUTO = 0, /* 16-bit: f16, as llama.cpp */
    CINFER_KV_CACHE_DTYPE_F32 = 1,
    CINFER_KV_CACHE_DTYPE_BF16 = 2,
    CINFER_KV_CACHE_DTYPE_F16 = 3,
    CINFER_KV_CACHE_DTYPE_Q8_0 = 4, /* blocks of 32 per head: 34 bytes (head_dim a multiple of 32) */
};

enum cinfer_schedule_policy {
    CINFER_SCHEDULE_FCFS = 0, /* first come, first served */
    CINFER_SCHEDULE_LPM = 1,  /* longest prefix match in the radix cache first */
};

/* How tool calls are read out of chat output (--tool-call-parser, SGLang's names). */
enum cinfer_tool_call_parser {
    CINFER_TOOL_PARSER_AUTO = 0,    /* from the model's chat template */
    CINFER_TOOL_PARSER_NONE = 1,    /* tool calls stay text */
    CINFER_TOOL_PARSER_QWEN25 = 2,  /* <tool_call>{...}</tool_call>: Qwen 2.5, Qwen3, Hermes */
    CINFER_TOOL_PARSER_LLAMA3 = 3,  /* {"name", "parameters"}: Llama 3.1 / 3.2 */
    CINFER_TOOL_PARSER_MISTRAL = 4, /* [TOOL_CALLS][...]: Mistral */
};

/* How reasoning is split from the answer (--reasoning-parser, SGLang's names). */
enum cinfer_reasoning_parser_kind {
    CINFER_REASONING_PARSER_NONE = 0,
    CINFER_REASONING_PARSER_QWEN3 = 1,       /* <think>...</think> when the output opens with it */
    CINFER_REASONING_PARSER_DEEPSEEK_R1 = 2, /* everything up to </think> (the template opened it) */
};

enum cinfer_restart_policy {
    CINFER_RESTART_OFF = 0,        /* a dead worker stops the engine */
    CINFER_RESTART_ON_FAILURE = 1, /* a dead worker is started again */
};

enum cinfer_log_level {
    CINFER_LOG_ERROR = 0,
    CINFER_LOG_WARNING = 1,
    CINFER_LOG_INFO = 2,
    CINFER_LOG_DEBUG = 3,
};

/* Where an option's value came from (for `cinfer config` and cross-checks). */
enum cinfer_option_origin {
    CINFER_ORIGIN_DEFAULT = 0,
    CINFER_ORIGIN_FILE = 1,
    CINFER_ORIGIN_FLAG = 2,
};

#define CINFER_SERVER_ARGS_MAX_OPTIONS 64

/* Every setting. Strings are owned (malloc'd) and NULL when unset; free with
 * cinfer_server_args_free. The comments name the file key and the flag. */
struct cinfer_server_args {
    /* model */
    char *model_path;                  /* model.path, --model-path (--model) */
    int context_length;                /* model.context_length, --context-length; 0: the model's */
    enum cinfer_weight_dtype dtype;    /* model.dtype, --dtype */
    int no_repack;                     /* model.no_repack, --no-repack (0 or 1) */

    /* tokenizer */
    char *tokenizer;                   /* tokenizer.plugin, --tokenizer */
    char *tokenizer_path;              /* tokenizer.path, --tokenizer-path; NULL: model_path */
    char *chat_template;               /* tokenizer.chat_template, --chat-template; NULL: the model's */

    /* launcher */
    char *launcher;                    /* launcher.plugin, --launcher: fork|mpi|ssh|auto|a file */
    struct cinfer_string_list hosts;   /* launcher.hosts, --hosts */
    char *plugin_path;                 /* launcher.plugin_path, --plugin-path */
    int tp_size;                       /* launcher.tp_size, --tp-size */
    int dp_size;                       /* launcher.dp_size, --dp-size */
    char *bind_address;                /* launcher.bind_address, --bind-address; NULL: found */
    int port_base;                     /* launcher.port_base, --port-base; 0: picked */
    char *ssh_args;                    /* launcher.ssh_args, --ssh-args */
    int connect_timeout_ms;            /* launcher.connect_timeout, --connect-timeout */
    struct cinfer_string_list remote_workers; /* launcher.remote_worker, --remote-worker */

    /* scheduler */
    int max_running_requests;          /* scheduler.max_running_requests */
    int max_queued_requests;           /* scheduler.max_queued_requests */
    int max_prefill_tokens;            /* scheduler.max_prefill_tokens */
    int chunked_prefill_size;          /* scheduler.chunked_prefill_size; 0: no chunking */
    int64_t max_total_tokens;          /* scheduler.max_total_tokens; 0: from the KV budget */
    int64_t kv_cache_bytes;            /* scheduler.kv_cache_bytes; 0: mem_fraction_static */
    enum cinfer_kv_cache_dtype kv_cache_dtype; /* scheduler.kv_cache_dtype, --kv-cache-dtype */
    double mem_fraction_static;        /* scheduler.mem_fraction_static */
    int page_size;                     /* scheduler.page_size, tokens per KV page */
    enum cinfer_schedule_policy schedule_policy; /* scheduler.schedule_policy */
    int disable_radix_cache;           /* scheduler.disable_radix_cache (0 or 1) */

    /* server */
    char *host;                        /* server.host, --host */
    int port;                          /* server.port, --port */
    char *api_key;                     /* server.api_key, --api-key; NULL: no key */
    int64_t max_request_body_bytes;    /* server.max_request_body_bytes */
    char *served_model_name;           /* server.served_model_name, --served-model-name; NULL: the model's base name */
    char *ssl_certfile;                /* server.ssl_certfile, --ssl-certfile; NULL: plain HTTP */
    char *ssl_keyfile;                 /* server.ssl_keyfile, --ssl-keyfile */
    int max_connections;               /* server.max_connections, --max-connections */
    int tool_call_parser;              /* server.tool_call_parser, --tool-call-parser (enum cinfer_tool_call_parser) */
    int reasoning_parser;              /* server.reasoning_parser, --reasoning-parser (enum cinfer_reasoning_parser_kind) */

    /* engine */
    char *device;                      /* engine.device, --device: cpu|cuda|auto|a backend plugin */
    int num_threads;                   /* engine.num_threads; 0: one per core */
    int64_t random_seed;               /* engine.random_seed; -1: chosen at start */
    int start_timeout_ms;              /* engine.start_timeout, --start-timeout */
    int watchdog_timeout_ms;           /* engine.watchdog_timeout, --watchdog-timeout */
    int drain_timeout_ms;              /* engine.drain_timeout, --drain-timeout */
    enum cinfer_restart_policy restart_policy; /* engine.restart_policy */

    /* log */
    enum cinfer_log_level log_level;   /* log.level, --log-level */

    /* Appended since (fields are only appended now) */
    int disable_hybrid_swa_memory;     /* scheduler.disable_hybrid_swa_memory (0 or 1) */
    int ep_size;                       /* launcher.ep_size, --ep-size: 1, or tp_size (whole experts per rank) */

    /* Bookkeeping: the origin of each option, in table order. */
    unsigned char origin[CINFER_SERVER_ARGS_MAX_OPTIONS];
};

/* Fills every field with its default. Only fails for lack of memory. */
CINFER_API int cinfer_server_args_init(struct cinfer_server_args *args, struct cinfer_error *err);
/* Frees the strings and lists; the struct may be initialized again afterwards. */
CINFER_API void cinfer_server_args_free(struct cinfer_server_args *args);
/* Makes dst an independent copy of src (dst is not freed first). */
CINFER_API int cinfer_server_args_copy(struct cinfer_server_args *dst, const struct cinfer_server_args *src,
                                       struct cinfer_error *err);

/* Reads a libconfig file over args: the keys it sets replace the current values, the
 * others stay. "@include" names a file relative to this one. Errors name the file, the
 * line and the key (CINFER_ERR_CONFIG; CINFER_ERR_IO when the file cannot be read); on
 * error args is left as it was. */
CINFER_API int cinfer_server_args_load_file(struct cinfer_server_args *args, const char *path,
                                            struct cinfer_error *err);
/* The same from text in memory; name stands for the file in messages. Text may not
 * @include files. */
CINFER_API int cinfer_server_args_load_string(struct cinfer_server_args *args, const char *text, const char *name,
                                              struct cinfer_error *err);

/* A flag of the calling command that the server-args parser should leave alone. */
struct cinfer_command_flag {
    const char *name;  /* "--max-new-tokens" */
    int takes_value;   /* 1: the next argv entry (or "=value") belongs to it */
};

/* Applies the server flags in argv[1..argc) over args (argv[0], the command's name,
 * is skipped). Accepted forms: --flag VALUE, --flag=VALUE, and for on/off options a
 * bare --flag (on) or --flag=true|false. "--config FILE" is consumed but not loaded
 * (cinfer_server_args_parse_command_line loads it first). Every other entry goes to
 * rest, in order: positional arguments, the command's own flags (command_flags,
 * terminated by a {NULL, 0} entry; may be NULL) with their values, and everything after
 * "--". rest must have room for argc entries; *n_rest receives the count. Any other
 * "-..." entry is an unknown flag (CINFER_ERR_CONFIG, with a suggestion when close).
 * On error args is left as it was. */
CINFER_API int cinfer_server_args_apply_flags(struct cinfer_server_args *args, int argc, char **argv,
                                              const struct cinfer_command_flag *command_flags, char **rest,
                                              int *n_rest, struct cinfer_error *err);

/* Checks the rules that tie options together (one KV budget, hosts only for ssh,
 * chunk sizes against the prefill budget and the page size...). */
CINFER_API int cinfer_server_args_validate(const struct cinfer_server_args *args, struct cinfer_error *err);

/* All of the above: defaults, then the file named by --config (if any), then the flags,
 * then validate. On failure args is already freed. */
CINFER_API int cinfer_server_args_parse_command_line(struct cinfer_server_args *args, int argc, char **argv,
                                                     const struct cinfer_command_flag *command_flags,
                                                     char **rest, int *n_rest, struct cinfer_error *err);

/* Writes every setting in config-file syntax, which cinfer_server_args_load_* reads
 * back to the same values. With annotate, each key carries a comment with its flag
 * and where its value came from. Returns 0 or CINFER_ERR_IO. */
CINFER_API int cinfer_server_args_print(const struct cinfer_server_args *args, FILE *out, int annotate);
/* The same into a malloc'd string (how args travel to worker processes). */
CINFER_API int cinfer_server_args_to_string(const struct cinfer_server_args *args, char **out,
                                            struct cinfer_error *err);

/* The flags, grouped by section, with their defaults and help: for a command's --help. */
CINFER_API void cinfer_server_args_print_help(FILE *out);
/* docs/configuration.md: the reference of every key and flag. */
CINFER_API void cinfer_server_args_print_markdown(FILE *out);

/* The origin of the option with this key ("server.port"); -1 for an unknown key. */
CINFER_API int cinfer_server_args_origin(const struct cinfer_server_args *args, const char *key);

#ifdef __cplusplus
}
#endif
#endif
