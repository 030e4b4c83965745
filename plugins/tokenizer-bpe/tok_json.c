/* Loading a Hugging Face tokenizer.json (libjansson) and the tokenizer_config.json
 * beside it. Every complaint names the file, the JSON path of the field, what was
 * expected and what was found; parse errors give FILE:LINE:COL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>

#include "tok.h"

struct jctx {
    const char *file;
    struct cinfer_error *err;
};

static const char *jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "something else";
}

static int wrong(struct jctx *c, const char *path, const char *expected, const json_t *found)
{
    return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s: expected %s, found %s", c->file, path,
                            expected, found ? jtype(found) : "nothing (the field is missing)");
}

/* Optional string field: *out stays NULL when absent or null. */
static int get_str(struct jctx *c, const json_t *obj, const char *key, const char *path, int required,
                   const char **out, size_t *len)
{
    char where[512];
    snprintf(where, sizeof(where), "%s.%s", path, key);
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (len)
        *len = 0;
    if (!v || json_is_null(v))
        return required ? wrong(c, where, "a string", NULL) : CINFER_OK;
    if (!json_is_string(v))
        return wrong(c, where, "a string", v);
    *out = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return CINFER_OK;
}

static int get_bool(struct jctx *c, const json_t *obj, const char *key, const char *path, int dflt, int *out)
{
    const json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v))
        return CINFER_OK;
    if (!json_is_boolean(v)) {
        char where[512];
        snprintf(where, sizeof(where), "%s.%s", path, key);
        return wrong(c, where, "true or false", v);
    }
    *out = json_is_true(v);
    return CINFER_OK;
}

static int get_uint(struct jctx *c, const json_t *obj, const char *key, const char *path, int64_t max,
                    int64_t *out)
{
    char where[512];
    snprintf(where, sizeof(where), "%s.%s", path, key);
    const json_t *v = json_object_get(obj, key);
    if (!v || !json_is_integer(v))
        return wrong(c, where, "a non-negative integer", v);
    *out = json_integer_value(v);
    if (*out < 0 || *out > max)
        return cinfer_error_set(c->err, CINFER_ERR_RANGE, "%s: %s: expected an integer in 0..%lld, found %lld",
                                c->file, where, (long long)max, (long long)*out);
    return CINFER_OK;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static const char *type_of(struct jctx *c, const json_t *obj, const char *path, int *rc)
{
    const char *t;
    *rc = CINFER_OK;
    if (!json_is_object(obj)) {
        *rc = wrong(c, path, "an object", obj);
        return NULL;
    }
    *rc = get_str(c, obj, "type", path, 1, &t, NULL);
    return t;
}

static int unsupported(struct jctx *c, const char *path, const char *what, const char *type)
{
    return cinfer_error_set(c->err, CINFER_ERR_UNSUPPORTED, "%s: %s.type: expected %s, found \"%s\"",
                            c->file, path, what, type);
}

/* {"String": s} or {"Regex": r} */
static int get_pattern(struct jctx *c, const json_t *obj, const char *path, const char **literal, size_t *lit_len,
                       const char **regex, size_t *re_len)
{
    char where[512];
    snprintf(where, sizeof(where), "%s.pattern", path);
    const json_t *p = json_object_get(obj, "pattern");
    if (!json_is_object(p))
        return wrong(c, where, "an object {\"String\": ...} or {\"Regex\": ...}", p);
    int rc = get_str(c, p, "String", where, 0, literal, lit_len);
    if (rc == CINFER_OK)
        rc = get_str(c, p, "Regex", where, 0, regex, re_len);
    if (rc == CINFER_OK && !*literal && !*regex)
        rc = wrong(c, where, "an object {\"String\": ...} or {\"Regex\": ...}", p);
    return rc;
}

/* ---- normalizer ---------------------------------------------------------------- */
static int add_norm(struct tok_normalizer *nz, struct tok_norm_step st)
{
    struct tok_norm_step *v = realloc(nz->steps, (nz->n + 1) * sizeof(*v));
    if (!v)
        return CINFER_ERR_NOMEM;
    nz->steps = v;
    nz->steps[nz->n++] = st;
    return CINFER_OK;
}

static int parse_normalizer(struct jctx *c, const json_t *j, const char *path, struct tok_normalizer *nz)
{
    if (!j || json_is_null(j))
        return CINFER_OK;
    int rc;
    const char *type = type_of(c, j, path, &rc);
    if (rc)
        return rc;
    struct tok_norm_step st = {0};
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "normalizers");
        char where[512];
        snprintf(where, sizeof(where), "%s.normalizers", path);
        if (!json_is_array(list))
            return wrong(c, where, "an array", list);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char item[600];
            snprintf(item, sizeof(item), "%s[%zu]", where, i);
            if ((rc = parse_normalizer(c, json_array_get(list, i), item, nz)))
                return rc;
        }
        return CINFER_OK;
    }
    if (!strcmp(type, "NFC")) st.kind = TOK_NORM_NFC;
    else if (!strcmp(type, "NFKC")) st.kind = TOK_NORM_NFKC;
    else if (!strcmp(type, "NFD")) st.kind = TOK_NORM_NFD;
    else if (!strcmp(type, "NFKD")) st.kind = TOK_NORM_NFKD;
    else if (!strcmp(type, "Lowercase")) st.kind = TOK_NORM_LOWERCASE;
    else if (!strcmp(type, "Prepend")) {
        const char *s;
        st.kind = TOK_NORM_PREPEND;
        if ((rc = get_str(c, j, "prepend", path, 1, &s, &st.text_len)))
            return rc;
        st.text = dup_n(s, st.text_len);
    } else if (!strcmp(type, "Replace")) {
        const char *lit, *re, *content;
        size_t lit_len, re_len;
        st.kind = TOK_NORM_REPLACE;
        if ((rc = get_pattern(c, j, path, &lit, &lit_len, &re, &re_len)) ||
            (rc = get_str(c, j, "content", path, 1, &content, &st.content_len)))
            return rc;
        st.content = dup_n(content, st.content_len);
        if (lit) {
            st.text = dup_n(lit, lit_len);
            st.text_len = lit_len;
        } else {
            char where[512];
            snprintf(where, sizeof(where), "%s: %s.pattern.Regex", c->file, path);
            if ((rc = cinfer_tok_regex_compile(re, re_len, &st.regex, where, c->err))) {
                free(st.content);
                return rc;
            }
        }
    } else if (!strcmp(type, "Strip")) {
        st.kind = TOK_NORM_STRIP;
        if ((rc = get_bool(c, j, "strip_left", path, 1, &st.strip_left)) ||
            (rc = get_bool(c, j, "strip_right", path, 1, &st.strip_right)))
            return rc;
    } else {
        return unsupported(c, path, "a normalizer cinfer implements (Sequence, NFC, NFKC, NFD, NFKD, "
                           "Lowercase, Prepend, Replace, Strip)", type);
    }
    if (add_norm(nz, st)) {
        free(st.text);
        free(st.content);
        return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

/* ---- pre-tokenizer ------------------------------------------------------------- */
static int add_pre(struct tok_pretokenizer *pt, struct tok_pretok_step st)
{
    struct tok_pretok_step *v = realloc(pt->steps, (pt->n + 1) * sizeof(*v));
    if (!v)
        return CINFER_ERR_NOMEM;
    pt->steps = v;
    pt->steps[pt->n++] = st;
    return CINFER_OK;
}

static int get_replacement(struct jctx *c, const json_t *j, const char *path, char out[5], size_t *len)
{
    const char *s;
    size_t n;
    int rc = get_str(c, j, "replacement", path, 0, &s, &n);
    if (rc)
        return rc;
    if (!s) {
        s = "\xE2\x96\x81";
        n = 3;
    }
    uint32_t cp;
    if (n == 0 || n > 4 || cinfer_tok_utf8_next(s, n, &cp) != n) {
        char where[512];
        snprintf(where, sizeof(where), "%s.replacement", path);
        return wrong(c, where, "a one-character string", json_object_get(j, "replacement"));
    }
    memcpy(out, s, n);
    out[n] = '\0';
    *len = n;
    return CINFER_OK;
}

static int get_prepend_scheme(struct jctx *c, const json_t *j, const char *path, enum tok_prepend_scheme *out)
{
    const char *s;
    int rc = get_str(c, j, "prepend_scheme", path, 0, &s, NULL);
    if (rc)
        return rc;
    if (!s) { /* before prepend_scheme, add_prefix_space said always or never */
        int add;
        if ((rc = get_bool(c, j, "add_prefix_space", path, 1, &add)))
            return rc;
        *out = add ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        return CINFER_OK;
    }
    if (!strcmp(s, "always")) *out = TOK_PREPEND_ALWAYS;
    else if (!strcmp(s, "first")) *out = TOK_PREPEND_FIRST;
    else if (!strcmp(s, "never")) *out = TOK_PREPEND_NEVER;
    else
        return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s.prepend_scheme: expected \"always\", "
                                "\"first\" or \"never\", found \"%s\"", c->file, path, s);
    return CINFER_OK;
}

static int parse_pretokenizer(struct jctx *c, const json_t *j, const char *path, struct tok_pretokenizer *pt)
{
    if (!j || json_is_null(j))
        return CINFER_OK;
    int rc;
    const char *type = type_of(c, j, path, &rc);
    if (rc)
        return rc;
    if (pt->byte_level)
        return cinfer_error_set(c->err, CINFER_ERR_UNSUPPORTED, "%s: %s: expected ByteLevel to be the last "
                                "pre-tokenizer, found \"%s\" after it", c->file, path, type);
    struct tok_pretok_step st = {0};
    char where[600];
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "pretokenizers");
        snprintf(where, sizeof(where), "%s.pretokenizers", path);
        if (!json_is_array(list))
            return wrong(c, where, "an array", list);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char item[700];
            snprintf(item, sizeof(item), "%s[%zu]", where, i);
            if ((rc = parse_pretokenizer(c, json_array_get(list, i), item, pt)))
                return rc;
        }
        return CINFER_OK;
    }
    if (!strcmp(type, "Split")) {
        const char *lit, *re, *behavior;
        size_t lit_len, re_len;
        st.kind = TOK_PRE_SPLIT;
        if ((rc = get_pattern(c, j, path, &lit, &lit_len, &re, &re_len)) ||
            (rc = get_str(c, j, "behavior", path, 1, &behavior, NULL)) ||
            (rc = get_bool(c, j, "invert", path, 0, &st.invert)))
            return rc;
        if (!strcmp(behavior, "Removed")) st.behavior = TOK_SPLIT_REMOVED;
        else if (!strcmp(behavior, "Isolated")) st.behavior = TOK_SPLIT_ISOLATED;
        else if (!strcmp(behavior, "MergedWithPrevious")) st.behavior = TOK_SPLIT_MERGED_WITH_PREVIOUS;
        else if (!strcmp(behavior, "MergedWithNext")) st.behavior = TOK_SPLIT_MERGED_WITH_NEXT;
        else if (!strcmp(behavior, "Contiguous")) st.behavior = TOK_SPLIT_CONTIGUOUS;
        else
            return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s.behavior: expected Removed, Isolated, "
                                    "MergedWithPrevious, MergedWithNext or Contiguous, found \"%s\"",
                                    c->file, path, behavior);
        if (lit) {
            st.literal = dup_n(lit, lit_len);
            st.literal_len = lit_len;
            if (!st.literal)
                return CINFER_ERR_NOMEM;
        } else {
            snprintf(where, sizeof(where), "%s: %s.pattern.Regex", c->file, path);
            if ((rc = cinfer_tok_regex_compile(re, re_len, &st.regex, where, c->err)))
                return rc;
        }
    } else if (!strcmp(type, "ByteLevel")) {
        int use_regex;
        st.kind = TOK_PRE_BYTE_LEVEL;
        if ((rc = get_bool(c, j, "add_prefix_space", path, 1, &st.add_prefix_space)) ||
            (rc = get_bool(c, j, "use_regex", path, 1, &use_regex)))
            return rc;
        if (use_regex && (rc = cinfer_tok_regex_compile(cinfer_tok_regex_gpt2, strlen(cinfer_tok_regex_gpt2), &st.regex,
                                                        "the GPT-2 split regex", c->err)))
            return rc;
        pt->byte_level = 1;
    } else if (!strcmp(type, "Metaspace")) {
        st.kind = TOK_PRE_METASPACE;
        if ((rc = get_replacement(c, j, path, st.replacement, &st.replacement_len)) ||
            (rc = get_prepend_scheme(c, j, path, &st.prepend_scheme)) ||
            (rc = get_bool(c, j, "split", path, 1, &st.split)))
            return rc;
    } else if (!strcmp(type, "WhitespaceSplit")) {
        st.kind = TOK_PRE_WHITESPACE_SPLIT;
    } else if (!strcmp(type, "Digits")) {
        st.kind = TOK_PRE_DIGITS;
        if ((rc = get_bool(c, j, "individual_digits", path, 0, &st.individual_digits)))
            return rc;
    } else {
        return unsupported(c, path, "a pre-tokenizer cinfer implements (Sequence, Split, ByteLevel, "
                           "Metaspace, WhitespaceSplit, Digits)", type);
    }
    if (add_pre(pt, st)) {
        if (st.regex)
            pcre2_code_free(st.regex);
        free(st.literal);
        return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

/* ---- decoder ------------------------------------------------------------------- */
static int add_dec(struct tok_decoder_chain *dc, struct tok_dec_step st)
{
    struct tok_dec_step *v = realloc(dc->steps, (dc->n + 1) * sizeof(*v));
    if (!v)
        return CINFER_ERR_NOMEM;
    dc->steps = v;
    dc->steps[dc->n++] = st;
    return CINFER_OK;
}

static int parse_decoder(struct jctx *c, const json_t *j, const char *path, struct tok_decoder_chain *dc)
{
    if (!j || json_is_null(j))
        return CINFER_OK;
    int rc;
    const char *type = type_of(c, j, path, &rc);
    if (rc)
        return rc;
    struct tok_dec_step st = {0};
    if (!strcmp(type, "Sequence")) {
        char where[512];
        const json_t *list = json_object_get(j, "decoders");
        snprintf(where, sizeof(where), "%s.decoders", path);
        if (!json_is_array(list))
            return wrong(c, where, "an array", list);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char item[600];
            snprintf(item, sizeof(item), "%s[%zu]", where, i);
            if ((rc = parse_decoder(c, json_array_get(list, i), item, dc)))
                return rc;
        }
        return CINFER_OK;
    }
    if (!strcmp(type, "ByteLevel")) st.kind = TOK_DEC_BYTE_LEVEL;
    else if (!strcmp(type, "ByteFallback")) st.kind = TOK_DEC_BYTE_FALLBACK;
    else if (!strcmp(type, "Fuse")) st.kind = TOK_DEC_FUSE;
    else if (!strcmp(type, "Metaspace")) {
        enum tok_prepend_scheme scheme;
        st.kind = TOK_DEC_METASPACE;
        if ((rc = get_replacement(c, j, path, st.replacement, &st.replacement_len)) ||
            (rc = get_prepend_scheme(c, j, path, &scheme)))
            return rc;
        st.prepend_never = scheme == TOK_PREPEND_NEVER;
    } else if (!strcmp(type, "Replace")) {
        const char *lit, *re, *content;
        size_t lit_len, re_len;
        st.kind = TOK_DEC_REPLACE;
        if ((rc = get_pattern(c, j, path, &lit, &lit_len, &re, &re_len)) ||
            (rc = get_str(c, j, "content", path, 1, &content, &st.content_len)))
            return rc;
        if (!lit)
            return cinfer_error_set(c->err, CINFER_ERR_UNSUPPORTED, "%s: %s.pattern: expected a String "
                                    "pattern in a Replace decoder, found a Regex", c->file, path);
        st.pattern = dup_n(lit, lit_len);
        st.pattern_len = lit_len;
        st.content = dup_n(content, st.content_len);
    } else if (!strcmp(type, "Strip")) {
        const char *content;
        int64_t start, stop;
        st.kind = TOK_DEC_STRIP;
        if ((rc = get_str(c, j, "content", path, 1, &content, &st.content_len)) ||
            (rc = get_uint(c, j, "start", path, 1 << 20, &start)) ||
            (rc = get_uint(c, j, "stop", path, 1 << 20, &stop)))
            return rc;
        st.content = dup_n(content, st.content_len);
        st.strip_start = (size_t)start;
        st.strip_stop = (size_t)stop;
    } else {
        return unsupported(c, path, "a decoder cinfer implements (Sequence, ByteLevel, ByteFallback, Fuse, "
                           "Metaspace, Replace, Strip)", type);
    }
    if ((st.kind == TOK_DEC_BYTE_LEVEL || st.kind == TOK_DEC_FUSE) && dc->join_at == SIZE_MAX)
        dc->join_at = dc->n;
    if (add_dec(dc, st)) {
        free(st.pattern);
        free(st.content);
        return CINFER_ERR_NOMEM;
    }
    return CINFER_OK;
}

/* ---- model --------------------------------------------------------------------- */
static int merge_sides(struct jctx *c, const json_t *m, size_t i, const char **a, size_t *a_len, const char **b,
                       size_t *b_len)
{
    char where[128];
    snprintf(where, sizeof(where), "model.merges[%zu]", i);
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1))
            return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s: expected \"left right\" with one space, "
                                    "found \"%.*s\"", c->file, where, (int)(n > 200 ? 200 : n), s);
        *a = s;
        *a_len = (size_t)(sp - s);
        *b = sp + 1;
        *b_len = n - *a_len - 1;
        return CINFER_OK;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *a_len = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *b_len = json_string_length(json_array_get(m, 1));
        return CINFER_OK;
    }
    return wrong(c, where, "a string \"left right\" or an array of two strings", m);
}

static int parse_model(struct jctx *c, const json_t *model, struct cinfer_tokenizer *tok)
{
    int rc;
    const json_t *tj = json_object_get(model, "type");
    if (!json_is_object(model))
        return wrong(c, "model", "an object", model);
    if (tj && !(json_is_string(tj) && !strcmp(json_string_value(tj), "BPE"))) {
        if (!json_is_string(tj))
            return wrong(c, "model.type", "a string", tj);
        return unsupported(c, "model", "\"BPE\" (cinfer's tokenizer-bpe handles BPE models only)",
                           json_string_value(tj));
    }
    const char *prefix, *suffix, *unk;
    if ((rc = get_str(c, model, "continuing_subword_prefix", "model", 0, &prefix, NULL)) ||
        (rc = get_str(c, model, "end_of_word_suffix", "model", 0, &suffix, NULL)) ||
        (rc = get_str(c, model, "unk_token", "model", 0, &unk, NULL)) ||
        (rc = get_bool(c, model, "byte_fallback", "model", 0, &tok->byte_fallback)) ||
        (rc = get_bool(c, model, "fuse_unk", "model", 0, &tok->fuse_unk)) ||
        (rc = get_bool(c, model, "ignore_merges", "model", 0, &tok->ignore_merges)))
        return rc;
    if ((prefix && *prefix) || (suffix && *suffix))
        return cinfer_error_set(c->err, CINFER_ERR_UNSUPPORTED, "%s: model: expected no continuing_subword_prefix "
                                "or end_of_word_suffix, found \"%s\" / \"%s\"", c->file, prefix ? prefix : "",
                                suffix ? suffix : "");
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return cinfer_error_set(c->err, CINFER_ERR_UNSUPPORTED, "%s: model.dropout: expected null (dropout is "
                                "for training), found %s", c->file, jtype(dropout));

    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return wrong(c, "model.vocab", "an object {piece: id}", vocab);
    const json_t *merges = json_object_get(model, "merges");
    if (merges && !json_is_null(merges) && !json_is_array(merges))
        return wrong(c, "model.merges", "an array", merges);

    /* ids may leave gaps; size the table by the largest one (added tokens too) */
    int64_t max_id = -1;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= INT32_MAX) {
            char where[300];
            snprintf(where, sizeof(where), "model.vocab[\"%.200s\"]", key);
            return wrong(c, where, "a non-negative integer id", val);
        }
        if (json_integer_value(val) > max_id)
            max_id = json_integer_value(val);
    }
    for (size_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].id > max_id)
            max_id = tok->added[i].id;
    if (max_id < 0)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: model.vocab: expected at least one piece, found "
                                "none", c->file);
    if ((rc = cinfer_tok_vocab_alloc(tok, (uint32_t)max_id + 1)))
        return cinfer_error_set(c->err, rc, "%s: out of memory for %lld ids", c->file, (long long)max_id + 1);

    struct tok_buf k = {0};
    json_object_foreach((json_t *)vocab, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        size_t len = strlen(key); /* jansson object keys cannot hold NUL */
        if (tok->pieces[id]) {
            cinfer_tok_buf_free(&k);
            return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: model.vocab: expected one piece per id, "
                                    "found \"%.100s\" and \"%.100s\" both with id %d", c->file,
                                    tok->pieces[id], key, id);
        }
        int usable = cinfer_tok_model_key(tok, key, len, &k);
        if (usable < 0 || cinfer_tok_set_piece(tok, id, key, len) ||
            (usable && cinfer_tok_strmap_put(&tok->model_ids, k.data, k.len, id))) {
            cinfer_tok_buf_free(&k);
            return cinfer_error_set(c->err, CINFER_ERR_NOMEM, "%s: out of memory", c->file);
        }
    }
    cinfer_tok_buf_free(&k);
    if (unk) {
        tok->unk_id = cinfer_tok_strmap_get(&tok->model_ids, unk, strlen(unk));
        if (tok->unk_id < 0)
            for (size_t i = 0; i < tok->n_added; i++)
                if (!strcmp(tok->added[i].content, unk))
                    tok->unk_id = tok->added[i].id;
    }

    size_t n_merges = merges ? json_array_size(merges) : 0;
    if (cinfer_tok_pairmap_init(&tok->merges, n_merges))
        return cinfer_error_set(c->err, CINFER_ERR_NOMEM, "%s: out of memory", c->file);
    struct tok_buf both = {0};
    rc = CINFER_OK;
    for (size_t i = 0; i < n_merges && rc == CINFER_OK; i++) {
        const char *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0;
        if ((rc = merge_sides(c, json_array_get(merges, i), i, &a, &a_len, &b, &b_len)))
            break;
        int missing = cinfer_tok_merge_add(tok, (int32_t)i, a, a_len, b, b_len);
        if (missing == CINFER_ERR_NOMEM) {
            rc = missing;
        } else if (missing > 0) {
            both.len = 0; /* the concatenation, for the message */
            if (cinfer_tok_buf_append(&both, a, a_len) || cinfer_tok_buf_append(&both, b, b_len)) {
                rc = CINFER_ERR_NOMEM;
                break;
            }
            const char *names[3] = {a, b, both.data};
            size_t lens[3] = {a_len, b_len, both.len};
            int s = missing - 1;
            rc = cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: model.merges[%zu]: expected pieces of "
                                  "model.vocab, found \"%.*s\"%s which is not in the vocabulary", c->file, i,
                                  (int)(lens[s] > 200 ? 200 : lens[s]), names[s],
                                  s == 2 ? " (the merged piece)" : "");
        }
    }
    cinfer_tok_buf_free(&both);
    if (rc == CINFER_ERR_NOMEM)
        cinfer_error_set(c->err, rc, "%s: out of memory", c->file);
    return rc;
}

/* ---- added tokens and post-processor ------------------------------------------- */
static int parse_added(struct jctx *c, const json_t *list, struct cinfer_tokenizer *tok)
{
    if (!list || json_is_null(list))
        return CINFER_OK;
    if (!json_is_array(list))
        return wrong(c, "added_tokens", "an array", list);
    tok->added = calloc(json_array_size(list) + 1, sizeof(*tok->added));
    if (!tok->added)
        return CINFER_ERR_NOMEM;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *t = json_array_get(list, i);
        char where[64];
        snprintf(where, sizeof(where), "added_tokens[%zu]", i);
        if (!json_is_object(t))
            return wrong(c, where, "an object", t);
        struct tok_added_token *a = &tok->added[tok->n_added];
        const char *content;
        int64_t id;
        int rc;
        if ((rc = get_uint(c, t, "id", where, INT32_MAX - 1, &id)) ||
            (rc = get_str(c, t, "content", where, 1, &content, &a->len)) ||
            (rc = get_bool(c, t, "special", where, 0, &a->special)) ||
            (rc = get_bool(c, t, "lstrip", where, 0, &a->lstrip)) ||
            (rc = get_bool(c, t, "rstrip", where, 0, &a->rstrip)) ||
            (rc = get_bool(c, t, "single_word", where, 0, &a->single_word)) ||
            (rc = get_bool(c, t, "normalized", where, !a->special, &a->normalized)))
            return rc;
        a->id = (int32_t)id;
        if (!(a->content = dup_n(content, a->len)))
            return CINFER_ERR_NOMEM;
        tok->n_added++;
    }
    return CINFER_OK;
}

static int push_id(int32_t **ids, size_t *n, int32_t id)
{
    int32_t *v = realloc(*ids, (*n + 1) * sizeof(*v));
    if (!v)
        return CINFER_ERR_NOMEM;
    v[(*n)++] = id;
    *ids = v;
    return CINFER_OK;
}

static int id_of_pair(struct jctx *c, const json_t *j, const char *path, const char *key, uint32_t vocab_size,
                      int32_t *id)
{
    const json_t *p = json_object_get(j, key);
    char where[512];
    snprintf(where, sizeof(where), "%s.%s", path, key);
    if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(json_array_get(p, 1)))
        return wrong(c, where, "an array [token, id]", p);
    json_int_t value = json_integer_value(json_array_get(p, 1));
    /* the id is added to every encoding, so it must name a token of the vocabulary */
    if (value < 0 || value >= (json_int_t)vocab_size)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s[1]: expected an id below %u, found %lld",
                                c->file, where, vocab_size, (long long)value);
    *id = (int32_t)value;
    return CINFER_OK;
}

static int parse_post(struct jctx *c, const json_t *j, const char *path, struct cinfer_tokenizer *tok)
{
    if (!j || json_is_null(j))
        return CINFER_OK;
    int rc;
    const char *type = type_of(c, j, path, &rc);
    if (rc)
        return rc;
    if (!strcmp(type, "ByteLevel"))
        return CINFER_OK;
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(j, "processors");
        char where[512];
        snprintf(where, sizeof(where), "%s.processors", path);
        if (!json_is_array(list))
            return wrong(c, where, "an array", list);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char item[600];
            snprintf(item, sizeof(item), "%s[%zu]", where, i);
            if ((rc = parse_post(c, json_array_get(list, i), item, tok)))
                return rc;
        }
        return CINFER_OK;
    }
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        int32_t cls, sep;
        if ((rc = id_of_pair(c, j, path, "cls", tok->vocab_size, &cls)) ||
            (rc = id_of_pair(c, j, path, "sep", tok->vocab_size, &sep)))
            return rc;
        if (push_id(&tok->prefix_ids, &tok->n_prefix, cls) || push_id(&tok->suffix_ids, &tok->n_suffix, sep))
            return CINFER_ERR_NOMEM;
        return CINFER_OK;
    }
    if (strcmp(type, "TemplateProcessing"))
        return unsupported(c, path, "a post-processor cinfer implements (TemplateProcessing, ByteLevel, "
                           "RobertaProcessing, BertProcessing, Sequence)", type);
    const json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
    char where[512];
    snprintf(where, sizeof(where), "%s.single", path);
    if (!json_is_array(single))
        return wrong(c, where, "an array", single);
    int seen_sequence = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *item = json_array_get(single, i);
        char at[600];
        snprintf(at, sizeof(at), "%s[%zu]", where, i);
        const json_t *sp = json_object_get(item, "SpecialToken");
        if (json_object_get(item, "Sequence")) {
            seen_sequence = 1;
            continue;
        }
        if (!json_is_object(sp))
            return wrong(c, at, "{\"SpecialToken\": ...} or {\"Sequence\": ...}", item);
        const char *name;
        if ((rc = get_str(c, sp, "id", at, 1, &name, NULL)))
            return rc;
        const json_t *def = json_object_get(specials, name);
        const json_t *ids = json_object_get(def, "ids");
        if (!json_is_array(ids))
            return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s.special_tokens[\"%s\"].ids: expected "
                                    "an array of ids for the template's special token, found %s", c->file,
                                    path, name, ids ? jtype(ids) : "nothing");
        for (size_t k = 0; k < json_array_size(ids); k++) {
            const json_t *v = json_array_get(ids, k);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= (json_int_t)tok->vocab_size)
                return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s.special_tokens[\"%s\"].ids[%zu]: "
                                        "expected an id below %u, found %s", c->file, path, name, k,
                                        tok->vocab_size, jtype(v));
            int32_t id = (int32_t)json_integer_value(v);
            if (seen_sequence ? push_id(&tok->suffix_ids, &tok->n_suffix, id)
                              : push_id(&tok->prefix_ids, &tok->n_prefix, id))
                return CINFER_ERR_NOMEM;
        }
    }
    return CINFER_OK;
}

/* ---- tokenizer_config.json ----------------------------------------------------- */
static int config_token(struct jctx *c, const json_t *cfg, const char *key, const struct cinfer_tokenizer *tok,
                        int32_t *id)
{
    const json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v))
        return CINFER_OK;
    const char *s = NULL;
    size_t n = 0;
    if (json_is_string(v)) {
        s = json_string_value(v);
        n = json_string_length(v);
    } else if (json_is_object(v)) {
        int rc = get_str(c, v, "content", key, 1, &s, &n);
        if (rc)
            return rc;
    } else {
        return wrong(c, key, "a string or an object with \"content\"", v);
    }
    int32_t found = cinfer_tok_strmap_get(&tok->piece_ids, s, n);
    if (found < 0)
        for (size_t i = 0; i < tok->n_added; i++)
            if (tok->added[i].len == n && !memcmp(tok->added[i].content, s, n))
                found = tok->added[i].id;
    if (found < 0)
        return cinfer_error_set(c->err, CINFER_ERR_PARSE, "%s: %s: expected a token of the vocabulary, found "
                                "\"%.*s\" which is not one", c->file, key, (int)(n > 200 ? 200 : n), s);
    *id = found;
    return CINFER_OK;
}

static void drop_id(int32_t *ids, size_t *n, int32_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (ids[i] != id)
            ids[k++] = ids[i];
    *n = k;
}

static int parse_config(struct jctx *c, const json_t *cfg, struct cinfer_tokenizer *tok)
{
    if (!json_is_object(cfg))
        return wrong(c, "(top level)", "an object", cfg);
    int rc;
    struct cinfer_tokenizer_info *info = &tok->info;
    if ((rc = config_token(c, cfg, "bos_token", tok, &info->bos_id)) ||
        (rc = config_token(c, cfg, "eos_token", tok, &info->eos_id)) ||
        (rc = config_token(c, cfg, "pad_token", tok, &info->pad_id)) ||
        (rc = config_token(c, cfg, "unk_token", tok, &tok->unk_id)))
        return rc;
    const json_t *tpl = json_object_get(cfg, "chat_template");
    if (json_is_string(tpl)) {
        tok->chat_template = strdup(json_string_value(tpl));
    } else if (json_is_array(tpl)) {
        for (size_t i = 0; i < json_array_size(tpl); i++) {
            const json_t *e = json_array_get(tpl, i);
            const json_t *name = json_object_get(e, "name"), *text = json_object_get(e, "template");
            if (!json_is_string(name) || !json_is_string(text)) {
                char where[64];
                snprintf(where, sizeof(where), "chat_template[%zu]", i);
                return wrong(c, where, "an object {\"name\": string, \"template\": string}", e);
            }
            if (!strcmp(json_string_value(name), "default"))
                tok->chat_template = strdup(json_string_value(text));
        }
    } else if (tpl && !json_is_null(tpl)) {
        return wrong(c, "chat_template", "a string or a list of {name, template}", tpl);
    }
    /* add_bos_token / add_eos_token, when present, decide (transformers' behaviour) */
    int add;
    const json_t *v;
    if ((v = json_object_get(cfg, "add_bos_token")) && !json_is_null(v)) {
        if ((rc = get_bool(c, cfg, "add_bos_token", "(top level)", 0, &add)))
            return rc;
        if (info->bos_id >= 0) {
            drop_id(tok->prefix_ids, &tok->n_prefix, info->bos_id);
            if (add) {
                int32_t *p = realloc(tok->prefix_ids, (tok->n_prefix + 1) * sizeof(*p));
                if (!p)
                    return CINFER_ERR_NOMEM;
                memmove(p + 1, p, tok->n_prefix * sizeof(*p));
                p[0] = info->bos_id;
                tok->prefix_ids = p;
                tok->n_prefix++;
            }
        }
    }
    if ((v = json_object_get(cfg, "add_eos_token")) && !json_is_null(v)) {
        if ((rc = get_bool(c, cfg, "add_eos_token", "(top level)", 0, &add)))
            return rc;
        if (info->eos_id >= 0) {
            drop_id(tok->suffix_ids, &tok->n_suffix, info->eos_id);
            if (add && push_id(&tok->suffix_ids, &tok->n_suffix, info->eos_id))
                return CINFER_ERR_NOMEM;
        }
    }
    return CINFER_OK;
}

static json_t *load_json(const char *file, int optional, size_t flags, struct cinfer_error *err, int *rc)
{
    json_error_t je;
    *rc = CINFER_OK;
    struct stat stbuf;
    if (stat(file, &stbuf) != 0) {
        if (optional && errno == ENOENT)
            return NULL;
        *rc = cinfer_error_set(err, errno == ENOENT ? CINFER_ERR_NOT_FOUND : CINFER_ERR_IO, "%s: cannot open: %s",
                               file, strerror(errno));
        return NULL;
    }
    json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | flags, &je);
    if (!root)
        *rc = cinfer_error_set(err, json_error_code(&je) == json_error_cannot_open_file ? CINFER_ERR_IO
                                                                                         : CINFER_ERR_PARSE,
                               "%s:%d:%d: %s (byte %d)", file, je.line, je.column, je.text, je.position);
    return root;
}

int cinfer_tok_load_json_folder(struct cinfer_tokenizer *tok, const char *path, struct cinfer_error *err)
{
    char file[4096], cfg_file[4096];
    struct stat st;
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (is_dir) {
        snprintf(file, sizeof(file), "%s/tokenizer.json", path);
        snprintf(cfg_file, sizeof(cfg_file), "%s/tokenizer_config.json", path);
    } else {
        snprintf(file, sizeof(file), "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(cfg_file, sizeof(cfg_file), "%.*stokenizer_config.json", slash ? (int)(slash - path + 1) : 0, path);
    }
    free(tok->source_path);
    tok->source_path = strdup(file);
    if (!tok->source_path)
        return CINFER_ERR_NOMEM;
    tok->model = TOK_MODEL_BPE;
    tok->unk_id = tok->info.bos_id = tok->info.eos_id = tok->info.pad_id = -1;
    tok->decoder.join_at = SIZE_MAX;

    int rc;
    json_t *root = load_json(file, 0, 0, err, &rc);
    if (!root)
        return rc;
    struct jctx c = {file, err};
    if (!json_is_object(root))
        rc = wrong(&c, "(top level)", "an object", root);
    if (rc == CINFER_OK)
        rc = parse_added(&c, json_object_get(root, "added_tokens"), tok);
    if (rc == CINFER_OK)
        rc = parse_normalizer(&c, json_object_get(root, "normalizer"), "normalizer", &tok->normalizer);
    if (rc == CINFER_OK)
        rc = parse_pretokenizer(&c, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", &tok->pretokenizer);
    tok->byte_level = tok->pretokenizer.byte_level;
    if (rc == CINFER_OK)
        rc = parse_model(&c, json_object_get(root, "model"), tok);
    if (rc == CINFER_OK)
        for (size_t i = 0; i < tok->n_added && rc == CINFER_OK; i++)
            if (tok->added[i].id < 0 || (uint32_t)tok->added[i].id >= tok->vocab_size)
                rc = CINFER_ERR_INTERNAL;
    if (rc == CINFER_OK)
        rc = parse_post(&c, json_object_get(root, "post_processor"), "post_processor", tok);
    if (rc == CINFER_OK)
        rc = parse_decoder(&c, json_object_get(root, "decoder"), "decoder", &tok->decoder);
    if (tok->decoder.join_at == SIZE_MAX)
        tok->decoder.join_at = tok->decoder.n;
    const json_t *decoder = json_object_get(root, "decoder");
    tok->decoder.join_with_space = !decoder || json_is_null(decoder);
    json_decref(root);
    if (rc == CINFER_ERR_NOMEM)
        return cinfer_error_set(err, rc, "%s: out of memory", file);
    if (rc)
        return rc;
    /* the template's first and last special tokens are BOS and EOS unless the config names them */
    if (tok->n_prefix)
        tok->info.bos_id = tok->prefix_ids[0];
    if (tok->n_suffix)
        tok->info.eos_id = tok->suffix_ids[tok->n_suffix - 1];
    if ((rc = cinfer_tok_finish(tok, err)))
        return rc;

    /* model_max_length is often 1e30 written as an integer: read numbers as reals here */
    json_t *cfg = load_json(cfg_file, 1, JSON_DECODE_INT_AS_REAL, err, &rc);
    if (cfg) {
        struct jctx cc = {cfg_file, err};
        rc = parse_config(&cc, cfg, tok);
        json_decref(cfg);
        if (rc == CINFER_ERR_NOMEM)
            return cinfer_error_set(err, rc, "%s: out of memory", cfg_file);
        if (rc)
            return rc;
        struct cinfer_tokenizer_info *info = &tok->info;
        info->unk_id = tok->unk_id;
        info->add_bos = info->bos_id >= 0 && tok->n_prefix && tok->prefix_ids[0] == info->bos_id;
        info->add_eos = info->eos_id >= 0 && tok->n_suffix && tok->suffix_ids[tok->n_suffix - 1] == info->eos_id;
        info->chat_template = tok->chat_template;
    }
    return rc;
}
