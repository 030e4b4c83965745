/* PLACEHOLDER until the Jinja renderer lands (helper "jinja"). */
#include "cinfer/chat_template.h"

int cinfer_chat_template_compile(const char *source, size_t len, const char *name,
                                 struct cinfer_chat_template **out, struct cinfer_error *err)
{
    (void)source;
    (void)len;
    *out = NULL;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: chat templates are not built yet", name);
}

int cinfer_chat_template_render(const struct cinfer_chat_template *t, const char *context_json, size_t context_len,
                                char **out, size_t *out_len, struct cinfer_error *err)
{
    (void)t;
    (void)context_json;
    (void)context_len;
    *out = NULL;
    if (out_len)
        *out_len = 0;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "chat templates are not built yet");
}

void cinfer_chat_template_free(struct cinfer_chat_template **t)
{
    if (t)
        *t = NULL;
}
