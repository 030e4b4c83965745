/* The cinfer subcommands; each lives in core/cli/cmd_<name>.c. */
#ifndef CINFER_CLI_COMMANDS_H
#define CINFER_CLI_COMMANDS_H

int cinfer_cmd_plugins(int argc, char **argv);
int cinfer_cmd_tokenize(int argc, char **argv);
int cinfer_cmd_generate(int argc, char **argv);
int cinfer_cmd_config(int argc, char **argv);
int cinfer_cmd_serve(int argc, char **argv);

/* Shared by the subcommands that take the server flags (cli_args.c). */
struct cinfer_command_flag;
struct cinfer_server_args;
/* 1 when argv[1..argc) holds --help or -h: looked for before parsing, which would
 * refuse an invalid setting the user only wants explained. */
int cinfer_cli_asks_help(int argc, char **argv);
/* Parses the server flags (and --config FILE) of `cinfer COMMAND`; the words that are
 * not server flags land in *rest (malloc'd, *n_rest entries; free() it, and
 * cinfer_server_args_free args). On failure prints "cinfer COMMAND: why", leaves
 * nothing allocated and returns 1. */
int cinfer_cli_parse_server_args(const char *command, int argc, char **argv,
                                 const struct cinfer_command_flag *own_flags, struct cinfer_server_args *args,
                                 char ***rest, int *n_rest);

#endif
