/* libFuzzer target for tokenizer-bpe's encode and decode: the first byte picks a
 * tokenizer (the small test tokenizers, stories260K's GGUF vocabulary, any folders or
 * .gguf files listed in $CINFER_FUZZ_TOKENIZERS, and byte-level ones without a normalizer
 * in $CINFER_FUZZ_LOSSLESS_TOKENIZERS, both colon-separated) and the flags; the
 * rest is the text, valid UTF-8 or not. Encoding never fails, ids stay in the vocabulary,
 * byte-level tokenizers decode back to the text as a replacing UTF-8 decoder reads it,
 * and the incremental decoder's deltas add up to decode(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern const struct cinfer_tokenizer_ops cinfer_tokenizer_bpe_ops;

enum { MAX_TOKENIZERS = 16 };
static struct cinfer_tokenizer *toks[MAX_TOKENIZERS];
static int lossless[MAX_TOKENIZERS]; /* decode(encode(text)) == text, after U+FFFD repair */
static int n_toks;

static void add(const char *path, int is_lossless)
{
    struct cinfer_error err = {0};
    if (n_toks < MAX_TOKENIZERS && cinfer_tokenizer_bpe_ops.open(path, &toks[n_toks], &err) == 0) {
        lossless[n_toks++] = is_lossless;
    } else {
        fprintf(stderr, "fuzz_tokenizer_encode: skipping %s: %s\n", path, err.message);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    add(CINFER_SOURCE_DIR "/tests/data/tokenizers/tiny-metaspace", 0);
    add(CINFER_SOURCE_DIR "/tests/data/tokenizers/tiny-split", 0);
    add(CINFER_SOURCE_DIR "/tests/data/models/stories260K.gguf", 0);
    const char *lists[2] = {getenv("CINFER_FUZZ_TOKENIZERS"), getenv("CINFER_FUZZ_LOSSLESS_TOKENIZERS")};
    for (int l = 0; l < 2; l++) {
        if (!lists[l])
            continue;
        char *copy = strdup(lists[l]), *save = NULL;
        for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save))
            add(p, l);
        free(copy);
    }
    if (!n_toks)
        abort();
    return 0;
}

/* WHATWG replacement, written independently of the plugin's, for the round-trip check. */
static size_t repair(const uint8_t *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t need = 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        size_t k = 1;
        while (need && k <= need && i + k < n && s[i + k] >= lo && s[i + k] <= hi) {
            k++;
            lo = 0x80;
            hi = 0xBF;
        }
        if (need && k == need + 1) {
            memcpy(out + o, s + i, k);
            o += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += k;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct cinfer_tokenizer_ops *ops = &cinfer_tokenizer_bpe_ops;
    if (size < 1)
        return 0;
    struct cinfer_tokenizer *tok = toks[data[0] % n_toks];
    int is_lossless = lossless[data[0] % n_toks];
    int add_special = (data[0] >> 4) & 1, skip = (data[0] >> 5) & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct cinfer_error err = {0};
    struct cinfer_token_ids ids = {0};
    if (ops->encode(tok, text, len, add_special, &ids, &err) != 0)
        abort(); /* encode never fails on any bytes */
    struct cinfer_tokenizer_info info;
    ops->info(tok, &info);
    for (size_t i = 0; i < ids.len; i++)
        if (ids.ids[i] < 0 || (uint32_t)ids.ids[i] >= info.vocab_size)
            abort();
    char *decoded = NULL;
    size_t decoded_len = 0;
    if (ops->decode(tok, ids.ids, ids.len, skip, &decoded, &decoded_len, &err) != 0)
        abort();
    if (is_lossless && !add_special && !skip) {
        char *fixed = malloc(len * 3 + 1);
        size_t fixed_len = repair(data + 1, len, fixed);
        if (fixed_len != decoded_len || memcmp(fixed, decoded, fixed_len) != 0)
            abort();
        free(fixed);
    }
    struct cinfer_token_decoder *d = NULL;
    if (ops->decoder_new(tok, skip, &d, &err) != 0)
        abort();
    size_t at = 0, step = 1 + (data[0] >> 6);
    for (size_t i = 0; i < ids.len; i += step) {
        char *delta;
        size_t dl;
        size_t take = ids.len - i < step ? ids.len - i : step;
        if (ops->decoder_step(d, ids.ids + i, take, &delta, &dl, &err) != 0)
            abort();
        if (at + dl > decoded_len || memcmp(decoded + at, delta, dl) != 0)
            abort();
        at += dl;
        free(delta);
    }
    char *delta;
    size_t dl;
    if (ops->decoder_finish(d, &delta, &dl, &err) != 0 || at + dl != decoded_len ||
        memcmp(decoded + at, delta, dl) != 0)
        abort();
    free(delta);
    ops->decoder_free(d);
    free(decoded);
    cinfer_token_ids_free(&ids);
    return 0;
}
