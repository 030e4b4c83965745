/* cinfer: the command-line front end. Dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"generate", cinfer_cmd_generate, "generate text from a prompt"},
    {"tokenize", cinfer_cmd_tokenize, "print the token ids of a text (or --decode ids)"},
    {"plugins", cinfer_cmd_plugins, "list the plugins found, their kind and version, and whether they load"},
    {"config", cinfer_cmd_config, "check a config file and print the settings it yields"},
    {"serve", cinfer_cmd_serve, "run the engine behind an HTTP server (OpenAI and SGLang APIs)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: cinfer <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'cinfer <command> --help' documents each command's flags.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cinfer %s\n", CINFER_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "cinfer: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
