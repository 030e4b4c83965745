/* "auto" for any plugin kind (launcher.plugin, engine.device): ask every loadable plugin
 * of the kind on the search path whether it can run here and open the usable one of
 * highest priority (the first found wins a tie; a name found again later on the path is
 * shadowed, as the loader does). */
#ifndef CINFER_PLUGIN_CHOICE_H
#define CINFER_PLUGIN_CHOICE_H

#include <stddef.h>

#include "cinfer/plugin.h"
#include "cinfer/plugins.h"

/* A plugin's answer: usable, its priority, and why not. 0, or a negative code when the
 * plugin could not be asked (it is then passed over). */
typedef int (*cinfer_plugin_ask_fn)(const struct cinfer_plugin *plugin, void *ctx, int *usable, int *priority,
                                    const char **why);

/* Opens the winner into *out. CINFER_ERR_NOT_FOUND (err untouched, *out NULL) when no
 * plugin of the kind is usable; either way answers (answers_bytes) lists every answer,
 * "name: usable, priority N; name: not usable: why", for the caller's message. */
int cinfer_plugin_choose(const char *search_path, enum cinfer_plugin_kind kind, cinfer_plugin_ask_fn ask, void *ctx,
                         struct cinfer_plugin **out, char *answers, size_t answers_bytes, struct cinfer_error *err);

#endif
