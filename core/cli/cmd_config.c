/* cinfer config — placeholder until its module lands; reports that it is missing. */
#include <stdio.h>

#include "cli/commands.h"

int cinfer_cmd_config(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer config: not built yet\n");
    return 2;
}
