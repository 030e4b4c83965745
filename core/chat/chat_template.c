/* core/chat/chat_template.c — the public chat-template API: compile a template once
 * (tokens and tree in the template's own arena, read-only afterwards, so one template
 * serves many threads), render it with a JSON context under bounds on memory, steps,
 * nesting and output. */
#include <stdlib.h>
#include <string.h>

#include "cinfer/chat_template.h"
#include "chat/jinja.h"

struct cinfer_chat_template {
    struct jinja_arena arena;
    struct jinja_node_list program;
    char *name;
};

#define JINJA_MAX_SOURCE_BYTES (16u << 20)

int cinfer_chat_template_compile(const char *source, size_t len, const char *name,
                                 struct cinfer_chat_template **out, struct cinfer_error *err)
{
    if (!out)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "chat template: out is NULL");
    *out = NULL;
    if (!name)
        name = "chat_template";
    if (!source && len)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "%s: source is NULL", name);
    if (len > JINJA_MAX_SOURCE_BYTES)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "%s: the template has %zu bytes, more than the %u allowed",
                                name, len, JINJA_MAX_SOURCE_BYTES);
    struct cinfer_chat_template *t = calloc(1, sizeof(*t));
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", name);
    }
    struct jinja_tokens tokens;
    int rc = cinfer_jinja_tokenize(source ? source : "", len, t->name, &t->arena, &tokens, err);
    if (!rc)
        rc = cinfer_jinja_parse(&tokens, t->name, &t->arena, &t->program, err);
    if (rc) {
        cinfer_chat_template_free(&t);
        return rc;
    }
    *out = t;
    return 0;
}

void cinfer_jinja_default_limits(struct jinja_limits *l)
{
    l->max_output_bytes = CINFER_CHAT_TEMPLATE_MAX_OUTPUT_BYTES;
    l->max_memory_bytes = (size_t)256 << 20;
    l->max_steps = 20000000;
    l->max_depth = 300;
}

int cinfer_jinja_render_with_limits(const struct cinfer_chat_template *t, const char *context_json, size_t context_len,
                                    const struct jinja_limits *limits, char **out, size_t *out_len,
                                    struct cinfer_error *err)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!t || !out)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "chat template render: template or out is NULL");
    struct jinja_rt rt = {
        .arena = {.limit_bytes = limits->max_memory_bytes},
        .name = t->name,
        .err = err,
        .max_steps = limits->max_steps,
        .max_depth = limits->max_depth,
        .max_output_bytes = limits->max_output_bytes,
    };
    struct jbuf text = {.limit_bytes = limits->max_output_bytes};
    struct jv context;
    int rc;
    if (!context_json || context_len == 0) {
        struct jv_object *empty = cinfer_jv_object_new(&rt, 0);
        rc = empty ? 0 : cinfer_jinja_nomem(&rt, NULL);
        context = (struct jv){.kind = JV_OBJECT, .u.o = empty};
    } else {
        rc = cinfer_jv_from_json(&rt, context_json, context_len, &context);
    }
    if (!rc)
        rc = cinfer_jinja_render(&rt, &t->program, context, &text);
    if (!rc && text.failed)
        rc = cinfer_error_set(err, CINFER_ERR_RANGE, "%s: the output would exceed %zu bytes", t->name,
                              limits->max_output_bytes);
    if (!rc && !text.p && !cinfer_jbuf_append(&text, "", 0))
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", t->name);
    cinfer_jinja_arena_free(&rt.arena);
    if (rc) {
        cinfer_jbuf_free(&text);
        return rc;
    }
    text.n = cinfer_jinja_wtf8_to_utf8(text.p, text.n);
    text.p[text.n] = 0;
    *out = text.p;
    if (out_len)
        *out_len = text.n;
    return 0;
}

int cinfer_chat_template_render(const struct cinfer_chat_template *t, const char *context_json, size_t context_len,
                                char **out, size_t *out_len, struct cinfer_error *err)
{
    struct jinja_limits l;
    cinfer_jinja_default_limits(&l);
    return cinfer_jinja_render_with_limits(t, context_json, context_len, &l, out, out_len, err);
}

void cinfer_chat_template_free(struct cinfer_chat_template **t)
{
    if (!t || !*t)
        return;
    cinfer_jinja_arena_free(&(*t)->arena);
    free((*t)->name);
    free(*t);
    *t = NULL;
}
