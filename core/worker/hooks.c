#include "worker/hooks.h"

#include <stddef.h>
#include <string.h>

void cinfer_engine_default_hooks(struct cinfer_engine_hooks *hooks)
{
    memset(hooks, 0, sizeof *hooks);
    hooks->version = CINFER_ENGINE_HOOKS_VERSION;
    hooks->struct_size = sizeof *hooks;
    hooks->run_scheduler_process = cinfer_default_run_scheduler_process;
    hooks->run_detokenizer_process = cinfer_default_run_detokenizer_process;
    hooks->init_tokenizer = cinfer_default_init_tokenizer;
}

int cinfer_hooks_check(const struct cinfer_engine_hooks *hooks, struct cinfer_error *err)
{
    if (!hooks)
        return CINFER_OK;
    if (hooks->version == 0 || hooks->struct_size < offsetof(struct cinfer_engine_hooks, run_scheduler_process))
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "engine hooks have version %u and struct_size %u: fill them with "
                                "cinfer_engine_default_hooks() before replacing slots (version %u, %zu bytes)",
                                hooks->version, hooks->struct_size, CINFER_ENGINE_HOOKS_VERSION,
                                sizeof(struct cinfer_engine_hooks));
    return CINFER_OK;
}

int cinfer_hooks_merge(struct cinfer_engine_hooks *out, const struct cinfer_engine_hooks *given)
{
    cinfer_engine_default_hooks(out);
    if (!given || given->version == 0)
        return 0;
    struct cinfer_engine_hooks caller = *out;
    size_t n = given->struct_size < sizeof caller ? given->struct_size : sizeof caller;
    memcpy(&caller, given, n); /* slots beyond the caller's struct keep the defaults */
    int custom = 0;
#define TAKE(slot)                                 \
    if (caller.slot && caller.slot != out->slot) { \
        out->slot = caller.slot;                   \
        custom = 1;                                \
    }
    TAKE(run_scheduler_process)
    TAKE(run_detokenizer_process)
    TAKE(init_tokenizer)
#undef TAKE
    return custom;
}

/* A worker process runs one worker: its hooks are the process's. */
static struct cinfer_engine_hooks worker_hooks;
static int worker_hooks_set;

void cinfer_worker_set_hooks(const struct cinfer_engine_hooks *hooks)
{
    cinfer_hooks_merge(&worker_hooks, hooks);
    worker_hooks_set = 1;
}

const struct cinfer_engine_hooks *cinfer_worker_hooks(void)
{
    if (!worker_hooks_set)
        cinfer_worker_set_hooks(NULL);
    return &worker_hooks;
}
