/* Stop strings on decoded text, across token boundaries. Text is fed as it is decoded;
 * what comes back is the text that can be shown now: everything except a tail that
 * could still be the start of a stop string (and never half a UTF-8 character). When
 * a stop string appears, the text ends where it starts (or after it, with no_trim). */
#ifndef CINFER_DETOKENIZER_STOP_MATCHER_H
#define CINFER_DETOKENIZER_STOP_MATCHER_H

#include <stddef.h>

#include "cinfer/engine.h"

struct cinfer_stop_matcher {
    char *stops[CINFER_MAX_STOP_STRINGS];
    size_t stop_len[CINFER_MAX_STOP_STRINGS];
    int n_stops;
    size_t max_stop_len;
    int no_trim;
    char *text;          /* everything decoded so far */
    size_t len, cap;
    size_t emitted;      /* bytes of text already handed out */
    int matched;         /* index of the stop string that matched, or -1 */
};

int cinfer_stop_matcher_init(struct cinfer_stop_matcher *m, char *const *stops, int n_stops, int no_trim);
void cinfer_stop_matcher_free(struct cinfer_stop_matcher *m);
/* Appends delta and sets (*out, *out_len) to the text that may be emitted now (a view
 * into the matcher, valid until the next call). final: no more text will come, so
 * nothing is held back. Returns 1 when a stop string matched (m->matched says which;
 * nothing more should be fed), 0 otherwise, CINFER_ERR_NOMEM on failure. */
int cinfer_stop_matcher_feed(struct cinfer_stop_matcher *m, const char *delta, size_t n, int final, const char **out,
                             size_t *out_len);

#endif
