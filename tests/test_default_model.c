/* The embedded default model (models/default, trained by scripts/train_default_model.py):
 * a complete, small Hugging Face folder that cinfer loads and runs exactly as the numpy
 * trainer does, and whose greedy output is English.
 *
 * Independent routes to the expectation:
 *  - config.json is read here with jansson and compared with what cinfer_model_load
 *    made of it;
 *  - models/default/reference_greedy.json holds the prompt's ids (the Python BPE, which
 *    Hugging Face's tokenizers library agrees with: scripts/train/check_tokenizer.py)
 *    and the greedy ids of the numpy float64 forward over the shipped weights; the C
 *    runtime's greedy ids must equal them;
 *  - the ids are decoded here by a byte-level decoder written from tokenizer.json (and,
 *    when the tokenizer-bpe plugin is built, by the plugin too, which must agree), and
 *    the words of that text must come from the training text's word list
 *    (tests/data/default_model_words.txt). */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "support/greedy_reference.h"
#include "support/runner.h"
#include "model/model.h"
#include "model/runtime.h"

#define MODEL_DIR CINFER_SOURCE_DIR "/models/default"
#define WORDS_PATH CINFER_SOURCE_DIR "/tests/data/default_model_words.txt"
#define MAX_MODEL_FOLDER_BYTES (20L * 1000 * 1000)
#define MAX_IDS 512
#define MIN_ENGLISH_WORD_SHARE 0.90

struct id_list {
    int32_t ids[MAX_IDS];
    int n;
};

static json_t *load_json(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", MODEL_DIR, name);
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    ck_assert_msg(doc != NULL, "%s: line %d: %s", path, jerr.line, jerr.text);
    return doc;
}

static void read_ids(json_t *array, const char *what, struct id_list *out)
{
    ck_assert_msg(json_is_array(array), "reference_greedy.json: %s is not an array", what);
    ck_assert_int_le(json_array_size(array), MAX_IDS);
    out->n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(array, i, v) {
        ck_assert_msg(json_is_integer(v), "reference_greedy.json: %s[%zu] is not an integer", what, i);
        out->ids[out->n++] = (int32_t)json_integer_value(v);
    }
}

/* The reference: prompt ids, numpy greedy ids and their text. */
struct reference {
    struct id_list prompt;
    struct id_list greedy;
    char text[4096];
};

static void reference_read(struct reference *ref)
{
    json_t *doc = load_json("reference_greedy.json");
    read_ids(json_object_get(doc, "prompt_ids"), "prompt_ids", &ref->prompt);
    read_ids(json_object_get(doc, "greedy_ids"), "greedy_ids", &ref->greedy);
    const char *text = json_string_value(json_object_get(doc, "greedy_text"));
    ck_assert_msg(text != NULL, "reference_greedy.json: greedy_text is not a string");
    ck_assert_uint_lt(strlen(text), sizeof ref->text);
    strcpy(ref->text, text);
    ck_assert_int_gt(ref->prompt.n, 0);
    ck_assert_int_gt(ref->greedy.n, 0);
    json_decref(doc);
}

/* ---- a byte-level BPE decoder written from tokenizer.json ---------------------- */

/* GPT-2's bytes_to_unicode, inverted: code point -> byte, -1 for none. Printable bytes
 * map to themselves; the other 68 map to 256, 257, ... in byte order. */
static int codepoint_to_byte(uint32_t cp)
{
    static int table[256 + 68];
    static int ready;
    if (!ready) {
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            table[i] = -1;
        int extra = 0;
        for (int b = 0; b < 256; b++) {
            int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            table[printable ? b : 256 + extra++] = b;
        }
        ready = 1;
    }
    return cp < 256 + 68 ? table[cp] : -1;
}

/* Decodes one UTF-8 character of s; returns its length (0 on a malformed sequence). */
static int utf8_next(const unsigned char *s, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
        *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    return 0; /* the byte-level alphabet only uses code points below 0x800 */
}

struct byte_decoder {
    json_t *doc;
    const char **pieces; /* (vocab) id -> stored piece */
    int vocab_size;
    int eos_id;
};

static void byte_decoder_open(struct byte_decoder *d)
{
    d->doc = load_json("tokenizer.json");
    json_t *model = json_object_get(d->doc, "model");
    ck_assert_str_eq(json_string_value(json_object_get(model, "type")), "BPE");
    json_t *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(d->doc, "added_tokens");
    /* Added tokens may also be in the vocabulary: the size is the largest id + 1. */
    const char *piece;
    json_t *id;
    size_t k;
    json_t *tok;
    d->vocab_size = 0;
    json_object_foreach(vocab, piece, id) {
        if (json_integer_value(id) >= d->vocab_size)
            d->vocab_size = (int)json_integer_value(id) + 1;
    }
    json_array_foreach(added, k, tok) {
        if (json_integer_value(json_object_get(tok, "id")) >= d->vocab_size)
            d->vocab_size = (int)json_integer_value(json_object_get(tok, "id")) + 1;
    }
    ck_assert_int_gt(d->vocab_size, 256);
    d->pieces = calloc((size_t)d->vocab_size, sizeof *d->pieces);
    ck_assert_ptr_nonnull(d->pieces);
    json_object_foreach(vocab, piece, id) {
        json_int_t i = json_integer_value(id);
        ck_assert_msg(i >= 0 && i < d->vocab_size, "tokenizer.json: id %lld of %s out of range", (long long)i,
                      piece);
        d->pieces[i] = piece;
    }
    d->eos_id = -1;
    json_array_foreach(added, k, tok) {
        json_int_t i = json_integer_value(json_object_get(tok, "id"));
        ck_assert(i >= 0 && i < d->vocab_size);
        d->pieces[i] = json_string_value(json_object_get(tok, "content"));
        if (strcmp(d->pieces[i], "<|endoftext|>") == 0)
            d->eos_id = (int)i;
    }
    for (int i = 0; i < d->vocab_size; i++)
        ck_assert_msg(d->pieces[i] != NULL, "tokenizer.json: no token has id %d", i);
}

static void byte_decoder_close(struct byte_decoder *d)
{
    free(d->pieces);
    json_decref(d->doc);
}

/* Writes the text of ids into out (NUL-terminated); special tokens are written as is. */
static void byte_decode(const struct byte_decoder *d, const struct id_list *ids, char *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < ids->n; i++) {
        ck_assert_msg(ids->ids[i] >= 0 && ids->ids[i] < d->vocab_size, "id %d out of range", ids->ids[i]);
        const unsigned char *p = (const unsigned char *)d->pieces[ids->ids[i]];
        if (ids->ids[i] == d->eos_id) {
            size_t len = strlen((const char *)p);
            ck_assert_uint_lt(n + len, cap);
            memcpy(out + n, p, len);
            n += len;
            continue;
        }
        while (*p) {
            uint32_t cp;
            int len = utf8_next(p, &cp);
            int byte = len ? codepoint_to_byte(cp) : -1;
            ck_assert_msg(byte >= 0, "tokenizer.json: piece of id %d is not byte-level", ids->ids[i]);
            ck_assert_uint_lt(n + 1, cap);
            out[n++] = (char)byte;
            p += len;
        }
    }
    out[n] = '\0';
}

/* ---- English words --------------------------------------------------------------- */

struct word_list {
    char *data;
    char **words; /* sorted, as the file is */
    size_t n;
};

static int cmp_word(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void word_list_read(struct word_list *wl)
{
    FILE *f = fopen(WORDS_PATH, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", WORDS_PATH);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    wl->data = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(wl->data);
    ck_assert_int_eq(fread(wl->data, 1, (size_t)size, f), size);
    fclose(f);
    wl->data[size] = '\0';
    size_t cap = 1;
    for (long i = 0; i < size; i++)
        cap += wl->data[i] == '\n';
    wl->words = malloc(cap * sizeof *wl->words);
    ck_assert_ptr_nonnull(wl->words);
    wl->n = 0;
    for (char *line = strtok(wl->data, "\n"); line; line = strtok(NULL, "\n"))
        wl->words[wl->n++] = line;
    qsort(wl->words, wl->n, sizeof *wl->words, cmp_word);
    ck_assert_uint_gt(wl->n, 10000); /* the KJV has about 12,000 distinct words */
}

static void word_list_free(struct word_list *wl)
{
    free(wl->words);
    free(wl->data);
}

/* Share of the text's words (runs of ASCII letters, lower-cased) found in the list. */
static double english_word_share(const struct word_list *wl, const char *text, int *n_words)
{
    int known = 0;
    *n_words = 0;
    for (const char *p = text; *p;) {
        if (!isalpha((unsigned char)*p)) {
            p++;
            continue;
        }
        char word[64];
        size_t len = 0;
        while (isalpha((unsigned char)*p)) {
            if (len + 1 < sizeof word)
                word[len++] = (char)tolower((unsigned char)*p);
            p++;
        }
        word[len] = '\0';
        const char *key = word;
        (*n_words)++;
        if (bsearch(&key, wl->words, wl->n, sizeof *wl->words, cmp_word))
            known++;
        else
            printf("not in the training text's words: \"%s\"\n", word);
    }
    return *n_words ? (double)known / *n_words : 0.0;
}

/* ---- the cases ------------------------------------------------------------------ */

START_TEST(folder_is_a_small_hf_llama)
{
    static const char *const files[] = {"config.json", "generation_config.json", "model.safetensors",
                                        "tokenizer.json", "tokenizer_config.json", "README.md"};
    long total_bytes = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", MODEL_DIR, files[i]);
        ck_assert_msg(stat(path, &st) == 0, "%s is missing", path);
        total_bytes += (long)st.st_size;
    }
    printf("models/default: %ld bytes in its files\n", total_bytes);
    ck_assert_msg(total_bytes <= MAX_MODEL_FOLDER_BYTES, "models/default holds %ld bytes; the budget is %ld",
                  total_bytes, MAX_MODEL_FOLDER_BYTES);

    json_t *config = load_json("config.json");
    ck_assert_str_eq(json_string_value(json_object_get(config, "model_type")), "llama");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(config, "architectures"), 0)),
                     "LlamaForCausalLM");
    ck_assert(json_is_true(json_object_get(config, "tie_word_embeddings")));
    json_decref(config);

    json_t *tok_config = load_json("tokenizer_config.json");
    ck_assert(json_is_false(json_object_get(tok_config, "add_bos_token")));
    ck_assert_str_eq(json_string_value(json_object_get(tok_config, "eos_token")), "<|endoftext|>");
    json_decref(tok_config);
}
END_TEST

START_TEST(reference_text_decodes_and_is_english)
{
    struct reference ref;
    reference_read(&ref);
    struct byte_decoder dec;
    byte_decoder_open(&dec);
    char text[4096];
    byte_decode(&dec, &ref.greedy, text, sizeof text);
    ck_assert_str_eq(text, ref.text);

    struct word_list wl;
    word_list_read(&wl);
    int n_words;
    double share = english_word_share(&wl, text, &n_words);
    printf("numpy greedy: \"%s\": %d words, %.0f%% from the training text\n", text, n_words, 100 * share);
    ck_assert_int_ge(n_words, 10);
    ck_assert_msg(share >= MIN_ENGLISH_WORD_SHARE, "only %.0f%% of the words are English", 100 * share);

    /* The check must be able to fail: bytes that are not words are refused. */
    double noise = english_word_share(&wl, "qzx vlorp thwack ghhk the", &n_words);
    ck_assert(noise < MIN_ENGLISH_WORD_SHARE);
    word_list_free(&wl);
    byte_decoder_close(&dec);
}
END_TEST

static int json_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "config.json: %s is not an integer", key);
    return (int)json_integer_value(v);
}

static double json_num(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_number(v), "config.json: %s is not a number", key);
    return json_number_value(v);
}

START_TEST(loads_with_its_config)
{
    struct cinfer_error err = {0};
    struct cinfer_model *model = NULL;
    struct cinfer_model_load_options opts = {.show_progress = 0};
    ck_assert_msg(cinfer_model_load(MODEL_DIR, &opts, &model, &err) == 0, "%s", err.message);
    const struct cinfer_model_config *c = &model->config;
    json_t *config = load_json("config.json");
    ck_assert_str_eq(c->architecture, "llama");
    ck_assert_int_eq(c->vocab_size, json_int(config, "vocab_size"));
    ck_assert_int_eq(c->hidden_size, json_int(config, "hidden_size"));
    ck_assert_int_eq(c->intermediate_size, json_int(config, "intermediate_size"));
    ck_assert_int_eq(c->num_layers, json_int(config, "num_hidden_layers"));
    ck_assert_int_eq(c->num_heads, json_int(config, "num_attention_heads"));
    ck_assert_int_eq(c->num_kv_heads, json_int(config, "num_key_value_heads"));
    ck_assert_int_eq(c->head_dim, c->hidden_size / c->num_heads);
    ck_assert_int_eq(c->max_position_embeddings, json_int(config, "max_position_embeddings"));
    ck_assert_float_eq_tol(c->rms_norm_eps, json_num(config, "rms_norm_eps"), 1e-12);
    ck_assert_float_eq_tol(c->rope_theta, json_num(config, "rope_theta"), 1e-3);
    ck_assert_int_eq(c->rope_interleaved, 0);
    ck_assert_int_eq(c->rope_scaling.type, CINFER_ROPE_SCALING_NONE);
    ck_assert_int_eq(c->tie_word_embeddings, 1);
    ck_assert_int_eq(c->attention_bias, 0);
    ck_assert_int_eq(c->qk_norm, 0);
    ck_assert_int_eq(c->n_eos, 1);
    ck_assert_int_eq(c->eos_token_ids[0], json_int(config, "eos_token_id"));
    ck_assert_ptr_eq(model->lm_head.data, model->tok_embeddings.data);
    ck_assert_int_eq(model->tok_embeddings.dtype, CINFER_DTYPE_F32);
    ck_assert_int_eq(model->tok_embeddings.rows, c->vocab_size);
    ck_assert_int_eq(model->tok_embeddings.cols, c->hidden_size);
    json_decref(config);
    cinfer_model_free(&model);
    ck_assert_ptr_null(model);
}
END_TEST

static void print_ids(const char *label, const struct id_list *l)
{
    printf("%s:", label);
    for (int i = 0; i < l->n; i++)
        printf("%s%d", i ? "," : " ", l->ids[i]);
    printf("\n");
}

/* Greedy decoding with the runtime alone (tests/support/greedy_reference.c): prefill
 * the prompt, then one token per call, exactly n_new tokens. */
static void runtime_greedy(const struct id_list *prompt, int n_new, struct id_list *out)
{
    ck_assert_int_le(prompt->n + n_new, MAX_IDS);
    out->n = cinfer_test_greedy_reference(MODEL_DIR, prompt->ids, prompt->n, n_new, 0, out->ids);
    ck_assert_int_eq(out->n, n_new);
}

/* The tokenizer-bpe plugin when it is built: its prompt ids and decoded text must
 * agree with the reference. Returns 0 when it was checked, -1 when absent. */
static int check_with_plugin(const char *prompt_text, const struct reference *ref, const struct id_list *ids,
                             const char *expected_text)
{
    struct cinfer_error err = {0};
    struct cinfer_plugin *plugin = NULL;
    if (cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, CINFER_BINARY_DIR "/lib/cinfer/plugins",
                           &plugin, &err) != 0) {
        printf("tokenizer-bpe plugin not used: %s\n", err.message);
        return -1;
    }
    const struct cinfer_tokenizer_ops *ops = cinfer_plugin_vtable(plugin);
    struct cinfer_tokenizer *tok = NULL;
    ck_assert_msg(ops->open(MODEL_DIR, &tok, &err) == 0, "tokenizer-bpe cannot open %s: %s", MODEL_DIR,
                  err.message);
    struct cinfer_token_ids enc = {0};
    ck_assert_msg(ops->encode(tok, prompt_text, strlen(prompt_text), 1, &enc, &err) == 0, "%s", err.message);
    ck_assert_int_eq((int)enc.len, ref->prompt.n);
    ck_assert_mem_eq(enc.ids, ref->prompt.ids, enc.len * sizeof(int32_t));
    cinfer_token_ids_free(&enc);
    char *text = NULL;
    size_t text_len = 0;
    ck_assert_msg(ops->decode(tok, ids->ids, (size_t)ids->n, 0, &text, &text_len, &err) == 0, "%s", err.message);
    ck_assert_str_eq(text, expected_text);
    printf("tokenizer-bpe plugin: prompt ids and decoded text agree\n");
    free(text);
    ops->close(tok);
    cinfer_plugin_close(&plugin);
    return 0;
}

START_TEST(greedy_matches_numpy_and_is_english)
{
    struct reference ref;
    reference_read(&ref);
    struct id_list greedy;
    runtime_greedy(&ref.prompt, ref.greedy.n, &greedy);
    print_ids("numpy greedy ids  ", &ref.greedy);
    print_ids("runtime greedy ids", &greedy);
    ck_assert_int_eq(greedy.n, ref.greedy.n);
    for (int i = 0; i < greedy.n; i++)
        ck_assert_msg(greedy.ids[i] == ref.greedy.ids[i], "greedy id %d: runtime %d, numpy %d", i, greedy.ids[i],
                      ref.greedy.ids[i]);

    struct byte_decoder dec;
    byte_decoder_open(&dec);
    char text[4096];
    byte_decode(&dec, &greedy, text, sizeof text);
    struct word_list wl;
    word_list_read(&wl);
    int n_words;
    double share = english_word_share(&wl, text, &n_words);
    printf("runtime greedy: \"%s\": %d words, %.0f%% from the training text\n", text, n_words, 100 * share);
    ck_assert_msg(share >= MIN_ENGLISH_WORD_SHARE, "only %.0f%% of the words are English", 100 * share);

    json_t *doc = load_json("reference_greedy.json");
    check_with_plugin(json_string_value(json_object_get(doc, "prompt")), &ref, &greedy, text);
    json_decref(doc);
    word_list_free(&wl);
    byte_decoder_close(&dec);
}
END_TEST


static Suite *suite_default_model(void)
{
    Suite *s = suite_create("default_model");
    TCase *tc = tcase_create("folder");
    tcase_add_test(tc, folder_is_a_small_hf_llama);
    tcase_add_test(tc, reference_text_decodes_and_is_english);
    suite_add_tcase(s, tc);
    TCase *rt = tcase_create("runtime");
    tcase_set_timeout(rt, 600);
    tcase_add_test(rt, loads_with_its_config);
    tcase_add_test(rt, greedy_matches_numpy_and_is_english);
    suite_add_tcase(s, rt);
    return s;
}

CINFER_TEST_MAIN(suite_default_model)
