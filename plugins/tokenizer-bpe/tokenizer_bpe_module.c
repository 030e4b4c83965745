/* The tokenizer-bpe vtable: opening (tokenizer.json folder or GGUF file) and the
 * calls of struct cinfer_tokenizer_ops, each a thin layer over the files that do the
 * work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <sys/stat.h>

#include "cinfer/tokenizer.h"
#include "tok.h"

/* The first bytes of a regular file (up to 8), for telling GGUF from JSON and for
 * saying what a file is when it is neither. Returns how many were read, -1 if none. */
static int first_bytes(const char *path, unsigned char head[8])
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t got = fread(head, 1, 8, f);
    fclose(f);
    return (int)got;
}

static int is_gguf_file(const char *path)
{
    unsigned char head[8];
    return first_bytes(path, head) >= 4 && memcmp(head, "GGUF", 4) == 0;
}

/* A file that is not what it should be: say what it starts with, in hex and as text. */
static int not_a_model_file(const char *path, const char *expected, struct cinfer_error *err)
{
    unsigned char head[8];
    int n = first_bytes(path, head);
    char hex[8 * 3 + 1] = "", text[8 * 4 + 1] = "";
    size_t h = 0, t = 0;
    for (int i = 0; i < n; i++) {
        h += (size_t)snprintf(hex + h, sizeof hex - h, "%s%02x", i ? " " : "", head[i]);
        t += (size_t)(head[i] >= 0x20 && head[i] < 0x7f && head[i] != '"' && head[i] != '\\'
                          ? snprintf(text + t, sizeof text - t, "%c", head[i])
                          : snprintf(text + t, sizeof text - t, "\\x%02x", head[i]));
    }
    if (n <= 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: %s, found an empty file", path, expected);
    return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: %s; this file starts with %s (\"%s\")", path, expected, hex,
                            text);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* A regular file that is JSON text: its first non-blank byte opens an object. */
static int looks_like_json_object(const char *path)
{
    unsigned char head[8];
    int n = first_bytes(path, head);
    for (int i = 0; i < n; i++)
        if (head[i] != ' ' && head[i] != '\t' && head[i] != '\r' && head[i] != '\n')
            return head[i] == '{';
    return 0;
}

static int has_file(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* The one .gguf file in dir, if there is exactly one. */
static int single_gguf(const char *dir, char *out, size_t out_bytes)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".gguf") == 0) {
            snprintf(out, out_bytes, "%s/%s", dir, e->d_name);
            found++;
        }
    }
    closedir(d);
    return found == 1 && is_gguf_file(out);
}

static int bpe_open(const char *path, struct cinfer_tokenizer **out, struct cinfer_error *err)
{
    *out = NULL;
    if (!path)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "tokenizer-bpe: open: path is NULL");
    struct stat st;
    if (stat(path, &st) != 0)
        return cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: expected a model folder, a folder with "
                                "tokenizer.json or a .gguf file, found nothing at that path", path);
    struct cinfer_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
    int rc;
    char gguf_in_folder[4096];
    if (is_gguf_file(path))
        rc = cinfer_tok_load_gguf(tok, path, err);
    else if (S_ISREG(st.st_mode) && ends_with(path, ".gguf"))
        rc = not_a_model_file(path, "not a GGUF file: GGUF files start with \"GGUF\" (47 47 55 46)", err);
    else if (S_ISREG(st.st_mode) && !looks_like_json_object(path))
        rc = not_a_model_file(path, "expected a GGUF file (starting with \"GGUF\") or a tokenizer.json file (a JSON "
                              "object)", err);
    else if (S_ISDIR(st.st_mode) && !has_file(path, "tokenizer.json") &&
             single_gguf(path, gguf_in_folder, sizeof(gguf_in_folder)))
        rc = cinfer_tok_load_gguf(tok, gguf_in_folder, err); /* a folder holding one .gguf file */
    else if (S_ISDIR(st.st_mode) && !has_file(path, "tokenizer.json"))
        rc = cinfer_error_set(err, CINFER_ERR_NOT_FOUND, "%s: expected tokenizer.json (or a single .gguf file) in "
                              "this folder, found neither", path);
    else
        rc = cinfer_tok_load_json_folder(tok, path, err);
    if (rc) {
        if (rc == CINFER_ERR_NOMEM && err && !err->message[0])
            cinfer_error_set(err, rc, "%s: out of memory", path);
        cinfer_tok_free(tok);
        return rc;
    }
    *out = tok;
    return CINFER_OK;
}

static void bpe_close(struct cinfer_tokenizer *tok)
{
    cinfer_tok_free(tok);
}

static void bpe_info(const struct cinfer_tokenizer *tok, struct cinfer_tokenizer_info *out)
{
    *out = tok->info;
}

static int bpe_encode(const struct cinfer_tokenizer *tok, const char *text, size_t len, int add_special,
                      struct cinfer_token_ids *out, struct cinfer_error *err)
{
    return cinfer_tok_encode(tok, text, len, add_special, out, err);
}

static int bpe_decode(const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                      char **text, size_t *text_len, struct cinfer_error *err)
{
    return cinfer_tok_decode(tok, ids, n, skip_special, text, text_len, err);
}

static const char *bpe_id_to_piece(const struct cinfer_tokenizer *tok, int32_t id)
{
    return id >= 0 && (uint32_t)id < tok->vocab_size ? tok->pieces[id] : NULL;
}

static int32_t bpe_piece_to_id(const struct cinfer_tokenizer *tok, const char *piece, size_t len)
{
    return piece ? cinfer_tok_strmap_get(&tok->piece_ids, piece, len) : -1;
}

static int bpe_is_special(const struct cinfer_tokenizer *tok, int32_t id)
{
    return id >= 0 && (uint32_t)id < tok->vocab_size && (tok->attr[id] & TOK_ATTR_SPECIAL) != 0;
}

static int bpe_decoder_new(const struct cinfer_tokenizer *tok, int skip_special, struct cinfer_token_decoder **out,
                           struct cinfer_error *err)
{
    struct cinfer_token_decoder *d = malloc(sizeof(*d));
    if (!d || cinfer_tok_stream_init(d, tok, skip_special)) {
        free(d);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: decoder_new: out of memory", tok->source_path);
    }
    *out = d;
    return CINFER_OK;
}

/* Hands this call's output to the caller and starts the next one empty. */
static int take_delta(struct cinfer_token_decoder *d, char **delta, size_t *delta_len, struct cinfer_error *err)
{
    char *s = malloc(d->out.len + 1);
    if (!s)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: decoder: out of memory", d->tok->source_path);
    if (d->out.len)
        memcpy(s, d->out.data, d->out.len);
    s[d->out.len] = '\0';
    *delta = s;
    *delta_len = d->out.len;
    d->out.len = 0;
    return CINFER_OK;
}

static int bpe_decoder_step(struct cinfer_token_decoder *d, const int32_t *ids, size_t n, char **delta,
                            size_t *delta_len, struct cinfer_error *err)
{
    int rc = cinfer_tok_stream_push(d, ids, n, err);
    if (rc) {
        d->out.len = 0;
        return rc;
    }
    return take_delta(d, delta, delta_len, err);
}

static int bpe_decoder_finish(struct cinfer_token_decoder *d, char **delta, size_t *delta_len,
                              struct cinfer_error *err)
{
    if (cinfer_tok_stream_flush(d))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: decoder: out of memory", d->tok->source_path);
    return take_delta(d, delta, delta_len, err);
}

static void bpe_decoder_free(struct cinfer_token_decoder *d)
{
    if (!d)
        return;
    cinfer_tok_stream_release(d);
    free(d);
}

static int bpe_token_bytes(const struct cinfer_tokenizer *tok, int32_t id, char *buf, size_t cap, size_t *len)
{
    struct tok_buf b = {0};
    int rc = cinfer_tok_token_bytes(tok, id, &b);
    *len = rc == CINFER_OK ? b.len : 0;
    if (rc == CINFER_OK && b.len > cap)
        rc = CINFER_ERR_RANGE;
    if (rc == CINFER_OK && b.len)
        memcpy(buf, b.data, b.len);
    cinfer_tok_buf_free(&b);
    return rc;
}

const struct cinfer_tokenizer_ops cinfer_tokenizer_bpe_ops = {
    .version = CINFER_TOKENIZER_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_tokenizer_ops),
    .open = bpe_open,
    .close = bpe_close,
    .info = bpe_info,
    .encode = bpe_encode,
    .decode = bpe_decode,
    .id_to_piece = bpe_id_to_piece,
    .piece_to_id = bpe_piece_to_id,
    .is_special = bpe_is_special,
    .decoder_new = bpe_decoder_new,
    .decoder_step = bpe_decoder_step,
    .decoder_finish = bpe_decoder_finish,
    .decoder_free = bpe_decoder_free,
    .token_bytes = bpe_token_bytes,
};
