/* One log line per event on stderr, prefixed with the process role so that the lines
 * of several processes can be told apart. */
#ifndef CINFER_UTIL_LOG_H
#define CINFER_UTIL_LOG_H

enum cinfer_log_severity { CINFER_LOG_SEV_ERROR = 0, CINFER_LOG_SEV_WARNING = 1, CINFER_LOG_SEV_INFO = 2, CINFER_LOG_SEV_DEBUG = 3 };

/* role: "main", "scheduler tp0", ...; level: the most verbose severity printed. */
void cinfer_log_set_role(const char *role);
void cinfer_log_set_level(int level);
void cinfer_log(int severity, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
