/* cinfer config: checks a config file and flags, and prints the settings they yield in
 * config-file syntax (or, with --markdown, the reference in docs/configuration.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/config.h"
#include "cli/commands.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: cinfer config [--config FILE] [server flags...]\n"
                 "       cinfer config --markdown\n\n"
                 "Checks the settings that a config file and flags yield and prints them in config-file\n"
                 "syntax, each with its flag and where its value came from; exits 1 with the reason when\n"
                 "a setting is wrong. --markdown prints the reference of every key and flag\n"
                 "(docs/configuration.md).\n\n");
    cinfer_server_args_print_help(out);
}

int cinfer_cmd_config(int argc, char **argv)
{
    static const struct cinfer_command_flag own_flags[] = {
        {"--help", 0}, {"-h", 0}, {"--markdown", 0}, {NULL, 0}};
    /* --help and --markdown need no valid settings: look for them before parsing. */
    if (cinfer_cli_asks_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--markdown")) {
            cinfer_server_args_print_markdown(stdout);
            return 0;
        }
    char **rest;
    int n_rest;
    struct cinfer_server_args args;
    if (cinfer_cli_parse_server_args("config", argc, argv, own_flags, &args, &rest, &n_rest))
        return 1;
    int status = 0;
    if (n_rest > 0) {
        fprintf(stderr, "cinfer config: unexpected argument '%s' (cinfer config takes only flags)\n", rest[0]);
        status = 1;
    } else if (cinfer_server_args_print(&args, stdout, 1) || fflush(stdout)) {
        fprintf(stderr, "cinfer config: cannot write the settings\n");
        status = 1;
    }
    cinfer_server_args_free(&args);
    free(rest);
    return status;
}
