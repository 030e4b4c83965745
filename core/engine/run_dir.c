#include "engine/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cinfer_run_dir_create(char *path, size_t path_bytes, struct cinfer_error *err)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0] || strlen(tmp) > 60) /* unix socket paths must stay short */
        tmp = "/tmp";
    snprintf(path, path_bytes, "%s/cinfer-XXXXXX", tmp);
    if (!mkdtemp(path)) /* mkdtemp makes it 0700 */
        return cinfer_error_set(err, CINFER_ERR_IO, "cannot create a run folder in %s: %s", tmp, strerror(errno));
    return CINFER_OK;
}

void cinfer_run_dir_remove(const char *path)
{
    if (!path || !path[0])
        return;
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *ent;
        while ((ent = readdir(dir))) {
            if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
                continue;
            char file[512];
            snprintf(file, sizeof file, "%s/%s", path, ent->d_name);
            unlink(file);
        }
        closedir(dir);
    }
    rmdir(path);
}
