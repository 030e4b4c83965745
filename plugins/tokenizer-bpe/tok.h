/* tok.h — the tokenizer-bpe plugin's internal types, shared by its files.
 *
 * Encoding runs the Hugging Face pipeline: replace invalid UTF-8, split out added
 * tokens, normalize, split out normalized added tokens, pre-tokenize, run the model on
 * each piece, then add the post-processor's special tokens. GGUF "llama" vocabularies
 * use the score-driven SentencePiece merge of llama.cpp instead of ranked merges. */
#ifndef TOK_H
#define TOK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "cinfer/error.h"
#include "cinfer/tokenizer.h"

/* ---- growable bytes and piece lists (tok_buf.c) ---------------------------- */
struct tok_buf {
    char *data;
    size_t len;
    size_t cap;
};
int cinfer_tok_buf_reserve(struct tok_buf *b, size_t need_bytes);
int cinfer_tok_buf_append(struct tok_buf *b, const void *data, size_t len);
void cinfer_tok_buf_free(struct tok_buf *b);

/* A piece of text inside a tok_pieces buffer. orig_start is where it begins in the
 * (UTF-8-repaired) input, so Metaspace's prepend_scheme "first" knows the first piece. */
struct tok_span {
    size_t start;
    size_t len;
    size_t orig_start;
};
struct tok_pieces {
    struct tok_buf text;
    struct tok_span *spans;
    size_t n;
    size_t cap;
};
int cinfer_tok_pieces_push(struct tok_pieces *p, const char *s, size_t len, size_t orig_start);
void cinfer_tok_pieces_clear(struct tok_pieces *p);
void cinfer_tok_pieces_free(struct tok_pieces *p);

/* ---- UTF-8 (tok_utf8.c) ------------------------------------------------------ */
/* Length of the valid prefix of s[0..n). */
size_t cinfer_tok_utf8_valid_prefix(const char *s, size_t n);
/* Appends s with each maximal invalid subsequence replaced by U+FFFD (WHATWG). When
 * hold_incomplete is set, a trailing truncated-but-valid prefix is not consumed:
 * returns the number of bytes consumed. */
size_t cinfer_tok_utf8_append_replacing(struct tok_buf *out, const char *s, size_t n, int hold_incomplete,
                                        int *nomem);
/* Decodes one code point at s (valid UTF-8 assumed); returns its byte length. */
size_t cinfer_tok_utf8_next(const char *s, size_t n, uint32_t *cp);
size_t cinfer_tok_utf8_encode(uint32_t cp, char out[4]);
/* GPT-2's byte-level alphabet: byte -> code point, and the reverse (-1 when none). */
uint32_t cinfer_tok_byte_to_cp(uint8_t b);
int cinfer_tok_cp_to_byte(uint32_t cp);
/* Unicode White_Space, as Rust's char::is_whitespace. */
int cinfer_tok_is_whitespace(uint32_t cp);
int cinfer_tok_is_alnum(uint32_t cp);
int cinfer_tok_is_numeric(uint32_t cp); /* Unicode Nd, Nl, No: Rust's char::is_numeric */

/* ---- hash maps (tok_hash.c) ------------------------------------------------- */
/* Byte string -> id. Keys are copied into the map's own arena. */
struct tok_strmap {
    uint64_t *slots;   /* (hash high bits << 32 | entry index + 1), 0 = empty */
    uint32_t mask;
    struct tok_strmap_entry {
        uint32_t key_off;
        uint32_t key_len;
        int32_t value;
    } *entries;
    uint32_t n, cap;
    struct tok_buf keys;
};
int cinfer_tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t value);
int32_t cinfer_tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len); /* -1 absent */
void cinfer_tok_strmap_free(struct tok_strmap *m);

/* (left id, right id) -> (rank, merged id), open addressing. */
struct tok_pair_entry {
    uint64_t key; /* left << 32 | right, UINT64_MAX = empty */
    int32_t rank;
    int32_t merged;
};
struct tok_pairmap {
    struct tok_pair_entry *slots;
    uint64_t mask;
    size_t n;
};
int cinfer_tok_pairmap_init(struct tok_pairmap *m, size_t expected);
/* Overwrites an existing entry (a later duplicate merge wins, as in the HF library). */
int cinfer_tok_pairmap_put(struct tok_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
const struct tok_pair_entry *cinfer_tok_pairmap_get(const struct tok_pairmap *m, int32_t left, int32_t right);
void cinfer_tok_pairmap_free(struct tok_pairmap *m);

/* ---- the word cache (tok_cache.c) --------------------------------------------- */
#define TOK_CACHE_MAX_KEY 30 /* longer words are not cached */
#define TOK_CACHE_MAX_IDS 14
struct tok_cache;
struct tok_cache *cinfer_tok_cache_new(void);
void cinfer_tok_cache_free(struct tok_cache *c);
/* Appends the cached ids of key and returns 1, or returns 0 (absent, or busy). */
int cinfer_tok_cache_get(struct tok_cache *c, uint64_t hash, const char *key, size_t len, struct cinfer_token_ids *out);
void cinfer_tok_cache_put(struct tok_cache *c, uint64_t hash, const char *key, size_t len, const int32_t *ids,
                          size_t n);
uint64_t cinfer_tok_hash_bytes(const char *s, size_t n);

/* ---- normalizers (tok_normalizer.c) ------------------------------------------ */
enum tok_norm_kind {
    TOK_NORM_NFC, TOK_NORM_NFKC, TOK_NORM_NFD, TOK_NORM_NFKD, TOK_NORM_LOWERCASE,
    TOK_NORM_PREPEND, TOK_NORM_REPLACE, TOK_NORM_STRIP,
};
struct tok_norm_step {
    enum tok_norm_kind kind;
    char *text;           /* PREPEND: the prefix; REPLACE: the literal pattern (or NULL) */
    size_t text_len;
    pcre2_code *regex;    /* REPLACE with a Regex pattern */
    char *content;        /* REPLACE: the replacement */
    size_t content_len;
    int strip_left, strip_right;
};
struct tok_normalizer {
    struct tok_norm_step *steps;
    size_t n;
};
/* Writes the normalized s into out (replacing its contents). */
int cinfer_tok_normalize(const struct tok_normalizer *nz, const char *s, size_t n, struct tok_buf *out,
                         struct tok_buf *scratch, struct cinfer_error *err);
void cinfer_tok_normalizer_free(struct tok_normalizer *nz);

/* ---- pre-tokenizers (tok_pretokenizer.c) ------------------------------------- */
enum tok_split_behavior {
    TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_WITH_PREVIOUS,
    TOK_SPLIT_MERGED_WITH_NEXT, TOK_SPLIT_CONTIGUOUS,
};
enum tok_pretok_kind {
    TOK_PRE_SPLIT,      /* regex or literal pattern, behavior, invert */
    TOK_PRE_BYTE_LEVEL, /* optional prefix space + GPT-2 regex; the model sees raw bytes */
    TOK_PRE_METASPACE,  /* ' ' -> replacement, prepend_scheme, optional split */
    TOK_PRE_WHITESPACE_SPLIT,
    TOK_PRE_DIGITS,
};
enum tok_prepend_scheme { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };
struct tok_pretok_step {
    enum tok_pretok_kind kind;
    pcre2_code *regex;          /* SPLIT with a regex; BYTE_LEVEL with use_regex */
    char *literal;              /* SPLIT with a String pattern */
    size_t literal_len;
    enum tok_split_behavior behavior;
    int invert;
    int add_prefix_space;       /* BYTE_LEVEL */
    char replacement[5];        /* METASPACE: UTF-8 of the replacement character */
    size_t replacement_len;
    enum tok_prepend_scheme prepend_scheme;
    int split;                  /* METASPACE */
    int individual_digits;      /* DIGITS */
};
struct tok_pretokenizer {
    struct tok_pretok_step *steps;
    size_t n;
    int byte_level; /* a BYTE_LEVEL step ends the sequence: pieces are raw bytes */
};
/* Splits s into pieces appended to out (work is scratch space). */
int cinfer_tok_pretokenize(const struct tok_pretokenizer *pt, const char *s, size_t n, size_t orig_start,
                           struct tok_pieces *out, struct tok_pieces *work, pcre2_match_data *md,
                           struct cinfer_error *err);
void cinfer_tok_pretokenizer_free(struct tok_pretokenizer *pt);
/* Compiles a Hugging Face (Oniguruma) split regex for PCRE2: \s and \S become Unicode
 * White_Space as Oniguruma has them; UTF, UCP and JIT. */
int cinfer_tok_regex_compile(const char *pattern, size_t len, pcre2_code **out, const char *where,
                             struct cinfer_error *err);
/* A tokenizer.ggml.pre tag (tok_pre_tags.c, generated from llama.cpp's table): its split
 * regexes (NULL-terminated, applied in order), flags, or why cinfer refuses it. */
struct tok_pre_tag {
    const char *name;
    const char *const *regexes;
    int ignore_merges;
    int add_bos;
    const char *refusal; /* NULL when cinfer reads it */
};
extern const struct tok_pre_tag cinfer_tok_pre_tags[];
extern const size_t cinfer_tok_pre_tag_count;
extern const char cinfer_tok_regex_gpt2[];
extern const char cinfer_tok_regex_llama3[];
extern const char cinfer_tok_regex_qwen2[];

/* ---- added tokens (tok_added.c) ---------------------------------------------- */
struct tok_added_token {
    int32_t id;
    char *content;
    size_t len;
    int special, lstrip, rstrip, single_word, normalized;
};
struct tok_added_set {
    struct tok_added_token **by_first_byte[256]; /* longest first; NULL-terminated */
    size_t count;
};
struct tok_segment {
    size_t start, len;  /* in the searched text */
    int32_t id;         /* the added token's id, or -1 for text */
};
struct tok_segments {
    struct tok_segment *v;
    size_t n, cap;
};
int cinfer_tok_added_set_build(struct tok_added_set *set, struct tok_added_token *tokens, size_t n,
                               int normalized);
/* Splits s into text segments and added-token matches (leftmost-longest). */
int cinfer_tok_added_split(const struct tok_added_set *set, const char *s, size_t n,
                           struct tok_segments *out);
void cinfer_tok_added_set_free(struct tok_added_set *set);

/* ---- decoders (tok_stream.c, cinfer_tok_decode.c) ----------------------------------- */
enum tok_dec_kind {
    TOK_DEC_BYTE_LEVEL, TOK_DEC_METASPACE, TOK_DEC_REPLACE, TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE, TOK_DEC_STRIP,
};
struct tok_dec_step {
    enum tok_dec_kind kind;
    char *pattern;          /* REPLACE: literal pattern */
    size_t pattern_len;
    char *content;          /* REPLACE: replacement; STRIP: the character stripped */
    size_t content_len;
    char replacement[5];    /* METASPACE */
    size_t replacement_len;
    int prepend_never;      /* METASPACE */
    size_t strip_start, strip_stop;
};
struct tok_decoder_chain {
    struct tok_dec_step *steps;
    size_t n;
    size_t join_at; /* index of the first joining step (BYTE_LEVEL or FUSE), or n */
    int join_with_space; /* no decoder at all: HF joins the tokens with " " */
};
void cinfer_tok_decoder_chain_free(struct tok_decoder_chain *dc);
/* Refuses chains the streaming decoder cannot run exactly. */
int cinfer_tok_decoder_chain_check(const struct tok_decoder_chain *dc, const char *where,
                                   struct cinfer_error *err);

/* ---- the tokenizer ----------------------------------------------------------- */
enum tok_model_kind {
    TOK_MODEL_BPE, /* ranked merges (Hugging Face BPE, GGUF "gpt2") */
    TOK_MODEL_SPM, /* score-driven merges (GGUF "llama"), as llama.cpp */
};
enum { TOK_ATTR_SPECIAL = 1, TOK_ATTR_ADDED = 2, TOK_ATTR_BYTE = 4, TOK_ATTR_UNUSED = 8 };

struct cinfer_tokenizer {
    char *source_path;
    enum tok_model_kind model;
    uint32_t vocab_size;        /* max id + 1 */
    char **pieces;              /* id -> stored piece or added content (NUL-terminated), or NULL */
    uint32_t *piece_len;
    uint8_t *attr;              /* id -> TOK_ATTR_* */
    struct tok_strmap piece_ids; /* stored piece / added content -> id */

    /* BPE */
    struct tok_strmap model_ids;  /* what the model looks up: raw bytes when byte_level */
    struct tok_pairmap merges;
    int32_t byte_ids[256];        /* byte_level: raw byte -> id */
    int32_t fallback_ids[256];    /* "<0xXX>" -> id, or -1 */
    int byte_level, byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;
    struct tok_cache *cache;      /* recent words -> ids (BPE only) */

    /* SPM */
    float *scores;
    struct tok_pairmap spm_pairs; /* (left id, right id) -> the piece spelling both */
    int add_space_prefix;

    struct tok_normalizer normalizer;
    struct tok_pretokenizer pretokenizer;
    struct tok_added_token *added;
    size_t n_added;
    struct tok_added_set added_raw;        /* matched before normalization */
    struct tok_added_set added_normalized; /* matched in normalized text */
    struct tok_decoder_chain decoder;

    int32_t *prefix_ids; size_t n_prefix; /* add_special: before the text */
    int32_t *suffix_ids; size_t n_suffix; /* add_special: after it */

    struct cinfer_tokenizer_info info;
    char *chat_template;
    char model_type[32];
};

/* Loaders fill a zeroed tokenizer; cinfer_tok_finish() derives what both share. */
int cinfer_tok_load_json_folder(struct cinfer_tokenizer *tok, const char *folder, struct cinfer_error *err);
int cinfer_tok_load_gguf(struct cinfer_tokenizer *tok, const char *path, struct cinfer_error *err);
int cinfer_tok_vocab_alloc(struct cinfer_tokenizer *tok, uint32_t size);
int cinfer_tok_set_piece(struct cinfer_tokenizer *tok, int32_t id, const char *s, size_t len);
int cinfer_tok_finish(struct cinfer_tokenizer *tok, struct cinfer_error *err);
/* The key the model looks a stored piece up by: for byte-level vocabularies the raw
 * bytes its characters stand for. Returns 1, 0 (not spelled in the byte alphabet) or
 * CINFER_ERR_NOMEM. */
int cinfer_tok_model_key(const struct cinfer_tokenizer *tok, const char *piece, size_t n, struct tok_buf *key);
int cinfer_tok_merge_add(struct cinfer_tokenizer *tok, int32_t rank, const char *a, size_t a_len, const char *b,
                         size_t b_len);
void cinfer_tok_free(struct cinfer_tokenizer *tok);

/* The model on one pre-tokenized piece; appends ids. */
struct tok_bpe_work;
int cinfer_tok_bpe_encode_piece(const struct cinfer_tokenizer *tok, const char *s, size_t n,
                                struct tok_bpe_work *w, struct cinfer_token_ids *out);
struct tok_bpe_work *cinfer_tok_bpe_work_new(void);
void cinfer_tok_bpe_work_free(struct tok_bpe_work *w);
/* Every way each piece splits into two pieces, so merging looks up ids, not strings. */
int cinfer_tok_spm_build_pairs(struct cinfer_tokenizer *tok);
int cinfer_tok_spm_encode_text(const struct cinfer_tokenizer *tok, const char *s, size_t n,
                               struct cinfer_token_ids *out);

int cinfer_tok_encode(const struct cinfer_tokenizer *tok, const char *text, size_t len, int add_special,
                      struct cinfer_token_ids *out, struct cinfer_error *err);

/* Streaming decoder; decode() is one step() plus finish() on a fresh one. */
struct cinfer_token_decoder {
    const struct cinfer_tokenizer *tok;
    int skip_special;
    size_t *step_index;         /* per Metaspace step: tokens that reached it */
    struct tok_buf byte_run;    /* BYTE_FALLBACK: pending byte tokens */
    size_t byte_run_step;       /* which step holds it */
    int strip_started;          /* whole-stream STRIP: a kept character was seen */
    size_t strip_left_done;
    size_t strip_held;          /* trailing strip characters held back */
    size_t tokens_seen;         /* tokens decoded so far (not counting skipped ones) */
    struct tok_buf pending;     /* output bytes not yet complete UTF-8 */
    struct tok_buf out;         /* this call's delta */
    struct tok_buf scratch;
};
int cinfer_tok_stream_init(struct cinfer_token_decoder *d, const struct cinfer_tokenizer *tok, int skip_special);
int cinfer_tok_stream_push(struct cinfer_token_decoder *d, const int32_t *ids, size_t n, struct cinfer_error *err);
int cinfer_tok_stream_flush(struct cinfer_token_decoder *d);
void cinfer_tok_stream_release(struct cinfer_token_decoder *d);
/* The bytes one token adds mid-stream (cinfer_tokenizer_ops.token_bytes), appended to out. */
int cinfer_tok_token_bytes(const struct cinfer_tokenizer *tok, int32_t id, struct tok_buf *out);
int cinfer_tok_decode(const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                      char **text, size_t *text_len, struct cinfer_error *err);

#endif
