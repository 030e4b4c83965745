/* libFuzzer target for the config reader and the flag parser. Any bytes, read as a
 * config file, either load or fail with a message; what loads must print and load back
 * to the same text. The same bytes split at newlines are also tried as argv. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_suppressions(void);

/* libconfig 1.5 leaks the string it was scanning when a syntax error cuts it short
 * (strbuf_append in its scanner); that is its bug, not one this target looks for. */
const char *__lsan_default_suppressions(void)
{
    return "leak:libconfig.so\n";
}

static void check_round_trip(const struct cinfer_server_args *args)
{
    char *printed = NULL, *again = NULL;
    struct cinfer_error err = {0};
    struct cinfer_server_args reloaded;
    if (cinfer_server_args_to_string(args, &printed, &err))
        return; /* out of memory */
    if (cinfer_server_args_init(&reloaded, &err) == 0) {
        if (cinfer_server_args_load_string(&reloaded, printed, "printed", &err) != 0)
            abort(); /* what cinfer prints, cinfer must read */
        if (cinfer_server_args_to_string(&reloaded, &again, &err) == 0 && strcmp(printed, again) != 0)
            abort(); /* and read back to the same values */
        free(again);
        cinfer_server_args_free(&reloaded);
    }
    free(printed);
}

static void try_as_config(const char *text)
{
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    if (cinfer_server_args_init(&args, &err))
        return;
    if (cinfer_server_args_load_string(&args, text, "fuzz.cfg", &err) == 0) {
        cinfer_server_args_validate(&args, &err);
        check_round_trip(&args);
    } else if (err.message[0] == '\0') {
        abort(); /* every failure carries words */
    }
    cinfer_server_args_free(&args);
}

static void try_as_flags(char *text)
{
    enum { MAX_ARGS = 64 };
    char *argv[MAX_ARGS + 1] = {"fuzz"};
    int argc = 1;
    for (char *line = strtok(text, "\n"); line && argc < MAX_ARGS; line = strtok(NULL, "\n"))
        argv[argc++] = line;
    static const struct cinfer_command_flag own[] = {{"--max-new-tokens", 1}, {"--stream", 0}, {NULL, 0}};
    char *rest[MAX_ARGS + 1];
    int n_rest = 0;
    struct cinfer_server_args args;
    struct cinfer_error err = {0};
    if (cinfer_server_args_init(&args, &err))
        return;
    if (cinfer_server_args_apply_flags(&args, argc, argv, own, rest, &n_rest, &err) == 0) {
        if (n_rest < 0 || n_rest >= argc)
            abort();
        check_round_trip(&args);
    }
    cinfer_server_args_free(&args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* libconfig reads a C string: bytes past a NUL are not seen */
    try_as_config(text);
    try_as_flags(text);
    free(text);
    return 0;
}
