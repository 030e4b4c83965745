/* A tiny but real tokenizer vtable shared by the fake plugins: one id per byte.
 * FAKE_NULL_ENCODE and FAKE_VTABLE_VERSION let a fake break one rule on purpose. */
#ifndef CINFER_TEST_FAKE_TOKENIZER_OPS_H
#define CINFER_TEST_FAKE_TOKENIZER_OPS_H

#include <stdlib.h>
#include <string.h>

#include "cinfer/plugin.h"
#include "cinfer/tokenizer.h"

#ifndef FAKE_VTABLE_VERSION
#define FAKE_VTABLE_VERSION CINFER_TOKENIZER_OPS_VERSION
#endif

struct cinfer_tokenizer {
    int unused;
};
struct cinfer_token_decoder {
    int unused;
};

static int fake_open(const char *path, struct cinfer_tokenizer **out, struct cinfer_error *err)
{
    (void)path;
    (void)err;
    *out = calloc(1, sizeof **out);
    return *out ? CINFER_OK : CINFER_ERR_NOMEM;
}
static void fake_close(struct cinfer_tokenizer *tok) { free(tok); }
static void fake_info(const struct cinfer_tokenizer *tok, struct cinfer_tokenizer_info *out)
{
    (void)tok;
    memset(out, 0, sizeof *out);
    out->vocab_size = 256;
    out->bos_id = out->eos_id = out->pad_id = out->unk_id = -1;
    out->model_type = "fake_bytes";
}
__attribute__((unused)) static int fake_encode(const struct cinfer_tokenizer *tok, const char *text, size_t len, int add_special,
                       struct cinfer_token_ids *out, struct cinfer_error *err)
{
    (void)tok;
    (void)add_special;
    (void)err;
    if (cinfer_token_ids_reserve(out, out->len + len))
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < len; i++)
        out->ids[out->len++] = (unsigned char)text[i];
    return CINFER_OK;
}
static int fake_decode(const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                       char **text, size_t *text_len, struct cinfer_error *err)
{
    (void)tok;
    (void)skip_special;
    char *s = malloc(n + 1);
    if (!s)
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > 255) {
            free(s);
            return cinfer_error_set(err, CINFER_ERR_RANGE, "id %d out of range [0, 256)", ids[i]);
        }
        s[i] = (char)ids[i];
    }
    s[n] = '\0';
    *text = s;
    *text_len = n;
    return CINFER_OK;
}
static const char *fake_id_to_piece(const struct cinfer_tokenizer *tok, int32_t id)
{
    (void)tok;
    (void)id;
    return NULL;
}
static int32_t fake_piece_to_id(const struct cinfer_tokenizer *tok, const char *piece, size_t len)
{
    (void)tok;
    return len == 1 ? (unsigned char)piece[0] : -1;
}
static int fake_is_special(const struct cinfer_tokenizer *tok, int32_t id)
{
    (void)tok;
    (void)id;
    return 0;
}
static int fake_decoder_new(const struct cinfer_tokenizer *tok, int skip_special, struct cinfer_token_decoder **out,
                            struct cinfer_error *err)
{
    (void)tok;
    (void)skip_special;
    (void)err;
    *out = calloc(1, sizeof **out);
    return *out ? CINFER_OK : CINFER_ERR_NOMEM;
}
static int fake_decoder_step(struct cinfer_token_decoder *dec, const int32_t *ids, size_t n, char **delta,
                             size_t *delta_len, struct cinfer_error *err)
{
    (void)dec;
    return fake_decode(NULL, ids, n, 0, delta, delta_len, err);
}
static int fake_decoder_finish(struct cinfer_token_decoder *dec, char **delta, size_t *delta_len,
                               struct cinfer_error *err)
{
    (void)dec;
    return fake_decode(NULL, NULL, 0, 0, delta, delta_len, err);
}
static void fake_decoder_free(struct cinfer_token_decoder *dec) { free(dec); }

static const struct cinfer_tokenizer_ops fake_tokenizer_ops = {
    .version = FAKE_VTABLE_VERSION,
    .struct_size = sizeof(struct cinfer_tokenizer_ops),
    .open = fake_open,
    .close = fake_close,
    .info = fake_info,
#ifdef FAKE_NULL_ENCODE
    .encode = NULL,
#else
    .encode = fake_encode,
#endif
    .decode = fake_decode,
    .id_to_piece = fake_id_to_piece,
    .piece_to_id = fake_piece_to_id,
    .is_special = fake_is_special,
    .decoder_new = fake_decoder_new,
    .decoder_step = fake_decoder_step,
    .decoder_finish = fake_decoder_finish,
    .decoder_free = fake_decoder_free,
};

#endif
