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

/* Caller's hooks must start with a version and struct_size (cinfer_engine_default_hooks
 * sets them): CINFER_ERR_INVALID_ARGUMENT otherwise. NULL is fine (the defaults). */
int cinfer_hooks_check(const struct cinfer_engine_hooks *hooks, struct cinfer_error *err);
/* out = the defaults, with every set slot that given's struct_size covers replacing
 * one; returns 1 when any slot differs from its default. */
int cinfer_hooks_merge(struct cinfer_engine_hooks *out, const struct cinfer_engine_hooks *given);

/* Set by the worker entry point before it calls a hook (a worker process runs one
 * worker, so its hooks are the process's). */
void cinfer_worker_set_hooks(const struct cinfer_engine_hooks *hooks);
const struct cinfer_engine_hooks *cinfer_worker_hooks(void);

#endif
