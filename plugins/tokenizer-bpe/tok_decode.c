/* decode(): the streaming decoder run once over all the ids. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

int cinfer_tok_decode(const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                      char **text, size_t *text_len, struct cinfer_error *err)
{
    struct cinfer_token_decoder d;
    if (cinfer_tok_stream_init(&d, tok, skip_special))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: decode: out of memory", tok->source_path);
    int rc = cinfer_tok_stream_push(&d, ids, n, err);
    if (rc == CINFER_OK && (rc = cinfer_tok_stream_flush(&d)) != CINFER_OK)
        cinfer_error_set(err, rc, "%s: decode: out of memory", tok->source_path);
    if (rc == CINFER_OK && (rc = cinfer_tok_buf_reserve(&d.out, d.out.len + 1)) != CINFER_OK)
        cinfer_error_set(err, rc, "%s: decode: out of memory", tok->source_path);
    if (rc == CINFER_OK) {
        d.out.data[d.out.len] = '\0';
        *text = d.out.data;
        *text_len = d.out.len;
        d.out = (struct tok_buf){0};
    }
    cinfer_tok_stream_release(&d);
    return rc;
}
