/* core/config/prescan.c — a look at config text before libconfig parses it, for what
 * libconfig would take silently:
 * - libconfig 1.5 reads an integer beyond 32 bits without an L suffix by wrapping it
 *   (kv_cache_bytes = 4294967296 becomes 0; hex above 0x7fffffff turns negative);
 * - text loaded from memory has no folder, so an @include in it would open whatever
 *   path it names relative to the process's working folder;
 * - a string still open at the end of the text: libconfig reports it but leaks the
 *   buffer of the string it was reading (found by fuzz_worker_settings). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/options.h"
#include "config/prescan.h"

static int is_name_char(char c)
{
    /* libconfig setting names: [A-Za-z*][-A-Za-z0-9_*]*; a digit inside one is no number. */
    return isalnum((unsigned char)c) || c == '_' || c == '*' || c == '-';
}

/* Length of the number token at p: digits, letters (hex, suffixes), '.', and a sign
 * right after an exponent's e. */
static size_t number_length(const char *p)
{
    size_t n = 0;
    int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    for (;;) {
        char c = p[n];
        if (isalnum((unsigned char)c) || c == '.')
            n++;
        else if ((c == '+' || c == '-') && n > 0 && !hex && (p[n - 1] == 'e' || p[n - 1] == 'E'))
            n++;
        else
            return n;
    }
}

static int check_number(const char *start, size_t len, int negative, int line, const char *name,
                        struct cinfer_error *err)
{
    char token[64];
    if (len >= sizeof token)
        len = sizeof token - 1;
    memcpy(token, start, len);
    token[len] = '\0';
    if (token[len - 1] == 'L' || token[len - 1] == 'l')
        return 0; /* 64-bit on purpose */
    int hex = token[0] == '0' && (token[1] == 'x' || token[1] == 'X');
    if (!hex && strpbrk(token, ".eE"))
        return 0; /* a float */
    errno = 0;
    char *end;
    unsigned long long magnitude = strtoull(token, &end, hex ? 16 : 10);
    if (*end)
        return 0; /* not a number libconfig accepts either; its parser reports it */
    unsigned long long limit = hex ? 0x7fffffffull : negative ? 2147483648ull : 2147483647ull;
    if (errno != ERANGE && magnitude <= limit)
        return 0;
    return cinfer_error_set(err, CINFER_ERR_CONFIG,
                            "%s:%d: %s%s: integer too large for 32 bits; write %s%sL for a 64-bit integer "
                            "(or a string with a unit, such as \"4G\" or \"10m\")",
                            name, line, negative ? "-" : "", token, negative ? "-" : "", token);
}

int cinfer_config_prescan(const char *text, const char *name, int allow_include, struct cinfer_error *err)
{
    int line = 1;
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            line++;
            p++;
        } else if (*p == '"') {
            int first_line = line;
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1])
                    p++;
                if (*p == '\n')
                    line++;
            }
            if (!*p) /* libconfig would say so too, but leaks the string it was reading */
                return cinfer_error_set(err, CINFER_ERR_CONFIG, "%s:%d: a string opened here is never closed (\")",
                                        name, first_line);
            p++;
        } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
            while (*p && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
                if (*p == '\n')
                    line++;
            if (*p)
                p += 2;
        } else if ((isdigit((unsigned char)*p) || ((*p == '-' || *p == '+') && isdigit((unsigned char)p[1]))) &&
                   (p == text || !is_name_char(p[-1]))) {
            int negative = *p == '-';
            if (*p == '-' || *p == '+')
                p++;
            size_t len = number_length(p);
            int rc = check_number(p, len, negative, line, name, err);
            if (rc)
                return rc;
            p += len;
        } else if (*p == '@' && !strncmp(p, "@include", 8) && !allow_include) {
            return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                    "%s:%d: @include is not allowed in settings given as text (only in files)", name,
                                    line);
        } else if (is_name_char(*p)) {
            while (is_name_char(*p))
                p++; /* a name, digits and all */
        } else {
            p++;
        }
    }
    return 0;
}
