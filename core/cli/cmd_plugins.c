/* cinfer plugins: every plugin found on the search path, its kind and version, and
 * whether it loads (and why not); for each launcher, its answer to the configured
 * settings, and for each compute backend its answer here: usable, with its priority,
 * or not usable and why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/backend.h"
#include "cinfer/config.h"
#include "cinfer/launcher.h"
#include "cinfer/plugins.h"
#include "cli/commands.h"

struct listing {
    const struct cinfer_launcher_config *config;
    int count;
};

static void print_entry(const struct cinfer_plugin_listing *e, void *ctx)
{
    struct listing *l = ctx;
    l->count++;
    if (!e->loads) {
        /* No trustworthy descriptor: name it after its file. */
        const char *base = strrchr(e->file, '/');
        base = base ? base + 1 : e->file;
        int name_len = (int)strlen(base) - 3;
        printf("%-16.*s %-10s %-8s REFUSED %s\n  why: %s\n", name_len, base, "-", "-", e->file, e->why_not);
        return;
    }
    printf("%-16s %-10s %-8s loads   %s\n", e->name, e->kind, e->version, e->file);
    struct cinfer_launcher_answer a;
    if (!strcmp(e->kind, "launcher") && cinfer_launcher_query(e->plugin, l->config, &a) == CINFER_OK) {
        if (a.usable)
            printf("  here: usable, priority %d\n", a.priority);
        else
            printf("  here: not usable: %s\n", a.why);
    }
    struct cinfer_backend_answer b;
    if (!strcmp(e->kind, "backend")) {
        int rc = cinfer_backend_query(e->plugin, &b);
        if (rc < 0)
            printf("  here: not usable: its query failed (%s)\n", cinfer_strerror(rc));
        else if (b.usable)
            printf("  here: usable, priority %d, %d device%s\n", b.priority, b.device_count,
                   b.device_count == 1 ? "" : "s");
        else
            printf("  here: not usable: %s\n", b.why);
    }
}

static void usage(FILE *out)
{
    fprintf(out, "usage: cinfer plugins [--config FILE] [server flags...]\n\n"
                 "Lists every plugin found, its kind and version, and whether it loads; each launcher\n"
                 "says whether it can start the configured workers here (--hosts, --tp-size, --dp-size\n"
                 "and the config file count), and with what priority for --launcher auto; each compute\n"
                 "backend says whether it can run here, and with what priority for --device auto.\n"
                 "Search order: --plugin-path DIRS (colon-separated), $CINFER_PLUGIN_PATH,\n"
                 "then the install folder (%s).\n",
            cinfer_plugin_install_dir() ? cinfer_plugin_install_dir() : "built-in table only");
}

int cinfer_cmd_plugins(int argc, char **argv)
{
    static const struct cinfer_command_flag own_flags[] = {{"--help", 0}, {"-h", 0}, {NULL, 0}};
    if (cinfer_cli_asks_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    char **rest;
    int n_rest;
    struct cinfer_server_args args;
    if (cinfer_cli_parse_server_args("plugins", argc, argv, own_flags, &args, &rest, &n_rest))
        return 1;
    int status = 0;
    if (n_rest > 0) {
        fprintf(stderr, "cinfer plugins: unexpected argument '%s' (see --help)\n", rest[0]);
        status = 2;
    } else {
        struct cinfer_launcher_config config = {.struct_size = sizeof config,
                                                .hosts = (const char *const *)args.hosts.items,
                                                .tp_size = args.tp_size, .dp_size = args.dp_size};
        struct listing l = {.config = &config};
        struct cinfer_error err = {0};
        printf("%-16s %-10s %-8s %-7s %s\n", "NAME", "KIND", "VERSION", "STATUS", "FILE");
        if (cinfer_plugin_list(args.plugin_path, print_entry, &l, &err)) {
            fprintf(stderr, "cinfer plugins: %s\n", err.message);
            status = 1;
        } else if (l.count == 0) {
            printf("(no plugins found)\n");
        }
    }
    cinfer_server_args_free(&args);
    free(rest);
    return status;
}
