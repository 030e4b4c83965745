/* The argument handling every engine-running subcommand shares; see commands.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/config.h"
#include "cli/commands.h"

int cinfer_cli_asks_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}

int cinfer_cli_parse_server_args(const char *command, int argc, char **argv,
                                 const struct cinfer_command_flag *own_flags, struct cinfer_server_args *args,
                                 char ***rest, int *n_rest)
{
    struct cinfer_error err = {0};
    *n_rest = 0;
    *rest = calloc((size_t)argc + 1, sizeof **rest);
    if (!*rest) {
        fprintf(stderr, "cinfer %s: out of memory\n", command);
        return 1;
    }
    if (cinfer_server_args_parse_command_line(args, argc, argv, own_flags, *rest, n_rest, &err)) {
        fprintf(stderr, "cinfer %s: %s\n", command, err.message);
        free(*rest);
        *rest = NULL;
        return 1;
    }
    return 0;
}
