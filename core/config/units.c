/* core/config/units.c — numbers as people write them in settings: whole integers,
 * sizes with binary suffixes (512M), durations with units (30s), and floats printed
 * so that they read back exactly. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

int cinfer_parse_int64(const char *text, int64_t *out)
{
    const char *p = text;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return -1; /* strtoll would accept leading spaces and an empty number */
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* Leading decimal digits of text as a non-negative int64; *rest points after them. */
static int parse_digits(const char *text, int64_t *out, const char **rest)
{
    if (!isdigit((unsigned char)*text))
        return -1;
    int64_t v = 0;
    const char *p = text;
    for (; isdigit((unsigned char)*p); p++) {
        int digit = *p - '0';
        if (v > (INT64_MAX - digit) / 10)
            return -1;
        v = v * 10 + digit;
    }
    *out = v;
    *rest = p;
    return 0;
}

static int multiply_checked(int64_t value, int64_t factor, int64_t *out)
{
    if (factor != 0 && value > INT64_MAX / factor)
        return -1;
    *out = value * factor;
    return 0;
}

int cinfer_parse_bytes(const char *text, int64_t *out)
{
    int64_t value;
    const char *unit;
    if (parse_digits(text, &value, &unit))
        return -1;
    static const char prefixes[] = "KMGT";
    int64_t factor = 1;
    if (*unit) {
        const char *at = strchr(prefixes, toupper((unsigned char)*unit));
        if (at && *at) {
            for (long i = 0; i <= at - prefixes; i++)
                factor *= 1024;
            unit++;
            if (*unit == 'i')
                unit++; /* KiB, MiB: the same binary multiples */
        }
        if (*unit == 'B' || *unit == 'b')
            unit++;
        if (*unit)
            return -1;
    }
    return multiply_checked(value, factor, out);
}

int cinfer_parse_duration_ms(const char *text, int64_t *out)
{
    int64_t value;
    const char *unit;
    if (parse_digits(text, &value, &unit))
        return -1;
    int64_t factor;
    if (!*unit || !strcmp(unit, "ms"))
        factor = 1;
    else if (!strcmp(unit, "s"))
        factor = 1000;
    else if (!strcmp(unit, "m"))
        factor = 60 * 1000;
    else if (!strcmp(unit, "h"))
        factor = 3600 * 1000;
    else
        return -1;
    return multiply_checked(value, factor, out);
}

void cinfer_format_bytes(int64_t bytes, char *out, size_t out_bytes)
{
    static const char suffixes[] = "KMGT";
    int64_t value = bytes;
    int suffix = -1;
    while (value != 0 && value % 1024 == 0 && suffix < 3) {
        value /= 1024;
        suffix++;
    }
    if (suffix < 0)
        snprintf(out, out_bytes, "%lld", (long long)bytes);
    else
        snprintf(out, out_bytes, "%lld%c", (long long)value, suffixes[suffix]);
}

void cinfer_format_duration_ms(int64_t ms, char *out, size_t out_bytes)
{
    static const struct {
        int64_t ms;
        const char *unit;
    } units[] = {{3600 * 1000, "h"}, {60 * 1000, "m"}, {1000, "s"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (ms != 0 && ms % units[i].ms == 0) {
            snprintf(out, out_bytes, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    snprintf(out, out_bytes, "%lldms", (long long)ms);
}

void cinfer_format_double(double value, char *out, size_t out_bytes)
{
    /* The shortest %g that reads back to the same double: 0.85, not 0.84999999999999998. */
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, out_bytes, "%.*g", digits, value);
        if (strtod(out, NULL) == value)
            break;
    }
    if (isfinite(value) && !strpbrk(out, ".e")) {
        size_t len = strlen(out);
        if (len + 2 < out_bytes)
            memcpy(out + len, ".0", 3);
    }
}
