/* cinfer plugins: every plugin found on the search path, its kind and version, and
 * whether it loads (and why not). */
#include <stdio.h>
#include <string.h>

#include "cinfer/plugins.h"
#include "cli/commands.h"

static void print_entry(const struct cinfer_plugin_listing *e, void *ctx)
{
    int *count = ctx;
    (*count)++;
    if (e->loads)
        printf("%-16s %-10s %-8s loads   %s\n", e->name, e->kind, e->version, e->file);
    else {
        /* No trustworthy descriptor: name it after its file. */
        const char *base = strrchr(e->file, '/');
        base = base ? base + 1 : e->file;
        int name_len = (int)strlen(base) - 3;
        printf("%-16.*s %-10s %-8s REFUSED %s\n  why: %s\n", name_len, base, "-", "-", e->file, e->why_not);
    }
}

int cinfer_cmd_plugins(int argc, char **argv)
{
    const char *search_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plugin-path") && i + 1 < argc) {
            search_path = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: cinfer plugins [--plugin-path DIRS]\n\n"
                   "Lists every plugin found, its kind and version, and whether it loads.\n"
                   "Search order: --plugin-path DIRS (colon-separated), $CINFER_PLUGIN_PATH,\n"
                   "then the install folder (%s).\n",
                   cinfer_plugin_install_dir() ? cinfer_plugin_install_dir() : "built-in table only");
            return 0;
        } else {
            fprintf(stderr, "cinfer plugins: unknown argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    printf("%-16s %-10s %-8s %-7s %s\n", "NAME", "KIND", "VERSION", "STATUS", "FILE");
    int count = 0;
    struct cinfer_error err = {0};
    if (cinfer_plugin_list(search_path, print_entry, &count, &err)) {
        fprintf(stderr, "cinfer plugins: %s\n", err.message);
        return 1;
    }
    if (count == 0)
        printf("(no plugins found)\n");
    return 0;
}
