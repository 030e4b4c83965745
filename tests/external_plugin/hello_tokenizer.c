/* hello-tokenizer: a third-party tokenizer plugin that splits text into words and
 * gives each word its length as its id. Small, but it uses only the installed
 * headers and libcinfer, as any out-of-tree plugin must. */
#include <stdlib.h>
#include <string.h>

#include <cinfer/plugin.h>
#include <cinfer/tokenizer.h>

#ifndef HELLO_NAME
#define HELLO_NAME "hello-tokenizer"
#endif

struct cinfer_tokenizer {
    int unused;
};
struct cinfer_token_decoder {
    int unused;
};

static int hello_open(const char *path, struct cinfer_tokenizer **out, struct cinfer_error *err)
{
    (void)path;
    *out = calloc(1, sizeof **out);
    return *out ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "hello-tokenizer: out of memory");
}
static void hello_close(struct cinfer_tokenizer *tok) { free(tok); }
static void hello_info(const struct cinfer_tokenizer *tok, struct cinfer_tokenizer_info *out)
{
    (void)tok;
    memset(out, 0, sizeof *out);
    out->vocab_size = 1024;
    out->bos_id = out->eos_id = out->pad_id = out->unk_id = -1;
    out->model_type = "word_length";
}
static int hello_encode(const struct cinfer_tokenizer *tok, const char *text, size_t len, int add_special,
                        struct cinfer_token_ids *out, struct cinfer_error *err)
{
    (void)tok;
    (void)add_special;
    size_t i = 0;
    while (i < len) {
        while (i < len && text[i] == ' ')
            i++;
        size_t start = i;
        while (i < len && text[i] != ' ')
            i++;
        if (i > start && cinfer_token_ids_push(out, (int32_t)((i - start) % 1024)))
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "hello-tokenizer: out of memory");
    }
    return CINFER_OK;
}
static int hello_decode(const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *text_len, struct cinfer_error *err)
{
    (void)tok;
    (void)ids;
    (void)skip_special;
    *text = calloc(1, 1);
    *text_len = 0;
    (void)n;
    return *text ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "hello-tokenizer: out of memory");
}
static const char *hello_id_to_piece(const struct cinfer_tokenizer *tok, int32_t id)
{
    (void)tok;
    (void)id;
    return NULL;
}
static int32_t hello_piece_to_id(const struct cinfer_tokenizer *tok, const char *piece, size_t len)
{
    (void)tok;
    (void)piece;
    return (int32_t)(len % 1024);
}
static int hello_is_special(const struct cinfer_tokenizer *tok, int32_t id)
{
    (void)tok;
    (void)id;
    return 0;
}
static int hello_decoder_new(const struct cinfer_tokenizer *tok, int skip_special,
                             struct cinfer_token_decoder **out, struct cinfer_error *err)
{
    (void)tok;
    (void)skip_special;
    *out = calloc(1, sizeof **out);
    return *out ? CINFER_OK : cinfer_error_set(err, CINFER_ERR_NOMEM, "hello-tokenizer: out of memory");
}
static int hello_decoder_step(struct cinfer_token_decoder *dec, const int32_t *ids, size_t n, char **delta,
                              size_t *delta_len, struct cinfer_error *err)
{
    (void)dec;
    return hello_decode(NULL, ids, n, 0, delta, delta_len, err);
}
static int hello_decoder_finish(struct cinfer_token_decoder *dec, char **delta, size_t *delta_len,
                                struct cinfer_error *err)
{
    (void)dec;
    return hello_decode(NULL, NULL, 0, 0, delta, delta_len, err);
}
static void hello_decoder_free(struct cinfer_token_decoder *dec) { free(dec); }

static const struct cinfer_tokenizer_ops hello_ops = {
    .version = CINFER_TOKENIZER_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_tokenizer_ops),
    .open = hello_open,
    .close = hello_close,
    .info = hello_info,
    .encode = hello_encode,
    .decode = hello_decode,
    .id_to_piece = hello_id_to_piece,
    .piece_to_id = hello_piece_to_id,
    .is_special = hello_is_special,
    .decoder_new = hello_decoder_new,
    .decoder_step = hello_decoder_step,
    .decoder_finish = hello_decoder_finish,
    .decoder_free = hello_decoder_free,
};

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_TOKENIZER, HELLO_NAME, "0.3.0", &hello_ops);
