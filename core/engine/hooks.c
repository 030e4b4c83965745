#include "engine/hooks.h"

#include <stddef.h>

void cinfer_engine_default_hooks(struct cinfer_engine_hooks *hooks)
{
    hooks->run_scheduler_process = cinfer_default_run_scheduler_process;
    hooks->run_detokenizer_process = cinfer_default_run_detokenizer_process;
    hooks->init_tokenizer = cinfer_default_init_tokenizer;
}

static struct cinfer_engine_hooks worker_hooks;
static int worker_hooks_set;

void cinfer_worker_set_hooks(const struct cinfer_engine_hooks *hooks)
{
    cinfer_engine_default_hooks(&worker_hooks);
    if (hooks) {
        if (hooks->run_scheduler_process)
            worker_hooks.run_scheduler_process = hooks->run_scheduler_process;
        if (hooks->run_detokenizer_process)
            worker_hooks.run_detokenizer_process = hooks->run_detokenizer_process;
        if (hooks->init_tokenizer)
            worker_hooks.init_tokenizer = hooks->init_tokenizer;
    }
    worker_hooks_set = 1;
}

const struct cinfer_engine_hooks *cinfer_worker_hooks(void)
{
    if (!worker_hooks_set)
        cinfer_worker_set_hooks(NULL);
    return &worker_hooks;
}
