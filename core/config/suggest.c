/* core/config/suggest.c — "did you mean ...?" for misspelt keys and flags: the
 * candidate with the smallest edit distance, when it is small for the word's length. */
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

/* Levenshtein distance with adjacent transpositions counted as one edit (optimal
 * string alignment), so "max_runnnig" is one edit from "max_running". */
static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 256 || m > 256)
        return (size_t)-1; /* nothing that long is a misspelt option name */
    size_t *rows = malloc(3 * (m + 1) * sizeof *rows);
    if (!rows)
        return (size_t)-1;
    size_t *before = rows, *prev = rows + (m + 1), *cur = rows + 2 * (m + 1);
    for (size_t j = 0; j <= m; j++)
        prev[j] = j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            cur[j] = best;
        }
        size_t *oldest = before;
        before = prev;
        prev = cur;
        cur = oldest;
    }
    size_t distance = prev[m];
    free(rows);
    return distance;
}

const char *cinfer_closest_word(const char *word, const char *const *candidates, int n_candidates)
{
    /* Up to a third of the word may be wrong (at least one edit, at most four). */
    size_t allowed = strlen(word) / 3;
    if (allowed < 1)
        allowed = 1;
    if (allowed > 4)
        allowed = 4;
    const char *best = NULL;
    size_t best_distance = allowed + 1;
    for (int i = 0; i < n_candidates; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_distance) {
            best = candidates[i];
            best_distance = d;
        }
    }
    return best;
}
