/* cinfer tokenize — placeholder until its module lands; reports that it is missing. */
#include <stdio.h>

#include "cli/commands.h"

int cinfer_cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer tokenize: not built yet\n");
    return 2;
}
