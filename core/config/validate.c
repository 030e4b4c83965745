/* core/config/validate.c — rules between options, checked once every source (defaults,
 * file, flags) has been applied. Each message names both keys and their values. */
#include <stdio.h>
#include <string.h>

#include "config/options.h"

static int check_launcher(const struct cinfer_server_args *args, struct cinfer_error *err)
{
    const char *launcher = args->launcher;
    int is_ssh = !strcmp(launcher, "ssh") || !strcmp(launcher, "launch-ssh");
    if (!launcher[0])
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "launcher.plugin (--launcher) is empty: expected auto, a launcher plugin's name or "
                                "the path of its file");
    if (is_ssh && args->hosts.count == 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "launcher.plugin is \"ssh\" but launcher.hosts (--hosts) is empty: the ssh "
                                "launcher needs one host per data-parallel replica");
    if (args->ep_size != 1 && args->ep_size != args->tp_size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "launcher.ep_size (--ep-size) is %d but launcher.tp_size (--tp-size) is %d: expert "
                                "parallelism uses the tensor-parallel ranks as its group, so ep_size is 1 or equal "
                                "to tp_size",
                                args->ep_size, args->tp_size);
    int ranks = args->dp_size * args->tp_size;
    if (args->hosts.count > 0 && args->hosts.count != args->dp_size && args->hosts.count != ranks)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "launcher.hosts (--hosts) lists %d host%s but launcher.dp_size (--dp-size) is %d and "
                                "tp_size %d: list one host per replica (%d) or one per rank (%d); a host may be "
                                "listed twice",
                                args->hosts.count, args->hosts.count == 1 ? "" : "s", args->dp_size, args->tp_size,
                                args->dp_size, ranks);
    return 0;
}

static int check_scheduler(const struct cinfer_server_args *args, struct cinfer_error *err)
{
    /* Judged by value, not by where the values came from, so that settings printed
     * for a worker process (every key written) pass the same check there. */
    const struct option *fraction = cinfer_option_by_key("scheduler", "mem_fraction_static");
    if (args->kv_cache_bytes != 0 && args->mem_fraction_static != fraction->default_double) {
        char bytes[32], share[32];
        cinfer_format_bytes(args->kv_cache_bytes, bytes, sizeof bytes);
        cinfer_format_double(args->mem_fraction_static, share, sizeof share);
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "scheduler.kv_cache_bytes (--kv-cache-bytes) is %s and scheduler.mem_fraction_static "
                                "(--mem-fraction-static) is %s: both size the KV cache, set only one",
                                bytes, share);
    }
    if (args->chunked_prefill_size > args->max_prefill_tokens)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "scheduler.chunked_prefill_size (%d) is larger than scheduler.max_prefill_tokens "
                                "(%d): a chunk must fit in one prefill batch",
                                args->chunked_prefill_size, args->max_prefill_tokens);
    if (args->chunked_prefill_size % args->page_size != 0)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "scheduler.chunked_prefill_size (%d) is not a multiple of scheduler.page_size (%d): "
                                "chunks must end on a KV page boundary",
                                args->chunked_prefill_size, args->page_size);
    if (args->max_total_tokens != 0 && args->max_total_tokens < args->page_size)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "scheduler.max_total_tokens (%lld) is less than one KV page (scheduler.page_size %d)",
                                (long long)args->max_total_tokens, args->page_size);
    if (args->max_total_tokens != 0 && args->context_length != 0 && args->max_total_tokens < args->context_length)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "scheduler.max_total_tokens (%lld) is less than model.context_length (%d): the KV "
                                "cache could not hold one request of full length",
                                (long long)args->max_total_tokens, args->context_length);
    if (args->schedule_policy == CINFER_SCHEDULE_LPM && args->disable_radix_cache)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "scheduler.schedule_policy is \"lpm\" but scheduler.disable_radix_cache is true: "
                                "longest-prefix-match needs the radix cache (use fcfs, or enable the cache)");
    return 0;
}

static int check_server(const struct cinfer_server_args *args, struct cinfer_error *err)
{
    if (!args->ssl_certfile != !args->ssl_keyfile)
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "server.%s (--%s) is set but server.%s (--%s) is not: TLS needs both the "
                                "certificate and its key",
                                args->ssl_certfile ? "ssl_certfile" : "ssl_keyfile",
                                args->ssl_certfile ? "ssl-certfile" : "ssl-keyfile",
                                args->ssl_certfile ? "ssl_keyfile" : "ssl_certfile",
                                args->ssl_certfile ? "ssl-keyfile" : "ssl-certfile");
    return 0;
}

/* Whether the device is usable is the backend's to say (the engine asks it at start);
 * here only its shape. */
static int check_device(const struct cinfer_server_args *args, struct cinfer_error *err)
{
    if (!args->device || !args->device[0])
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "engine.device (--device) is empty: expected auto, cpu, cuda, a backend plugin's "
                                "name or the path of a plugin file");
    return 0;
}

int cinfer_server_args_validate(const struct cinfer_server_args *args, struct cinfer_error *err)
{
    int rc = check_device(args, err);
    if (!rc)
        rc = check_launcher(args, err);
    if (!rc)
        rc = check_scheduler(args, err);
    if (!rc)
        rc = check_server(args, err);
    return rc;
}
