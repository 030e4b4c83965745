/* core/util/progress.h — a one-line progress bar on stderr for long loads, drawn only
 * when stderr is a terminal; silent otherwise (callers log a summary line instead). */
#ifndef CINFER_UTIL_PROGRESS_H
#define CINFER_UTIL_PROGRESS_H

#include <stdint.h>

struct cinfer_progress {
    const char *label;
    uint64_t total_bytes;
    uint64_t done_bytes;
    int drawing;        /* 1 when the bar is shown */
    int last_permille;  /* redraw only when this changes */
};

/* want: the caller asks for a bar; it is drawn only if stderr is a terminal too. */
void cinfer_progress_begin(struct cinfer_progress *p, const char *label, uint64_t total_bytes, int want);
void cinfer_progress_advance(struct cinfer_progress *p, uint64_t bytes);
/* Clears the bar's line so the next message starts clean. */
void cinfer_progress_end(struct cinfer_progress *p);
/* Whether a bar would be drawn (stderr is a terminal). */
int cinfer_progress_available(void);

/* Milliseconds on a monotonic clock, for durations in log lines. */
int64_t cinfer_monotonic_ms(void);

#endif
