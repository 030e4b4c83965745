/* core/config/flags.c — command-line flags over server args: --flag VALUE, --flag=VALUE,
 * bare on/off flags; the command's own flags and positional arguments are handed back
 * untouched, in order. */
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

#define CONFIG_FLAG "--config"

static const struct cinfer_command_flag *command_flag(const struct cinfer_command_flag *flags, const char *name,
                                                      size_t name_len)
{
    for (; flags && flags->name; flags++)
        if (strlen(flags->name) == name_len && !memcmp(flags->name, name, name_len))
            return flags;
    return NULL;
}

static int unknown_flag(const char *arg, size_t name_len, const struct cinfer_command_flag *command_flags,
                        struct cinfer_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(name_len < sizeof name ? name_len : sizeof name - 1), arg);
    const char *candidates[2 * CINFER_SERVER_ARGS_MAX_OPTIONS + 64];
    int n = 0;
    for (int i = 0; i < cinfer_options_count; i++) {
        candidates[n++] = cinfer_options[i].flag;
        if (cinfer_options[i].flag_alias)
            candidates[n++] = cinfer_options[i].flag_alias;
    }
    candidates[n++] = CONFIG_FLAG;
    for (const struct cinfer_command_flag *f = command_flags; f && f->name && n < (int)(sizeof candidates / sizeof *candidates); f++)
        candidates[n++] = f->name;
    const char *close = cinfer_closest_word(name, candidates, n);
    if (close)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "unknown flag %s (did you mean %s?)", name, close);
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "unknown flag %s (--help lists the flags)", name);
}

static int missing_value(const struct option *opt, const char *written, struct cinfer_error *err)
{
    char expected[256];
    cinfer_option_describe_expected(opt, 1, expected, sizeof expected);
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: missing its value (%s)", written, expected);
}

/* Applies the flags to args directly; the public function wraps this in a copy. */
static int apply(struct cinfer_server_args *args, int argc, char **argv,
                 const struct cinfer_command_flag *command_flags, char **rest, int *n_rest,
                 struct cinfer_error *err)
{
    int kept = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--")) {
            while (++i < argc)
                rest[kept++] = argv[i];
            break;
        }
        /* "-" alone (stdin) and anything not starting with '-' is positional. */
        if (arg[0] != '-' || arg[1] == '\0') {
            rest[kept++] = argv[i];
            continue;
        }
        const char *equals = strchr(arg, '=');
        size_t name_len = equals ? (size_t)(equals - arg) : strlen(arg);
        const char *inline_value = equals ? equals + 1 : NULL;

        const struct cinfer_command_flag *own = command_flag(command_flags, arg, name_len);
        if (own) {
            rest[kept++] = argv[i];
            if (own->takes_value && !inline_value && i + 1 < argc)
                rest[kept++] = argv[++i];
            continue;
        }
        if (name_len == strlen(CONFIG_FLAG) && !memcmp(arg, CONFIG_FLAG, name_len)) {
            if (!inline_value && ++i >= argc)
                return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: missing its value (a config file)", CONFIG_FLAG);
            continue; /* loaded by cinfer_server_args_parse_command_line, before the flags */
        }
        const struct option *opt = cinfer_option_by_flag(arg, name_len);
        if (!opt)
            return unknown_flag(arg, name_len, command_flags, err);

        const char *value = inline_value;
        if (!value && opt->type == OPTION_BOOL) {
            value = "true"; /* a bare on/off flag turns it on */
        } else if (!value) {
            if (i + 1 >= argc)
                return missing_value(opt, arg, err);
            value = argv[++i];
        }
        int rc = cinfer_option_set_from_text(args, opt, value, err);
        if (rc)
            return cinfer_error_prefix(err, "%.*s", (int)name_len, arg);
        args->origin[cinfer_option_index(opt)] = CINFER_ORIGIN_FLAG;
    }
    *n_rest = kept;
    return 0;
}

int cinfer_server_args_apply_flags(struct cinfer_server_args *args, int argc, char **argv,
                                   const struct cinfer_command_flag *command_flags, char **rest, int *n_rest,
                                   struct cinfer_error *err)
{
    struct cinfer_server_args updated;
    int rc = cinfer_server_args_copy(&updated, args, err);
    if (rc)
        return rc;
    rc = apply(&updated, argc, argv, command_flags, rest, n_rest, err);
    if (rc) {
        cinfer_server_args_free(&updated);
        *n_rest = 0;
        return rc;
    }
    cinfer_server_args_free(args);
    *args = updated;
    return 0;
}

/* The value of the last --config in argv (a later one wins, like any flag), or NULL. */
static const char *config_file_flag(int argc, char **argv, const struct cinfer_command_flag *command_flags)
{
    const char *path = NULL;
    size_t config_len = strlen(CONFIG_FLAG);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--"))
            break;
        const char *equals = strchr(arg, '=');
        size_t name_len = equals ? (size_t)(equals - arg) : strlen(arg);
        const struct cinfer_command_flag *own = command_flag(command_flags, arg, name_len);
        const struct option *opt = own ? NULL : cinfer_option_by_flag(arg, name_len);
        if (name_len == config_len && !memcmp(arg, CONFIG_FLAG, config_len)) {
            if (equals)
                path = equals + 1;
            else if (i + 1 < argc)
                path = argv[++i];
        } else if (!equals && ((own && own->takes_value) || (opt && opt->type != OPTION_BOOL))) {
            i++; /* skip the value: "--chat-template --config" names a file called --config */
        }
    }
    return path;
}

int cinfer_server_args_parse_command_line(struct cinfer_server_args *args, int argc, char **argv,
                                          const struct cinfer_command_flag *command_flags, char **rest,
                                          int *n_rest, struct cinfer_error *err)
{
    *n_rest = 0;
    int rc = cinfer_server_args_init(args, err);
    if (rc)
        return rc;
    const char *config_path = config_file_flag(argc, argv, command_flags);
    if (config_path)
        rc = cinfer_server_args_load_file(args, config_path, err);
    if (!rc)
        rc = cinfer_server_args_apply_flags(args, argc, argv, command_flags, rest, n_rest, err);
    if (!rc)
        rc = cinfer_server_args_validate(args, err);
    if (rc) {
        cinfer_server_args_free(args);
        *n_rest = 0;
    }
    return rc;
}
