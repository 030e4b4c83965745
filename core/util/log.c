#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char log_role[64] = "cinfer";
static int log_level = CINFER_LOG_SEV_WARNING;

void cinfer_log_set_role(const char *role)
{
    snprintf(log_role, sizeof log_role, "%s", role);
}

void cinfer_log_set_level(int level)
{
    log_level = level;
}

void cinfer_log(int severity, const char *fmt, ...)
{
    if (severity > log_level)
        return;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    /* One fprintf per line so lines from several threads do not interleave. */
    fprintf(stderr, "%02d:%02d:%02d.%03ld [%s] %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000,
            log_role, names[severity < 0 ? 0 : severity > 3 ? 3 : severity], line);
}
