/* core/config/options.h — the one table of server options, and the value helpers
 * that the file reader, the flag parser, the printers and the docs share. */
#ifndef CINFER_CONFIG_OPTIONS_H
#define CINFER_CONFIG_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cinfer/config.h"

/* The C type of the field an option fills, and how its value is written. */
enum option_type {
    OPTION_STRING,      /* char *, NULL when unset; "" in a file or flag unsets it */
    OPTION_STRING_LIST, /* struct cinfer_string_list; a list of strings in a file,
                           comma-separated on the command line */
    OPTION_INT,         /* int */
    OPTION_INT64,       /* int64_t */
    OPTION_BYTES,       /* int64_t bytes; an integer or a string such as "512M", "2G" */
    OPTION_DURATION_MS, /* int milliseconds; an integer or a string such as "30s", "5m" */
    OPTION_DOUBLE,      /* double */
    OPTION_BOOL,        /* int, 0 or 1 */
    OPTION_ENUM,        /* an enum, stored as int: the index of its name in choices */
};

struct option {
    const char *section;      /* "scheduler" */
    const char *name;         /* "max_running_requests" */
    const char *flag;         /* "--max-running-requests" */
    const char *flag_alias;   /* another accepted spelling ("--model"), or NULL */
    enum option_type type;
    size_t offset;            /* of the field in struct cinfer_server_args */
    int64_t min, max;         /* integer kinds (bytes and milliseconds included) */
    double min_double, max_double;
    /* OPTION_ENUM: the names, NULL-terminated, in enum order. OPTION_STRING: the names
     * accepted besides a path (a value with a '/'); NULL when any string is fine. */
    const char *const *choices;
    const char *default_string; /* OPTION_STRING / OPTION_STRING_LIST (comma-separated) */
    int64_t default_int;        /* integer kinds, OPTION_BOOL and OPTION_ENUM */
    double default_double;
    const char *value_name;   /* "N", "PATH", "HOST"... in --help */
    const char *help;         /* one sentence or two, for --help, the docs and comments */
};

extern const struct option cinfer_options[];
extern const int cinfer_options_count;
extern const char *const cinfer_config_sections[]; /* in table order, NULL-terminated */

/* The option with key "section.name" or this flag (or alias); NULL if none. */
const struct option *cinfer_option_by_key(const char *section, const char *name);
const struct option *cinfer_option_by_flag(const char *flag, size_t flag_len);
int cinfer_option_index(const struct option *opt);

/* The field of opt inside args. */
void *cinfer_option_field(struct cinfer_server_args *args, const struct option *opt);
const void *cinfer_option_field_const(const struct cinfer_server_args *args, const struct option *opt);

/* Sets opt's field from text as written on a command line (or in a string-valued file
 * setting for bytes and durations). On failure returns CINFER_ERR_CONFIG and writes
 * "expected ..., found ..." (without a prefix) into err; the field keeps its value. */
int cinfer_option_set_from_text(struct cinfer_server_args *args, const struct option *opt, const char *text,
                                struct cinfer_error *err);
/* Sets an integer-kind or double field from a number, checking the range. */
int cinfer_option_set_int(struct cinfer_server_args *args, const struct option *opt, int64_t value,
                          struct cinfer_error *err);
int cinfer_option_set_double(struct cinfer_server_args *args, const struct option *opt, double value,
                             struct cinfer_error *err);
/* Replaces a string field (NULL or "" unsets it). */
int cinfer_option_set_string(struct cinfer_server_args *args, const struct option *opt, const char *value,
                             struct cinfer_error *err);
/* Replaces a string list with count items (copied). */
int cinfer_option_set_list(struct cinfer_server_args *args, const struct option *opt, const char *const *items,
                           int count, struct cinfer_error *err);
/* Frees the option's memory, leaving the field unset. */
void cinfer_option_clear(struct cinfer_server_args *args, const struct option *opt);

/* Writes the expected form of opt's values. With the range: "an integer from 1 to
 * 65535", "one of \"fcfs\", \"lpm\""; without: "an integer" (for type mismatches). */
void cinfer_option_describe_expected(const struct option *opt, int with_range, char *out, size_t out_bytes);
/* Writes opt's current value in config-file syntax ("30000", "\"2G\"", "[ \"a\" ]"). */
void cinfer_option_write_value(const struct cinfer_server_args *args, const struct option *opt, FILE *out);
/* Writes a string as a libconfig string literal, escaped. */
void cinfer_write_string_literal(const char *text, FILE *out);
/* Writes opt's default as a person reads it ("30000", "2G", "(none)"). */
void cinfer_option_format_default(const struct option *opt, char *out, size_t out_bytes);
/* The names a type goes by in --help and in the docs ("integer", "bytes"). */
const char *cinfer_option_type_name(enum option_type type);

/* Parses a size with an optional binary suffix (K, M, G, T; "KiB", "MB" alike: 1024^n).
 * Returns 0 or -1 when malformed or beyond int64. */
int cinfer_parse_bytes(const char *text, int64_t *out);
/* Parses a duration: plain milliseconds, or a number with ms, s, m or h. */
int cinfer_parse_duration_ms(const char *text, int64_t *out);
/* Parses a whole decimal integer (optional sign); -1 when malformed or out of int64. */
int cinfer_parse_int64(const char *text, int64_t *out);
/* Formats bytes with the largest exact binary suffix ("2G", "1536K", "1000"). */
void cinfer_format_bytes(int64_t bytes, char *out, size_t out_bytes);
/* Formats milliseconds with the largest exact unit ("5m", "1500ms"). */
void cinfer_format_duration_ms(int64_t ms, char *out, size_t out_bytes);
/* Formats a double with the fewest digits that read back to the same value, always
 * with a decimal point so libconfig reads it as a float ("0.85", "1.0"). */
void cinfer_format_double(double value, char *out, size_t out_bytes);

/* The closest of candidates to word, or NULL when none is close enough to suggest. */
const char *cinfer_closest_word(const char *word, const char *const *candidates, int n_candidates);

#endif
