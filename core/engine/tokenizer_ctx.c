/* The default init_tokenizer hook: loads the configured tokenizer plugin and opens the
 * model's tokenizer with it. */
#include <stdlib.h>

#include "cinfer/config.h"
#include "cinfer/engine.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "engine/default_model.h"
#include "worker/hooks.h"

int cinfer_default_init_tokenizer(const struct cinfer_server_args *args, struct cinfer_tokenizer_ctx **out,
                                  struct cinfer_error *err)
{
    *out = NULL;
    const char *plugin_name = args->tokenizer && args->tokenizer[0] ? args->tokenizer : "tokenizer-bpe";
    const char *path = args->tokenizer_path ? args->tokenizer_path
                       : args->model_path   ? args->model_path
                                            : cinfer_default_model_path();
    struct cinfer_tokenizer_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory loading the tokenizer");
    int rc = cinfer_plugin_open(plugin_name, CINFER_PLUGIN_KIND_TOKENIZER, args->plugin_path, &ctx->plugin, err);
    if (rc) {
        free(ctx);
        return rc;
    }
    ctx->ops = cinfer_plugin_vtable(ctx->plugin);
    rc = ctx->ops->open(path, &ctx->tok, err);
    if (rc) {
        cinfer_plugin_close(&ctx->plugin);
        free(ctx);
        return rc;
    }
    *out = ctx;
    return CINFER_OK;
}

void cinfer_tokenizer_ctx_free(struct cinfer_tokenizer_ctx **ctx)
{
    if (!ctx || !*ctx)
        return;
    if ((*ctx)->tok)
        (*ctx)->ops->close((*ctx)->tok);
    cinfer_plugin_close(&(*ctx)->plugin);
    free(*ctx);
    *ctx = NULL;
}
