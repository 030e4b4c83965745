/* libFuzzer target for tokenizer-bpe's tokenizer.json loader: any bytes either load or
 * fail with a message that names the file; a tokenizer that loads must encode, decode
 * and stream a few texts without fault, every id inside its vocabulary. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer/tokenizer.h"
#include "fuzz_input_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern const struct cinfer_tokenizer_ops cinfer_tokenizer_bpe_ops;

static const char *const texts[] = {
    "Hello world, it's 2024!", "  spaces\tand\nlines ", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
    "<s>x</s><unk>", "bad \xff\xc0 bytes \xe2\x82", "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct cinfer_tokenizer_ops *ops = &cinfer_tokenizer_bpe_ops;
    char path[64];
    int fd = fuzz_input_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct cinfer_tokenizer *tok = NULL;
    struct cinfer_error err = {0};
    if (ops->open(path, &tok, &err) != 0) {
        if (!strstr(err.message, path))
            abort(); /* every refusal names the file */
        close(fd);
        return 0;
    }
    struct cinfer_tokenizer_info info;
    ops->info(tok, &info);
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        struct cinfer_token_ids ids = {0};
        if (ops->encode(tok, texts[t], strlen(texts[t]), (int)(t & 1), &ids, &err) == 0) {
            for (size_t i = 0; i < ids.len; i++)
                if (ids.ids[i] < 0 || (uint32_t)ids.ids[i] >= info.vocab_size)
                    abort();
            char *text = NULL;
            size_t len = 0;
            if (ops->decode(tok, ids.ids, ids.len, (int)(t & 2), &text, &len, &err) == 0) {
                struct cinfer_token_decoder *d = NULL;
                if (ops->decoder_new(tok, (int)(t & 2), &d, &err) == 0) {
                    size_t streamed = 0;
                    for (size_t i = 0; i < ids.len; i++) {
                        char *delta;
                        size_t dl;
                        if (ops->decoder_step(d, &ids.ids[i], 1, &delta, &dl, &err) == 0) {
                            if (streamed + dl > len || memcmp(text + streamed, delta, dl) != 0)
                                abort(); /* the deltas spell decode() */
                            streamed += dl;
                            free(delta);
                        }
                    }
                    char *delta;
                    size_t dl;
                    if (ops->decoder_finish(d, &delta, &dl, &err) == 0) {
                        if (streamed + dl != len || memcmp(text + streamed, delta, dl) != 0)
                            abort();
                        free(delta);
                    }
                    ops->decoder_free(d);
                }
                free(text);
            }
        }
        cinfer_token_ids_free(&ids);
    }
    for (int32_t id = -1; id <= (int32_t)info.vocab_size; id++)
        if (ops->id_to_piece(tok, id))
            (void)ops->is_special(tok, id);
    ops->close(tok);
    close(fd);
    return 0;
}
