#include "support/run_command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int cinfer_test_run(const char *cmd, char *out, size_t out_bytes)
{
    char *joined = malloc(strlen(cmd) + 16);
    if (!joined)
        return -1;
    sprintf(joined, "(%s) 2>&1", cmd);
    FILE *pipe = popen(joined, "r");
    free(joined);
    if (!pipe)
        return -1;
    size_t used = 0;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0) {
        if (out && used + 1 < out_bytes) {
            size_t room = out_bytes - 1 - used;
            size_t take = n < room ? n : room;
            memcpy(out + used, chunk, take);
            used += take;
        }
    }
    if (out && out_bytes)
        out[used] = '\0';
    int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
