/* Terminal progress bar: "label [#####.....]  45%  120.0/260.0 MiB". */
#include "util/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define BAR_CELLS 30

int cinfer_progress_available(void)
{
    return isatty(STDERR_FILENO);
}

int64_t cinfer_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void draw(const struct cinfer_progress *p, int permille)
{
    char bar[BAR_CELLS + 1];
    int filled = permille * BAR_CELLS / 1000;
    for (int i = 0; i < BAR_CELLS; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BAR_CELLS] = 0;
    fprintf(stderr, "\r%s [%s] %3d%%  %.1f/%.1f MiB", p->label, bar, permille / 10,
            (double)p->done_bytes / (1024.0 * 1024.0), (double)p->total_bytes / (1024.0 * 1024.0));
    fflush(stderr);
}

void cinfer_progress_begin(struct cinfer_progress *p, const char *label, uint64_t total_bytes, int want)
{
    p->label = label;
    p->total_bytes = total_bytes;
    p->done_bytes = 0;
    p->drawing = want && cinfer_progress_available();
    p->last_permille = -1;
    if (p->drawing)
        draw(p, 0);
}

void cinfer_progress_advance(struct cinfer_progress *p, uint64_t bytes)
{
    p->done_bytes += bytes;
    if (!p->drawing)
        return;
    uint64_t done = p->done_bytes > p->total_bytes ? p->total_bytes : p->done_bytes;
    int permille = p->total_bytes ? (int)(done * 1000 / p->total_bytes) : 1000;
    if (permille != p->last_permille) {
        p->last_permille = permille;
        draw(p, permille);
    }
}

void cinfer_progress_end(struct cinfer_progress *p)
{
    if (p->drawing)
        fprintf(stderr, "\r\033[K");
    p->drawing = 0;
}
