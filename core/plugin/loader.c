/* Finds, opens and checks plugins with libltdl.
 *
 * Every lt_* call happens under one lock (libltdl keeps global state). A plugin's
 * module stays open as long as any struct cinfer_plugin refers to it: lt_dlopen
 * counts references per module, and we close exactly once per successful open. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ltdl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cpu_backend.h"
#include "cinfer/backend.h"
#include "cinfer/launcher.h"
#include "cinfer/plugins.h"
#include "plugin/builtin_plugins.h"
#include "plugin/descriptor_check.h"
#include "plugin/search_path.h"

struct cinfer_plugin {
    lt_dlhandle module;                            /* NULL for a built-in plugin */
    const struct cinfer_plugin_descriptor *desc;
    char *file;
};

static pthread_mutex_t ltdl_lock = PTHREAD_MUTEX_INITIALIZER;
static int ltdl_ready;

/* Call with ltdl_lock held. */
static int ltdl_init_locked(struct cinfer_error *err)
{
    if (ltdl_ready)
        return CINFER_OK;
    if (lt_dlinit() != 0)
        return cinfer_error_set(err, CINFER_ERR_PLUGIN, "libltdl failed to initialise: %s", lt_dlerror());
    ltdl_ready = 1;
    return CINFER_OK;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int looks_like_path(const char *name)
{
    size_t n = strlen(name);
    return strchr(name, '/') || (n > 3 && !strcmp(name + n - 3, ".so"));
}

/* Part of the core in every build, static plugins or not: the CPU backend. */
static const struct cinfer_plugin_descriptor *core_builtin(size_t i)
{
    return i == 0 ? cinfer_cpu_backend_descriptor() : NULL;
}

static const struct cinfer_plugin_descriptor *find_builtin(const char *name)
{
    for (size_t i = 0; core_builtin(i); i++)
        if (!strcmp(core_builtin(i)->name, name))
            return core_builtin(i);
    const struct cinfer_plugin_descriptor *const *table = cinfer_builtin_plugin_table();
    for (size_t i = 0; table && table[i]; i++)
        if (table[i]->name && !strcmp(table[i]->name, name))
            return table[i];
    return NULL;
}

/* Opens one file and checks it; on success fills *out. */
static int open_file(const char *path, uint32_t expected_kind, struct cinfer_plugin **out,
                     struct cinfer_error *err)
{
    pthread_mutex_lock(&ltdl_lock);
    int rc = ltdl_init_locked(err);
    if (rc) {
        pthread_mutex_unlock(&ltdl_lock);
        return rc;
    }
    /* Local symbols: two plugins may define the same internal names. */
    lt_dladvise advise;
    lt_dladvise_init(&advise);
    lt_dladvise_local(&advise);
    lt_dlhandle module = lt_dlopenadvise(path, advise);
    lt_dladvise_destroy(&advise);
    if (!module) {
        /* libltdl's own words are vague ("file not found"); the dynamic linker's
         * say what is wrong with the file. */
        const char *why = lt_dlerror();
        void *probe = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        if (probe)
            dlclose(probe);
        else
            why = dlerror();
        rc = cinfer_error_set(err, CINFER_ERR_PLUGIN, "%s: cannot load as a shared object: %s", path,
                              why ? why : "unknown reason");
        pthread_mutex_unlock(&ltdl_lock);
        return rc;
    }
    const struct cinfer_plugin_descriptor *desc = lt_dlsym(module, CINFER_PLUGIN_DESCRIPTOR_SYMBOL);
    if (!desc) {
        lt_dlclose(module);
        pthread_mutex_unlock(&ltdl_lock);
        return cinfer_error_set(err, CINFER_ERR_PLUGIN,
                                "%s: not a cinfer plugin: it exports no symbol '%s'", path,
                                CINFER_PLUGIN_DESCRIPTOR_SYMBOL);
    }
    rc = cinfer_plugin_check_descriptor(desc, path, expected_kind, err);
    if (rc) {
        lt_dlclose(module);
        pthread_mutex_unlock(&ltdl_lock);
        return rc;
    }
    pthread_mutex_unlock(&ltdl_lock);

    struct cinfer_plugin *p = calloc(1, sizeof *p);
    char *file = strdup(path);
    if (!p || !file) {
        free(p);
        free(file);
        pthread_mutex_lock(&ltdl_lock);
        lt_dlclose(module);
        pthread_mutex_unlock(&ltdl_lock);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory opening plugin", path);
    }
    p->module = module;
    p->desc = desc;
    p->file = file;
    *out = p;
    return CINFER_OK;
}

static int wrap_builtin(const struct cinfer_plugin_descriptor *desc, uint32_t expected_kind,
                        struct cinfer_plugin **out, struct cinfer_error *err)
{
    int rc = cinfer_plugin_check_descriptor(desc, "built-in", expected_kind, err);
    if (rc)
        return rc;
    struct cinfer_plugin *p = calloc(1, sizeof *p);
    if (!p || !(p->file = strdup("built-in"))) {
        free(p);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory opening built-in plugin");
    }
    p->desc = desc;
    *out = p;
    return CINFER_OK;
}

int cinfer_plugin_open(const char *name_or_path, uint32_t expected_kind, const char *search_path,
                       struct cinfer_plugin **out, struct cinfer_error *err)
{
    *out = NULL;
    if (!name_or_path || !name_or_path[0])
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "no plugin name given");
    if (looks_like_path(name_or_path)) {
        if (!file_exists(name_or_path))
            return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: plugin file does not exist",
                                    name_or_path);
        return open_file(name_or_path, expected_kind, out, err);
    }
    const struct cinfer_plugin_descriptor *builtin = find_builtin(name_or_path);
    if (builtin)
        return wrap_builtin(builtin, expected_kind, out, err);

    struct cinfer_plugin_dirs dirs;
    if (cinfer_plugin_dirs_collect(search_path, &dirs))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory collecting plugin folders");
    int rc = CINFER_ERR_NOT_FOUND;
    for (size_t i = 0; i < dirs.count; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.so", dirs.dirs[i], name_or_path);
        if (file_exists(path)) {
            rc = open_file(path, expected_kind, out, err);
            break;
        }
    }
    if (rc == CINFER_ERR_NOT_FOUND) {
        char where[2048];
        cinfer_error_set(err, rc, "plugin '%s' not found: looked for %s.so in %s", name_or_path,
                         name_or_path, cinfer_plugin_dirs_describe(&dirs, where, sizeof where));
    }
    cinfer_plugin_dirs_free(&dirs);
    return rc;
}

const struct cinfer_plugin_descriptor *cinfer_plugin_descriptor_of(const struct cinfer_plugin *p)
{
    return p->desc;
}

const void *cinfer_plugin_vtable(const struct cinfer_plugin *p)
{
    return p->desc->vtable;
}

const char *cinfer_plugin_file(const struct cinfer_plugin *p)
{
    return p->file;
}

void cinfer_plugin_close(struct cinfer_plugin **pp)
{
    if (!pp || !*pp)
        return;
    struct cinfer_plugin *p = *pp;
    if (p->module) {
        pthread_mutex_lock(&ltdl_lock);
        lt_dlclose(p->module);
        pthread_mutex_unlock(&ltdl_lock);
    }
    free(p->file);
    free(p);
    *pp = NULL;
}

static void report(const char *file, const struct cinfer_plugin *p, const struct cinfer_error *why,
                   cinfer_plugin_listing_fn fn, void *ctx)
{
    struct cinfer_plugin_listing entry = {.file = file};
    if (p) {
        entry.name = p->desc->name;
        entry.kind = cinfer_plugin_kind_name(p->desc->kind);
        entry.version = p->desc->version;
        entry.loads = 1;
        entry.plugin = p;
    } else {
        entry.why_not = why->message;
    }
    fn(&entry, ctx);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cinfer_plugin_list(const char *search_path, cinfer_plugin_listing_fn fn, void *ctx,
                       struct cinfer_error *err)
{
    for (size_t i = 0; core_builtin(i); i++) {
        struct cinfer_plugin *p = NULL;
        struct cinfer_error why = {0};
        wrap_builtin(core_builtin(i), 0, &p, &why);
        report("built-in", p, &why, fn, ctx);
        cinfer_plugin_close(&p);
    }
    {
        const struct cinfer_plugin_descriptor *const *table = cinfer_builtin_plugin_table();
        for (size_t i = 0; table && table[i]; i++) {
            struct cinfer_plugin *p = NULL;
            struct cinfer_error why = {0};
            wrap_builtin(table[i], 0, &p, &why);
            report("built-in", p, &why, fn, ctx);
            cinfer_plugin_close(&p);
        }
    }
    struct cinfer_plugin_dirs dirs;
    if (cinfer_plugin_dirs_collect(search_path, &dirs))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory collecting plugin folders");
    for (size_t d = 0; d < dirs.count; d++) {
        DIR *dir = opendir(dirs.dirs[d]);
        if (!dir)
            continue; /* a configured folder that does not exist simply holds no plugins */
        char *names[1024];
        size_t n = 0;
        struct dirent *ent;
        while ((ent = readdir(dir)) && n < sizeof names / sizeof names[0]) {
            size_t len = strlen(ent->d_name);
            if (len > 3 && !strcmp(ent->d_name + len - 3, ".so"))
                names[n++] = strdup(ent->d_name);
        }
        closedir(dir);
        qsort(names, n, sizeof names[0], compare_names);
        for (size_t i = 0; i < n; i++) {
            if (!names[i])
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dirs.dirs[d], names[i]);
            struct cinfer_plugin *p = NULL;
            struct cinfer_error why = {0};
            open_file(path, 0, &p, &why);
            report(path, p, &why, fn, ctx);
            cinfer_plugin_close(&p);
            free(names[i]);
        }
    }
    cinfer_plugin_dirs_free(&dirs);
    return CINFER_OK;
}

int cinfer_launcher_query(const struct cinfer_plugin *p, const struct cinfer_launcher_config *config,
                          struct cinfer_launcher_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    if (!p || p->desc->kind != CINFER_PLUGIN_KIND_LAUNCHER)
        return CINFER_ERR_INVALID_ARGUMENT;
    const struct cinfer_launcher_ops *ops = p->desc->vtable;
    if (ops->version >= 2)
        return ops->query_config(config, answer);
    answer->usable = ops->query(&answer->priority) == 1;
    if (!answer->usable)
        snprintf(answer->why, sizeof answer->why, "its query() said no (a version-1 launcher gives no reason)");
    return CINFER_OK;
}

int cinfer_backend_query(const struct cinfer_plugin *p, struct cinfer_backend_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    if (!p || p->desc->kind != CINFER_PLUGIN_KIND_BACKEND)
        return CINFER_ERR_INVALID_ARGUMENT;
    const struct cinfer_backend_ops *ops = p->desc->vtable;
    int rc = ops->query(answer);
    answer->why[sizeof answer->why - 1] = '\0';
    if (rc == CINFER_OK && !answer->usable && !answer->why[0])
        snprintf(answer->why, sizeof answer->why, "its query() said no without a reason");
    return rc;
}
