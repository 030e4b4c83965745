/* The default implementations behind struct cinfer_engine_hooks, and the hooks a
 * worker process runs with (so the detokenizer uses an overridden init_tokenizer). */
#ifndef CINFER_ENGINE_HOOKS_H
#define CINFER_ENGINE_HOOKS_H

#include "cinfer/config.h"
#include "cinfer/engine.h"

int cinfer_default_run_scheduler_process(const struct cinfer_server_args *args, const struct cinfer_port_args *ports,
                                         int gpu_id, int tp_rank, int dp_rank);
int cinfer_default_run_detokenizer_process(const struct cinfer_server_args *args,
                                           const struct cinfer_port_args *ports);
int cinfer_default_init_tokenizer(const struct cinfer_server_args *args, struct cinfer_tokenizer_ctx **out,
                                  struct cinfer_error *err);

/* Set by the worker entry point before it calls a hook. */
void cinfer_worker_set_hooks(const struct cinfer_engine_hooks *hooks);
const struct cinfer_engine_hooks *cinfer_worker_hooks(void);

#endif
