/* core/config/load.c — reading a libconfig file into server args. Every setting must be
 * a known key of a known section with a value of the right type and range; anything
 * else is refused with the file, the line, the key, what was expected and what was
 * found. */
#include <errno.h>
#include <libconfig.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/prescan.h"
#include "config/options.h"

/* Where a setting was written, for messages: "cinfer.cfg:12". */
struct place {
    char file[512];
    int line;
};

/* name is what the text was loaded as; folder, for files, is where @include looks (an
 * included file is reported with it, as libconfig knows it only by its written name). */
static struct place place_of(const config_setting_t *setting, const char *name, const char *folder)
{
    struct place p = {.line = (int)config_setting_source_line(setting)};
    const char *file = config_setting_source_file(setting);
    if (!file || !strcmp(file, name))
        snprintf(p.file, sizeof p.file, "%s", name);
    else if (file[0] != '/' && folder)
        snprintf(p.file, sizeof p.file, "%s/%s", folder, file);
    else
        snprintf(p.file, sizeof p.file, "%s", file);
    return p;
}

static const char *type_phrase(const config_setting_t *setting)
{
    switch (config_setting_type(setting)) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a number with a decimal point";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    }
    return "nothing";
}

static int is_integer(const config_setting_t *s)
{
    return config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64;
}

static int wrong_type(const struct place *at, const struct option *opt, const config_setting_t *setting,
                      struct cinfer_error *err)
{
    char expected[256];
    cinfer_option_describe_expected(opt, 0, expected, sizeof expected);
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s.%s: expected %s, found %s", at->file, at->line,
                            opt->section, opt->name, expected, type_phrase(setting));
}

static int read_list(struct cinfer_server_args *args, const struct option *opt, const config_setting_t *setting,
                     const struct place *at, struct cinfer_error *err)
{
    int type = config_setting_type(setting);
    if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
        return wrong_type(at, opt, setting, err);
    int count = config_setting_length(setting);
    const char **items = calloc((size_t)count + 1, sizeof *items);
    if (!items)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reading %s.%s", opt->section, opt->name);
    for (int i = 0; i < count; i++) {
        const config_setting_t *item = config_setting_get_elem(setting, (unsigned)i);
        items[i] = config_setting_get_string(item);
        if (!items[i]) {
            free(items);
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s.%s[%d]: expected a string, found %s", at->file,
                                    at->line, opt->section, opt->name, i, type_phrase(item));
        }
    }
    int rc = cinfer_option_set_list(args, opt, items, count, err);
    free(items);
    if (rc)
        cinfer_error_prefix(err, "%s:%d: %s.%s", at->file, at->line, opt->section, opt->name);
    return rc;
}

/* Sets opt from one setting, whose type must fit opt's. */
static int read_value(struct cinfer_server_args *args, const struct option *opt, const config_setting_t *setting,
                      const struct place *at, struct cinfer_error *err)
{
    int type = config_setting_type(setting);
    int rc;
    switch (opt->type) {
    case OPTION_STRING:
    case OPTION_ENUM:
        if (type != CONFIG_TYPE_STRING)
            return wrong_type(at, opt, setting, err);
        if (opt->type == OPTION_STRING)
            rc = cinfer_option_set_string(args, opt, config_setting_get_string(setting), err);
        else
            rc = cinfer_option_set_from_text(args, opt, config_setting_get_string(setting), err);
        break;
    case OPTION_STRING_LIST:
        return read_list(args, opt, setting, at, err);
    case OPTION_INT:
    case OPTION_INT64:
        if (!is_integer(setting))
            return wrong_type(at, opt, setting, err);
        rc = cinfer_option_set_int(args, opt, config_setting_get_int64(setting), err);
        break;
    case OPTION_BYTES:
    case OPTION_DURATION_MS:
        /* An integer (bytes, milliseconds) or a string with a unit ("2G", "30s"). */
        if (is_integer(setting))
            rc = cinfer_option_set_int(args, opt, config_setting_get_int64(setting), err);
        else if (type == CONFIG_TYPE_STRING)
            rc = cinfer_option_set_from_text(args, opt, config_setting_get_string(setting), err);
        else
            return wrong_type(at, opt, setting, err);
        break;
    case OPTION_DOUBLE:
        if (type == CONFIG_TYPE_FLOAT)
            rc = cinfer_option_set_double(args, opt, config_setting_get_float(setting), err);
        else if (is_integer(setting))
            rc = cinfer_option_set_double(args, opt, (double)config_setting_get_int64(setting), err);
        else
            return wrong_type(at, opt, setting, err);
        break;
    case OPTION_BOOL:
        if (type != CONFIG_TYPE_BOOL)
            return wrong_type(at, opt, setting, err);
        *(int *)cinfer_option_field(args, opt) = config_setting_get_bool(setting) ? 1 : 0;
        rc = 0;
        break;
    default:
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s.%s has no type", opt->section, opt->name);
    }
    if (rc)
        cinfer_error_prefix(err, "%s:%d: %s.%s", at->file, at->line, opt->section, opt->name);
    return rc;
}

static int is_section(const char *name)
{
    for (int i = 0; cinfer_config_sections[i]; i++)
        if (!strcmp(name, cinfer_config_sections[i]))
            return 1;
    return 0;
}

/* The key of the first option named name in any section, or NULL. */
static const struct option *option_named(const char *name)
{
    for (int i = 0; i < cinfer_options_count; i++)
        if (!strcmp(cinfer_options[i].name, name))
            return &cinfer_options[i];
    return NULL;
}

static int unknown_key(const char *section, const char *name, const struct place *at, struct cinfer_error *err)
{
    const char *names[CINFER_SERVER_ARGS_MAX_OPTIONS];
    int n = 0;
    for (int i = 0; i < cinfer_options_count; i++)
        if (!strcmp(cinfer_options[i].section, section))
            names[n++] = cinfer_options[i].name;
    const char *close = cinfer_closest_word(name, names, n);
    if (close)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s.%s: unknown key (did you mean %s.%s?)", at->file,
                                at->line, section, name, section, close);
    const struct option *elsewhere = option_named(name);
    if (elsewhere)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s.%s: unknown key (%s belongs in section %s: %s.%s)",
                                at->file, at->line, section, name, name, elsewhere->section, elsewhere->section,
                                name);
    return cinfer_error_set(err, CINFER_ERR_CONFIG,
                            "%s:%d: %s.%s: unknown key (docs/configuration.md lists the keys of each section)",
                            at->file, at->line, section, name);
}

static int unknown_section(const config_setting_t *setting, const struct place *at, struct cinfer_error *err)
{
    const char *name = config_setting_name(setting);
    int n_sections = 0;
    char list[256] = "";
    for (; cinfer_config_sections[n_sections]; n_sections++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", n_sections ? ", " : "", cinfer_config_sections[n_sections]);
    }
    const struct option *key = option_named(name);
    if (key && !config_setting_is_group(setting))
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "%s:%d: %s: settings belong in a section (did you mean %s.%s, written as %s = { %s = ...; };?)",
                                at->file, at->line, name, key->section, name, key->section, name);
    const char *close = cinfer_closest_word(name, cinfer_config_sections, n_sections);
    if (close)
        return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s: unknown section (did you mean %s?)", at->file,
                                at->line, name, close);
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s: unknown section (the sections are %s)", at->file,
                            at->line, name, list);
}

static int read_config(struct cinfer_server_args *args, const config_t *cfg, const char *name,
                       const char *folder, struct cinfer_error *err)
{
    const config_setting_t *root = config_root_setting(cfg);
    for (int i = 0; i < config_setting_length(root); i++) {
        const config_setting_t *section = config_setting_get_elem(root, (unsigned)i);
        const char *section_name = config_setting_name(section);
        struct place at = place_of(section, name, folder);
        if (!is_section(section_name))
            return unknown_section(section, &at, err);
        if (!config_setting_is_group(section))
            return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s: expected a section (%s = { ... };), found %s",
                                    at.file, at.line, section_name, section_name, type_phrase(section));
        for (int j = 0; j < config_setting_length(section); j++) {
            const config_setting_t *setting = config_setting_get_elem(section, (unsigned)j);
            const char *key = config_setting_name(setting);
            at = place_of(setting, name, folder);
            const struct option *opt = cinfer_option_by_key(section_name, key);
            if (!opt)
                return unknown_key(section_name, key, &at, err);
            int rc = read_value(args, opt, setting, &at, err);
            if (rc)
                return rc;
            args->origin[cinfer_option_index(opt)] = CINFER_ORIGIN_FILE;
        }
    }
    return 0;
}

static int syntax_error(const config_t *cfg, const char *name, const char *folder, struct cinfer_error *err)
{
    char file[512];
    const char *error_file = config_error_file(cfg);
    if (error_file && strcmp(error_file, name) && error_file[0] != '/' && folder)
        snprintf(file, sizeof file, "%s/%s", folder, error_file);
    else
        snprintf(file, sizeof file, "%s", error_file ? error_file : name);
    if (config_error_type(cfg) == CONFIG_ERR_FILE_IO)
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot read the config file (%s)", file,
                                config_error_text(cfg) ? config_error_text(cfg) : "file I/O error");
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: %s", file, config_error_line(cfg),
                            config_error_text(cfg) ? config_error_text(cfg) : "syntax error");
}

/* Reads cfg's settings into a copy of args and swaps it in on success, so that a
 * failed load leaves args as it was. */
static int read_into(struct cinfer_server_args *args, const config_t *cfg, const char *name, const char *folder,
                     struct cinfer_error *err)
{
    struct cinfer_server_args updated;
    int rc = cinfer_server_args_copy(&updated, args, err);
    if (rc)
        return rc;
    rc = read_config(&updated, cfg, name, folder, err);
    if (rc) {
        cinfer_server_args_free(&updated);
        return rc;
    }
    cinfer_server_args_free(args);
    *args = updated;
    return 0;
}

int cinfer_server_args_load_string(struct cinfer_server_args *args, const char *text, const char *name,
                                   struct cinfer_error *err)
{
    int rc = cinfer_config_prescan(text, name, 0, err);
    if (rc)
        return rc;
    config_t cfg;
    config_init(&cfg);
    if (config_read_string(&cfg, text) != CONFIG_TRUE)
        rc = syntax_error(&cfg, name, NULL, err);
    else
        rc = read_into(args, &cfg, name, NULL, err);
    config_destroy(&cfg);
    return rc;
}

/* The whole file, NUL-terminated, or NULL with err set. */
static char *read_whole_file(const char *path, struct cinfer_error *err)
{
    enum { MAX_CONFIG_BYTES = 16 << 20 };
    FILE *f = fopen(path, "r");
    if (!f) {
        cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot read the config file: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(MAX_CONFIG_BYTES + 1);
    size_t len = text ? fread(text, 1, MAX_CONFIG_BYTES + 1, f) : 0;
    int failed = !text || ferror(f);
    fclose(f);
    if (failed) {
        cinfer_error_set(err, text ? CINFER_ERR_IO : CINFER_ERR_NOMEM, "%s: cannot read the config file", path);
        free(text);
        return NULL;
    }
    if (len > MAX_CONFIG_BYTES) {
        cinfer_error_set(err, CINFER_ERR_CONFIG, "%s: config file larger than %d MiB", path, MAX_CONFIG_BYTES >> 20);
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

int cinfer_server_args_load_file(struct cinfer_server_args *args, const char *path, struct cinfer_error *err)
{
    /* Read here first for errno's words (libconfig only says "file I/O error") and for
     * the prescan. Files named by @include are not prescanned. */
    char *text = read_whole_file(path, err);
    if (!text)
        return err ? err->code : CINFER_ERR_IO;
    int rc = cinfer_config_prescan(text, path, 1, err);
    free(text);
    if (rc)
        return rc;

    char *folder_copy = strdup(path);
    if (!folder_copy)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reading %s", path);
    config_t cfg;
    config_init(&cfg);
    const char *folder = dirname(folder_copy);
    config_set_include_dir(&cfg, folder); /* @include is relative to this file */
    if (config_read_file(&cfg, path) != CONFIG_TRUE)
        rc = syntax_error(&cfg, path, folder, err);
    else
        rc = read_into(args, &cfg, path, folder, err);
    config_destroy(&cfg);
    free(folder_copy);
    return rc;
}
