#include "plugin/plugin_choice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct choice {
    enum cinfer_plugin_kind kind;
    cinfer_plugin_ask_fn ask;
    void *ctx;
    char best_file[4096];
    char best_name[128];
    int best_priority;
    int found;
    char seen_names[32][128]; /* a name found again later in the search order is shadowed */
    int n_seen;
    char *answers;
    size_t answers_bytes;
};

static void consider(const struct cinfer_plugin_listing *e, void *arg)
{
    struct choice *c = arg;
    if (!e->loads || !e->plugin || !e->kind || strcmp(e->kind, cinfer_plugin_kind_name(c->kind)))
        return;
    for (int i = 0; i < c->n_seen; i++)
        if (!strcmp(c->seen_names[i], e->name))
            return;
    if (c->n_seen < 32)
        snprintf(c->seen_names[c->n_seen++], sizeof c->seen_names[0], "%s", e->name);
    int usable = 0, priority = 0;
    const char *why = "";
    if (c->ask(e->plugin, c->ctx, &usable, &priority, &why) != CINFER_OK)
        return;
    size_t used = strlen(c->answers);
    if (usable)
        snprintf(c->answers + used, c->answers_bytes - used, "%s%s: usable, priority %d", used ? "; " : "", e->name,
                 priority);
    else
        snprintf(c->answers + used, c->answers_bytes - used, "%s%s: not usable: %s", used ? "; " : "", e->name, why);
    if (usable && (!c->found || priority > c->best_priority)) {
        c->found = 1;
        c->best_priority = priority;
        snprintf(c->best_file, sizeof c->best_file, "%s", e->file);
        snprintf(c->best_name, sizeof c->best_name, "%s", e->name);
    }
}

int cinfer_plugin_choose(const char *search_path, enum cinfer_plugin_kind kind, cinfer_plugin_ask_fn ask, void *ctx,
                         struct cinfer_plugin **out, char *answers, size_t answers_bytes, struct cinfer_error *err)
{
    *out = NULL;
    answers[0] = '\0';
    struct choice *c = calloc(1, sizeof *c);
    if (!c)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory choosing a %s", cinfer_plugin_kind_name(kind));
    c->kind = kind;
    c->ask = ask;
    c->ctx = ctx;
    c->answers = answers;
    c->answers_bytes = answers_bytes;
    int rc = cinfer_plugin_list(search_path, consider, c, err);
    if (rc == CINFER_OK && !c->found)
        rc = CINFER_ERR_NOT_FOUND;
    else if (rc == CINFER_OK) /* a built-in is opened by name, a file by its path: the one asked is the one run */
        rc = cinfer_plugin_open(strcmp(c->best_file, "built-in") ? c->best_file : c->best_name, kind, search_path,
                                out, err);
    free(c);
    return rc;
}
