/* core/config/print.c — server args written back in config-file syntax: what
 * `cinfer config` shows, and how the settings travel to worker processes (the reader
 * gets back the same values). */
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

static const char *origin_words(int origin)
{
    switch (origin) {
    case CINFER_ORIGIN_FILE: return "from the config file";
    case CINFER_ORIGIN_FLAG: return "from a flag";
    default: return "default";
    }
}

int cinfer_server_args_print(const struct cinfer_server_args *args, FILE *out, int annotate)
{
    for (int s = 0; cinfer_config_sections[s]; s++) {
        const char *section = cinfer_config_sections[s];
        fprintf(out, "%s%s = {\n", s ? "\n" : "", section);
        for (int i = 0; i < cinfer_options_count; i++) {
            const struct option *opt = &cinfer_options[i];
            if (strcmp(opt->section, section))
                continue;
            fprintf(out, "  %s = ", opt->name);
            cinfer_option_write_value(args, opt, out);
            fputc(';', out);
            if (annotate)
                fprintf(out, "  # %s, %s", opt->flag, origin_words(args->origin[i]));
            fputc('\n', out);
        }
        fputs("};\n", out);
    }
    return ferror(out) ? CINFER_ERR_IO : 0;
}

int cinfer_server_args_to_string(const struct cinfer_server_args *args, char **out, struct cinfer_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *stream = open_memstream(&text, &len);
    if (!stream)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory writing the server args");
    int rc = cinfer_server_args_print(args, stream, 0);
    if (fclose(stream) != 0 || rc) {
        free(text);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory writing the server args");
    }
    *out = text;
    return 0;
}
