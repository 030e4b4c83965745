/* Builds the plugin search path. The install folder is found from where this code
 * itself lives (dladdr), so an installed or build-tree cinfer finds its plugins with
 * no environment variable: lib/cinfer/plugins beside libcinfer, or, when the core is
 * linked into an executable in bin/, ../lib/cinfer/plugins. */
#include "plugin/search_path.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cinfer/error.h"
#include "cinfer/plugins.h"

#ifndef CINFER_PLUGIN_RELDIR
#define CINFER_PLUGIN_RELDIR "cinfer/plugins"
#endif
#ifndef CINFER_LIBDIR_FROM_BINDIR
#define CINFER_LIBDIR_FROM_BINDIR "../lib"
#endif

__attribute__((unused)) static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *cinfer_plugin_install_dir(void)
{
#ifdef CINFER_STATIC_PLUGINS
    return NULL;
#else
    static char dir[PATH_MAX + 64];
    static int done;
    if (done)
        return dir[0] ? dir : NULL;
    Dl_info info;
    char self[PATH_MAX];
    /* For code linked into the executable, dli_fname is argv[0], which may be relative
     * or rewritten (process titles): /proc/self/exe is the truth there. */
    int found = dladdr((void *)&cinfer_plugin_install_dir, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
                realpath(info.dli_fname, self);
    if (!found)
        found = realpath("/proc/self/exe", self) != NULL;
    if (found) {
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char candidate[PATH_MAX + 64];
            snprintf(candidate, sizeof candidate, "%s/%s", self, CINFER_PLUGIN_RELDIR);
            if (!is_dir(candidate))
                snprintf(candidate, sizeof candidate, "%s/%s/%s", self, CINFER_LIBDIR_FROM_BINDIR,
                         CINFER_PLUGIN_RELDIR);
            if (!realpath(candidate, dir))  /* not there (yet): keep the plain path */
                snprintf(dir, sizeof dir, "%s", candidate);
        }
    }
    done = 1;
    return dir[0] ? dir : NULL;
#endif /* CINFER_STATIC_PLUGINS */
}

static int add_dir(struct cinfer_plugin_dirs *dirs, const char *dir, size_t len)
{
    if (len == 0 || dirs->count == CINFER_PLUGIN_MAX_DIRS)
        return CINFER_OK;
    for (size_t i = 0; i < dirs->count; i++)
        if (strlen(dirs->dirs[i]) == len && !strncmp(dirs->dirs[i], dir, len))
            return CINFER_OK;
    char *copy = strndup(dir, len);
    if (!copy)
        return CINFER_ERR_NOMEM;
    dirs->dirs[dirs->count++] = copy;
    return CINFER_OK;
}

static int add_colon_list(struct cinfer_plugin_dirs *dirs, const char *list)
{
    while (list && *list) {
        const char *end = strchr(list, ':');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        int rc = add_dir(dirs, list, len);
        if (rc)
            return rc;
        list = end ? end + 1 : NULL;
    }
    return CINFER_OK;
}

int cinfer_plugin_dirs_collect(const char *configured, struct cinfer_plugin_dirs *dirs)
{
    memset(dirs, 0, sizeof *dirs);
    int rc = add_colon_list(dirs, configured);
    if (!rc)
        rc = add_colon_list(dirs, getenv("CINFER_PLUGIN_PATH"));
    const char *installed = cinfer_plugin_install_dir();
    if (!rc && installed)
        rc = add_dir(dirs, installed, strlen(installed));
    if (rc)
        cinfer_plugin_dirs_free(dirs);
    return rc;
}

void cinfer_plugin_dirs_free(struct cinfer_plugin_dirs *dirs)
{
    for (size_t i = 0; i < dirs->count; i++)
        free(dirs->dirs[i]);
    dirs->count = 0;
}

const char *cinfer_plugin_dirs_describe(const struct cinfer_plugin_dirs *dirs, char *buf, size_t buf_bytes)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < dirs->count && used < buf_bytes; i++)
        used += (size_t)snprintf(buf + used, buf_bytes - used, "%s%s", i ? ", " : "", dirs->dirs[i]);
    if (dirs->count == 0)
        snprintf(buf, buf_bytes, "(no folders)");
    return buf;
}
