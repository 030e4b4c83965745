/* core/config/args.c — the life of a struct cinfer_server_args: defaults from the
 * option table, deep copies, freeing. */
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

static int set_default(struct cinfer_server_args *args, const struct option *opt, struct cinfer_error *err)
{
    switch (opt->type) {
    case OPTION_STRING:
        return cinfer_option_set_string(args, opt, opt->default_string, err);
    case OPTION_STRING_LIST:
        return cinfer_option_set_from_text(args, opt, opt->default_string ? opt->default_string : "", err);
    case OPTION_INT:
    case OPTION_INT64:
    case OPTION_BYTES:
    case OPTION_DURATION_MS:
        return cinfer_option_set_int(args, opt, opt->default_int, err);
    case OPTION_DOUBLE:
        return cinfer_option_set_double(args, opt, opt->default_double, err);
    case OPTION_BOOL:
    case OPTION_ENUM:
        *(int *)cinfer_option_field(args, opt) = (int)opt->default_int;
        return 0;
    }
    return CINFER_ERR_INTERNAL;
}

int cinfer_server_args_init(struct cinfer_server_args *args, struct cinfer_error *err)
{
    memset(args, 0, sizeof *args);
    for (int i = 0; i < cinfer_options_count; i++) {
        int rc = set_default(args, &cinfer_options[i], err);
        if (rc) {
            cinfer_error_prefix(err, "default of %s.%s", cinfer_options[i].section, cinfer_options[i].name);
            cinfer_server_args_free(args);
            return rc;
        }
        args->origin[i] = CINFER_ORIGIN_DEFAULT;
    }
    return 0;
}

void cinfer_server_args_free(struct cinfer_server_args *args)
{
    if (!args)
        return;
    for (int i = 0; i < cinfer_options_count; i++)
        cinfer_option_clear(args, &cinfer_options[i]);
}

int cinfer_server_args_copy(struct cinfer_server_args *dst, const struct cinfer_server_args *src,
                            struct cinfer_error *err)
{
    *dst = *src;
    /* The pointers in dst are src's until replaced; unset them first so that a failure
     * halfway frees only what was copied. */
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *opt = &cinfer_options[i];
        if (opt->type == OPTION_STRING)
            *(char **)cinfer_option_field(dst, opt) = NULL;
        else if (opt->type == OPTION_STRING_LIST)
            memset(cinfer_option_field(dst, opt), 0, sizeof(struct cinfer_string_list));
    }
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *opt = &cinfer_options[i];
        int rc = 0;
        if (opt->type == OPTION_STRING) {
            /* Copied without the option's checks: src already passed them. */
            const char *value = *(char *const *)cinfer_option_field_const(src, opt);
            if (value && !(*(char **)cinfer_option_field(dst, opt) = strdup(value)))
                rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory copying %s.%s", opt->section, opt->name);
        } else if (opt->type == OPTION_STRING_LIST) {
            const struct cinfer_string_list *list = cinfer_option_field_const(src, opt);
            rc = cinfer_option_set_list(dst, opt, (const char *const *)list->items, list->count, err);
        }
        if (rc) {
            cinfer_server_args_free(dst);
            return rc;
        }
    }
    return 0;
}

int cinfer_server_args_origin(const struct cinfer_server_args *args, const char *key)
{
    const char *dot = strchr(key, '.');
    if (!dot)
        return -1;
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *opt = &cinfer_options[i];
        if (strlen(opt->section) == (size_t)(dot - key) && !memcmp(opt->section, key, (size_t)(dot - key)) &&
            !strcmp(opt->name, dot + 1))
            return args->origin[i];
    }
    return -1;
}
