/* A request's output text as it reads after its prompt (output_text.h). */
#include "detokenizer/output_text.h"

#include <stdlib.h>
#include <string.h>

/* Bytes of the UTF-8 character that starts with lead (1 for a stray byte). */
static size_t char_bytes(unsigned char lead)
{
    if (lead < 0xC0)
        return 1; /* ASCII, or a stray continuation byte */
    if (lead < 0xE0)
        return 2;
    if (lead < 0xF0)
        return 3;
    return lead < 0xF8 ? 4 : 1;
}

/* Takes off the front of text[0..*len) the characters that are still the prompt's held
 * text; at the first that is not, the output has departed from the prompt's text and
 * nothing more is taken off, from this delta or any later one. */
static void drop_held(struct cinfer_output_text *o, char *text, size_t *len)
{
    if (!text)
        return;
    size_t at = 0;
    while (o->held_seen < o->held_len && at < *len) {
        size_t n = char_bytes((unsigned char)text[at]);
        if (n > *len - at)
            n = *len - at;
        if (n > o->held_len - o->held_seen || memcmp(text + at, o->held + o->held_seen, n) != 0) {
            o->held_seen = o->held_len;
            break;
        }
        at += n;
        o->held_seen += n;
    }
    if (at) {
        memmove(text, text + at, *len - at);
        *len -= at;
        text[*len] = '\0';
    }
}

/* decode(context[from..n)) where from is the first place the context can start: its
 * text is not empty and does not start with U+FFFD. A context that starts inside a
 * character spelled by a byte-fallback run turns that whole run into U+FFFD (the run is
 * not valid UTF-8), and the output's bytes that continue the run with it; starting at
 * a character's first byte reads the run as the whole prompt does. When no place
 * qualifies (a run longer than the context that the prompt leaves half spelled), the
 * whole context. A context that is the whole prompt starts at 0: no run begins before
 * it, and a U+FFFD there is the prompt's own (a run that is invalid as a whole, e.g.
 * <0xC5><0x77>, whose later bytes alone would read as valid text). */
static int decode_context(const struct cinfer_output_text *o, const struct cinfer_tokenizer *tok, int skip_special,
                          const int32_t *context, size_t n, int context_is_prompt, size_t *from, char **text,
                          size_t *len, struct cinfer_error *err)
{
    for (size_t i = 0; i < n && !context_is_prompt; i++) {
        int rc = o->ops->decode(tok, context + i, n - i, skip_special, text, len, err);
        if (rc != CINFER_OK)
            return rc;
        if (*len && !(*len >= 3 && memcmp(*text, "\xEF\xBF\xBD", 3) == 0)) {
            *from = i;
            return CINFER_OK;
        }
        free(*text);
        *text = NULL;
    }
    *from = 0;
    return o->ops->decode(tok, context, n, skip_special, text, len, err);
}

/* Runs the decoder over the context and keeps what of decode(context) it has not
 * released yet. CINFER_OK, or the plugin's code with err set. */
static int prime(struct cinfer_output_text *o, const struct cinfer_tokenizer *tok, int skip_special,
                 const int32_t *context, size_t n_context, int context_is_prompt, struct cinfer_error *err)
{
    char *released = NULL, *whole = NULL;
    size_t released_len = 0, whole_len = 0, from = 0;
    int rc = decode_context(o, tok, skip_special, context, n_context, context_is_prompt, &from, &whole, &whole_len,
                            err);
    if (rc == CINFER_OK)
        rc = o->ops->decoder_step(o->decoder, context + from, n_context - from, &released, &released_len, err);
    /* The deltas and finish() add up to decode(): what finish() would give is held. A
     * plugin that breaks that promise gets nothing held. */
    if (rc == CINFER_OK && released_len <= whole_len && (!released_len || !memcmp(whole, released, released_len)) &&
        whole_len > released_len) {
        o->held_len = whole_len - released_len;
        memmove(whole, whole + released_len, o->held_len);
        o->held = whole;
        whole = NULL;
    }
    free(released);
    free(whole);
    return rc;
}

int cinfer_output_text_start(struct cinfer_output_text *o, const struct cinfer_tokenizer_ops *ops,
                             const struct cinfer_tokenizer *tok, int skip_special, const int32_t *context,
                             size_t n_context, int context_is_prompt, struct cinfer_error *err)
{
    memset(o, 0, sizeof *o);
    o->ops = ops;
    int rc = ops->decoder_new(tok, skip_special, &o->decoder, err);
    if (rc != CINFER_OK || n_context == 0)
        return rc;
    struct cinfer_error why = {0};
    rc = prime(o, tok, skip_special, context, n_context, context_is_prompt, &why);
    if (rc == CINFER_OK)
        return CINFER_OK;
    /* Out of memory is the caller's failure; an id the tokenizer cannot decode only
     * costs the context: start again without it. */
    ops->decoder_free(o->decoder);
    o->decoder = NULL;
    if (err)
        *err = why;
    if (rc == CINFER_ERR_NOMEM)
        return rc;
    o->context_failed = 1;
    return ops->decoder_new(tok, skip_special, &o->decoder, err);
}

int cinfer_output_text_step(struct cinfer_output_text *o, const int32_t *ids, size_t n, char **delta,
                            size_t *delta_len, struct cinfer_error *err)
{
    int rc = o->ops->decoder_step(o->decoder, ids, n, delta, delta_len, err);
    if (rc == CINFER_OK)
        drop_held(o, *delta, delta_len);
    return rc;
}

int cinfer_output_text_finish(struct cinfer_output_text *o, char **delta, size_t *delta_len,
                              struct cinfer_error *err)
{
    int rc = o->ops->decoder_finish(o->decoder, delta, delta_len, err);
    if (rc == CINFER_OK)
        drop_held(o, *delta, delta_len);
    return rc;
}

void cinfer_output_text_free(struct cinfer_output_text *o)
{
    if (o->decoder)
        o->ops->decoder_free(o->decoder);
    free(o->held);
    memset(o, 0, sizeof *o);
}
