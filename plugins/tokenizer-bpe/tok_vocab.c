/* The vocabulary both loaders fill: id -> piece, piece -> id, token attributes, and
 * what follows from them (byte tables, special ids, the info record). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

int cinfer_tok_vocab_alloc(struct cinfer_tokenizer *tok, uint32_t size)
{
    tok->vocab_size = size;
    tok->pieces = calloc(size ? size : 1, sizeof(*tok->pieces));
    tok->piece_len = calloc(size ? size : 1, sizeof(*tok->piece_len));
    tok->attr = calloc(size ? size : 1, sizeof(*tok->attr));
    return tok->pieces && tok->piece_len && tok->attr ? CINFER_OK : CINFER_ERR_NOMEM;
}

int cinfer_tok_set_piece(struct cinfer_tokenizer *tok, int32_t id, const char *s, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return CINFER_ERR_NOMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    free(tok->pieces[id]);
    tok->pieces[id] = copy;
    tok->piece_len[id] = (uint32_t)len;
    return CINFER_OK;
}

/* What the model looks up for a vocabulary piece: for byte-level vocabularies the raw
 * bytes its characters stand for (so encoding never maps bytes to characters). */
int cinfer_tok_model_key(const struct cinfer_tokenizer *tok, const char *piece, size_t n, struct tok_buf *key)
{
    key->len = 0;
    if (!tok->byte_level)
        return cinfer_tok_buf_append(key, piece, n) ? CINFER_ERR_NOMEM : 1;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += cinfer_tok_utf8_next(piece + i, n - i, &cp);
        int b = cinfer_tok_cp_to_byte(cp);
        if (b < 0)
            return 0; /* not spelled in the byte alphabet: the model can never produce it */
        char ch = (char)b;
        if (cinfer_tok_buf_append(key, &ch, 1))
            return CINFER_ERR_NOMEM;
    }
    return 1;
}

/* Adds merge number rank of pieces a and b (as stored). Returns 0, CINFER_ERR_NOMEM,
 * or 1, 2, 3 when a, b or their concatenation is not a piece of the model. */
int cinfer_tok_merge_add(struct cinfer_tokenizer *tok, int32_t rank, const char *a, size_t a_len, const char *b,
                         size_t b_len)
{
    struct tok_buf both = {0}, key = {0};
    int32_t ids[3] = {-1, -1, -1};
    int rc = CINFER_OK;
    if (cinfer_tok_buf_append(&both, a, a_len) || cinfer_tok_buf_append(&both, b, b_len))
        rc = CINFER_ERR_NOMEM;
    const char *names[3] = {a, b, both.data};
    size_t lens[3] = {a_len, b_len, both.len};
    for (int s = 0; s < 3 && rc == CINFER_OK; s++) {
        int usable = cinfer_tok_model_key(tok, names[s], lens[s], &key);
        if (usable < 0)
            rc = CINFER_ERR_NOMEM;
        else if (usable)
            ids[s] = cinfer_tok_strmap_get(&tok->model_ids, key.data, key.len);
        if (rc == CINFER_OK && ids[s] < 0)
            rc = s + 1;
    }
    if (rc == CINFER_OK && cinfer_tok_pairmap_put(&tok->merges, ids[0], ids[1], rank, ids[2]))
        rc = CINFER_ERR_NOMEM;
    cinfer_tok_buf_free(&both);
    cinfer_tok_buf_free(&key);
    return rc;
}

static int contains(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

int cinfer_tok_finish(struct cinfer_tokenizer *tok, struct cinfer_error *err)
{
    const char *path = tok->source_path;
    /* added tokens take their ids' pieces and attributes */
    for (size_t i = 0; i < tok->n_added; i++) {
        struct tok_added_token *a = &tok->added[i];
        if (cinfer_tok_set_piece(tok, a->id, a->content, a->len))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
        tok->attr[a->id] |= TOK_ATTR_ADDED | (a->special ? TOK_ATTR_SPECIAL : 0);
    }
    /* a piece listed twice maps to its last id, as llama.cpp's token_to_id does */
    for (uint32_t id = 0; id < tok->vocab_size; id++)
        if (tok->pieces[id] && cinfer_tok_strmap_put(&tok->piece_ids, tok->pieces[id], tok->piece_len[id], (int32_t)id))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
    /* the added vocabulary wins on lookups, as in the HF library */
    for (size_t i = 0; i < tok->n_added; i++)
        if (cinfer_tok_strmap_put(&tok->piece_ids, tok->added[i].content, tok->added[i].len, tok->added[i].id))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        tok->fallback_ids[b] = cinfer_tok_strmap_get(tok->model == TOK_MODEL_BPE ? &tok->model_ids : &tok->piece_ids,
                                                     name, 6);
        char c = (char)b;
        tok->byte_ids[b] = tok->byte_level ? cinfer_tok_strmap_get(&tok->model_ids, &c, 1) : -1;
        if (tok->fallback_ids[b] >= 0)
            tok->attr[tok->fallback_ids[b]] |= TOK_ATTR_BYTE;
    }
    if (tok->model == TOK_MODEL_BPE && !(tok->cache = cinfer_tok_cache_new()))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
    if (tok->model == TOK_MODEL_SPM && cinfer_tok_spm_build_pairs(tok))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
    if (cinfer_tok_added_set_build(&tok->added_raw, tok->added, tok->n_added, 0) ||
        cinfer_tok_added_set_build(&tok->added_normalized, tok->added, tok->n_added, 1))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
    int rc = cinfer_tok_decoder_chain_check(&tok->decoder, path, err);
    if (rc)
        return rc;

    struct cinfer_tokenizer_info *info = &tok->info;
    info->vocab_size = tok->vocab_size;
    info->unk_id = tok->unk_id;
    info->add_bos = info->bos_id >= 0 && contains(tok->prefix_ids, tok->n_prefix, info->bos_id);
    info->add_eos = info->eos_id >= 0 && contains(tok->suffix_ids, tok->n_suffix, info->eos_id);
    info->chat_template = tok->chat_template;
    snprintf(tok->model_type, sizeof(tok->model_type), "%s",
             tok->byte_level ? "byte_level_bpe" : "sentencepiece_bpe");
    info->model_type = tok->model_type;
    return CINFER_OK;
}

void cinfer_tok_free(struct cinfer_tokenizer *tok)
{
    if (!tok)
        return;
    for (uint32_t i = 0; tok->pieces && i < tok->vocab_size; i++)
        free(tok->pieces[i]);
    free(tok->pieces);
    free(tok->piece_len);
    free(tok->attr);
    cinfer_tok_strmap_free(&tok->piece_ids);
    cinfer_tok_strmap_free(&tok->model_ids);
    cinfer_tok_pairmap_free(&tok->merges);
    cinfer_tok_pairmap_free(&tok->spm_pairs);
    cinfer_tok_cache_free(tok->cache);
    free(tok->scores);
    cinfer_tok_normalizer_free(&tok->normalizer);
    cinfer_tok_pretokenizer_free(&tok->pretokenizer);
    for (size_t i = 0; i < tok->n_added; i++)
        free(tok->added[i].content);
    free(tok->added);
    cinfer_tok_added_set_free(&tok->added_raw);
    cinfer_tok_added_set_free(&tok->added_normalized);
    cinfer_tok_decoder_chain_free(&tok->decoder);
    free(tok->prefix_ids);
    free(tok->suffix_ids);
    free(tok->chat_template);
    free(tok->source_path);
    free(tok);
}
