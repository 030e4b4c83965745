/* Tokenizer parity: the tokenizer-bpe plugin against the official libraries.
 *
 * The ctest fixture tokenizer_reference (tests/reference/make_tokenizer_reference.sh)
 * encodes a seeded corpus of ~2,650 strings with Hugging Face's `tokenizers` (GPT-2,
 * Llama 3, Qwen3, Mistral, Gemma 2, Gemma 3, gpt-oss, Mistral Nemo tokenizer.json) and
 * with SentencePiece (the Llama 2 model, which cinfer reads from a vocabulary-only
 * GGUF), and writes the ids and decoded text.
 * For every tokenizer and every string this test checks, through the loaded plugin:
 *   - encode(text, add_special=0) and (add_special=1) give the reference ids;
 *   - decode(reference ids) gives the reference text, with and without special tokens;
 *   - decode(encode(text)) == text wherever the reference library round-trips too;
 *   - decode of random id sequences (broken UTF-8 byte runs, specials anywhere) gives
 *     the reference text, with and without special tokens;
 *   - the incremental decoder's deltas (one id per step, and chunks with skip_special)
 *     concatenate to decode();
 *   - the detokenizer's output text after a prompt (core/detokenizer/output_text.c,
 *     primed with the prompt's last CINFER_IPC_MAX_PROMPT_TAIL ids as the scheduler
 *     sends them), for every string, random id sequence and prompt ending in special
 *     tokens split into prompt and output at up to 16 points, with and without special
 *     tokens, one id per step and in chunks: it is the reference's decode(all) past the
 *     reference's decode(prompt) wherever that is a prefix of decode(all), and past
 *     the characters the two share where it is not (a prompt ending mid-character);
 *   - piece_to_id(id_to_piece(id)) == id over the vocabulary;
 *   - three threads encoding the corpus at once on one tokenizer get the same ids.
 * It prints one summary line per tokenizer and the first mismatches of each kind with
 * the string and both id lists. Without node/npm/python3-sentencepiece, or without the
 * plugin in this build, it exits 77 (ctest SKIP_RETURN_CODE) and says why. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer/plugin.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "detokenizer/output_text.h"
#include "ipc/messages.h"
#include "support/runner.h"

#define REFERENCE_DIR CINFER_BINARY_DIR "/tokenizer-reference"
#define PLUGIN_DIR CINFER_BINARY_DIR "/lib/cinfer/plugins"
#define SKIP_EXIT_CODE 77
#define MISMATCHES_SHOWN 3    /* per kind of check and tokenizer */
#define TEXT_SHOWN_BYTES 160  /* of a mismatching string */
#define IDS_SHOWN 12          /* ids printed from the first difference on */
#define MAX_REASONS 4

static const char *const tokenizer_names[] = {"gpt2",   "llama3", "qwen3",        "mistral",   "gemma2",
                                              "gemma3", "gptoss", "mistral_nemo", "llama2-spm"};
#define N_TOKENIZERS (sizeof tokenizer_names / sizeof tokenizer_names[0])

/* ---- printing ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not valid there. */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3;
        lo = s[0] == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
        hi = s[0] == 0xED ? 0x9F : 0xBF; /* no surrogates */
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4;
        lo = s[0] == 0xF0 ? 0x90 : 0x80;
        hi = s[0] == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Writes text as a C-ish literal: valid UTF-8 kept, control and invalid bytes escaped,
 * cut after max_bytes. */
static void print_text(const char *text, size_t len, size_t max_bytes)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t shown = len < max_bytes ? len : max_bytes;
    putchar('"');
    for (size_t i = 0; i < shown;) {
        size_t n = utf8_sequence_length(s + i, len - i);
        if (n > 1) {
            fwrite(s + i, 1, n, stdout);
            i += n;
            continue;
        }
        unsigned char c = s[i++];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (n == 0 || c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
    if (shown < len)
        printf("... (%zu bytes)", len);
}

static size_t first_difference(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

/* Prints ids[from..from+IDS_SHOWN) with the plugin's pieces, e.g. "1917:Ġworld". */
static void print_ids(const char *label, const struct cinfer_tokenizer_ops *ops,
                      const struct cinfer_tokenizer *tok, const int32_t *ids, size_t n, size_t from)
{
    printf("      %s (%zu ids, from #%zu):", label, n, from);
    for (size_t i = from; i < n && i < from + IDS_SHOWN; i++) {
        const char *piece = ops->id_to_piece(tok, ids[i]);
        printf(" %d", ids[i]);
        if (piece != NULL) {
            putchar(':');
            print_text(piece, strlen(piece), 24);
        }
    }
    if (from + IDS_SHOWN < n)
        printf(" ...");
    putchar('\n');
}

/* ---- the reference file -------------------------------------------------------------- */

struct reference {
    json_t *root;
    json_t *cases;   /* array of case objects */
    const char *path; /* what the plugin opens */
};

/* 1 and a reason when this tokenizer's reference could not be made. */
static int tokenizer_skipped(const char *name, char *why, size_t why_bytes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.SKIP", REFERENCE_DIR, name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(why, 1, why_bytes - 1, f);
    fclose(f);
    why[n] = '\0';
    why[strcspn(why, "\n")] = '\0';
    return 1;
}

static void reference_load(struct reference *ref, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.expected.json", REFERENCE_DIR, name);
    json_error_t jerr;
    ref->root = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(ref->root != NULL, "%s: line %d: %s (run the tokenizer_reference fixture)",
                  path, jerr.line, jerr.text);
    ref->cases = json_object_get(ref->root, "cases");
    ref->path = json_string_value(json_object_get(ref->root, "path"));
    ck_assert_msg(json_is_array(ref->cases) && ref->path != NULL,
                  "%s: expected an object with \"cases\" (array) and \"path\" (string)", path);
}

/* The case's input bytes: "text" as is, or "hex" decoded (invalid UTF-8 cases). */
static char *case_input(const json_t *c, size_t *len)
{
    const json_t *text = json_object_get(c, "text");
    if (text != NULL) {
        *len = json_string_length(text);
        char *copy = malloc(*len + 1);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, json_string_value(text), *len + 1);
        return copy;
    }
    const char *hex = json_string_value(json_object_get(c, "hex"));
    ck_assert_msg(hex != NULL, "reference case has neither \"text\" nor \"hex\"");
    *len = strlen(hex) / 2;
    char *bytes = malloc(*len + 1);
    ck_assert_ptr_nonnull(bytes);
    for (size_t i = 0; i < *len; i++) {
        unsigned int b;
        ck_assert_msg(sscanf(hex + 2 * i, "%2x", &b) == 1, "bad hex in reference: %s", hex);
        bytes[i] = (char)b;
    }
    bytes[*len] = '\0';
    return bytes;
}

static void ids_from_json(const json_t *arr, struct cinfer_token_ids *out)
{
    out->len = 0;
    ck_assert_msg(json_is_array(arr), "reference ids are not an array");
    ck_assert_int_eq(cinfer_token_ids_reserve(out, json_array_size(arr) + 1), CINFER_OK);
    for (size_t i = 0; i < json_array_size(arr); i++)
        out->ids[out->len++] = (int32_t)json_integer_value(json_array_get(arr, i));
}

/* ---- counting ------------------------------------------------------------------------ */

enum check_kind {
    CHECK_ENCODE,          /* encode(text, 0) == ids */
    CHECK_ENCODE_SPECIAL,  /* encode(text, 1) == ids_special */
    CHECK_DECODE,          /* decode(ids, 0) == decoded */
    CHECK_DECODE_SKIP,     /* decode(ids_special, 1) == decoded_skip */
    CHECK_ROUNDTRIP,       /* decode(encode(text), 0) == text, where the reference round-trips */
    CHECK_INCREMENTAL,     /* deltas of ids, one at a time, + finish == decode(ids, 0) */
    CHECK_INCREMENTAL_SKIP, /* deltas of ids_special in chunks of 1..5, skip_special == decode(.., 1) */
    CHECK_RANDOM_DECODE,   /* decode(random ids, 0 and 1) == the reference's decoded text */
    CHECK_OUTPUT,          /* output text after a prompt == decode(all) past decode(prompt), specials kept */
    CHECK_OUTPUT_SKIP,     /* the same with skip_special */
    CHECK_OUTPUT_DEPARTS,  /* where decode(prompt) is no prefix of decode(all): past what they share */
    CHECK_VOCAB,           /* piece_to_id(id_to_piece(id)) == id, reference ids < vocab_size */
    CHECK_ERRORS,          /* a plugin call failed */
    N_CHECKS
};
static const char *const check_names[N_CHECKS] = {
    "encode", "encode+special", "decode", "decode skip_special", "round trip", "incremental",
    "incremental skip_special", "decode random ids", "output after prompt", "output after prompt skip_special",
    "output where the prompt's text is no prefix", "vocabulary", "errors",
};

struct tally {
    uint32_t vocab_size; /* the plugin's */
    size_t compared;
    size_t random_decoded; /* random id sequences decoded */
    size_t failed[N_CHECKS];
    size_t checked[N_CHECKS]; /* of the output checks: splits compared (each one id per step and chunked) */
    size_t split_prompts;     /* strings and id sequences split into prompt and output */
    size_t splits_no_expectation; /* the reference has none (see check_splits) */
    size_t splits_long_run;       /* no prefix, and a byte run longer than the context (see check_splits) */
    size_t roundtrip_checked;
    const char *reasons[MAX_REASONS]; /* why the reference itself does not round-trip */
    size_t reason_count[MAX_REASONS];
};

/* Counts a failure; returns 1 when it is among the first few, to be shown. */
static int tally_fail(struct tally *t, enum check_kind kind)
{
    return ++t->failed[kind] <= MISMATCHES_SHOWN;
}

static void tally_reason(struct tally *t, const char *why)
{
    for (int i = 0; i < MAX_REASONS; i++) {
        if (t->reasons[i] == NULL)
            t->reasons[i] = why;
        if (strcmp(t->reasons[i], why) == 0) {
            t->reason_count[i]++;
            return;
        }
    }
}

/* ---- the checks of one case ---------------------------------------------------------- */

struct plugin_tokenizer {
    struct cinfer_plugin *plugin;
    const struct cinfer_tokenizer_ops *ops;
    struct cinfer_tokenizer *tok;
    const char *name;
};

static void show_failure(const struct plugin_tokenizer *pt, enum check_kind kind, size_t case_index,
                         const char *text, size_t len)
{
    printf("  %s: %s mismatch, case %zu: ", pt->name, check_names[kind], case_index);
    print_text(text, len, TEXT_SHOWN_BYTES);
    putchar('\n');
}

static void check_ids(const struct plugin_tokenizer *pt, struct tally *t, enum check_kind kind,
                      size_t case_index, const char *text, size_t len, const struct cinfer_token_ids *want)
{
    struct cinfer_token_ids got = {0};
    struct cinfer_error err = {0};
    int rc = pt->ops->encode(pt->tok, text, len, kind == CHECK_ENCODE_SPECIAL, &got, &err);
    if (rc != CINFER_OK) {
        if (tally_fail(t, CHECK_ERRORS)) {
            show_failure(pt, CHECK_ERRORS, case_index, text, len);
            printf("      encode failed: %s\n", err.message);
        }
    } else if (got.len != want->len ||
               (got.len > 0 && memcmp(got.ids, want->ids, got.len * sizeof *got.ids) != 0)) {
        if (tally_fail(t, kind)) {
            size_t at = first_difference(want->ids, want->len, got.ids, got.len);
            size_t from = at > 3 ? at - 3 : 0;
            show_failure(pt, kind, case_index, text, len);
            print_ids("reference", pt->ops, pt->tok, want->ids, want->len, from);
            print_ids("plugin   ", pt->ops, pt->tok, got.ids, got.len, from);
        }
    }
    cinfer_token_ids_free(&got);
}

/* decode(ids, skip) into a malloc'd string; NULL (and an error counted) on failure. */
static char *plugin_decode(const struct plugin_tokenizer *pt, struct tally *t, size_t case_index,
                           const struct cinfer_token_ids *ids, int skip_special, size_t *len)
{
    char *out = NULL;
    struct cinfer_error err = {0};
    if (pt->ops->decode(pt->tok, ids->ids, ids->len, skip_special, &out, len, &err) != CINFER_OK) {
        if (tally_fail(t, CHECK_ERRORS))
            printf("  %s: decode failed, case %zu: %s\n", pt->name, case_index, err.message);
        return NULL;
    }
    return out;
}

static void check_text(const struct plugin_tokenizer *pt, struct tally *t, enum check_kind kind,
                       size_t case_index, const char *text, size_t len, const char *want,
                       size_t want_len, const char *got, size_t got_len)
{
    if (got == NULL || (got_len == want_len && memcmp(got, want, got_len) == 0))
        return;
    if (tally_fail(t, kind)) {
        show_failure(pt, kind, case_index, text, len);
        printf("      reference: ");
        print_text(want, want_len, TEXT_SHOWN_BYTES);
        printf("\n      plugin:    ");
        print_text(got, got_len, TEXT_SHOWN_BYTES);
        putchar('\n');
    }
}

static int append(char **buf, size_t *len, size_t *cap, const char *more, size_t more_len)
{
    if (*len + more_len + 1 > *cap) {
        size_t cap_new = (*len + more_len + 1) * 2;
        char *grown = realloc(*buf, cap_new);
        if (grown == NULL)
            return CINFER_ERR_NOMEM;
        *buf = grown;
        *cap = cap_new;
    }
    if (more_len > 0)
        memcpy(*buf + *len, more, more_len);
    *len += more_len;
    (*buf)[*len] = '\0';
    return CINFER_OK;
}

/* Feeds ids to a fresh incremental decoder, one at a time or (chunked) in steps of
 * 1, 2, 3, 4, 5, 1, ... ids; the concatenated deltas plus finish(). */
static char *incremental_decode(const struct plugin_tokenizer *pt, const struct cinfer_token_ids *ids,
                                int skip_special, int chunked, size_t *len, struct cinfer_error *err)
{
    struct cinfer_token_decoder *dec = NULL;
    if (pt->ops->decoder_new(pt->tok, skip_special, &dec, err) != CINFER_OK)
        return NULL;
    char *all = NULL;
    size_t cap = 0;
    *len = 0;
    int rc = append(&all, len, &cap, "", 0);
    for (size_t i = 0, step = 0; rc == CINFER_OK && i <= ids->len; step++) {
        size_t n = chunked ? step % 5 + 1 : 1;
        if (n > ids->len - i)
            n = ids->len - i;
        char *delta = NULL;
        size_t delta_len = 0;
        rc = i < ids->len ? pt->ops->decoder_step(dec, &ids->ids[i], n, &delta, &delta_len, err)
                          : pt->ops->decoder_finish(dec, &delta, &delta_len, err);
        if (rc == CINFER_OK)
            rc = append(&all, len, &cap, delta, delta_len);
        free(delta);
        i += i < ids->len ? n : 1;
    }
    pt->ops->decoder_free(dec);
    if (rc != CINFER_OK) {
        free(all);
        return NULL;
    }
    return all;
}

/* The incremental decoder (one id per step without skipping, chunks with skip_special)
 * against decode() of the same ids. */
static void check_incremental(const struct plugin_tokenizer *pt, struct tally *t, enum check_kind kind,
                              size_t case_index, const char *text, size_t len,
                              const struct cinfer_token_ids *ids, const char *want, size_t want_len)
{
    int skip = kind == CHECK_INCREMENTAL_SKIP;
    size_t inc_len = 0;
    struct cinfer_error err = {0};
    char *inc = incremental_decode(pt, ids, skip, skip, &inc_len, &err);
    if (inc == NULL) {
        if (tally_fail(t, CHECK_ERRORS))
            printf("  %s: incremental decode failed, case %zu: %s\n", pt->name, case_index, err.message);
        return;
    }
    check_text(pt, t, kind, case_index, text, len, want, want_len, inc, inc_len);
    free(inc);
}

/* The detokenizer's output text for a prompt of ids[0..k) and an output of the rest:
 * cinfer_output_text primed with the prompt's last CINFER_IPC_MAX_PROMPT_TAIL ids (what
 * the scheduler sends), the output fed one id per step or in steps of 1, 2, 3, 4, 5, 1,
 * ... ids; the deltas and finish() concatenated. */
static char *output_after_prompt(const struct plugin_tokenizer *pt, const struct cinfer_token_ids *ids, size_t k,
                                 int skip_special, int chunked, size_t *len, struct cinfer_error *err)
{
    size_t n_context = k < CINFER_IPC_MAX_PROMPT_TAIL ? k : CINFER_IPC_MAX_PROMPT_TAIL;
    struct cinfer_output_text o;
    if (cinfer_output_text_start(&o, pt->ops, pt->tok, skip_special, ids->ids + k - n_context, n_context,
                                 n_context < CINFER_IPC_MAX_PROMPT_TAIL, err) != CINFER_OK)
        return NULL;
    int rc = o.context_failed ? CINFER_ERR_RANGE : CINFER_OK;
    char *all = NULL;
    size_t cap = 0;
    *len = 0;
    if (rc == CINFER_OK)
        rc = append(&all, len, &cap, "", 0);
    for (size_t i = k, step = 0; rc == CINFER_OK && i <= ids->len; step++) {
        size_t n = chunked ? step % 5 + 1 : 1;
        if (n > ids->len - i)
            n = ids->len - i;
        char *delta = NULL;
        size_t delta_len = 0;
        rc = i < ids->len ? cinfer_output_text_step(&o, &ids->ids[i], n, &delta, &delta_len, err)
                          : cinfer_output_text_finish(&o, &delta, &delta_len, err);
        if (rc == CINFER_OK)
            rc = append(&all, len, &cap, delta, delta_len);
        free(delta);
        i += i < ids->len ? n : 1;
    }
    cinfer_output_text_free(&o);
    if (rc != CINFER_OK) {
        free(all);
        return NULL;
    }
    return all;
}

/* 1 when ids[0..k) ends in a byte-fallback run ("<0xAB>" pieces; skipped special
 * tokens do not end it) that starts before the prompt ids the detokenizer gets. */
static int byte_run_longer_than_context(const struct plugin_tokenizer *pt, const struct cinfer_token_ids *ids,
                                        size_t k, int skip_special)
{
    size_t n = 0, run = 0;
    for (size_t i = k; i-- > 0; n++) {
        const char *piece = pt->ops->id_to_piece(pt->tok, ids->ids[i]);
        if (piece && strlen(piece) == 6 && !strncmp(piece, "<0x", 3) && piece[5] == '>')
            run++;
        else if (!(skip_special && pt->ops->is_special(pt->tok, ids->ids[i])))
            break;
    }
    return run > 0 && n > CINFER_IPC_MAX_PROMPT_TAIL;
}

/* Every split of ids the reference describes ([k, bytes, is_prefix]: decode(ids[0..k))
 * shares bytes of whole, all of itself when is_prefix; bytes -1 when the reference has
 * no expectation): the output text after the prompt ids[0..k) must be whole past those
 * bytes, fed one id per step and chunked. Where decode(ids[0..k)) is not a prefix (the
 * prompt ends inside a character), that holds only when the byte-fallback run the
 * prompt ends in starts within the prompt ids the detokenizer gets: such splits are
 * counted as not compared. */
static void check_splits(const struct plugin_tokenizer *pt, struct tally *t, size_t case_index, const char *label,
                         size_t label_len, const struct cinfer_token_ids *ids, int skip_special, const json_t *whole,
                         const json_t *splits)
{
    const char *whole_text = json_string_value(whole);
    size_t whole_len = json_string_length(whole);
    ck_assert_msg(whole_text != NULL && json_is_array(splits), "case %zu: reference without its splits", case_index);
    for (size_t i = 0; i < json_array_size(splits); i++) {
        const json_t *split = json_array_get(splits, i);
        size_t k = (size_t)json_integer_value(json_array_get(split, 0));
        json_int_t bytes = json_integer_value(json_array_get(split, 1));
        int is_prefix = json_integer_value(json_array_get(split, 2)) == 1;
        ck_assert_msg(k > 0 && k < ids->len && bytes <= (json_int_t)whole_len, "case %zu: split %zu is out of range",
                      case_index, i);
        if (bytes < 0) {
            t->splits_no_expectation++;
            continue;
        }
        if (!is_prefix && byte_run_longer_than_context(pt, ids, k, skip_special)) {
            t->splits_long_run++;
            continue;
        }
        size_t shared = (size_t)bytes;
        enum check_kind kind = !is_prefix ? CHECK_OUTPUT_DEPARTS : skip_special ? CHECK_OUTPUT_SKIP : CHECK_OUTPUT;
        t->checked[kind]++;
        for (int chunked = 0; chunked <= 1; chunked++) {
            size_t got_len = 0;
            struct cinfer_error err = {0};
            char *got = output_after_prompt(pt, ids, k, skip_special, chunked, &got_len, &err);
            if (got == NULL) {
                if (tally_fail(t, CHECK_ERRORS))
                    printf("  %s: output after prompt failed, case %zu, split at %zu: %s\n", pt->name, case_index, k,
                           err.message[0] ? err.message : "the prompt's ids do not decode");
                continue;
            }
            if (got_len != whole_len - shared || memcmp(got, whole_text + shared, got_len) != 0) {
                if (tally_fail(t, kind)) {
                    show_failure(pt, kind, case_index, label, label_len);
                    printf("      prompt ids [0, %zu) of %zu, %s, special tokens %s\n", k, ids->len,
                           chunked ? "output in chunks" : "output one id per step", skip_special ? "skipped" : "kept");
                    printf("      reference: ");
                    print_text(whole_text + shared, whole_len - shared, TEXT_SHOWN_BYTES);
                    printf("\n      plugin:    ");
                    print_text(got, got_len, TEXT_SHOWN_BYTES);
                    putchar('\n');
                }
            }
            free(got);
        }
    }
}

static void check_case(const struct plugin_tokenizer *pt, struct tally *t, size_t case_index, const json_t *c)
{
    size_t len;
    char *text = case_input(c, &len);
    struct cinfer_token_ids ids = {0}, ids_special = {0};
    ids_from_json(json_object_get(c, "ids"), &ids);
    ids_from_json(json_object_get(c, "ids_special"), &ids_special);
    const json_t *decoded = json_object_get(c, "decoded"), *decoded_skip = json_object_get(c, "decoded_skip");
    t->compared++;

    check_ids(pt, t, CHECK_ENCODE, case_index, text, len, &ids);
    check_ids(pt, t, CHECK_ENCODE_SPECIAL, case_index, text, len, &ids_special);

    size_t got_len = 0;
    char *got = plugin_decode(pt, t, case_index, &ids, 0, &got_len);
    check_text(pt, t, CHECK_DECODE, case_index, text, len, json_string_value(decoded),
               json_string_length(decoded), got, got_len);
    if (got != NULL)
        check_incremental(pt, t, CHECK_INCREMENTAL, case_index, text, len, &ids, got, got_len);
    free(got);

    got = plugin_decode(pt, t, case_index, &ids_special, 1, &got_len);
    check_text(pt, t, CHECK_DECODE_SKIP, case_index, text, len, json_string_value(decoded_skip),
               json_string_length(decoded_skip), got, got_len);
    if (got != NULL)
        check_incremental(pt, t, CHECK_INCREMENTAL_SKIP, case_index, text, len, &ids_special, got, got_len);
    free(got);

    check_splits(pt, t, case_index, text, len, &ids, 0, decoded, json_object_get(c, "splits"));
    check_splits(pt, t, case_index, text, len, &ids_special, 1, decoded_skip, json_object_get(c, "splits_skip"));
    t->split_prompts++;

    for (size_t i = 0; i < ids_special.len; i++) {
        if (ids_special.ids[i] < 0 || (uint32_t)ids_special.ids[i] >= t->vocab_size) {
            if (tally_fail(t, CHECK_VOCAB))
                printf("  %s: reference id %d of case %zu is outside the plugin's vocab_size %u\n",
                       pt->name, ids_special.ids[i], case_index, t->vocab_size);
            break;
        }
    }

    if (json_is_true(json_object_get(c, "roundtrip"))) {
        /* For invalid UTF-8 input the text that should come back is the repaired one,
         * which the reference decoded to. */
        struct cinfer_token_ids ours = {0};
        struct cinfer_error err = {0};
        t->roundtrip_checked++;
        if (pt->ops->encode(pt->tok, text, len, 0, &ours, &err) == CINFER_OK) {
            got = plugin_decode(pt, t, case_index, &ours, 0, &got_len);
            check_text(pt, t, CHECK_ROUNDTRIP, case_index, text, len, json_string_value(decoded),
                       json_string_length(decoded), got, got_len);
            free(got);
        }
        cinfer_token_ids_free(&ours);
    } else {
        const char *why = json_string_value(json_object_get(c, "why_no_roundtrip"));
        tally_reason(t, why != NULL ? why : "unknown");
    }
    cinfer_token_ids_free(&ids);
    cinfer_token_ids_free(&ids_special);
    free(text);
}

/* A random id sequence (ids no encoder made: broken UTF-8 byte runs, specials anywhere):
 * decode with and without special tokens against the reference, and the incremental
 * decoder against decode(). */
static void check_decode_case(const struct plugin_tokenizer *pt, struct tally *t, size_t case_index, const json_t *c,
                              int boundary)
{
    struct cinfer_token_ids ids = {0};
    ids_from_json(json_object_get(c, "ids"), &ids);
    char label[256];
    size_t used = (size_t)snprintf(label, sizeof label, boundary ? "prompt ending in special tokens, ids" : "random ids");
    for (size_t i = 0; i < ids.len && used < sizeof label; i++)
        used += (size_t)snprintf(label + used, sizeof label - used, " %d", ids.ids[i]);
    size_t label_len = used < sizeof label ? used : sizeof label - 1;
    check_splits(pt, t, case_index, label, label_len, &ids, 0, json_object_get(c, "decoded"),
                 json_object_get(c, "splits"));
    check_splits(pt, t, case_index, label, label_len, &ids, 1, json_object_get(c, "decoded_skip"),
                 json_object_get(c, "splits_skip"));
    t->split_prompts++;
    if (boundary) {
        cinfer_token_ids_free(&ids);
        return;
    }
    t->random_decoded++;
    for (int skip = 0; skip <= 1; skip++) {
        const json_t *want = json_object_get(c, skip ? "decoded_skip" : "decoded");
        size_t got_len = 0;
        char *got = plugin_decode(pt, t, case_index, &ids, skip, &got_len);
        check_text(pt, t, CHECK_RANDOM_DECODE, case_index, label, label_len, json_string_value(want),
                   json_string_length(want), got, got_len);
        if (got != NULL)
            check_incremental(pt, t, skip ? CHECK_INCREMENTAL_SKIP : CHECK_INCREMENTAL, case_index, label,
                              label_len, &ids, got, got_len);
        free(got);
    }
    cinfer_token_ids_free(&ids);
}

/* ---- the test ------------------------------------------------------------------------ */

static void plugin_tokenizer_open(struct plugin_tokenizer *pt, const char *name, const char *path)
{
    struct cinfer_error err = {0};
    pt->name = name;
    int rc = cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, PLUGIN_DIR, &pt->plugin, &err);
    ck_assert_msg(rc == CINFER_OK, "loading plugin tokenizer-bpe from %s: %s", PLUGIN_DIR, err.message);
    pt->ops = cinfer_plugin_vtable(pt->plugin);
    rc = pt->ops->open(path, &pt->tok, &err);
    ck_assert_msg(rc == CINFER_OK, "%s: opening %s: %s", name, path, err.message);
}

static void plugin_tokenizer_close(struct plugin_tokenizer *pt)
{
    pt->ops->close(pt->tok);
    cinfer_plugin_close(&pt->plugin);
}

/* Every stored piece maps back to its id (the plugin's own tables agree). */
static void check_vocabulary(const struct plugin_tokenizer *pt, struct tally *t)
{
    struct cinfer_tokenizer_info info;
    pt->ops->info(pt->tok, &info);
    t->vocab_size = info.vocab_size;
    for (uint32_t id = 0; id < info.vocab_size; id++) {
        const char *piece = pt->ops->id_to_piece(pt->tok, (int32_t)id);
        if (piece == NULL)
            continue; /* a hole in the id space */
        int32_t back = pt->ops->piece_to_id(pt->tok, piece, strlen(piece));
        if (back != (int32_t)id && tally_fail(t, CHECK_VOCAB)) {
            printf("  %s: piece_to_id(id_to_piece(%u) = ", pt->name, id);
            print_text(piece, strlen(piece), 40);
            printf(") = %d\n", back);
        }
    }
}

START_TEST(parity_with_reference)
{
    const char *name = tokenizer_names[_i];
    char why[512];
    if (tokenizer_skipped(name, why, sizeof why)) {
        printf("parity %-10s: skipped: %s\n", name, why);
        return;
    }
    struct reference ref;
    reference_load(&ref, name);
    struct plugin_tokenizer pt;
    plugin_tokenizer_open(&pt, name, ref.path);

    struct tally t = {0};
    check_vocabulary(&pt, &t);
    for (size_t i = 0; i < json_array_size(ref.cases); i++)
        check_case(&pt, &t, i, json_array_get(ref.cases, i));
    const json_t *decode_cases = json_object_get(ref.root, "decode_cases");
    for (size_t i = 0; i < json_array_size(decode_cases); i++)
        check_decode_case(&pt, &t, i, json_array_get(decode_cases, i), 0);
    const json_t *boundary_cases = json_object_get(ref.root, "boundary_cases");
    for (size_t i = 0; i < json_array_size(boundary_cases); i++)
        check_decode_case(&pt, &t, i, json_array_get(boundary_cases, i), 1);

    size_t failed = 0;
    printf("parity %-10s: %zu strings and %zu random id sequences compared (%s), mismatches:", name,
           t.compared, t.random_decoded, json_string_value(json_object_get(ref.root, "library")));
    for (int k = 0; k < N_CHECKS; k++) {
        printf(" %s %zu%s", check_names[k], t.failed[k], k + 1 < N_CHECKS ? "," : "\n");
        failed += t.failed[k];
    }
    printf("parity %-10s: output after a prompt: %zu strings and id sequences (%zu ending in special tokens) split "
           "into prompt and output, %zu splits with special tokens kept and %zu skipped where the prompt's text is a "
           "prefix, %zu where it is not, each fed one id per step and in chunks; not compared, the prompt ending "
           "inside a character: %zu where the reference has no expectation, %zu of a byte run longer than the "
           "context\n", name, t.split_prompts, json_array_size(boundary_cases), t.checked[CHECK_OUTPUT],
           t.checked[CHECK_OUTPUT_SKIP], t.checked[CHECK_OUTPUT_DEPARTS], t.splits_no_expectation, t.splits_long_run);
    printf("parity %-10s: round trip checked on %zu; the reference itself does not round-trip %zu:",
           name, t.roundtrip_checked, t.compared - t.roundtrip_checked);
    for (int i = 0; i < MAX_REASONS && t.reasons[i] != NULL; i++)
        printf(" %zu (%s)", t.reason_count[i], t.reasons[i]);
    putchar('\n');
    fflush(stdout);

    ck_assert_msg(failed == 0, "%s: %zu mismatches against %s (details above)", name, failed, ref.path);
    plugin_tokenizer_close(&pt);
    json_decref(ref.root);
}
END_TEST

/* encode() is promised safe from many threads at once on one tokenizer: several threads
 * encode the whole corpus (add_special 1) at the same time and must each get the
 * reference ids. */
#define ENCODE_THREADS 3

struct encode_worker {
    const struct plugin_tokenizer *pt;
    const json_t *cases;
    size_t first_case; /* threads start at different places, so they overlap in time */
    size_t mismatches;
    size_t errors;
};

static void *encode_worker_run(void *arg)
{
    struct encode_worker *w = arg;
    size_t n = json_array_size(w->cases);
    struct cinfer_token_ids got = {0};
    for (size_t k = 0; k < n; k++) {
        const json_t *c = json_array_get(w->cases, (w->first_case + k) % n);
        size_t len;
        char *text = case_input(c, &len);
        const json_t *want = json_object_get(c, "ids_special");
        struct cinfer_error err = {0};
        got.len = 0;
        if (w->pt->ops->encode(w->pt->tok, text, len, 1, &got, &err) != CINFER_OK) {
            w->errors++;
        } else {
            int same = got.len == json_array_size(want);
            for (size_t i = 0; same && i < got.len; i++)
                same = got.ids[i] == (int32_t)json_integer_value(json_array_get(want, i));
            w->mismatches += !same;
        }
        free(text);
    }
    cinfer_token_ids_free(&got);
    return NULL;
}

START_TEST(encode_from_threads)
{
    const char *name = tokenizer_names[_i];
    char why[512];
    if (tokenizer_skipped(name, why, sizeof why)) {
        printf("threads %-10s: skipped: %s\n", name, why);
        return;
    }
    struct reference ref;
    reference_load(&ref, name);
    struct plugin_tokenizer pt;
    plugin_tokenizer_open(&pt, name, ref.path);
    struct encode_worker workers[ENCODE_THREADS];
    pthread_t threads[ENCODE_THREADS];
    for (int i = 0; i < ENCODE_THREADS; i++) {
        workers[i] = (struct encode_worker){&pt, ref.cases, i * json_array_size(ref.cases) / ENCODE_THREADS, 0, 0};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, encode_worker_run, &workers[i]), 0);
    }
    size_t mismatches = 0, errors = 0;
    for (int i = 0; i < ENCODE_THREADS; i++) {
        pthread_join(threads[i], NULL);
        mismatches += workers[i].mismatches;
        errors += workers[i].errors;
    }
    printf("threads %-10s: %d threads x %zu strings encoded at once: %zu mismatches, %zu errors\n", name,
           ENCODE_THREADS, json_array_size(ref.cases), mismatches, errors);
    plugin_tokenizer_close(&pt);
    json_decref(ref.root);
    ck_assert_msg(mismatches == 0 && errors == 0, "%s: concurrent encode gave %zu mismatches, %zu errors",
                  name, mismatches, errors);
}
END_TEST

static Suite *suite_tokenizer_parity(void)
{
    Suite *s = suite_create("tokenizer_parity");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, parity_with_reference, 0, (int)N_TOKENIZERS);
    tcase_add_loop_test(tc, encode_from_threads, 0, (int)N_TOKENIZERS);
    suite_add_tcase(s, tc);
    return s;
}

/* Why the whole test cannot run here, or NULL. */
static const char *skip_reason(char *buf, size_t buf_bytes)
{
#ifndef CINFER_PARITY_HAVE_PLUGIN
    snprintf(buf, buf_bytes, "plugins/tokenizer-bpe is not part of this build (or plugins are static)");
    return buf;
#else
    FILE *f = fopen(REFERENCE_DIR "/SKIP", "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, buf_bytes - 1, f);
        fclose(f);
        buf[n] = '\0';
        return buf;
    }
    if (access(REFERENCE_DIR "/corpus.json", R_OK) != 0) {
        snprintf(buf, buf_bytes, "%s/corpus.json is missing: run the tests through ctest, whose "
                 "tokenizer_reference fixture makes it", REFERENCE_DIR);
        return buf;
    }
    /* With some references missing the others still run (and the missing ones say so);
     * with none at all there is nothing to test. */
    size_t used = 0;
    for (size_t i = 0; i < N_TOKENIZERS; i++) {
        char why[256];
        if (!tokenizer_skipped(tokenizer_names[i], why, sizeof why))
            return NULL;
        used += (size_t)snprintf(buf + used, used < buf_bytes ? buf_bytes - used : 0, "%s%s: %s",
                                 i ? "; " : "", tokenizer_names[i], why);
        if (used >= buf_bytes)
            used = buf_bytes - 1;
    }
    return buf;
#endif
}

int main(void)
{
    char why[512];
    setvbuf(stdout, NULL, _IOLBF, 0); /* the forked test's lines appear in order */
    if (skip_reason(why, sizeof why) != NULL) {
        printf("test_tokenizer_parity: SKIP: %s\n", why);
        return SKIP_EXIT_CODE;
    }
    return cinfer_test_run_suite(suite_tokenizer_parity());
}
