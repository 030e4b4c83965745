/* cinfer/tokenizer.h — the tokenizer plugin interface (kind CINFER_PLUGIN_KIND_TOKENIZER).
 *
 * A tokenizer plugin opens a model's tokenizer (a Hugging Face folder with
 * tokenizer.json, or a GGUF file with an embedded vocabulary) and turns text into
 * token ids and back. Memory handed to the caller is malloc'd and freed with free(). */
#ifndef CINFER_TOKENIZER_H
#define CINFER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "cinfer/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump when a slot is appended; slots are never reordered or removed. A core still
 * loads plugins of CINFER_TOKENIZER_OPS_MIN_VERSION and checks the version before
 * calling a slot added since ("valid since vN" below). */
#define CINFER_TOKENIZER_OPS_VERSION 2u
#define CINFER_TOKENIZER_OPS_MIN_VERSION 1u

struct cinfer_tokenizer;      /* the plugin's state for one opened tokenizer */
struct cinfer_token_decoder;  /* the plugin's state for one incremental decode */

/* A growable array of token ids. encode() appends; the owner frees ids with free(). */
struct cinfer_token_ids {
    int32_t *ids;
    size_t len;
    size_t cap;
};

struct cinfer_tokenizer_info {
    uint32_t vocab_size;  /* ids are in [0, vocab_size) */
    int32_t bos_id;       /* -1 when the tokenizer has none */
    int32_t eos_id;       /* -1 when none; the primary end-of-sequence id */
    int32_t pad_id;       /* -1 when none */
    int32_t unk_id;       /* -1 when none */
    int add_bos;          /* encode(add_special=1) puts bos_id first */
    int add_eos;          /* encode(add_special=1) puts eos_id last */
    const char *chat_template; /* Jinja source from tokenizer_config.json or GGUF; NULL if none */
    const char *model_type;    /* "byte_level_bpe" or "sentencepiece_bpe" */
};

struct cinfer_tokenizer_ops {
    uint32_t version;     /* CINFER_TOKENIZER_OPS_VERSION the plugin was built with */
    uint32_t struct_size; /* sizeof(struct cinfer_tokenizer_ops) it was built with */

    /* path: a model folder, a folder holding tokenizer.json (+ tokenizer_config.json),
     * or a .gguf file. On failure err names the file and, for JSON, the position. */
    int (*open)(const char *path, struct cinfer_tokenizer **out, struct cinfer_error *err);
    void (*close)(struct cinfer_tokenizer *tok);

    void (*info)(const struct cinfer_tokenizer *tok, struct cinfer_tokenizer_info *out);

    /* Appends the ids of text[0..len) to out. add_special adds BOS/EOS as the
     * tokenizer's config says. Invalid UTF-8 never fails: like the Hugging Face
     * library fed the text through a replacing UTF-8 decoder (Python's
     * errors="replace", the WHATWG TextDecoder), each maximal invalid subsequence
     * becomes U+FFFD before tokenizing. Safe to call from
     * many threads at once on one tok. */
    int (*encode)(const struct cinfer_tokenizer *tok, const char *text, size_t len,
                  int add_special, struct cinfer_token_ids *out, struct cinfer_error *err);

    /* Decodes ids into a malloc'd NUL-terminated string (*text, *text_len bytes).
     * skip_special drops special/added-special tokens. Ids out of range are an error. */
    int (*decode)(const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n,
                  int skip_special, char **text, size_t *text_len, struct cinfer_error *err);

    /* The vocabulary entry of one id as stored (raw piece, e.g. "Ġthe" or "▁the"),
     * or NULL when out of range. Valid while tok is open. */
    const char *(*id_to_piece)(const struct cinfer_tokenizer *tok, int32_t id);
    /* The id of a stored piece or added token, or -1. */
    int32_t (*piece_to_id)(const struct cinfer_tokenizer *tok, const char *piece, size_t len);
    /* 1 when id is a special token (control token, or added token marked special). */
    int (*is_special)(const struct cinfer_tokenizer *tok, int32_t id);

    /* Incremental decoding for streaming. step() takes the next ids and appends to
     * *delta (malloc'd, NUL-terminated, may be empty) only text that is complete
     * UTF-8; bytes of a character still being spelled are held back. Its cost is
     * O(new ids), independent of how many came before. The concatenation of all
     * deltas plus finish() equals decode() of all the ids. The detokenizer relies on
     * it: it steps a decoder through a prompt's last ids before the output's, so that
     * the output reads as it does after the prompt, and compares with decode(). */
    int (*decoder_new)(const struct cinfer_tokenizer *tok, int skip_special,
                       struct cinfer_token_decoder **out, struct cinfer_error *err);
    int (*decoder_step)(struct cinfer_token_decoder *dec, const int32_t *ids, size_t n,
                        char **delta, size_t *delta_len, struct cinfer_error *err);
    /* Flushes what is held back (an incomplete sequence becomes U+FFFD as decode() does). */
    int (*decoder_finish)(struct cinfer_token_decoder *dec, char **delta, size_t *delta_len,
                          struct cinfer_error *err);
    void (*decoder_free)(struct cinfer_token_decoder *dec);

    /* Valid since version 2. The bytes token id adds to decoded text in the middle of
     * a stream (byte-level pieces mapped back to bytes, "<0x0A>" byte tokens as their
     * byte, SentencePiece's "\u2581" as a space), which constrained decoding matches a
     * grammar against. Writes up to cap bytes to buf and their count to *len; *len 0
     * for special and control tokens and unused ids. CINFER_ERR_RANGE when cap is too
     * small (*len then says how many are needed) or id is outside the vocabulary. */
    int (*token_bytes)(const struct cinfer_tokenizer *tok, int32_t id, char *buf, size_t cap, size_t *len);
};

/* Grows ids to hold at least need entries; returns CINFER_OK or CINFER_ERR_NOMEM. */
CINFER_API int cinfer_token_ids_reserve(struct cinfer_token_ids *ids, size_t need);
CINFER_API int cinfer_token_ids_push(struct cinfer_token_ids *ids, int32_t id);
CINFER_API void cinfer_token_ids_free(struct cinfer_token_ids *ids);

#ifdef __cplusplus
}
#endif
#endif
