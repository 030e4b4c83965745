/* A launcher plugin, offered where a tokenizer is expected. */
#include <errno.h>
#include <stddef.h>

#include "cinfer/launcher.h"
#include "cinfer/plugin.h"

static int query(int *priority) { *priority = 0; return 0; }
static int init(const struct cinfer_launcher_options *o, struct cinfer_launcher **out, struct cinfer_error *err)
{
    (void)o; (void)out;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "fake launcher starts nothing");
}
static int spawn(struct cinfer_launcher *l, const struct cinfer_spawn_request *r, struct cinfer_worker_handle **out,
                 struct cinfer_error *err)
{
    (void)l; (void)r; (void)out;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "fake launcher starts nothing");
}
static int status(struct cinfer_launcher *l, struct cinfer_worker_handle *w, struct cinfer_worker_status *out)
{
    (void)l; (void)w; (void)out;
    return CINFER_ERR_STATE;
}
static int sig(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int signo)
{
    (void)l; (void)w; (void)signo;
    return CINFER_ERR_STATE;
}
static int wait_for(struct cinfer_launcher *l, struct cinfer_worker_handle *w, int timeout_ms,
                    struct cinfer_worker_status *out)
{
    (void)l; (void)w; (void)timeout_ms; (void)out;
    return CINFER_ERR_STATE;
}
static void fini(struct cinfer_launcher **l) { *l = NULL; }

/* A version-1 launcher: its vtable ends at fini. */
static const struct cinfer_launcher_ops ops = {
    .version = 1, .struct_size = offsetof(struct cinfer_launcher_ops, query_config), .query = query, .init = init,
    .spawn = spawn, .status = status, .signal = sig, .wait = wait_for, .fini = fini};

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_LAUNCHER, "fake-wrong-kind", "1.0.0", &ops);
