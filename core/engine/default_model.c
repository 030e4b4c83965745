/* Where the embedded default model is: $CINFER_DEFAULT_MODEL, else share/cinfer/models/
 * default in the install tree (found beside the plugin folder), else the source tree
 * this build came from. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cinfer/plugins.h"
#include "engine/default_model.h"

#ifndef CINFER_DATADIR_FROM_LIBDIR
#define CINFER_DATADIR_FROM_LIBDIR "../share"
#endif
#ifndef CINFER_SOURCE_MODEL_DIR
#define CINFER_SOURCE_MODEL_DIR ""
#endif

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *cinfer_default_model_path(void)
{
    static char path[PATH_MAX + 64];
    const char *env = getenv("CINFER_DEFAULT_MODEL");
    if (env && env[0])
        return env;
    const char *plugins = cinfer_plugin_install_dir(); /* <prefix>/lib/cinfer/plugins */
    if (plugins) {
        snprintf(path, sizeof path, "%s/../../%s/cinfer/models/default", plugins, CINFER_DATADIR_FROM_LIBDIR);
        if (is_dir(path))
            return path;
    }
    return CINFER_SOURCE_MODEL_DIR;
}
