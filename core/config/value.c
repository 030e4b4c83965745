/* core/config/value.c — setting one option's field with type and range checks, and
 * writing its value back out. Errors here say "expected ..., found ..."; the caller
 * puts the place (file:line: key, or --flag) in front. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

const char *cinfer_option_type_name(enum option_type type)
{
    switch (type) {
    case OPTION_STRING: return "string";
    case OPTION_STRING_LIST: return "list of strings";
    case OPTION_INT: return "integer";
    case OPTION_INT64: return "integer";
    case OPTION_BYTES: return "size";
    case OPTION_DURATION_MS: return "duration";
    case OPTION_DOUBLE: return "number";
    case OPTION_BOOL: return "boolean";
    case OPTION_ENUM: return "choice";
    }
    return "?";
}

/* Appends to out (NUL-terminated, out_bytes in all) like snprintf at its end. */
static void append(char *out, size_t out_bytes, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t out_bytes, const char *fmt, ...)
{
    size_t len = strnlen(out, out_bytes);
    if (len + 1 >= out_bytes)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + len, out_bytes - len, fmt, ap);
    va_end(ap);
}

static void append_choices(char *out, size_t out_bytes, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        append(out, out_bytes, "%s\"%s\"", i ? ", " : "", choices[i]);
}

void cinfer_option_describe_expected(const struct option *opt, int with_range, char *out, size_t out_bytes)
{
    char low[32], high[32];
    out[0] = '\0';
    switch (opt->type) {
    case OPTION_STRING:
        append(out, out_bytes, with_range && opt->default_string ? "a non-empty string" : "a string");
        break;
    case OPTION_STRING_LIST:
        append(out, out_bytes, "a list of strings");
        break;
    case OPTION_INT:
    case OPTION_INT64:
        if (!with_range)
            append(out, out_bytes, "an integer");
        else if (opt->max == INT64_MAX)
            append(out, out_bytes, "an integer of at least %lld", (long long)opt->min);
        else
            append(out, out_bytes, "an integer from %lld to %lld", (long long)opt->min, (long long)opt->max);
        break;
    case OPTION_BYTES:
        cinfer_format_bytes(opt->min, low, sizeof low);
        cinfer_format_bytes(opt->max, high, sizeof high);
        append(out, out_bytes, "a size in bytes");
        if (with_range)
            append(out, out_bytes, " from %s to %s", low, high);
        append(out, out_bytes, " (an integer, or a string such as \"512M\")");
        break;
    case OPTION_DURATION_MS:
        cinfer_format_duration_ms(opt->min, low, sizeof low);
        cinfer_format_duration_ms(opt->max, high, sizeof high);
        append(out, out_bytes, "a duration");
        if (with_range)
            append(out, out_bytes, " from %s to %s", low, high);
        append(out, out_bytes, " (milliseconds, or a string such as \"30s\")");
        break;
    case OPTION_DOUBLE:
        cinfer_format_double(opt->min_double, low, sizeof low);
        cinfer_format_double(opt->max_double, high, sizeof high);
        if (with_range)
            append(out, out_bytes, "a number from %s to %s", low, high);
        else
            append(out, out_bytes, "a number");
        break;
    case OPTION_BOOL:
        append(out, out_bytes, "true or false");
        break;
    case OPTION_ENUM:
        if (with_range) {
            append(out, out_bytes, "one of ");
            append_choices(out, out_bytes, opt->choices);
        } else {
            append(out, out_bytes, "a string");
        }
        break;
    }
}

static int expected_found(struct cinfer_error *err, const struct option *opt, const char *found_fmt,
                          const char *found)
{
    char expected[512];
    cinfer_option_describe_expected(opt, 1, expected, sizeof expected);
    char found_text[256];
    snprintf(found_text, sizeof found_text, found_fmt, found);
    return cinfer_error_set(err, CINFER_ERR_CONFIG, "expected %s, found %s", expected, found_text);
}

int cinfer_option_set_int(struct cinfer_server_args *args, const struct option *opt, int64_t value,
                          struct cinfer_error *err)
{
    if (opt->type == OPTION_DOUBLE)
        return cinfer_option_set_double(args, opt, (double)value, err);
    if (value < opt->min || value > opt->max) {
        char found[32];
        if (opt->type == OPTION_BYTES)
            cinfer_format_bytes(value, found, sizeof found);
        else if (opt->type == OPTION_DURATION_MS)
            cinfer_format_duration_ms(value, found, sizeof found);
        else
            snprintf(found, sizeof found, "%lld", (long long)value);
        return expected_found(err, opt, "%s", found);
    }
    void *field = cinfer_option_field(args, opt);
    switch (opt->type) {
    case OPTION_INT:
    case OPTION_DURATION_MS:
        *(int *)field = (int)value; /* the table's ranges keep these within int */
        return 0;
    case OPTION_INT64:
    case OPTION_BYTES:
        *(int64_t *)field = value;
        return 0;
    default:
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s.%s is not an integer option", opt->section, opt->name);
    }
}

int cinfer_option_set_double(struct cinfer_server_args *args, const struct option *opt, double value,
                             struct cinfer_error *err)
{
    if (!(value >= opt->min_double && value <= opt->max_double)) { /* NaN fails too */
        char found[40];
        cinfer_format_double(value, found, sizeof found);
        return expected_found(err, opt, "%s", found);
    }
    *(double *)cinfer_option_field(args, opt) = value;
    return 0;
}

int cinfer_option_set_string(struct cinfer_server_args *args, const struct option *opt, const char *value,
                             struct cinfer_error *err)
{
    char *copy = NULL;
    if (value && *value) {
        copy = strdup(value);
        if (!copy)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory copying %s.%s", opt->section, opt->name);
    } else if (opt->default_string) {
        /* Options with a default have no meaning when unset. */
        return expected_found(err, opt, "%s", "an empty string");
    }
    char **field = cinfer_option_field(args, opt);
    free(*field);
    *field = copy;
    return 0;
}

int cinfer_option_set_list(struct cinfer_server_args *args, const struct option *opt, const char *const *items,
                           int count, struct cinfer_error *err)
{
    char **copy = NULL;
    if (count > 0) {
        copy = calloc((size_t)count + 1, sizeof *copy);
        if (!copy)
            goto nomem;
        for (int i = 0; i < count; i++) {
            if (!items[i][0]) {
                for (int j = 0; j < i; j++)
                    free(copy[j]);
                free(copy);
                return cinfer_error_set(err, CINFER_ERR_CONFIG, "expected non-empty names, found an empty one (item %d)",
                                        i + 1);
            }
            copy[i] = strdup(items[i]);
            if (!copy[i]) {
                for (int j = 0; j < i; j++)
                    free(copy[j]);
                free(copy);
                goto nomem;
            }
        }
    }
    cinfer_option_clear(args, opt);
    struct cinfer_string_list *list = cinfer_option_field(args, opt);
    list->items = copy;
    list->count = count;
    return 0;
nomem:
    return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory copying %s.%s", opt->section, opt->name);
}

void cinfer_option_clear(struct cinfer_server_args *args, const struct option *opt)
{
    void *field = cinfer_option_field(args, opt);
    if (opt->type == OPTION_STRING) {
        free(*(char **)field);
        *(char **)field = NULL;
    } else if (opt->type == OPTION_STRING_LIST) {
        struct cinfer_string_list *list = field;
        for (int i = 0; i < list->count; i++)
            free(list->items[i]);
        free(list->items);
        list->items = NULL;
        list->count = 0;
    }
}

/* "a,b , c" -> the list a, b, c (spaces around names dropped); "" -> empty. */
static int set_list_from_text(struct cinfer_server_args *args, const struct option *opt, const char *text,
                              struct cinfer_error *err)
{
    char *buffer = strdup(text);
    size_t n_max = 1;
    for (const char *p = text; *p; p++)
        n_max += *p == ',';
    const char **items = calloc(n_max, sizeof *items);
    if (!buffer || !items) {
        free(buffer);
        free(items);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory reading %s", opt->flag);
    }
    int count = 0;
    char *all_space = buffer + strspn(buffer, " \t");
    if (*all_space) {
        char *start = buffer;
        for (;;) {
            char *comma = strchr(start, ',');
            if (comma)
                *comma = '\0';
            while (isspace((unsigned char)*start))
                start++;
            char *end = start + strlen(start);
            while (end > start && isspace((unsigned char)end[-1]))
                *--end = '\0';
            items[count++] = start;
            if (!comma)
                break;
            start = comma + 1;
        }
    }
    int rc = cinfer_option_set_list(args, opt, items, count, err);
    free(items);
    free(buffer);
    return rc;
}

int cinfer_option_set_from_text(struct cinfer_server_args *args, const struct option *opt, const char *text,
                                struct cinfer_error *err)
{
    int64_t number;
    switch (opt->type) {
    case OPTION_STRING:
        return cinfer_option_set_string(args, opt, text, err);
    case OPTION_STRING_LIST:
        return set_list_from_text(args, opt, text, err);
    case OPTION_INT:
    case OPTION_INT64:
        if (cinfer_parse_int64(text, &number))
            return expected_found(err, opt, "\"%s\"", text);
        return cinfer_option_set_int(args, opt, number, err);
    case OPTION_BYTES:
        if (cinfer_parse_bytes(text, &number))
            return expected_found(err, opt, "\"%s\"", text);
        return cinfer_option_set_int(args, opt, number, err);
    case OPTION_DURATION_MS:
        if (cinfer_parse_duration_ms(text, &number))
            return expected_found(err, opt, "\"%s\"", text);
        return cinfer_option_set_int(args, opt, number, err);
    case OPTION_DOUBLE: {
        char *end;
        errno = 0;
        double value = strtod(text, &end);
        if (!*text || isspace((unsigned char)*text) || *end || errno == ERANGE || !isfinite(value))
            return expected_found(err, opt, "\"%s\"", text);
        return cinfer_option_set_double(args, opt, value, err);
    }
    case OPTION_BOOL: {
        int *field = cinfer_option_field(args, opt);
        if (!strcmp(text, "true") || !strcmp(text, "1"))
            *field = 1;
        else if (!strcmp(text, "false") || !strcmp(text, "0"))
            *field = 0;
        else
            return expected_found(err, opt, "\"%s\"", text);
        return 0;
    }
    case OPTION_ENUM:
        for (int i = 0; opt->choices[i]; i++)
            if (!strcmp(text, opt->choices[i])) {
                *(int *)cinfer_option_field(args, opt) = i;
                return 0;
            }
        return expected_found(err, opt, "\"%s\"", text);
    }
    return cinfer_error_set(err, CINFER_ERR_INTERNAL, "%s.%s has no type", opt->section, opt->name);
}

void cinfer_write_string_literal(const char *text, FILE *out)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\x%02x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* libconfig reads integers beyond 32 bits only with an L suffix. */
static void write_integer(int64_t value, FILE *out)
{
    if (value < INT32_MIN || value > INT32_MAX)
        fprintf(out, "%lldL", (long long)value);
    else
        fprintf(out, "%lld", (long long)value);
}

void cinfer_option_write_value(const struct cinfer_server_args *args, const struct option *opt, FILE *out)
{
    const void *field = cinfer_option_field_const(args, opt);
    char text[64];
    switch (opt->type) {
    case OPTION_STRING: {
        const char *value = *(char *const *)field;
        cinfer_write_string_literal(value ? value : "", out);
        return;
    }
    case OPTION_STRING_LIST: {
        const struct cinfer_string_list *list = field;
        fputc('[', out);
        for (int i = 0; i < list->count; i++) {
            fputs(i ? ", " : " ", out);
            cinfer_write_string_literal(list->items[i], out);
        }
        fputs(" ]", out);
        return;
    }
    case OPTION_INT:
        write_integer(*(const int *)field, out);
        return;
    case OPTION_INT64:
        write_integer(*(const int64_t *)field, out);
        return;
    case OPTION_BYTES: {
        int64_t bytes = *(const int64_t *)field;
        cinfer_format_bytes(bytes, text, sizeof text);
        if (bytes != 0 && !isdigit((unsigned char)text[strlen(text) - 1]))
            fprintf(out, "\"%s\"", text);
        else
            write_integer(bytes, out);
        return;
    }
    case OPTION_DURATION_MS: {
        int ms = *(const int *)field;
        if (ms == 0) {
            fputs("0", out);
            return;
        }
        cinfer_format_duration_ms(ms, text, sizeof text);
        fprintf(out, "\"%s\"", text);
        return;
    }
    case OPTION_DOUBLE:
        cinfer_format_double(*(const double *)field, text, sizeof text);
        fputs(text, out);
        return;
    case OPTION_BOOL:
        fputs(*(const int *)field ? "true" : "false", out);
        return;
    case OPTION_ENUM:
        fprintf(out, "\"%s\"", opt->choices[*(const int *)field]);
        return;
    }
}

void cinfer_option_format_default(const struct option *opt, char *out, size_t out_bytes)
{
    switch (opt->type) {
    case OPTION_STRING:
    case OPTION_STRING_LIST:
        snprintf(out, out_bytes, "%s", opt->default_string ? opt->default_string : "unset");
        return;
    case OPTION_INT:
    case OPTION_INT64:
        snprintf(out, out_bytes, "%lld", (long long)opt->default_int);
        return;
    case OPTION_BYTES:
        cinfer_format_bytes(opt->default_int, out, out_bytes);
        return;
    case OPTION_DURATION_MS:
        if (opt->default_int == 0)
            snprintf(out, out_bytes, "0");
        else
            cinfer_format_duration_ms(opt->default_int, out, out_bytes);
        return;
    case OPTION_DOUBLE:
        cinfer_format_double(opt->default_double, out, out_bytes);
        return;
    case OPTION_BOOL:
        snprintf(out, out_bytes, "%s", opt->default_int ? "true" : "false");
        return;
    case OPTION_ENUM:
        snprintf(out, out_bytes, "%s", opt->choices[opt->default_int]);
        return;
    }
}
