#include "util/proc_title.h"

#include <string.h>
#include <sys/prctl.h>

void cinfer_set_process_title(int argc, char **argv, const char *title)
{
    prctl(PR_SET_NAME, title, 0, 0, 0);
    if (argc < 1 || !argv || !argv[0])
        return;
    /* The argv strings lie back to back; their whole span is ours to rewrite. */
    char *start = argv[0];
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc; i++)
        if (argv[i] == end)
            end = argv[i] + strlen(argv[i]) + 1;
    size_t room = (size_t)(end - start);
    size_t n = strlen(title);
    if (n >= room)
        n = room - 1;
    memset(start, 0, room);
    memcpy(start, title, n);
    for (int i = 1; i < argc; i++)
        argv[i] = start + n; /* the empty string at the end */
}
