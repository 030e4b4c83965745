/* encode(): the whole pipeline for one text. Every buffer is local to the call, so any
 * number of threads may encode with one tokenizer at once. */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

struct encode_work {
    struct tok_buf repaired;   /* the input with invalid UTF-8 replaced */
    struct tok_buf normalized;
    struct tok_buf scratch;
    struct tok_segments raw_segments;
    struct tok_segments norm_segments;
    struct tok_pieces pieces;
    struct tok_pieces pieces_work;
    pcre2_match_data *md;
    struct tok_bpe_work *bpe;
};

static void work_free(struct encode_work *w)
{
    cinfer_tok_buf_free(&w->repaired);
    cinfer_tok_buf_free(&w->normalized);
    cinfer_tok_buf_free(&w->scratch);
    free(w->raw_segments.v);
    free(w->norm_segments.v);
    cinfer_tok_pieces_free(&w->pieces);
    cinfer_tok_pieces_free(&w->pieces_work);
    if (w->md)
        pcre2_match_data_free(w->md);
    cinfer_tok_bpe_work_free(w->bpe);
}

/* A SentencePiece fragment as llama.cpp feeds it: a space in front after BOS or a
 * special token (add_space_prefix), then every space written as U+2581. */
static int encode_spm_fragment(const struct cinfer_tokenizer *tok, const char *s, size_t n, int prefix_space,
                               struct encode_work *w, struct cinfer_token_ids *out)
{
    struct tok_buf *t = &w->scratch;
    t->len = 0;
    if (prefix_space && cinfer_tok_buf_append(t, "\xE2\x96\x81", 3))
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ' ? cinfer_tok_buf_append(t, "\xE2\x96\x81", 3) : cinfer_tok_buf_append(t, s + i, 1))
            return CINFER_ERR_NOMEM;
    return cinfer_tok_spm_encode_text(tok, t->data, t->len, out);
}

static int encode_bpe_text(const struct cinfer_tokenizer *tok, const char *s, size_t n, size_t orig,
                           struct encode_work *w, struct cinfer_token_ids *out, struct cinfer_error *err)
{
    int rc;
    if (tok->normalizer.n) {
        if ((rc = cinfer_tok_normalize(&tok->normalizer, s, n, &w->normalized, &w->scratch, err)))
            return rc;
        s = w->normalized.data;
        n = w->normalized.len;
    }
    struct tok_segment whole = {0, n, -1};
    const struct tok_segment *segs = &whole;
    size_t n_segs = 1;
    if (tok->added_normalized.count) {
        if ((rc = cinfer_tok_added_split(&tok->added_normalized, s, n, &w->norm_segments)))
            return rc;
        segs = w->norm_segments.v;
        n_segs = w->norm_segments.n;
    }
    for (size_t i = 0; i < n_segs; i++) {
        if (segs[i].id >= 0) {
            if ((rc = cinfer_token_ids_push(out, segs[i].id)))
                return rc;
            continue;
        }
        if (!segs[i].len)
            continue;
        const char *piece_text = s + segs[i].start;
        if ((rc = cinfer_tok_pretokenize(&tok->pretokenizer, piece_text, segs[i].len, orig + segs[i].start, &w->pieces,
                                         &w->pieces_work, w->md, err)))
            return rc;
        for (size_t p = 0; p < w->pieces.n; p++) {
            const struct tok_span *sp = &w->pieces.spans[p];
            if ((rc = cinfer_tok_bpe_encode_piece(tok, w->pieces.text.data + sp->start, sp->len, w->bpe, out)))
                return rc;
        }
    }
    return CINFER_OK;
}

int cinfer_tok_encode(const struct cinfer_tokenizer *tok, const char *text, size_t len, int add_special,
                      struct cinfer_token_ids *out, struct cinfer_error *err)
{
    if (!text && len)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "encode: text is NULL but len is %zu", len);
    struct encode_work w = {0};
    int rc = CINFER_OK;
    const char *s = text ? text : "";
    size_t n = len;
    if (cinfer_tok_utf8_valid_prefix(s, n) != n) {
        int nomem;
        cinfer_tok_utf8_append_replacing(&w.repaired, s, n, 0, &nomem);
        if (nomem)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: encode: out of memory", tok->source_path);
        s = w.repaired.data;
        n = w.repaired.len;
    }
    w.md = pcre2_match_data_create(16, NULL);
    w.bpe = cinfer_tok_bpe_work_new();
    if (!w.md || !w.bpe)
        rc = CINFER_ERR_NOMEM;
    for (size_t i = 0; add_special && rc == CINFER_OK && i < tok->n_prefix; i++)
        rc = cinfer_token_ids_push(out, tok->prefix_ids[i]);
    if (rc == CINFER_OK)
        rc = cinfer_tok_added_split(&tok->added_raw, s, n, &w.raw_segments);
    int prev_special = 1; /* SPM: the text starts as if after a special token */
    for (size_t i = 0; rc == CINFER_OK && i < w.raw_segments.n; i++) {
        const struct tok_segment *seg = &w.raw_segments.v[i];
        if (seg->id >= 0) {
            rc = cinfer_token_ids_push(out, seg->id);
            prev_special = 1;
        } else if (seg->len == 0) {
            continue;
        } else if (tok->model == TOK_MODEL_SPM) {
            rc = encode_spm_fragment(tok, s + seg->start, seg->len, tok->add_space_prefix && prev_special, &w, out);
            prev_special = 0;
        } else {
            rc = encode_bpe_text(tok, s + seg->start, seg->len, seg->start, &w, out, err);
        }
    }
    for (size_t i = 0; add_special && rc == CINFER_OK && i < tok->n_suffix; i++)
        rc = cinfer_token_ids_push(out, tok->suffix_ids[i]);
    work_free(&w);
    if (rc == CINFER_ERR_NOMEM)
        return cinfer_error_set(err, rc, "%s: encode: out of memory", tok->source_path);
    return rc;
}
