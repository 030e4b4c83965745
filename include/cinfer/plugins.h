/* cinfer/plugins.h — finding and loading plugins (libltdl).
 *
 * Search order for a plugin named NAME: each folder of the configured path
 * (colon-separated), each folder of $CINFER_PLUGIN_PATH, then the install folder
 * (lib/cinfer/plugins beside libcinfer). In a CINFER_STATIC_PLUGINS build the
 * built-in table is searched first. NAME may also be a path to a .so file.
 *
 * The loader reads the descriptor symbol and checks abi_version, struct_size, kind,
 * name and the vtable's version/size before any plugin code runs; every refusal names
 * the file and what was expected and found. A loaded plugin stays resident until the
 * last cinfer_plugin_close() of it. */
#ifndef CINFER_PLUGINS_H
#define CINFER_PLUGINS_H

#include <stdint.h>

#include "cinfer/error.h"
#include "cinfer/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cinfer_plugin;

/* expected_kind: an enum cinfer_plugin_kind, or 0 to accept any kind.
 * search_path: colon-separated folders searched first; may be NULL. */
CINFER_API int cinfer_plugin_open(const char *name_or_path, uint32_t expected_kind,
                                  const char *search_path, struct cinfer_plugin **out,
                                  struct cinfer_error *err);
CINFER_API const struct cinfer_plugin_descriptor *
cinfer_plugin_descriptor_of(const struct cinfer_plugin *p);
/* The vtable, already checked against the kind's version and size. */
CINFER_API const void *cinfer_plugin_vtable(const struct cinfer_plugin *p);
/* The file it came from, or "built-in". */
CINFER_API const char *cinfer_plugin_file(const struct cinfer_plugin *p);
CINFER_API void cinfer_plugin_close(struct cinfer_plugin **p);

/* What `cinfer plugins` prints: one entry per candidate file found. */
struct cinfer_plugin_listing {
    const char *file;     /* path, or "built-in" */
    const char *name;     /* from the descriptor; NULL if it did not load */
    const char *kind;     /* "launcher", "tokenizer", "backend" or NULL */
    const char *version;  /* NULL if it did not load */
    int loads;            /* 1 when every check passed */
    const char *why_not;  /* the refusal when loads == 0 */
    /* Appended later: the loaded plugin, valid during the callback only (NULL when it
     * did not load), e.g. to ask a launcher with cinfer_launcher_query(). */
    const struct cinfer_plugin *plugin;
};
typedef void (*cinfer_plugin_listing_fn)(const struct cinfer_plugin_listing *entry, void *ctx);
CINFER_API int cinfer_plugin_list(const char *search_path, cinfer_plugin_listing_fn fn, void *ctx,
                                  struct cinfer_error *err);

CINFER_API const char *cinfer_plugin_kind_name(uint32_t kind);

/* Asks a loaded launcher plugin whether it can start the configured workers here:
 * query_config for a version-2 launcher, query for a version-1 one (which cannot say
 * why not). CINFER_ERR_INVALID_ARGUMENT when p is not a launcher. */
struct cinfer_launcher_config;
struct cinfer_launcher_answer;
CINFER_API int cinfer_launcher_query(const struct cinfer_plugin *p, const struct cinfer_launcher_config *config,
                                     struct cinfer_launcher_answer *answer);
/* Asks a loaded backend plugin whether it can run here (its query slot; the loader
 * has checked that the slot exists). CINFER_ERR_INVALID_ARGUMENT when p is not a
 * backend; otherwise what query returned. answer->why is filled when not usable. */
struct cinfer_backend_answer;
CINFER_API int cinfer_backend_query(const struct cinfer_plugin *p, struct cinfer_backend_answer *answer);
/* The folder the loader searches last (beside libcinfer); NULL for a static build. */
CINFER_API const char *cinfer_plugin_install_dir(void);

#ifdef __cplusplus
}
#endif
#endif
