/* What the launchers that run workers on other hosts (launch-ssh, launch-mpi) share:
 * their versioned configuration's field test, a program found on PATH, and the
 * launcher.remote_worker list that names the cinfer-worker path per host. Static
 * functions in a header, as common/local_process.h, so each plugin compiles its own copy
 * and none exports a name (two static plugins link into one program). */
#ifndef CINFER_PLUGINS_REMOTE_HOSTS_H
#define CINFER_PLUGINS_REMOTE_HOSTS_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer/launcher.h"

/* Whether the engine's struct cinfer_launcher_config is new enough to hold field. */
static inline int remote_config_has(const struct cinfer_launcher_config *c, size_t offset, size_t size)
{
    return c && c->struct_size >= offset + size;
}
#define REMOTE_CONFIG_HAS(c, field) \
    remote_config_has((c), offsetof(struct cinfer_launcher_config, field), sizeof((c)->field))

/* name on PATH as an absolute path in out (exec'd after fork, where no search may run);
 * 0 when no directory of PATH has it. */
static inline int remote_find_on_path(const char *name, char *out, size_t out_bytes)
{
    const char *path = getenv("PATH");
    if (!path || !path[0])
        path = "/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(out, out_bytes, "%.*s/%s", (int)n, path, name);
        if (n && access(out, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

/* A NULL-terminated copy of the "PATH" / "HOST=PATH" items (NULL items: none); -1 when
 * memory runs out, with nothing left allocated. */
static inline void remote_workers_free(char **items)
{
    for (char **item = items; item && *item; item++)
        free(*item);
    free(items);
}

static inline int remote_workers_copy(const char *const *items, char ***out)
{
    *out = NULL;
    size_t n = 0;
    while (items && items[n])
        n++;
    char **copy = calloc(n + 1, sizeof *copy);
    if (!copy)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!(copy[i] = strdup(items[i]))) {
            remote_workers_free(copy);
            return -1;
        }
    }
    *out = copy;
    return 0;
}

/* The cinfer-worker path for host: a "HOST=PATH" item naming it (as given, or without
 * ssh's "user@"), else the last bare "PATH" item, else fallback (this machine's path). */
static inline const char *remote_worker_path(char *const *items, const char *host, const char *fallback)
{
    const char *at = strrchr(host, '@');
    const char *bare = at ? at + 1 : host;
    for (char *const *item = items; item && *item; item++) {
        const char *eq = strchr(*item, '=');
        if (!eq) {
            fallback = *item;
            continue;
        }
        size_t n = (size_t)(eq - *item);
        if ((strlen(host) == n && !strncmp(*item, host, n)) || (strlen(bare) == n && !strncmp(*item, bare, n)))
            return eq + 1;
    }
    return fallback;
}

#endif
