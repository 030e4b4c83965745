/* Loading the vocabulary a GGUF file embeds (tokenizer.ggml.*), as llama.cpp reads it:
 * "llama" is SentencePiece (pieces, scores, token types; merges implied by scores),
 * "gpt2" is byte-level BPE (pieces, merges, and tokenizer.ggml.pre naming the split
 * regex). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/gguf.h"
#include "tok.h"

/* llama.cpp's token types */
enum { GGUF_TOKEN_NORMAL = 1, GGUF_TOKEN_UNKNOWN = 2, GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4,
       GGUF_TOKEN_UNUSED = 5, GGUF_TOKEN_BYTE = 6 };

static int opt_i32(const struct cinfer_gguf *g, const char *key, int32_t dflt, int32_t *out, struct cinfer_error *err)
{
    uint32_t v;
    int rc = cinfer_gguf_get_u32(g, key, &v, err);
    if (rc == CINFER_ERR_NOT_FOUND) {
        *out = dflt;
        return CINFER_OK;
    }
    if (rc == CINFER_OK)
        *out = v > INT32_MAX ? -1 : (int32_t)v;
    return rc;
}

static int opt_bool(const struct cinfer_gguf *g, const char *key, int dflt, int *out, struct cinfer_error *err)
{
    int rc = cinfer_gguf_get_bool(g, key, out, err);
    if (rc == CINFER_ERR_NOT_FOUND) {
        *out = dflt;
        return CINFER_OK;
    }
    return rc;
}

static int array_of(const struct cinfer_gguf *g, const char *key, enum cinfer_gguf_value_type want, uint64_t *count,
                    const char *want_name, struct cinfer_error *err)
{
    enum cinfer_gguf_value_type t;
    int rc = cinfer_gguf_get_array(g, key, &t, count, err);
    if (rc == CINFER_ERR_NOT_FOUND)
        return cinfer_error_set(err, rc, "%s: expected the key %s (an array of %s), found no such key",
                                cinfer_gguf_path(g), key, want_name);
    if (rc)
        return rc;
    int is_int = t <= CINFER_GGUF_INT32 || t == CINFER_GGUF_UINT64 || t == CINFER_GGUF_INT64;
    if (want == CINFER_GGUF_INT32 ? !is_int : t != want)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: %s: expected an array of %s, found an array of "
                                "GGUF type %d", cinfer_gguf_path(g), key, want_name, (int)t);
    return CINFER_OK;
}

/* The split of tokenizer.ggml.pre: llama.cpp's regexes for the tag, one Split step each
 * (isolated), then the byte-level mapping. No tag: llama.cpp's "default". */
static int set_split_regex(struct cinfer_tokenizer *tok, const struct cinfer_gguf *g, struct cinfer_error *err)
{
    struct cinfer_gguf_str pre = {"default", 7};
    int rc = cinfer_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
    if (rc == CINFER_ERR_NOT_FOUND) {
        pre = (struct cinfer_gguf_str){"default", 7};
        rc = CINFER_OK;
    }
    if (rc)
        return rc;
    const struct tok_pre_tag *tag = NULL;
    for (size_t i = 0; i < cinfer_tok_pre_tag_count && !tag; i++)
        if (pre.len == strlen(cinfer_tok_pre_tags[i].name) && !memcmp(pre.data, cinfer_tok_pre_tags[i].name, pre.len))
            tag = &cinfer_tok_pre_tags[i];
    int shown = (int)(pre.len > 100 ? 100 : pre.len);
    if (!tag)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                "%s: tokenizer.ggml.pre: \"%.*s\" is not a pre-tokenizer llama.cpp's converter writes "
                                "(cinfer knows %zu: llama-bpe, qwen2, deepseek-r1-qwen, deepseek-v3, gpt-4o, tekken, "
                                "smaug-bpe, command-r, smollm, gpt-2, default, ...; plugins/tokenizer-bpe/tok_pre_tags.c)",
                                cinfer_gguf_path(g), shown, pre.data, cinfer_tok_pre_tag_count);
    if (tag->refusal)
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre \"%.*s\": %s; cinfer does not "
                                "implement it", cinfer_gguf_path(g), shown, pre.data, tag->refusal);
    tok->ignore_merges = tag->ignore_merges; /* as llama.cpp: Llama 3's and Tekken's pre-tokens skip merges */
    tok->info.add_bos = tag->add_bos;        /* the default; tokenizer.ggml.add_bos_token overrides it */
    size_t n = 0;
    while (tag->regexes[n])
        n++;
    struct tok_pretokenizer *pt = &tok->pretokenizer;
    pt->steps = calloc(n + 1, sizeof(*pt->steps));
    if (!pt->steps)
        return CINFER_ERR_NOMEM;
    pt->n = n + 1;
    char where[160];
    snprintf(where, sizeof where, "tokenizer.ggml.pre \"%.*s\" regex", shown, pre.data);
    for (size_t i = 0; i < n; i++) {
        pt->steps[i].kind = TOK_PRE_SPLIT;
        pt->steps[i].behavior = TOK_SPLIT_ISOLATED;
        rc = cinfer_tok_regex_compile(tag->regexes[i], strlen(tag->regexes[i]), &pt->steps[i].regex, where, err);
        if (rc)
            return rc;
    }
    pt->steps[n].kind = TOK_PRE_BYTE_LEVEL;
    pt->byte_level = tok->byte_level = 1;
    return CINFER_OK;
}

static int set_decoder(struct cinfer_tokenizer *tok)
{
    struct tok_decoder_chain *dc = &tok->decoder;
    dc->steps = calloc(4, sizeof(*dc->steps));
    if (!dc->steps)
        return CINFER_ERR_NOMEM;
    if (tok->model == TOK_MODEL_BPE) {
        dc->steps[0].kind = TOK_DEC_BYTE_LEVEL;
        dc->n = 1;
        dc->join_at = 0;
        return CINFER_OK;
    }
    /* what llama.cpp's token_to_piece does for SPM, as HF's Llama decoder writes it */
    dc->steps[0] = (struct tok_dec_step){.kind = TOK_DEC_REPLACE, .pattern = strdup("\xE2\x96\x81"),
                                         .pattern_len = 3, .content = strdup(" "), .content_len = 1};
    dc->steps[1].kind = TOK_DEC_BYTE_FALLBACK;
    dc->steps[2].kind = TOK_DEC_FUSE;
    dc->n = 3;
    dc->join_at = 2;
    if (tok->add_space_prefix) {
        dc->steps[3] = (struct tok_dec_step){.kind = TOK_DEC_STRIP, .content = strdup(" "), .content_len = 1,
                                             .strip_start = 1};
        dc->n = 4;
    }
    return dc->steps[0].pattern && dc->steps[0].content ? CINFER_OK : CINFER_ERR_NOMEM;
}

static int load(struct cinfer_tokenizer *tok, const struct cinfer_gguf *g, struct cinfer_error *err)
{
    const char *path = cinfer_gguf_path(g);
    struct cinfer_gguf_str model;
    int rc = cinfer_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    uint32_t split_no = 0, split_count = 0;
    if (rc == CINFER_ERR_NOT_FOUND && cinfer_gguf_get_u32(g, "split.no", &split_no, err) == CINFER_OK &&
        cinfer_gguf_get_u32(g, "split.count", &split_count, err) == CINFER_OK && split_no > 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "%s: this is part %u of %u of a split model, "
                                "whose vocabulary is in its first part: open the file named ...-00001-of-%05u.gguf",
                                path, split_no + 1, split_count, split_count);
    if (rc == CINFER_ERR_NOT_FOUND)
        return cinfer_error_set(err, rc, "%s: expected an embedded vocabulary (the key tokenizer.ggml.model), "
                                "found none", path);
    if (rc)
        return rc;
    if (model.len == 5 && !memcmp(model.data, "llama", 5))
        tok->model = TOK_MODEL_SPM;
    else if (model.len == 4 && !memcmp(model.data, "gpt2", 4))
        tok->model = TOK_MODEL_BPE;
    else
        return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model: expected \"llama\" or "
                                "\"gpt2\", found \"%.*s\"", path, (int)(model.len > 100 ? 100 : model.len),
                                model.data);
    uint64_t n_tokens, n_types = 0, n_scores = 0;
    if ((rc = array_of(g, "tokenizer.ggml.tokens", CINFER_GGUF_STRING, &n_tokens, "strings", err)))
        return rc;
    if (n_tokens == 0 || n_tokens > INT32_MAX)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tokenizer.ggml.tokens: expected 1..%d pieces, found "
                                "%llu", path, INT32_MAX, (unsigned long long)n_tokens);
    int have_types = cinfer_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0;
    if (have_types && (rc = array_of(g, "tokenizer.ggml.token_type", CINFER_GGUF_INT32, &n_types, "integers", err)))
        return rc;
    if (have_types && n_types != n_tokens)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tokenizer.ggml.token_type: expected %llu entries (one "
                                "per token), found %llu", path, (unsigned long long)n_tokens,
                                (unsigned long long)n_types);
    if (tok->model == TOK_MODEL_SPM) {
        if ((rc = array_of(g, "tokenizer.ggml.scores", CINFER_GGUF_FLOAT32, &n_scores, "float32", err)))
            return rc;
        if (n_scores != n_tokens)
            return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tokenizer.ggml.scores: expected %llu entries (one "
                                    "per token), found %llu", path, (unsigned long long)n_tokens,
                                    (unsigned long long)n_scores);
        tok->scores = calloc(n_tokens, sizeof(*tok->scores));
        if (!tok->scores)
            return CINFER_ERR_NOMEM;
    } else {
        if ((rc = set_split_regex(tok, g, err)))
            return rc;
    }
    if ((rc = cinfer_tok_vocab_alloc(tok, (uint32_t)n_tokens)))
        return rc;
    tok->added = calloc(n_tokens, sizeof(*tok->added));
    if (!tok->added)
        return CINFER_ERR_NOMEM;
    struct tok_buf key = {0};
    for (uint64_t i = 0; i < n_tokens; i++) {
        struct cinfer_gguf_str s;
        int64_t type = GGUF_TOKEN_NORMAL;
        cinfer_gguf_array_str(g, "tokenizer.ggml.tokens", i, &s);
        if (have_types)
            cinfer_gguf_array_i64(g, "tokenizer.ggml.token_type", i, &type);
        if (tok->scores)
            cinfer_gguf_array_f32(g, "tokenizer.ggml.scores", i, &tok->scores[i]);
        if (cinfer_tok_set_piece(tok, (int32_t)i, s.data, s.len)) {
            cinfer_tok_buf_free(&key);
            return CINFER_ERR_NOMEM;
        }
        if (tok->model == TOK_MODEL_BPE && type != GGUF_TOKEN_CONTROL) {
            int usable = cinfer_tok_model_key(tok, s.data, s.len, &key);
            if (usable < 0 || (usable && cinfer_tok_strmap_put(&tok->model_ids, key.data, key.len, (int32_t)i))) {
                cinfer_tok_buf_free(&key);
                return CINFER_ERR_NOMEM;
            }
        }
        if (type == GGUF_TOKEN_UNUSED)
            tok->attr[i] |= TOK_ATTR_UNUSED;
        /* control, user-defined and unknown tokens are matched in the text as llama.cpp does */
        if ((type == GGUF_TOKEN_CONTROL || type == GGUF_TOKEN_USER_DEFINED || type == GGUF_TOKEN_UNKNOWN) && s.len) {
            struct tok_added_token *a = &tok->added[tok->n_added++];
            a->id = (int32_t)i;
            a->content = malloc(s.len + 1);
            if (!a->content) {
                cinfer_tok_buf_free(&key);
                return CINFER_ERR_NOMEM;
            }
            memcpy(a->content, s.data, s.len);
            a->content[s.len] = '\0';
            a->len = s.len;
            a->special = type != GGUF_TOKEN_USER_DEFINED;
        }
    }
    cinfer_tok_buf_free(&key);

    if (tok->model == TOK_MODEL_BPE) {
        uint64_t n_merges;
        if ((rc = array_of(g, "tokenizer.ggml.merges", CINFER_GGUF_STRING, &n_merges, "strings", err)))
            return rc;
        if (cinfer_tok_pairmap_init(&tok->merges, n_merges))
            return CINFER_ERR_NOMEM;
        for (uint64_t i = 0; i < n_merges; i++) {
            struct cinfer_gguf_str m;
            cinfer_gguf_array_str(g, "tokenizer.ggml.merges", i, &m);
            const char *sp = memchr(m.data, ' ', m.len);
            if (!sp)
                return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tokenizer.ggml.merges[%llu]: expected \"left "
                                        "right\", found \"%.*s\"", path, (unsigned long long)i,
                                        (int)(m.len > 200 ? 200 : m.len), m.data);
            size_t a_len = (size_t)(sp - m.data);
            int missing = cinfer_tok_merge_add(tok, (int32_t)i, m.data, a_len, sp + 1, m.len - a_len - 1);
            if (missing == CINFER_ERR_NOMEM)
                return missing;
            if (missing > 0)
                return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tokenizer.ggml.merges[%llu]: expected pieces "
                                        "of tokenizer.ggml.tokens, found \"%.*s\" whose %s is not one", path,
                                        (unsigned long long)i, (int)(m.len > 200 ? 200 : m.len), m.data,
                                        missing == 1 ? "left side" : missing == 2 ? "right side" : "concatenation");
        }
    }

    struct cinfer_tokenizer_info *info = &tok->info;
    int spm = tok->model == TOK_MODEL_SPM;
    if ((rc = opt_i32(g, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, &info->bos_id, err)) ||
        (rc = opt_i32(g, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, &info->eos_id, err)) ||
        (rc = opt_i32(g, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, &tok->unk_id, err)) ||
        (rc = opt_i32(g, "tokenizer.ggml.padding_token_id", -1, &info->pad_id, err)) ||
        (rc = opt_bool(g, "tokenizer.ggml.add_bos_token", spm || info->add_bos, &info->add_bos, err)) ||
        (rc = opt_bool(g, "tokenizer.ggml.add_eos_token", 0, &info->add_eos, err)) ||
        (rc = opt_bool(g, "tokenizer.ggml.add_space_prefix", spm, &tok->add_space_prefix, err)))
        return rc;
    int32_t *ids[4] = {&info->bos_id, &info->eos_id, &tok->unk_id, &info->pad_id};
    for (int k = 0; k < 4; k++)
        if (*ids[k] >= (int32_t)n_tokens)
            *ids[k] = -1;
    if (info->add_bos && info->bos_id >= 0) {
        tok->prefix_ids = malloc(sizeof(int32_t));
        if (!tok->prefix_ids)
            return CINFER_ERR_NOMEM;
        tok->prefix_ids[tok->n_prefix++] = info->bos_id;
    }
    if (info->add_eos && info->eos_id >= 0) {
        tok->suffix_ids = malloc(sizeof(int32_t));
        if (!tok->suffix_ids)
            return CINFER_ERR_NOMEM;
        tok->suffix_ids[tok->n_suffix++] = info->eos_id;
    }
    struct cinfer_gguf_str tpl;
    rc = cinfer_gguf_get_str(g, "tokenizer.chat_template", &tpl, err);
    if (rc == CINFER_OK) {
        tok->chat_template = malloc(tpl.len + 1);
        if (!tok->chat_template)
            return CINFER_ERR_NOMEM;
        memcpy(tok->chat_template, tpl.data, tpl.len);
        tok->chat_template[tpl.len] = '\0';
    } else if (rc != CINFER_ERR_NOT_FOUND) {
        return rc;
    }
    if ((rc = set_decoder(tok)))
        return rc;
    return cinfer_tok_finish(tok, err);
}

int cinfer_tok_load_gguf(struct cinfer_tokenizer *tok, const char *path, struct cinfer_error *err)
{
    tok->source_path = strdup(path);
    tok->unk_id = tok->info.bos_id = tok->info.eos_id = tok->info.pad_id = -1;
    if (!tok->source_path)
        return CINFER_ERR_NOMEM;
    struct cinfer_gguf *g = NULL;
    int rc = cinfer_gguf_open(path, &g, err);
    if (rc)
        return rc;
    rc = load(tok, g, err);
    if (rc == CINFER_ERR_NOMEM)
        cinfer_error_set(err, rc, "%s: out of memory loading the vocabulary", path);
    cinfer_gguf_close(&g);
    return rc;
}
