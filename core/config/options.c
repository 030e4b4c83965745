/* core/config/options.c — the table of every server option. Adding a setting means
 * adding a field to struct cinfer_server_args and one entry here; the file reader, the
 * flags, --help, `cinfer config` and docs/configuration.md follow from it. */
#include "config/options.h"

#include <stddef.h>
#include <string.h>

#define FIELD(name) offsetof(struct cinfer_server_args, name)
#define KIB ((int64_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define SECOND_MS 1000
#define DAY_MS (24 * 3600 * SECOND_MS)

static const char *const dtype_choices[] = {"auto", "f32", "f16", "bf16", NULL};
static const char *const kv_cache_dtype_choices[] = {"auto", "f32", "bf16", "f16", "q8_0", NULL};
static const char *const schedule_policy_choices[] = {"fcfs", "lpm", NULL};
static const char *const restart_policy_choices[] = {"off", "on-failure", NULL};
static const char *const log_level_choices[] = {"error", "warning", "info", "debug", NULL};
static const char *const tool_call_parser_choices[] = {"auto", "none", "qwen25", "llama3", "mistral", NULL};
static const char *const reasoning_parser_choices[] = {"none", "qwen3", "deepseek-r1", NULL};

const char *const cinfer_config_sections[] = {"model", "tokenizer", "launcher", "scheduler",
                                              "server", "engine", "log", NULL};

const struct option cinfer_options[] = {
    /* ---- model ---- */
    {.section = "model", .name = "path", .flag = "--model-path", .flag_alias = "--model",
     .type = OPTION_STRING, .offset = FIELD(model_path), .value_name = "PATH",
     .help = "The model: a Hugging Face folder (config.json, *.safetensors, tokenizer.json) or a GGUF file."},
    {.section = "model", .name = "context_length", .flag = "--context-length",
     .type = OPTION_INT, .offset = FIELD(context_length), .min = 0, .max = 16 * 1024 * 1024,
     .default_int = 0, .value_name = "TOKENS",
     .help = "Longest sequence (prompt plus output) in tokens; 0 uses the model's own limit."},
    {.section = "model", .name = "dtype", .flag = "--dtype",
     .type = OPTION_ENUM, .offset = FIELD(dtype), .choices = dtype_choices,
     .default_int = CINFER_WEIGHT_DTYPE_AUTO, .value_name = "TYPE",
     .help = "Type the weight matrices are held in: auto keeps the checkpoint's types; f32, f16 or bf16 converts "
             "every matrix to it at load (Q8_0 too, dequantized), in memory of its own."},
    {.section = "model", .name = "no_repack", .flag = "--no-repack",
     .type = OPTION_BOOL, .offset = FIELD(no_repack), .default_int = 0,
     .help = "Read the weights as the file stores them, mapped and shared with other processes through "
             "the page cache, instead of repacking them into the CPU kernels' faster layout at load (F16 "
             "and BF16 on AVX-512 CPUs; Q8_0 and the block-quantized types such as Q4_K on AVX2 and "
             "AVX-512 ones). Repacked, batch-1 decode streams 5-15% closer to the memory's read rate, and "
             "the block-quantized types run their vector kernels only repacked, but each process holds "
             "its own copy."},

    /* ---- tokenizer ---- */
    {.section = "tokenizer", .name = "plugin", .flag = "--tokenizer",
     .type = OPTION_STRING, .offset = FIELD(tokenizer), .default_string = "tokenizer-bpe", .value_name = "NAME",
     .help = "Tokenizer plugin: a name looked up on the plugin path, or the path of a plugin file."},
    {.section = "tokenizer", .name = "path", .flag = "--tokenizer-path",
     .type = OPTION_STRING, .offset = FIELD(tokenizer_path), .value_name = "PATH",
     .help = "Where the tokenizer files are, when not next to the model; unset uses the model path."},
    {.section = "tokenizer", .name = "chat_template", .flag = "--chat-template",
     .type = OPTION_STRING, .offset = FIELD(chat_template), .value_name = "FILE",
     .help = "A file holding a Jinja chat template; unset uses the template that comes with the model."},

    /* ---- launcher ---- */
    {.section = "launcher", .name = "plugin", .flag = "--launcher",
     .type = OPTION_STRING, .offset = FIELD(launcher), .default_string = "auto", .value_name = "NAME",
     .help = "The launcher plugin that starts the worker processes: auto (every launcher found is asked "
             "whether it is usable here, and the highest priority wins: launch-mpi inside a Slurm or MPI "
             "allocation, launch-ssh with hosts, else launch-fork), fork, mpi or ssh (short for launch-fork, "
             "launch-mpi, launch-ssh), any other launcher plugin by name, or the path of a plugin file. "
             "`cinfer plugins` shows each launcher's answer."},
    {.section = "launcher", .name = "hosts", .flag = "--hosts",
     .type = OPTION_STRING_LIST, .offset = FIELD(hosts), .value_name = "HOST,...",
     .help = "Hosts the scheduler ranks run on, as host or user@host (launch-ssh; launch-mpi takes host names): "
             "one per data-parallel replica (its ranks share the host), or one per rank (dp_size times tp_size, "
             "replica by replica). With hosts, every channel is tcp:// with CURVE keys made for the engine. "
             "Empty inside a Slurm or MPI allocation, launch-mpi takes one node of it per replica."},
    {.section = "launcher", .name = "bind_address", .flag = "--bind-address",
     .type = OPTION_STRING, .offset = FIELD(bind_address), .value_name = "ADDRESS",
     .help = "With hosts: the address of this machine the workers reach its channels at; unset, the address "
             "this machine reaches the first host from. \"*\" binds every interface (and still advertises that "
             "address)."},
    {.section = "launcher", .name = "port_base", .flag = "--port-base",
     .type = OPTION_INT, .offset = FIELD(port_base), .min = 0, .max = 65000, .default_int = 0, .value_name = "PORT",
     .help = "With hosts: the first tcp port of the engine's channels (it uses 2 + dp_size * (tp_size + 3) in a "
             "row); 0 picks one from the process id, outside the kernel's ephemeral port range."},
    {.section = "launcher", .name = "ssh_args", .flag = "--ssh-args",
     .type = OPTION_STRING, .offset = FIELD(ssh_args), .value_name = "ARGS",
     .help = "Extra arguments for the ssh client, split on spaces (\"-F FILE -i KEY\"): launch-ssh's, and "
             "mpirun's when launch-mpi reaches other hosts (its plm_rsh_args)."},
    {.section = "launcher", .name = "connect_timeout", .flag = "--connect-timeout",
     .type = OPTION_DURATION_MS, .offset = FIELD(connect_timeout_ms), .min = SECOND_MS, .max = 3600 * SECOND_MS,
     .default_int = 10 * SECOND_MS, .value_name = "TIME",
     .help = "How long ssh waits for a host to answer (ConnectTimeout, whole seconds), for launch-ssh and for "
             "mpirun's ssh under launch-mpi."},
    {.section = "launcher", .name = "remote_worker", .flag = "--remote-worker",
     .type = OPTION_STRING_LIST, .offset = FIELD(remote_workers), .value_name = "[HOST=]PATH,...",
     .help = "The cinfer-worker executable on the hosts: PATH for every host, HOST=PATH for one; unset, the "
             "same path as on this machine."},
    {.section = "launcher", .name = "plugin_path", .flag = "--plugin-path",
     .type = OPTION_STRING, .offset = FIELD(plugin_path), .value_name = "DIRS",
     .help = "Colon-separated folders searched for plugins before $CINFER_PLUGIN_PATH and the install folder."},
    {.section = "launcher", .name = "tp_size", .flag = "--tp-size",
     .type = OPTION_INT, .offset = FIELD(tp_size), .min = 1, .max = 1024, .default_int = 1, .value_name = "N",
     .help = "Tensor-parallel ranks: scheduler processes that each hold a slice of every layer."},
    {.section = "launcher", .name = "ep_size", .flag = "--ep-size",
     .type = OPTION_INT, .offset = FIELD(ep_size), .min = 1, .max = 1024, .default_int = 1, .value_name = "N",
     .help = "Expert-parallel ranks of a mixture-of-experts model (as SGLang's --ep-size): 1 splits every "
             "expert's intermediate width over the tensor-parallel ranks; equal to tp_size, each rank holds "
             "whole experts (its contiguous share of them) and runs only the chosen ones it holds, the router "
             "whole on every rank, while attention, dense layers and a shared expert keep the tensor-parallel "
             "split. Any other value is refused. Moot for a dense model."},
    {.section = "launcher", .name = "dp_size", .flag = "--dp-size",
     .type = OPTION_INT, .offset = FIELD(dp_size), .min = 1, .max = 1024, .default_int = 1, .value_name = "N",
     .help = "Data-parallel replicas: independent copies of the model serving requests side by side."},

    /* ---- scheduler ---- */
    {.section = "scheduler", .name = "max_running_requests", .flag = "--max-running-requests",
     .type = OPTION_INT, .offset = FIELD(max_running_requests), .min = 1, .max = 1 << 20, .default_int = 64,
     .value_name = "N", .help = "Requests decoded together in one batch, at most."},
    {.section = "scheduler", .name = "max_queued_requests", .flag = "--max-queued-requests",
     .type = OPTION_INT, .offset = FIELD(max_queued_requests), .min = 0, .max = 1 << 20, .default_int = 1024,
     .value_name = "N",
     .help = "Requests waiting for a batch slot, at most; one more is refused with \"queue full\"."},
    {.section = "scheduler", .name = "max_prefill_tokens", .flag = "--max-prefill-tokens",
     .type = OPTION_INT, .offset = FIELD(max_prefill_tokens), .min = 1, .max = 16 * 1024 * 1024,
     .default_int = 16384, .value_name = "TOKENS", .help = "Prompt tokens processed in one prefill batch, at most."},
    {.section = "scheduler", .name = "chunked_prefill_size", .flag = "--chunked-prefill-size",
     .type = OPTION_INT, .offset = FIELD(chunked_prefill_size), .min = 0, .max = 16 * 1024 * 1024,
     .default_int = 8192, .value_name = "TOKENS",
     .help = "Long prompts are prefilled in chunks of this many tokens, between decode steps; 0 turns "
             "chunking off."},
    {.section = "scheduler", .name = "max_total_tokens", .flag = "--max-total-tokens",
     .type = OPTION_INT64, .offset = FIELD(max_total_tokens), .min = 0, .max = (int64_t)1 << 40,
     .default_int = 0, .value_name = "TOKENS",
     .help = "KV cache capacity in tokens, over all requests; 0 derives it from the memory budget."},
    {.section = "scheduler", .name = "kv_cache_bytes", .flag = "--kv-cache-bytes",
     .type = OPTION_BYTES, .offset = FIELD(kv_cache_bytes), .min = 0, .max = (int64_t)1 << 50,
     .default_int = 0, .value_name = "BYTES",
     .help = "Memory for the KV cache, such as 512M or 2G (multiples of 1024); 0 sizes it from "
             "mem_fraction_static instead."},
    {.section = "scheduler", .name = "kv_cache_dtype", .flag = "--kv-cache-dtype",
     .type = OPTION_ENUM, .offset = FIELD(kv_cache_dtype), .choices = kv_cache_dtype_choices,
     .default_int = CINFER_KV_CACHE_DTYPE_AUTO, .value_name = "TYPE",
     .help = "Element type of the KV cache: auto is f16 (as llama.cpp); bf16 and f16 hold twice the tokens "
             "of f32 in the same memory, q8_0 (blocks of 32 per head, 34 bytes; head_dim a multiple of 32) "
             "3.8 times. The KV budget counts the chosen type's bytes."},
    {.section = "scheduler", .name = "mem_fraction_static", .flag = "--mem-fraction-static",
     .type = OPTION_DOUBLE, .offset = FIELD(mem_fraction_static), .min_double = 0.01, .max_double = 0.99,
     .default_double = 0.8, .value_name = "FRACTION",
     .help = "Fraction of the device's memory for the weights and the KV cache together (as SGLang): on "
             "a GPU the KV cache gets fraction x total minus what is in use once the weights are loaded; on "
             "the CPU, this fraction of the memory available at start. Used when kv_cache_bytes and "
             "max_total_tokens are 0."},
    {.section = "scheduler", .name = "page_size", .flag = "--page-size",
     .type = OPTION_INT, .offset = FIELD(page_size), .min = 1, .max = 4096, .default_int = 16,
     .value_name = "TOKENS", .help = "Tokens per KV cache page."},
    {.section = "scheduler", .name = "schedule_policy", .flag = "--schedule-policy",
     .type = OPTION_ENUM, .offset = FIELD(schedule_policy), .choices = schedule_policy_choices,
     .default_int = CINFER_SCHEDULE_FCFS, .value_name = "POLICY",
     .help = "Which waiting request runs next: fcfs in arrival order, lpm the longest prefix already "
             "in the radix cache first."},
    {.section = "scheduler", .name = "disable_radix_cache", .flag = "--disable-radix-cache",
     .type = OPTION_BOOL, .offset = FIELD(disable_radix_cache), .default_int = 0,
     .help = "Do not share the KV cache of common prompt prefixes between requests."},
    {.section = "scheduler", .name = "disable_hybrid_swa_memory", .flag = "--disable-hybrid-swa-memory",
     .type = OPTION_BOOL, .offset = FIELD(disable_hybrid_swa_memory), .default_int = 0,
     .help = "Keep the sliding-window layers' KV cache for the whole context, as the full-attention layers'. "
             "By default a model with sliding-window layers (Gemma 2 and 3, for example) keeps them in "
             "their own pages and releases what no window reaches any more, so those layers hold about two "
             "windows per request."},

    /* ---- server ---- */
    {.section = "server", .name = "host", .flag = "--host",
     .type = OPTION_STRING, .offset = FIELD(host), .default_string = "127.0.0.1", .value_name = "ADDRESS",
     .help = "Address the HTTP server listens on."},
    {.section = "server", .name = "port", .flag = "--port",
     .type = OPTION_INT, .offset = FIELD(port), .min = 0, .max = 65535, .default_int = 30000, .value_name = "PORT",
     .help = "Port the HTTP server listens on; 0 picks a free one."},
    {.section = "server", .name = "api_key", .flag = "--api-key",
     .type = OPTION_STRING, .offset = FIELD(api_key), .value_name = "KEY",
     .help = "When set, HTTP requests must carry \"Authorization: Bearer KEY\"."},
    {.section = "server", .name = "max_request_body_bytes", .flag = "--max-request-body-bytes",
     .type = OPTION_BYTES, .offset = FIELD(max_request_body_bytes), .min = 1024, .max = GIB,
     .default_int = 16 * MIB, .value_name = "BYTES",
     .help = "Largest HTTP request body accepted; a larger one is refused with 413."},
    {.section = "server", .name = "served_model_name", .flag = "--served-model-name",
     .type = OPTION_STRING, .offset = FIELD(served_model_name), .value_name = "NAME",
     .help = "The model name /v1/models reports and the \"model\" field of requests must match; unset uses "
             "the base name of the model folder or file."},
    {.section = "server", .name = "ssl_certfile", .flag = "--ssl-certfile",
     .type = OPTION_STRING, .offset = FIELD(ssl_certfile), .value_name = "FILE",
     .help = "PEM certificate (chain) for HTTPS; with ssl_keyfile the server speaks TLS only."},
    {.section = "server", .name = "ssl_keyfile", .flag = "--ssl-keyfile",
     .type = OPTION_STRING, .offset = FIELD(ssl_keyfile), .value_name = "FILE",
     .help = "PEM private key of ssl_certfile, unencrypted."},
    {.section = "server", .name = "tool_call_parser", .flag = "--tool-call-parser",
     .type = OPTION_ENUM, .offset = FIELD(tool_call_parser), .choices = tool_call_parser_choices,
     .default_int = 0, .value_name = "NAME",
     .help = "How /v1/chat/completions reads tool calls out of the output into tool_calls: qwen25 "
             "(<tool_call>{...}</tool_call>: Qwen 2.5, Qwen3, Hermes), llama3 ({\"name\", \"parameters\"}), mistral "
             "([TOOL_CALLS][...]); auto picks by the model's chat template, none leaves them as text. (gpt-oss's "
             "format is not offered: that family is not supported yet.)"},
    {.section = "server", .name = "reasoning_parser", .flag = "--reasoning-parser",
     .type = OPTION_ENUM, .offset = FIELD(reasoning_parser), .choices = reasoning_parser_choices,
     .default_int = 0, .value_name = "NAME",
     .help = "Split a <think> model's reasoning from its answer into reasoning_content: qwen3 (when the output "
             "opens with <think>), deepseek-r1 (everything up to </think>: R1 distills, whose template opens "
             "it); none keeps it in content."},
    {.section = "server", .name = "max_connections", .flag = "--max-connections",
     .type = OPTION_INT, .offset = FIELD(max_connections), .min = 1, .max = 65536, .default_int = 2048,
     .value_name = "N",
     .help = "Open HTTP connections at most, each served by its own thread; the server refuses more."},

    /* ---- engine ---- */
    {.section = "engine", .name = "device", .flag = "--device",
     .type = OPTION_STRING, .offset = FIELD(device), .default_string = "auto", .value_name = "DEVICE",
     .help = "The compute backend the forward pass runs on: auto (every backend found is asked whether it is "
             "usable here, and the highest priority wins: a usable GPU backend, else the built-in cpu), cpu, "
             "cuda (short for the backend-cuda plugin; an error that says why when no CUDA device is usable), "
             "any other backend plugin by name, or the path of a plugin file. `cinfer plugins` shows each "
             "backend's answer."},
    {.section = "engine", .name = "num_threads", .flag = "--num-threads",
     .type = OPTION_INT, .offset = FIELD(num_threads), .min = 0, .max = 4096, .default_int = 0,
     .value_name = "N", .help = "CPU threads per scheduler process for the forward pass; 0 uses one per core."},
    {.section = "engine", .name = "random_seed", .flag = "--random-seed",
     .type = OPTION_INT64, .offset = FIELD(random_seed), .min = -1, .max = INT64_MAX, .default_int = -1,
     .value_name = "SEED",
     .help = "Seed for sampling of requests that bring no seed of their own; -1 picks one at start."},
    {.section = "engine", .name = "start_timeout", .flag = "--start-timeout",
     .type = OPTION_DURATION_MS, .offset = FIELD(start_timeout_ms), .min = 1, .max = DAY_MS,
     .default_int = 120 * SECOND_MS, .value_name = "TIME",
     .help = "How long every worker has to load its model and report ready (plain numbers are "
             "milliseconds; or 500ms, 30s, 5m, 1h)."},
    {.section = "engine", .name = "watchdog_timeout", .flag = "--watchdog-timeout",
     .type = OPTION_DURATION_MS, .offset = FIELD(watchdog_timeout_ms), .min = SECOND_MS, .max = DAY_MS,
     .default_int = 300 * SECOND_MS, .value_name = "TIME",
     .help = "A worker that neither answers a heartbeat nor finishes a forward step for this long is "
             "declared hung and stopped."},
    {.section = "engine", .name = "drain_timeout", .flag = "--drain-timeout",
     .type = OPTION_DURATION_MS, .offset = FIELD(drain_timeout_ms), .min = 0, .max = DAY_MS,
     .default_int = 30 * SECOND_MS, .value_name = "TIME",
     .help = "At shutdown, how long requests in flight may run to completion before they are aborted."},
    {.section = "engine", .name = "restart_policy", .flag = "--restart-policy",
     .type = OPTION_ENUM, .offset = FIELD(restart_policy), .choices = restart_policy_choices,
     .default_int = CINFER_RESTART_OFF, .value_name = "POLICY",
     .help = "What a dead worker causes: off stops the engine, on-failure starts the workers again."},

    /* ---- log ---- */
    {.section = "log", .name = "level", .flag = "--log-level",
     .type = OPTION_ENUM, .offset = FIELD(log_level), .choices = log_level_choices,
     .default_int = CINFER_LOG_INFO, .value_name = "LEVEL", .help = "Least important message written to the log."},
};

const int cinfer_options_count = (int)(sizeof cinfer_options / sizeof cinfer_options[0]);

_Static_assert(sizeof cinfer_options / sizeof cinfer_options[0] <= CINFER_SERVER_ARGS_MAX_OPTIONS,
               "struct cinfer_server_args.origin has a slot per option");

const struct option *cinfer_option_by_key(const char *section, const char *name)
{
    for (int i = 0; i < cinfer_options_count; i++)
        if (!strcmp(cinfer_options[i].section, section) && !strcmp(cinfer_options[i].name, name))
            return &cinfer_options[i];
    return NULL;
}

static int flag_equals(const char *flag, const char *text, size_t text_len)
{
    return flag && strlen(flag) == text_len && !memcmp(flag, text, text_len);
}

const struct option *cinfer_option_by_flag(const char *flag, size_t flag_len)
{
    for (int i = 0; i < cinfer_options_count; i++)
        if (flag_equals(cinfer_options[i].flag, flag, flag_len) ||
            flag_equals(cinfer_options[i].flag_alias, flag, flag_len))
            return &cinfer_options[i];
    return NULL;
}

int cinfer_option_index(const struct option *opt)
{
    return (int)(opt - cinfer_options);
}

void *cinfer_option_field(struct cinfer_server_args *args, const struct option *opt)
{
    return (char *)args + opt->offset;
}

const void *cinfer_option_field_const(const struct cinfer_server_args *args, const struct option *opt)
{
    return (const char *)args + opt->offset;
}
