/* The cinfer subcommands; each lives in core/cli/cmd_<name>.c. */
#ifndef CINFER_CLI_COMMANDS_H
#define CINFER_CLI_COMMANDS_H

int cinfer_cmd_plugins(int argc, char **argv);
int cinfer_cmd_tokenize(int argc, char **argv);
int cinfer_cmd_generate(int argc, char **argv);
int cinfer_cmd_config(int argc, char **argv);
int cinfer_cmd_serve(int argc, char **argv);

#endif
