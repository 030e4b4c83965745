#include "detokenizer/stop_matcher.h"

#include <stdlib.h>
#include <string.h>

int cinfer_stop_matcher_init(struct cinfer_stop_matcher *m, char *const *stops, int n_stops, int no_trim)
{
    memset(m, 0, sizeof *m);
    m->matched = -1;
    m->no_trim = no_trim;
    for (int i = 0; i < n_stops && i < CINFER_MAX_STOP_STRINGS; i++) {
        size_t n = stops[i] ? strlen(stops[i]) : 0;
        if (n == 0)
            continue; /* an empty stop string would match everywhere: ignored */
        m->stops[m->n_stops] = strdup(stops[i]);
        if (!m->stops[m->n_stops]) {
            cinfer_stop_matcher_free(m);
            return CINFER_ERR_NOMEM;
        }
        m->stop_len[m->n_stops++] = n;
        if (n > m->max_stop_len)
            m->max_stop_len = n;
    }
    return CINFER_OK;
}

void cinfer_stop_matcher_free(struct cinfer_stop_matcher *m)
{
    for (int i = 0; i < m->n_stops; i++)
        free(m->stops[i]);
    free(m->text);
    memset(m, 0, sizeof *m);
    m->matched = -1;
}

int cinfer_stop_matcher_feed(struct cinfer_stop_matcher *m, const char *delta, size_t n, int final, const char **out,
                             size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (m->matched >= 0)
        return 1;
    if (m->len + n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 256;
        while (cap < m->len + n + 1)
            cap *= 2;
        char *grown = realloc(m->text, cap);
        if (!grown)
            return CINFER_ERR_NOMEM;
        m->text = grown;
        m->cap = cap;
    }
    if (n)
        memcpy(m->text + m->len, delta, n);
    m->len += n;
    m->text[m->len] = '\0';

    /* A match must start at or after what was emitted: anything earlier was checked
     * when it was held back. Take the earliest match of any stop string. */
    size_t best_at = m->len;
    int best = -1;
    for (int i = 0; i < m->n_stops; i++) {
        const char *hit = memmem(m->text + m->emitted, m->len - m->emitted, m->stops[i], m->stop_len[i]);
        if (hit && (size_t)(hit - m->text) < best_at) {
            best_at = (size_t)(hit - m->text);
            best = i;
        }
    }
    size_t end;
    if (best >= 0) {
        m->matched = best;
        end = m->no_trim ? best_at + m->stop_len[best] : best_at;
    } else if (final || m->n_stops == 0) {
        end = m->len;
    } else {
        /* Hold back a tail that could be the start of a stop string, and never cut
         * a UTF-8 character in two. */
        size_t hold = m->max_stop_len - 1;
        end = m->len > m->emitted + hold ? m->len - hold : m->emitted;
        while (end > m->emitted && end < m->len && ((unsigned char)m->text[end] & 0xC0) == 0x80)
            end--;
    }
    if (end < m->emitted)
        end = m->emitted;
    *out = m->text + m->emitted;
    *out_len = end - m->emitted;
    m->emitted = end;
    return best >= 0;
}
