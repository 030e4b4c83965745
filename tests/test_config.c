/* Server args: the libconfig reader, the flags, validation, printing and the docs.
 * Each error kind is checked with the exact sentence a person sees; every option goes
 * through print -> load and through its flag; the example file and the generated
 * docs are checked against the option table. */
#include <check.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer/config.h"
#include "config/prescan.h"
#include "config/options.h"
#include "support/run_command.h"
#include "support/runner.h"

#define CINFER_BIN CINFER_BINARY_DIR "/bin/cinfer"

/* ---- helpers ------------------------------------------------------------------------- */

static void init_args(struct cinfer_server_args *args)
{
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_server_args_init(args, &err) == 0, "init: %s", err.message);
}

/* Loads text (named cinfer.cfg) over defaults and expects exactly this error. */
static void expect_load_error(const char *text, int code, const char *message)
{
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    init_args(&args);
    int rc = cinfer_server_args_load_string(&args, text, "cinfer.cfg", &err);
    ck_assert_msg(rc == code, "load of <<%s>> returned %d, expected %d (%s)", text, rc, code, err.message);
    ck_assert_str_eq(err.message, message);
    ck_assert_int_eq(err.code, code);
    cinfer_server_args_free(&args);
}

static void load_ok(struct cinfer_server_args *args, const char *text)
{
    struct cinfer_error err = {0};
    init_args(args);
    int rc = cinfer_server_args_load_string(args, text, "cinfer.cfg", &err);
    ck_assert_msg(rc == 0, "load of <<%s>> failed: %s", text, err.message);
}

/* Applies flags (a NULL-terminated list after the command name) and expects this error. */
static void expect_flag_error(const char *message, ...)
{
    char *argv[32] = {"test"};
    int argc = 1;
    va_list ap;
    va_start(ap, message);
    for (char *a; (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    char *rest[32];
    int n_rest = -1;
    init_args(&args);
    int rc = cinfer_server_args_apply_flags(&args, argc, argv, NULL, rest, &n_rest, &err);
    ck_assert_msg(rc == CINFER_ERR_CONFIG, "flags gave %d (%s), expected an error", rc, err.message);
    ck_assert_str_eq(err.message, message);
    ck_assert_int_eq(args.port, 30000); /* a failed apply leaves args as they were */
    cinfer_server_args_free(&args);
}

static void expect_invalid(const char *text, const char *message)
{
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    load_ok(&args, text);
    ck_assert_int_eq(cinfer_server_args_validate(&args, &err), CINFER_ERR_CONFIG);
    ck_assert_str_eq(err.message, message);
    cinfer_server_args_free(&args);
}

static char *print_to_string(const struct cinfer_server_args *args, int annotate)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(cinfer_server_args_print(args, f, annotate), 0);
    fclose(f);
    return text;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    ck_assert_int_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    return text;
}

/* Field equality by the option's type. */
static int option_equal(const struct cinfer_server_args *a, const struct cinfer_server_args *b,
                        const struct option *opt)
{
    const void *fa = cinfer_option_field_const(a, opt), *fb = cinfer_option_field_const(b, opt);
    switch (opt->type) {
    case OPTION_STRING: {
        const char *sa = *(char *const *)fa, *sb = *(char *const *)fb;
        return (!sa && !sb) || (sa && sb && !strcmp(sa, sb));
    }
    case OPTION_STRING_LIST: {
        const struct cinfer_string_list *la = fa, *lb = fb;
        if (la->count != lb->count)
            return 0;
        for (int i = 0; i < la->count; i++)
            if (strcmp(la->items[i], lb->items[i]))
                return 0;
        return la->count == 0 || (!la->items[la->count] && !lb->items[lb->count]);
    }
    case OPTION_INT:
    case OPTION_DURATION_MS:
    case OPTION_BOOL:
    case OPTION_ENUM: return *(const int *)fa == *(const int *)fb;
    case OPTION_INT64:
    case OPTION_BYTES: return *(const int64_t *)fa == *(const int64_t *)fb;
    case OPTION_DOUBLE: return *(const double *)fa == *(const double *)fb;
    }
    return 0;
}

/* ---- the table ----------------------------------------------------------------------- */

START_TEST(table_is_consistent)
{
    /* Every key has a flag and every flag a key; neither twice; every option has help;
     * every section listed has options, and every option's section is listed. */
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *o = &cinfer_options[i];
        ck_assert_msg(o->flag && !strncmp(o->flag, "--", 2), "%s.%s has no --flag", o->section, o->name);
        ck_assert_msg(o->help && strlen(o->help) > 10, "%s.%s has no help", o->section, o->name);
        ck_assert_ptr_eq(cinfer_option_by_key(o->section, o->name), o);
        ck_assert_ptr_eq(cinfer_option_by_flag(o->flag, strlen(o->flag)), o);
        if (o->flag_alias)
            ck_assert_ptr_eq(cinfer_option_by_flag(o->flag_alias, strlen(o->flag_alias)), o);
        int listed = 0;
        for (int s = 0; cinfer_config_sections[s]; s++)
            listed |= !strcmp(cinfer_config_sections[s], o->section);
        ck_assert_msg(listed, "%s.%s: section not listed", o->section, o->name);
        if (o->type == OPTION_ENUM)
            ck_assert_ptr_nonnull(o->choices);
        if (o->type != OPTION_STRING && o->type != OPTION_STRING_LIST && o->type != OPTION_DOUBLE &&
            o->type != OPTION_BOOL && o->type != OPTION_ENUM)
            ck_assert_msg(o->min <= o->default_int && o->default_int <= o->max, "%s.%s default out of range",
                          o->section, o->name);
    }
    for (int s = 0; cinfer_config_sections[s]; s++) {
        int n = 0;
        for (int i = 0; i < cinfer_options_count; i++)
            n += !strcmp(cinfer_options[i].section, cinfer_config_sections[s]);
        ck_assert_msg(n > 0, "section %s has no options", cinfer_config_sections[s]);
    }
    /* The SGLang names the engine's users know. */
    static const char *const sglang_flags[] = {
        "--model-path", "--model", "--tokenizer-path", "--context-length", "--dtype", "--tp-size", "--dp-size",
        "--host", "--port", "--api-key", "--max-running-requests", "--max-prefill-tokens",
        "--chunked-prefill-size", "--max-total-tokens", "--mem-fraction-static", "--page-size",
        "--schedule-policy", "--disable-radix-cache", "--random-seed", "--watchdog-timeout", "--log-level",
        "--chat-template", "--device"};
    for (size_t i = 0; i < sizeof sglang_flags / sizeof *sglang_flags; i++)
        ck_assert_msg(cinfer_option_by_flag(sglang_flags[i], strlen(sglang_flags[i])), "no %s", sglang_flags[i]);
}
END_TEST

START_TEST(defaults_from_the_table)
{
    struct cinfer_server_args args;
    init_args(&args);
    ck_assert_ptr_null(args.model_path);
    ck_assert_str_eq(args.tokenizer, "tokenizer-bpe");
    ck_assert_str_eq(args.launcher, "auto");
    ck_assert_str_eq(args.host, "127.0.0.1");
    ck_assert_int_eq(args.port, 30000);
    ck_assert_int_eq(args.tp_size, 1);
    ck_assert_int_eq(args.hosts.count, 0);
    ck_assert_ptr_null(args.hosts.items);
    ck_assert_int_eq(args.page_size, 16);
    ck_assert(args.mem_fraction_static == 0.8);
    ck_assert_int_eq(args.max_request_body_bytes, 16 << 20);
    ck_assert_int_eq(args.start_timeout_ms, 120000);
    ck_assert_int_eq(args.drain_timeout_ms, 30000);
    ck_assert_int_eq(args.schedule_policy, CINFER_SCHEDULE_FCFS);
    ck_assert_int_eq(args.log_level, CINFER_LOG_INFO);
    ck_assert_int_eq(args.random_seed, -1);
    for (int i = 0; i < cinfer_options_count; i++)
        ck_assert_int_eq(args.origin[i], CINFER_ORIGIN_DEFAULT);
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_server_args_validate(&args, &err), 0);
    cinfer_server_args_free(&args);
    cinfer_server_args_free(&args); /* freeing twice is harmless */
}
END_TEST

/* ---- numbers as written -------------------------------------------------------------- */

START_TEST(units)
{
    int64_t v;
    ck_assert_int_eq(cinfer_parse_bytes("512M", &v), 0);
    ck_assert_int_eq(v, 512LL * 1024 * 1024);
    ck_assert_int_eq(cinfer_parse_bytes("2G", &v), 0);
    ck_assert_int_eq(v, 2LL << 30);
    ck_assert_int_eq(cinfer_parse_bytes("2g", &v), 0);
    ck_assert_int_eq(v, 2LL << 30);
    ck_assert_int_eq(cinfer_parse_bytes("1KiB", &v), 0);
    ck_assert_int_eq(v, 1024);
    ck_assert_int_eq(cinfer_parse_bytes("3MB", &v), 0);
    ck_assert_int_eq(v, 3LL << 20);
    ck_assert_int_eq(cinfer_parse_bytes("1T", &v), 0);
    ck_assert_int_eq(v, 1LL << 40);
    ck_assert_int_eq(cinfer_parse_bytes("100B", &v), 0);
    ck_assert_int_eq(v, 100);
    ck_assert_int_eq(cinfer_parse_bytes("9223372036854775807", &v), 0);
    ck_assert_int_eq(v, INT64_MAX);
    const char *bad_bytes[] = {"", "M", "1.5G", "-1", "+1", " 1", "1 G", "1X", "1GG", "1iB", "8589934592G",
                               "9223372036854775808", "0x10"};
    for (size_t i = 0; i < sizeof bad_bytes / sizeof *bad_bytes; i++)
        ck_assert_msg(cinfer_parse_bytes(bad_bytes[i], &v) == -1, "\"%s\" accepted", bad_bytes[i]);

    ck_assert_int_eq(cinfer_parse_duration_ms("250", &v), 0);
    ck_assert_int_eq(v, 250);
    ck_assert_int_eq(cinfer_parse_duration_ms("250ms", &v), 0);
    ck_assert_int_eq(v, 250);
    ck_assert_int_eq(cinfer_parse_duration_ms("30s", &v), 0);
    ck_assert_int_eq(v, 30000);
    ck_assert_int_eq(cinfer_parse_duration_ms("5m", &v), 0);
    ck_assert_int_eq(v, 300000);
    ck_assert_int_eq(cinfer_parse_duration_ms("2h", &v), 0);
    ck_assert_int_eq(v, 7200000);
    const char *bad_durations[] = {"", "s", "1d", "1.5s", "-1s", "1 s", "1sec", "1S", "3074457345618258603m"};
    for (size_t i = 0; i < sizeof bad_durations / sizeof *bad_durations; i++)
        ck_assert_msg(cinfer_parse_duration_ms(bad_durations[i], &v) == -1, "\"%s\" accepted", bad_durations[i]);

    ck_assert_int_eq(cinfer_parse_int64("-42", &v), 0);
    ck_assert_int_eq(v, -42);
    ck_assert_int_eq(cinfer_parse_int64("+7", &v), 0);
    ck_assert_int_eq(v, 7);
    const char *bad_ints[] = {"", "-", "1e3", "0x10", " 5", "5 ", "9223372036854775808", "12abc"};
    for (size_t i = 0; i < sizeof bad_ints / sizeof *bad_ints; i++)
        ck_assert_msg(cinfer_parse_int64(bad_ints[i], &v) == -1, "\"%s\" accepted", bad_ints[i]);

    char text[64];
    cinfer_format_bytes(1536 * 1024, text, sizeof text);
    ck_assert_str_eq(text, "1536K");
    cinfer_format_bytes(2LL << 30, text, sizeof text);
    ck_assert_str_eq(text, "2G");
    cinfer_format_bytes(1000, text, sizeof text);
    ck_assert_str_eq(text, "1000");
    cinfer_format_bytes(0, text, sizeof text);
    ck_assert_str_eq(text, "0");
    cinfer_format_bytes(1LL << 50, text, sizeof text);
    ck_assert_str_eq(text, "1024T");
    cinfer_format_duration_ms(1500, text, sizeof text);
    ck_assert_str_eq(text, "1500ms");
    cinfer_format_duration_ms(90000, text, sizeof text);
    ck_assert_str_eq(text, "90s");
    cinfer_format_duration_ms(7200000, text, sizeof text);
    ck_assert_str_eq(text, "2h");
    cinfer_format_double(0.85, text, sizeof text);
    ck_assert_str_eq(text, "0.85");
    cinfer_format_double(1.0, text, sizeof text);
    ck_assert_str_eq(text, "1.0");
    cinfer_format_double(1.0 / 3.0, text, sizeof text);
    ck_assert(strtod(text, NULL) == 1.0 / 3.0);
    cinfer_format_double(1e-7, text, sizeof text);
    ck_assert_str_eq(text, "1e-07");
}
END_TEST

START_TEST(oversized_integer_literals)
{
    struct cinfer_error err = {0};
    /* Strings, comments, names with digits and floats are no integers. */
    const char *fine = "a = { s = \"99999999999 \\\" 88888888888\"; # 77777777777\n"
                       "  // 66666666666\n /* 55555555555\n */ x9999999999 = 1.5e300; y = 2147483647;\n"
                       "  z = -2147483648; w = 9999999999L; v = 0x7fffffff; };";
    ck_assert_int_eq(cinfer_config_prescan(fine, "t.cfg", 1, &err), 0);
    ck_assert_int_eq(cinfer_config_prescan("a = { b = 1;\n c = 4294967296; };", "t.cfg", 1, &err),
                     CINFER_ERR_CONFIG);
    ck_assert_str_eq(err.message, "t.cfg:2: 4294967296: integer too large for 32 bits; write 4294967296L for a "
                                  "64-bit integer (or a string with a unit, such as \"4G\" or \"10m\")");
    ck_assert_int_eq(cinfer_config_prescan("a={b=-2147483649;};", "t.cfg", 1, &err), CINFER_ERR_CONFIG);
    ck_assert_int_eq(cinfer_config_prescan("a={b=0xFFFFFFFF;};", "t.cfg", 1, &err), CINFER_ERR_CONFIG);
    ck_assert_int_eq(cinfer_config_prescan("a={b=[1,99999999999];};", "t.cfg", 1, &err),
                     CINFER_ERR_CONFIG);
    /* @include: fine in files, refused in text (it has no folder to be relative to). */
    ck_assert_int_eq(cinfer_config_prescan("a = \"@include\"; # @include\n", "t", 0, &err), 0);
    ck_assert_int_eq(cinfer_config_prescan("\n@include \"/etc/passwd\"\n", "t", 1, &err), 0);
    ck_assert_int_eq(cinfer_config_prescan("\n@include \"/etc/passwd\"\n", "t", 0, &err), CINFER_ERR_CONFIG);
    ck_assert_str_eq(err.message, "t:2: @include is not allowed in settings given as text (only in files)");
    /* A string left open at the end: refused here, since libconfig leaks what it was reading. */
    ck_assert_int_eq(cinfer_config_prescan("a = \"x\\\"y\";\nb = \"z\n\";\n", "t", 0, &err), 0);
    ck_assert_int_eq(cinfer_config_prescan("a = \"x\";\nb = \"];\nc = 1;\n", "t", 0, &err), CINFER_ERR_CONFIG);
    ck_assert_str_eq(err.message, "t:2: a string opened here is never closed (\")");
    /* Without the scan libconfig would wrap this to 0; with it, the user is told. */
    expect_load_error("scheduler = { kv_cache_bytes = 4294967296; };", CINFER_ERR_CONFIG,
                      "cinfer.cfg:1: 4294967296: integer too large for 32 bits; write 4294967296L for a 64-bit "
                      "integer (or a string with a unit, such as \"4G\" or \"10m\")");
    struct cinfer_server_args args;
    load_ok(&args, "scheduler = { kv_cache_bytes = 4294967296L; max_total_tokens = 5000000000L; };");
    ck_assert_int_eq(args.kv_cache_bytes, 4294967296LL);
    ck_assert_int_eq(args.max_total_tokens, 5000000000LL);
    cinfer_server_args_free(&args);
}
END_TEST

/* ---- the file: values ---------------------------------------------------------------- */

START_TEST(file_values_of_every_form)
{
    struct cinfer_server_args args;
    load_ok(&args, "model = { path = \"/m/x\"; context_length = 4096; dtype = \"bf16\"; };\n"
                   "launcher = { plugin = \"ssh\"; hosts = [ \"a\", \"root@b\" ]; dp_size = 2; };\n"
                   "scheduler = { kv_cache_bytes = \"2G\"; page_size = 32;\n"
                   "              disable_radix_cache = true; max_total_tokens = 123456; };\n"
                   "server = { max_request_body_bytes = 65536; api_key = \"\"; };\n"
                   "engine = { start_timeout = 90000; drain_timeout = \"1m\"; random_seed = 7; };\n");
    ck_assert_str_eq(args.model_path, "/m/x");
    ck_assert_int_eq(args.context_length, 4096);
    ck_assert_int_eq(args.dtype, CINFER_WEIGHT_DTYPE_BF16);
    ck_assert_str_eq(args.launcher, "ssh");
    ck_assert_int_eq(args.hosts.count, 2);
    ck_assert_str_eq(args.hosts.items[0], "a");
    ck_assert_str_eq(args.hosts.items[1], "root@b");
    ck_assert_ptr_null(args.hosts.items[2]);
    ck_assert_int_eq(args.kv_cache_bytes, 2LL << 30);
    ck_assert_int_eq(args.page_size, 32);
    ck_assert_int_eq(args.disable_radix_cache, 1);
    ck_assert_int_eq(args.max_total_tokens, 123456);
    ck_assert_int_eq(args.max_request_body_bytes, 65536);
    ck_assert_ptr_null(args.api_key);
    ck_assert_int_eq(args.start_timeout_ms, 90000);
    ck_assert_int_eq(args.drain_timeout_ms, 60000);
    ck_assert_int_eq(args.random_seed, 7);
    ck_assert_int_eq(cinfer_server_args_origin(&args, "server.port"), CINFER_ORIGIN_DEFAULT);
    ck_assert_int_eq(cinfer_server_args_origin(&args, "model.path"), CINFER_ORIGIN_FILE);
    ck_assert_int_eq(cinfer_server_args_origin(&args, "model.nope"), -1);
    ck_assert_int_eq(cinfer_server_args_origin(&args, "nodot"), -1);
    cinfer_server_args_free(&args);
}
END_TEST

/* ---- the file: each error kind -------------------------------------------------------- */

START_TEST(file_errors)
{
    const int C = CINFER_ERR_CONFIG;
    expect_load_error("model = { path = ; };", C, "cinfer.cfg:1: syntax error");
    expect_load_error("model = {\n  path = \"x\";\n  = 3;\n};", C, "cinfer.cfg:3: syntax error");
    expect_load_error("server = { port = 1; port = 2; };", C, "cinfer.cfg:1: duplicate setting name");
    expect_load_error("modle = { path = \"x\"; };", C, "cinfer.cfg:1: modle: unknown section (did you mean model?)");
    expect_load_error("\nnetwork = { };", C,
                      "cinfer.cfg:2: network: unknown section (the sections are model, tokenizer, launcher, "
                      "scheduler, server, engine, log)");
    expect_load_error("port = 8080;", C,
                      "cinfer.cfg:1: port: settings belong in a section (did you mean server.port, written as "
                      "server = { port = ...; };?)");
    expect_load_error("server = 3;", C, "cinfer.cfg:1: server: expected a section (server = { ... };), found an integer");
    expect_load_error("scheduler = {\n max_running_request = 8; };", C,
                      "cinfer.cfg:2: scheduler.max_running_request: unknown key (did you mean "
                      "scheduler.max_running_requests?)");
    expect_load_error("scheduler = { port = 8; };", C,
                      "cinfer.cfg:1: scheduler.port: unknown key (port belongs in section server: server.port)");
    expect_load_error("log = { colour = true; };", C,
                      "cinfer.cfg:1: log.colour: unknown key (docs/configuration.md lists the keys of each section)");
    /* The brief's example, on line 12. */
    expect_load_error("\n\n\n\n\n\n\n\n\n\nscheduler = {\n  max_running_requests = \"lots\";\n};", C,
                      "cinfer.cfg:12: scheduler.max_running_requests: expected an integer, found a string");
    expect_load_error("scheduler = { max_running_requests = 8.0; };", C,
                      "cinfer.cfg:1: scheduler.max_running_requests: expected an integer, found a number with a "
                      "decimal point");
    expect_load_error("server = { port = 70000; };", C,
                      "cinfer.cfg:1: server.port: expected an integer from 0 to 65535, found 70000");
    expect_load_error("launcher = { tp_size = 0; };", C,
                      "cinfer.cfg:1: launcher.tp_size: expected an integer from 1 to 1024, found 0");
    expect_load_error("engine = { random_seed = -2; };", C,
                      "cinfer.cfg:1: engine.random_seed: expected an integer of at least -1, found -2");
    expect_load_error("scheduler = { schedule_policy = \"fifo\"; };", C,
                      "cinfer.cfg:1: scheduler.schedule_policy: expected one of \"fcfs\", \"lpm\", found \"fifo\"");
    expect_load_error("log = { level = 3; };", C, "cinfer.cfg:1: log.level: expected a string, found an integer");
    expect_load_error("launcher = { plugin = \"\"; };", C,
                      "cinfer.cfg:1: launcher.plugin: expected a non-empty string, found an empty string");
    expect_load_error("server = { host = \"\"; };", C,
                      "cinfer.cfg:1: server.host: expected a non-empty string, found an empty string");
    expect_load_error("model = { path = 5; };", C, "cinfer.cfg:1: model.path: expected a string, found an integer");
    expect_load_error("scheduler = { kv_cache_bytes = \"2X\"; };", C,
                      "cinfer.cfg:1: scheduler.kv_cache_bytes: expected a size in bytes from 0 to 1024T (an "
                      "integer, or a string such as \"512M\"), found \"2X\"");
    expect_load_error("server = { max_request_body_bytes = \"2G\"; };", C,
                      "cinfer.cfg:1: server.max_request_body_bytes: expected a size in bytes from 1K to 1G (an "
                      "integer, or a string such as \"512M\"), found 2G");
    expect_load_error("scheduler = { kv_cache_bytes = true; };", C,
                      "cinfer.cfg:1: scheduler.kv_cache_bytes: expected a size in bytes (an integer, or a string "
                      "such as \"512M\"), found a boolean");
    expect_load_error("engine = { watchdog_timeout = \"10\"; start_timeout = \"1d\"; };", C,
                      "cinfer.cfg:1: engine.watchdog_timeout: expected a duration from 1s to 24h (milliseconds, "
                      "or a string such as \"30s\"), found 10ms");
    expect_load_error("engine = { start_timeout = \"1d\"; };", C,
                      "cinfer.cfg:1: engine.start_timeout: expected a duration from 1ms to 24h (milliseconds, or "
                      "a string such as \"30s\"), found \"1d\"");
    expect_load_error("scheduler = { mem_fraction_static = 1.5; };", C,
                      "cinfer.cfg:1: scheduler.mem_fraction_static: expected a number from 0.01 to 0.99, found 1.5");
    expect_load_error("scheduler = { mem_fraction_static = 1; };", C, /* an integer is a number too */
                      "cinfer.cfg:1: scheduler.mem_fraction_static: expected a number from 0.01 to 0.99, found 1.0");
    expect_load_error("scheduler = { mem_fraction_static = \"half\"; };", C,
                      "cinfer.cfg:1: scheduler.mem_fraction_static: expected a number, found a string");
    expect_load_error("scheduler = { disable_radix_cache = 1; };", C,
                      "cinfer.cfg:1: scheduler.disable_radix_cache: expected true or false, found an integer");
    expect_load_error("launcher = { hosts = \"a,b\"; };", C,
                      "cinfer.cfg:1: launcher.hosts: expected a list of strings, found a string");
    expect_load_error("launcher = { hosts = ( \"a\", 2 ); };", C,
                      "cinfer.cfg:1: launcher.hosts[1]: expected a string, found an integer");
    expect_load_error("launcher = { hosts = [ \"a\", \"\" ]; };", C,
                      "cinfer.cfg:1: launcher.hosts: expected non-empty names, found an empty one (item 2)");
    expect_load_error("model = { dtype = { x = 1; }; };", C, "cinfer.cfg:1: model.dtype: expected a string, found a group");

    /* A failed load leaves the args as they were. */
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    init_args(&args);
    ck_assert_int_eq(cinfer_server_args_load_string(&args, "server = { port = 1; host = 5; };", "c", &err), C);
    ck_assert_int_eq(args.port, 30000);
    ck_assert_int_eq(cinfer_server_args_origin(&args, "server.port"), CINFER_ORIGIN_DEFAULT);
    /* A file that is not there. */
    ck_assert_int_eq(cinfer_server_args_load_file(&args, "/nonexistent/cinfer.cfg", &err), CINFER_ERR_IO);
    ck_assert_str_eq(err.message, "/nonexistent/cinfer.cfg: cannot read the config file: No such file or directory");
    cinfer_server_args_free(&args);
}
END_TEST

/* ---- flags ----------------------------------------------------------------------------- */

START_TEST(flag_errors)
{
    expect_flag_error("unknown flag --max-runing-requests (did you mean --max-running-requests?)",
                      "--max-runing-requests", "4", NULL);
    expect_flag_error("unknown flag --prot (did you mean --port?)", "--prot=8", NULL);
    expect_flag_error("unknown flag --frobnicate (--help lists the flags)", "--frobnicate", NULL);
    expect_flag_error("unknown flag -p (--help lists the flags)", "-p", "8", NULL);
    expect_flag_error("--port: missing its value (an integer from 0 to 65535)", "--port", NULL);
    expect_flag_error("--config: missing its value (a config file)", "--config", NULL);
    expect_flag_error("--port: expected an integer from 0 to 65535, found \"80x\"", "--port", "80x", NULL);
    expect_flag_error("--port: expected an integer from 0 to 65535, found \"\"", "--port=", NULL);
    expect_flag_error("--port: expected an integer from 0 to 65535, found 65536", "--port", "65536", NULL);
    expect_flag_error("--tp-size: expected an integer from 1 to 1024, found \"99999999999999999999\"", "--tp-size",
                      "99999999999999999999", NULL);
    expect_flag_error("--kv-cache-bytes: expected a size in bytes from 0 to 1024T (an integer, or a string such as "
                      "\"512M\"), found \"lots\"",
                      "--kv-cache-bytes", "lots", NULL);
    expect_flag_error("--mem-fraction-static: expected a number from 0.01 to 0.99, found \"nan\"",
                      "--mem-fraction-static", "nan", NULL);
    expect_flag_error("--mem-fraction-static: expected a number from 0.01 to 0.99, found 0.995",
                      "--mem-fraction-static=0.995", NULL);
    expect_flag_error("--disable-radix-cache: expected true or false, found \"maybe\"", "--disable-radix-cache=maybe",
                      NULL);
    expect_flag_error("--log-level: expected one of \"error\", \"warning\", \"info\", \"debug\", found \"trace\"",
                      "--log-level", "trace", NULL);
    expect_flag_error("--hosts: expected non-empty names, found an empty one (item 2)", "--hosts", "a,,b", NULL);
    expect_flag_error("--watchdog-timeout: expected a duration from 1s to 24h (milliseconds, or a string such as "
                      "\"30s\"), found \"soon\"",
                      "--watchdog-timeout", "soon", NULL);
    /* The port parsed fine before the bad flag, yet nothing of this call sticks. */
    expect_flag_error("unknown flag --bogus (--help lists the flags)", "--port", "1", "--bogus", NULL);
}
END_TEST

START_TEST(flags_and_rest)
{
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    init_args(&args);
    static const struct cinfer_command_flag mine[] = {{"--max-new-tokens", 1}, {"--stream", 0}, {NULL, 0}};
    char *argv[] = {"generate", "--max-new-tokens", "5", "Hello", "--port", "99", "--stream", "--model=/m",
                    "--disable-radix-cache", "--hosts", " a , b ", "--max-new-tokens=7", "-", "--dtype=f16",
                    "--", "--port", "x"};
    int argc = (int)(sizeof argv / sizeof *argv);
    char *rest[sizeof argv / sizeof *argv];
    int n_rest = 0;
    ck_assert_int_eq(cinfer_server_args_apply_flags(&args, argc, argv, mine, rest, &n_rest, &err), 0);
    const char *expected_rest[] = {"--max-new-tokens", "5", "Hello", "--stream", "--max-new-tokens=7", "-",
                                   "--port", "x"};
    ck_assert_int_eq(n_rest, (int)(sizeof expected_rest / sizeof *expected_rest));
    for (int i = 0; i < n_rest; i++)
        ck_assert_str_eq(rest[i], expected_rest[i]);
    ck_assert_int_eq(args.port, 99);
    ck_assert_str_eq(args.model_path, "/m");
    ck_assert_int_eq(args.disable_radix_cache, 1);
    ck_assert_int_eq(args.hosts.count, 2);
    ck_assert_str_eq(args.hosts.items[0], "a");
    ck_assert_str_eq(args.hosts.items[1], "b");
    ck_assert_int_eq(args.dtype, CINFER_WEIGHT_DTYPE_F16);
    ck_assert_int_eq(cinfer_server_args_origin(&args, "server.port"), CINFER_ORIGIN_FLAG);

    /* Later flags win; --flag=false turns an on/off option off; "" unsets a string. */
    char *argv2[] = {"x", "--port", "1", "--port=2", "--disable-radix-cache=false", "--model-path", "",
                     "--hosts="};
    ck_assert_int_eq(cinfer_server_args_apply_flags(&args, 8, argv2, NULL, rest, &n_rest, &err), 0);
    ck_assert_int_eq(n_rest, 0);
    ck_assert_int_eq(args.port, 2);
    ck_assert_int_eq(args.disable_radix_cache, 0);
    ck_assert_ptr_null(args.model_path);
    ck_assert_int_eq(args.hosts.count, 0);
    ck_assert_ptr_null(args.hosts.items);
    cinfer_server_args_free(&args);
}
END_TEST

START_TEST(flag_over_file)
{
    char path[] = "/tmp/cinfer-test-config-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "server = { port = 1234; host = \"0.0.0.0\"; };\nscheduler = { page_size = 8; };\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);

    for (int order = 0; order < 2; order++) {
        /* The file is read first whatever its place among the flags. */
        char *first[] = {"serve", "--config", path, "--port", "5678", "prompt"};
        char config_eq[128];
        snprintf(config_eq, sizeof config_eq, "--config=%s", path);
        char *second[] = {"serve", "--port=5678", "prompt", config_eq};
        char **argv = order ? second : first;
        int argc = order ? 4 : 6;
        struct cinfer_server_args args;
        struct cinfer_error err = {0};
        char *rest[8];
        int n_rest = 0;
        ck_assert_msg(cinfer_server_args_parse_command_line(&args, argc, argv, NULL, rest, &n_rest, &err) == 0,
                      "%s", err.message);
        ck_assert_int_eq(args.port, 5678);
        ck_assert_str_eq(args.host, "0.0.0.0");
        ck_assert_int_eq(args.page_size, 8);
        ck_assert_int_eq(args.max_running_requests, 64);
        ck_assert_int_eq(cinfer_server_args_origin(&args, "server.port"), CINFER_ORIGIN_FLAG);
        ck_assert_int_eq(cinfer_server_args_origin(&args, "server.host"), CINFER_ORIGIN_FILE);
        ck_assert_int_eq(cinfer_server_args_origin(&args, "scheduler.max_running_requests"), CINFER_ORIGIN_DEFAULT);
        ck_assert_int_eq(n_rest, 1);
        ck_assert_str_eq(rest[0], "prompt");
        cinfer_server_args_free(&args);
    }

    /* parse_command_line validates, and names the file of a bad setting. */
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    char *rest[8];
    int n_rest = 0;
    char *bad_flag[] = {"serve", "--config", path, "--chunked-prefill-size", "12"};
    ck_assert_int_eq(cinfer_server_args_parse_command_line(&args, 5, bad_flag, NULL, rest, &n_rest, &err),
                     CINFER_ERR_CONFIG);
    ck_assert_str_eq(err.message, "scheduler.chunked_prefill_size (12) is not a multiple of scheduler.page_size (8): "
                                  "chunks must end on a KV page boundary");
    char *missing[] = {"serve", "--config", "/nonexistent.cfg"};
    ck_assert_int_eq(cinfer_server_args_parse_command_line(&args, 3, missing, NULL, rest, &n_rest, &err),
                     CINFER_ERR_IO);
    unlink(path);
}
END_TEST

START_TEST(include_in_files)
{
    /* @include names a file next to the including one; errors in it name that file. */
    char folder[] = "/tmp/cinfer-test-include-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(folder));
    char main_path[128], part_path[128];
    snprintf(main_path, sizeof main_path, "%s/main.cfg", folder);
    snprintf(part_path, sizeof part_path, "%s/part.cfg", folder);
    FILE *f = fopen(main_path, "w");
    fputs("server = { port = 4242; };\n@include \"part.cfg\"\n", f);
    fclose(f);
    f = fopen(part_path, "w");
    fputs("scheduler = { page_size = 64; };\n", f);
    fclose(f);
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    init_args(&args);
    ck_assert_msg(cinfer_server_args_load_file(&args, main_path, &err) == 0, "%s", err.message);
    ck_assert_int_eq(args.port, 4242);
    ck_assert_int_eq(args.page_size, 64);

    f = fopen(part_path, "w");
    fputs("\nscheduler = { page_size = 0; };\n", f);
    fclose(f);
    ck_assert_int_eq(cinfer_server_args_load_file(&args, main_path, &err), CINFER_ERR_CONFIG);
    char expected[256];
    snprintf(expected, sizeof expected, "%s:2: scheduler.page_size: expected an integer from 1 to 4096, found 0",
             part_path);
    ck_assert_str_eq(err.message, expected);
    ck_assert_int_eq(args.page_size, 64);
    cinfer_server_args_free(&args);
    unlink(part_path);
    unlink(main_path);
    rmdir(folder);
}
END_TEST

/* ---- cross-field rules ---------------------------------------------------------------- */

START_TEST(validation)
{
    expect_invalid("launcher = { plugin = \"ssh\"; };",
                   "launcher.plugin is \"ssh\" but launcher.hosts (--hosts) is empty: the ssh launcher needs one "
                   "host per data-parallel replica");
    expect_invalid("launcher = { plugin = \"ssh\"; hosts = [ \"a\" ]; dp_size = 2; };",
                   "launcher.hosts (--hosts) lists 1 host but launcher.dp_size (--dp-size) is 2 and tp_size 1: list "
                   "one host per replica (2) or one per rank (2); a host may be listed twice");
    expect_invalid("launcher = { hosts = [ \"a\", \"b\", \"c\" ]; dp_size = 2; tp_size = 2; };",
                   "launcher.hosts (--hosts) lists 3 hosts but launcher.dp_size (--dp-size) is 2 and tp_size 2: list "
                   "one host per replica (2) or one per rank (4); a host may be listed twice");
    expect_invalid("launcher = { tp_size = 4; ep_size = 2; };",
                   "launcher.ep_size (--ep-size) is 2 but launcher.tp_size (--tp-size) is 4: expert parallelism uses "
                   "the tensor-parallel ranks as its group, so ep_size is 1 or equal to tp_size");
    expect_invalid("launcher = { ep_size = 2; };",
                   "launcher.ep_size (--ep-size) is 2 but launcher.tp_size (--tp-size) is 1: expert parallelism uses "
                   "the tensor-parallel ranks as its group, so ep_size is 1 or equal to tp_size");
    expect_invalid("scheduler = { kv_cache_bytes = \"1G\"; mem_fraction_static = 0.5; };",
                   "scheduler.kv_cache_bytes (--kv-cache-bytes) is 1G and scheduler.mem_fraction_static "
                   "(--mem-fraction-static) is 0.5: both size the KV cache, set only one");
    expect_invalid("scheduler = { chunked_prefill_size = 4096; max_prefill_tokens = 2048; };",
                   "scheduler.chunked_prefill_size (4096) is larger than scheduler.max_prefill_tokens (2048): a "
                   "chunk must fit in one prefill batch");
    expect_invalid("scheduler = { chunked_prefill_size = 1000; };",
                   "scheduler.chunked_prefill_size (1000) is not a multiple of scheduler.page_size (16): chunks "
                   "must end on a KV page boundary");
    expect_invalid("scheduler = { max_total_tokens = 8; };",
                   "scheduler.max_total_tokens (8) is less than one KV page (scheduler.page_size 16)");
    expect_invalid("model = { context_length = 8192; };\nscheduler = { max_total_tokens = 4096; };",
                   "scheduler.max_total_tokens (4096) is less than model.context_length (8192): the KV cache could "
                   "not hold one request of full length");
    expect_invalid("scheduler = { schedule_policy = \"lpm\"; disable_radix_cache = true; };",
                   "scheduler.schedule_policy is \"lpm\" but scheduler.disable_radix_cache is true: "
                   "longest-prefix-match needs the radix cache (use fcfs, or enable the cache)");

    /* And what the rules allow. */
    const char *valid[] = {
        "launcher = { plugin = \"ssh\"; hosts = [ \"a\", \"a\" ]; dp_size = 2; };",
        "launcher = { plugin = \"/opt/launch-slurm.so\"; hosts = [ \"a\" ]; };",
        "launcher = { tp_size = 4; ep_size = 4; };", /* SGLang's rule: the MoE layers' group is the TP group */
        "scheduler = { kv_cache_bytes = \"1G\"; };",
        "scheduler = { kv_cache_bytes = \"1G\"; mem_fraction_static = 0.8; };", /* the default: not a second budget */
        "scheduler = { kv_cache_bytes = 0; mem_fraction_static = 0.5; };",
        "scheduler = { chunked_prefill_size = 0; max_prefill_tokens = 100; };",
        "model = { context_length = 4096; };\nscheduler = { max_total_tokens = 4096; };",
    };
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) {
        struct cinfer_server_args args, in_worker;
        struct cinfer_error err = {0};
        load_ok(&args, valid[i]);
        ck_assert_msg(cinfer_server_args_validate(&args, &err) == 0, "%s: %s", valid[i], err.message);
        /* Settings sent to a worker as text (every key written) pass there too. */
        char *text = NULL;
        ck_assert_int_eq(cinfer_server_args_to_string(&args, &text, &err), 0);
        load_ok(&in_worker, text);
        ck_assert_msg(cinfer_server_args_validate(&in_worker, &err) == 0, "%s in a worker: %s", valid[i], err.message);
        free(text);
        cinfer_server_args_free(&in_worker);
        cinfer_server_args_free(&args);
    }
}
END_TEST

/* ---- every option through print -> load, and through its flag ------------------------ */

/* Sets opt to a value other than its default: variant 0 the far end of its range,
 * variant 1 the near end or another choice. */
static void set_unusual(struct cinfer_server_args *args, const struct option *opt, int variant)
{
    struct cinfer_error err = {0};
    int rc = 0;
    switch (opt->type) {
    case OPTION_STRING:
        if (opt->choices)
            rc = cinfer_option_set_string(args, opt, variant ? "fork" : "/opt/cinfer/launch-\"odd\".so", &err);
        else
            rc = cinfer_option_set_string(args, opt,
                                          variant ? "plain"
                                                  : "quote \" backslash \\ tab\t newline\n bell\x07 del\x7f utf8 \xc3\xa9 #;{}",
                                          &err);
        break;
    case OPTION_STRING_LIST: {
        const char *items[] = {"node1", "user@node-2", "a \"quoted\" \\ name"};
        rc = cinfer_option_set_list(args, opt, items, variant ? 1 : 3, &err);
        break;
    }
    case OPTION_INT:
    case OPTION_INT64:
        rc = cinfer_option_set_int(args, opt, variant ? opt->min : opt->max, &err);
        break;
    case OPTION_BYTES:
        rc = cinfer_option_set_int(args, opt, variant ? 1536 * 1024 + 1 : opt->max, &err);
        break;
    case OPTION_DURATION_MS:
        rc = cinfer_option_set_int(args, opt, variant ? 1501 : opt->max, &err);
        break;
    case OPTION_DOUBLE:
        rc = cinfer_option_set_double(args, opt, variant ? opt->min_double : 0.3, &err);
        break;
    case OPTION_BOOL:
        *(int *)cinfer_option_field(args, opt) = !opt->default_int;
        break;
    case OPTION_ENUM: {
        int n = 0;
        while (opt->choices[n])
            n++;
        *(int *)cinfer_option_field(args, opt) = variant ? 0 : n - 1;
        if (*(int *)cinfer_option_field(args, opt) == opt->default_int)
            *(int *)cinfer_option_field(args, opt) = 1;
        break;
    }
    }
    ck_assert_msg(rc == 0, "%s.%s: %s", opt->section, opt->name, err.message);
}

START_TEST(every_option_round_trips)
{
    for (int variant = 0; variant < 2; variant++) {
        for (int annotate = 0; annotate < 2; annotate++) {
            struct cinfer_server_args set, loaded;
            init_args(&set);
            for (int i = 0; i < cinfer_options_count; i++)
                set_unusual(&set, &cinfer_options[i], variant);
            char *text = print_to_string(&set, annotate);
            load_ok(&loaded, text);
            for (int i = 0; i < cinfer_options_count; i++) {
                const struct option *opt = &cinfer_options[i];
                ck_assert_msg(option_equal(&set, &loaded, opt), "%s.%s differs after print -> load (variant %d):\n%s",
                              opt->section, opt->name, variant, text);
                ck_assert_int_eq(loaded.origin[i], CINFER_ORIGIN_FILE);
            }
            /* And printing the loaded args gives the same text. */
            char *again = print_to_string(&loaded, 0);
            char *plain = print_to_string(&set, 0);
            ck_assert_str_eq(again, plain);
            /* to_string is print without annotations. */
            char *serialized = NULL;
            struct cinfer_error err = {0};
            ck_assert_int_eq(cinfer_server_args_to_string(&set, &serialized, &err), 0);
            ck_assert_str_eq(serialized, plain);
            /* A copy is deep: it survives the original. */
            struct cinfer_server_args copy;
            ck_assert_int_eq(cinfer_server_args_copy(&copy, &set, &err), 0);
            cinfer_server_args_free(&set);
            char *from_copy = print_to_string(&copy, 0);
            ck_assert_str_eq(from_copy, plain);
            free(from_copy);
            free(serialized);
            free(plain);
            free(again);
            free(text);
            cinfer_server_args_free(&copy);
            cinfer_server_args_free(&loaded);
        }
    }
}
END_TEST

/* The text a person would type after the flag for opt's current value. */
static void flag_text(const struct cinfer_server_args *args, const struct option *opt, char *out, size_t out_bytes)
{
    const void *field = cinfer_option_field_const(args, opt);
    switch (opt->type) {
    case OPTION_STRING: snprintf(out, out_bytes, "%s", *(char *const *)field ? *(char *const *)field : ""); return;
    case OPTION_STRING_LIST: {
        const struct cinfer_string_list *list = field;
        out[0] = '\0';
        for (int i = 0; i < list->count; i++)
            snprintf(out + strlen(out), out_bytes - strlen(out), "%s%s", i ? "," : "", list->items[i]);
        return;
    }
    case OPTION_INT:
    case OPTION_DURATION_MS: snprintf(out, out_bytes, "%d", *(const int *)field); return;
    case OPTION_INT64:
    case OPTION_BYTES: snprintf(out, out_bytes, "%lld", (long long)*(const int64_t *)field); return;
    case OPTION_DOUBLE: snprintf(out, out_bytes, "%.17g", *(const double *)field); return;
    case OPTION_BOOL: snprintf(out, out_bytes, "%s", *(const int *)field ? "true" : "false"); return;
    case OPTION_ENUM: snprintf(out, out_bytes, "%s", opt->choices[*(const int *)field]); return;
    }
}

START_TEST(every_flag_sets_its_key)
{
    struct cinfer_server_args want;
    init_args(&want);
    for (int i = 0; i < cinfer_options_count; i++)
        set_unusual(&want, &cinfer_options[i], 1); /* variant 1: no commas or quotes in lists */
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *opt = &cinfer_options[i];
        char value[256], joined[300];
        flag_text(&want, opt, value, sizeof value);
        snprintf(joined, sizeof joined, "%s=%s", opt->flag, value);
        /* Both spellings, and the alias when there is one. */
        char *forms[3][3] = {{"x", (char *)opt->flag, value}, {"x", joined, NULL},
                             {"x", (char *)(opt->flag_alias ? opt->flag_alias : opt->flag), value}};
        if (opt->type == OPTION_BOOL) {
            /* An on/off flag takes no separate value: alone it means on. */
            ck_assert_str_eq(value, "true");
            forms[0][2] = NULL;
            forms[2][2] = NULL;
        }
        for (int f = 0; f < 3; f++) {
            struct cinfer_server_args got;
            struct cinfer_error err = {0};
            char *rest[3];
            int n_rest = 0;
            init_args(&got);
            int argc = forms[f][2] ? 3 : 2;
            ck_assert_msg(cinfer_server_args_apply_flags(&got, argc, forms[f], NULL, rest, &n_rest, &err) == 0,
                          "%s %s: %s", opt->flag, value, err.message);
            ck_assert_msg(option_equal(&want, &got, opt), "%s %s did not set %s.%s", opt->flag, value, opt->section,
                          opt->name);
            ck_assert_int_eq(got.origin[i], CINFER_ORIGIN_FLAG);
            ck_assert_int_eq(n_rest, 0);
            cinfer_server_args_free(&got);
        }
    }
    cinfer_server_args_free(&want);
}
END_TEST

/* ---- the example file and the docs ---------------------------------------------------- */

START_TEST(example_file)
{
    const char *path = CINFER_SOURCE_DIR "/examples/cinfer.cfg";
    struct cinfer_server_args args, defaults;
    struct cinfer_error err = {0};
    init_args(&args);
    init_args(&defaults);
    ck_assert_msg(cinfer_server_args_load_file(&args, path, &err) == 0, "%s", err.message);
    ck_assert_msg(cinfer_server_args_validate(&args, &err) == 0, "%s", err.message);
    /* Every key is written in it, every value is the default but the model path. */
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *opt = &cinfer_options[i];
        ck_assert_msg(args.origin[i] == CINFER_ORIGIN_FILE, "examples/cinfer.cfg lacks %s.%s", opt->section, opt->name);
        if (opt->offset != offsetof(struct cinfer_server_args, model_path))
            ck_assert_msg(option_equal(&args, &defaults, opt), "examples/cinfer.cfg: %s.%s is not the default",
                          opt->section, opt->name);
    }
    ck_assert_str_eq(args.model_path, "/models/SmolLM2-135M-Instruct");

    /* Each key's comment names its flag and states the default the table has. */
    char *text = read_file(path);
    for (int i = 0; i < cinfer_options_count; i++) {
        const struct option *opt = &cinfer_options[i];
        char section_start[64], key[64], flag[80], def[96];
        snprintf(section_start, sizeof section_start, "\n%s = {\n", opt->section);
        snprintf(key, sizeof key, "\n  %s = ", opt->name);
        snprintf(flag, sizeof flag, "Flag: %s", opt->flag);
        char def_text[64];
        cinfer_option_format_default(opt, def_text, sizeof def_text);
        snprintf(def, sizeof def, "Default: %s.", def_text);
        const char *section = strstr(text, section_start);
        ck_assert_msg(section != NULL, "no section %s", opt->section);
        const char *line = strstr(section, key);
        ck_assert_msg(line != NULL, "no key %s.%s", opt->section, opt->name);
        /* The comment block right above the key. */
        const char *comment_end = line;
        const char *comment = line;
        while (comment > section) {
            const char *prev = comment - 1;
            while (prev > section && prev[-1] != '\n')
                prev--;
            if (strncmp(prev, "  #", 3))
                break;
            comment = prev - 1;
        }
        size_t comment_len = (size_t)(comment_end - comment);
        char *block = strndup(comment, comment_len);
        ck_assert_msg(strstr(block, flag), "%s.%s: its comment does not say \"%s\":%s", opt->section, opt->name, flag,
                      block);
        ck_assert_msg(strstr(block, def), "%s.%s: its comment does not say \"%s\":%s", opt->section, opt->name, def,
                      block);
        free(block);
    }
    free(text);
    cinfer_server_args_free(&args);
    cinfer_server_args_free(&defaults);
}
END_TEST

START_TEST(docs_match_the_table)
{
    char *generated = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&generated, &len);
    cinfer_server_args_print_markdown(f);
    fclose(f);
    char *committed = read_file(CINFER_SOURCE_DIR "/docs/configuration.md");
    ck_assert_msg(!strcmp(generated, committed),
                  "docs/configuration.md differs from the option table; regenerate it with\n"
                  "  build/bin/cinfer config --markdown > docs/configuration.md");
    /* Every key and flag is in it. */
    for (int i = 0; i < cinfer_options_count; i++) {
        char key[80];
        snprintf(key, sizeof key, "`%s.%s`", cinfer_options[i].section, cinfer_options[i].name);
        ck_assert_msg(strstr(committed, key) && strstr(committed, cinfer_options[i].flag), "%s missing", key);
    }
    free(generated);
    free(committed);
}
END_TEST

START_TEST(help_lists_every_flag)
{
    char *help = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&help, &len);
    cinfer_server_args_print_help(f);
    fclose(f);
    for (int i = 0; i < cinfer_options_count; i++) {
        char line[128];
        snprintf(line, sizeof line, "\n  %s", cinfer_options[i].flag);
        ck_assert_msg(strstr(help, line), "--help lacks %s", cinfer_options[i].flag);
    }
    ck_assert_ptr_nonnull(strstr(help, "  --model-path, --model PATH\n"));
    ck_assert_ptr_nonnull(strstr(help, "[server.port: an integer from 0 to 65535; default 30000]"));
    free(help);
}
END_TEST

/* ---- cinfer config ------------------------------------------------------------------- */

START_TEST(cinfer_config_command)
{
    static char out[65536];
    int rc = cinfer_test_run(CINFER_BIN " config --port 70000", out, sizeof out);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(out, "cinfer config: --port: expected an integer from 0 to 65535, found 70000\n");

    rc = cinfer_test_run(CINFER_BIN " config --config " CINFER_SOURCE_DIR "/tests/test_config.c", out, sizeof out);
    ck_assert_int_eq(rc, 1);
    ck_assert_ptr_nonnull(strstr(out, "cinfer config: " CINFER_SOURCE_DIR "/tests/test_config.c:"));

    rc = cinfer_test_run(CINFER_BIN " config stray", out, sizeof out);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(out, "cinfer config: unexpected argument 'stray' (cinfer config takes only flags)\n");

    /* The printed settings are the file's plus the flag, and read back the same. */
    rc = cinfer_test_run(CINFER_BIN " config --config " CINFER_SOURCE_DIR "/examples/cinfer.cfg --port 8080 "
                                    "--kv-cache-bytes 3G --mem-fraction-static=0.7 2>&1",
                         out, sizeof out);
    ck_assert_int_eq(rc, 1); /* both KV budgets set: the rule says so */
    ck_assert_ptr_nonnull(strstr(out, "both size the KV cache"));
    rc = cinfer_test_run(CINFER_BIN " config --config " CINFER_SOURCE_DIR "/examples/cinfer.cfg --port 8080 "
                                    "--max-total-tokens 6000000000",
                         out, sizeof out);
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "  port = 8080;  # --port, from a flag\n"));
    ck_assert_ptr_nonnull(strstr(out, "  host = \"127.0.0.1\";  # --host, from the config file\n"));
    ck_assert_ptr_nonnull(strstr(out, "  max_total_tokens = 6000000000L;"));
    struct cinfer_server_args args;
    load_ok(&args, out);
    ck_assert_int_eq(args.port, 8080);
    ck_assert_int_eq(args.max_total_tokens, 6000000000LL);
    ck_assert_str_eq(args.model_path, "/models/SmolLM2-135M-Instruct");
    cinfer_server_args_free(&args);

    rc = cinfer_test_run(CINFER_BIN " config --help", out, sizeof out);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(out, "--kv-cache-bytes BYTES"));
}
END_TEST

static Suite *suite_config(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, table_is_consistent);
    tcase_add_test(tc, defaults_from_the_table);
    tcase_add_test(tc, units);
    tcase_add_test(tc, oversized_integer_literals);
    tcase_add_test(tc, file_values_of_every_form);
    tcase_add_test(tc, file_errors);
    tcase_add_test(tc, flag_errors);
    tcase_add_test(tc, flags_and_rest);
    tcase_add_test(tc, flag_over_file);
    tcase_add_test(tc, include_in_files);
    tcase_add_test(tc, validation);
    tcase_add_test(tc, every_option_round_trips);
    tcase_add_test(tc, every_flag_sets_its_key);
    tcase_add_test(tc, example_file);
    tcase_add_test(tc, docs_match_the_table);
    tcase_add_test(tc, help_lists_every_flag);
    tcase_add_test(tc, cinfer_config_command);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_config)
