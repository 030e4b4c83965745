/* cinfer tokenize: text -> token ids (or ids -> text with --decode) through a tokenizer
 * plugin, by default tokenizer-bpe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "cli/commands.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: cinfer tokenize [--plugin NAME] [--plugin-path DIRS] --model PATH\n"
            "                       [--decode] [--no-special] [TEXT...]\n"
            "\n"
            "Prints the token ids of TEXT on one line, separated by spaces. Several TEXT\n"
            "arguments are joined with one space; without any, the text is read from stdin.\n"
            "\n"
            "  --model PATH        a model folder, a folder holding tokenizer.json (and\n"
            "                      tokenizer_config.json), or a .gguf file (required)\n"
            "  --decode            the arguments (or stdin) are token ids, separated by spaces\n"
            "                      or commas; prints the text they spell\n"
            "  --no-special        encoding: do not add BOS/EOS; decoding: drop special tokens\n"
            "  --plugin NAME       the tokenizer plugin, a name or a path to a .so\n"
            "                      (default: tokenizer-bpe)\n"
            "  --plugin-path DIRS  colon-separated folders searched for plugins before\n"
            "                      $CINFER_PLUGIN_PATH and the install folder\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 on success, 1 when the tokenizer fails (the message says why),\n"
            "2 on a usage error.\n");
}

struct text {
    char *data;
    size_t len;
};

static int append(struct text *t, const char *s, size_t n)
{
    char *d = realloc(t->data, t->len + n + 1);
    if (!d)
        return -1;
    memcpy(d + t->len, s, n);
    t->data = d;
    t->len += n;
    t->data[t->len] = '\0';
    return 0;
}

static int read_stdin(struct text *t)
{
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), stdin)) > 0)
        if (append(t, buf, got))
            return -1;
    return ferror(stdin) ? -1 : 0;
}

/* Ids separated by spaces, commas or newlines; 1 on a word that is not an id. */
static int parse_ids(const char *s, struct cinfer_token_ids *ids, const char **bad)
{
    while (*s) {
        if (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t' || *s == '\r') {
            s++;
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ' ' && *end != ',' && *end != '\n' && *end != '\t' && *end != '\r')) {
            *bad = s;
            return 1;
        }
        if (cinfer_token_ids_push(ids, (int32_t)v))
            return -1;
        s = end;
    }
    return 0;
}

int cinfer_cmd_tokenize(int argc, char **argv)
{
    const char *plugin_name = "tokenizer-bpe", *search_path = NULL, *model = NULL;
    int decode = 0, no_special = 0, n_args = 0;
    struct text input = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(input.data);
            return 0;
        } else if ((!strcmp(a, "--plugin") || !strcmp(a, "--plugin-path") || !strcmp(a, "--model")) && i + 1 >= argc) {
            fprintf(stderr, "cinfer tokenize: %s expects a value (see --help)\n", a);
            free(input.data);
            return 2;
        } else if (!strcmp(a, "--plugin")) {
            plugin_name = argv[++i];
        } else if (!strcmp(a, "--plugin-path")) {
            search_path = argv[++i];
        } else if (!strcmp(a, "--model")) {
            model = argv[++i];
        } else if (!strcmp(a, "--decode")) {
            decode = 1;
        } else if (!strcmp(a, "--no-special")) {
            no_special = 1;
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                if ((n_args++ && append(&input, " ", 1)) || append(&input, argv[i], strlen(argv[i])))
                    goto nomem;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "cinfer tokenize: unknown option '%s' (see --help)\n", a);
            free(input.data);
            return 2;
        } else if ((n_args++ && append(&input, " ", 1)) || append(&input, a, strlen(a))) {
            goto nomem;
        }
    }
    if (!model) {
        fprintf(stderr, "cinfer tokenize: --model PATH is required (see --help)\n");
        free(input.data);
        return 2;
    }
    if (!n_args && read_stdin(&input)) {
        fprintf(stderr, "cinfer tokenize: reading stdin failed\n");
        free(input.data);
        return 1;
    }

    struct cinfer_token_ids ids = {0};
    if (decode) {
        const char *bad = NULL;
        int rc = parse_ids(input.data ? input.data : "", &ids, &bad);
        if (rc < 0)
            goto nomem;
        if (rc > 0) {
            int len = 0;
            while (bad[len] && bad[len] != ' ' && bad[len] != ',' && bad[len] != '\n' && len < 40)
                len++;
            fprintf(stderr, "cinfer tokenize: --decode expects token ids (integers), found '%.*s'\n", len, bad);
            free(input.data);
            cinfer_token_ids_free(&ids);
            return 2;
        }
    }

    struct cinfer_error err = {0};
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_tokenizer *tok = NULL;
    const struct cinfer_tokenizer_ops *ops = NULL;
    int status = 1;
    if (cinfer_plugin_open(plugin_name, CINFER_PLUGIN_KIND_TOKENIZER, search_path, &plugin, &err)) {
        fprintf(stderr, "cinfer tokenize: %s\n", err.message);
        goto out;
    }
    ops = cinfer_plugin_vtable(plugin);
    if (ops->open(model, &tok, &err)) {
        fprintf(stderr, "cinfer tokenize: %s\n", err.message);
        goto out;
    }
    if (decode) {
        char *text = NULL;
        size_t text_len = 0;
        if (ops->decode(tok, ids.ids, ids.len, no_special, &text, &text_len, &err)) {
            fprintf(stderr, "cinfer tokenize: %s\n", err.message);
            goto out;
        }
        fwrite(text, 1, text_len, stdout);
        putchar('\n');
        free(text);
    } else {
        if (ops->encode(tok, input.data ? input.data : "", input.len, !no_special, &ids, &err)) {
            fprintf(stderr, "cinfer tokenize: %s\n", err.message);
            goto out;
        }
        for (size_t i = 0; i < ids.len; i++)
            printf(i ? " %d" : "%d", ids.ids[i]);
        putchar('\n');
    }
    status = fflush(stdout) == 0 ? 0 : 1;
out:
    if (tok && ops)
        ops->close(tok);
    cinfer_plugin_close(&plugin);
    cinfer_token_ids_free(&ids);
    free(input.data);
    return status;
nomem:
    fprintf(stderr, "cinfer tokenize: out of memory\n");
    free(input.data);
    return 1;
}
