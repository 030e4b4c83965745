/* fuzz_grammar: the grammar compiler and its sources on arbitrary bytes. The first byte
 * picks the source (0: grammar text, 1: JSON Schema, 2: regular expression, 3: JSON
 * Schema through the request path, cinfer_constraint_grammar); the rest is the text.
 * Whatever compiles is then walked with a small vocabulary (every byte and some
 * multi-byte pieces), the later input bytes choosing among the allowed tokens, and
 * every step's mask is checked against the reference (replay the output on a fresh
 * matcher and try each token): a mask may neither allow a token the grammar refuses
 * nor refuse one it allows. Nothing may crash, leak, hang or read out of bounds, and
 * every refusal must say why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/constraint.h"
#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const pieces[] = {"{\"", "\":", "\",", "\"}", "}]", "true", "null", "12", "ab", " \"", "\\n", "é",
                                     "\xe6\x97", "日本", "a\"", "0}", ",\""};
enum { N_PIECES = sizeof pieces / sizeof pieces[0], VOCAB = 256 + N_PIECES };

static int vocab_bytes(void *ctx, int32_t id, const uint8_t **bytes, size_t *len)
{
    static uint8_t single[256];
    (void)ctx;
    if (id < 256) {
        single[id] = (uint8_t)id;
        *bytes = &single[id];
        *len = 1;
    } else {
        *bytes = (const uint8_t *)pieces[id - 256];
        *len = strlen(pieces[id - 256]);
    }
    return 0;
}

static struct cinfer_token_table *table(void)
{
    static struct cinfer_token_table *tt;
    struct cinfer_error err = {0};
    if (!tt && cinfer_token_table_create(VOCAB, VOCAB, vocab_bytes, NULL, &tt, &err))
        abort();
    return tt;
}

static void walk(const char *text, const uint8_t *choices, size_t n_choices)
{
    struct cinfer_grammar *g = NULL;
    struct cinfer_error err = {0};
    if (cinfer_grammar_compile_text(text, strlen(text), &g, &err)) {
        if (!err.message[0])
            abort();
        return;
    }
    struct cinfer_token_table *tt = table();
    struct cinfer_grammar_masks *m = NULL;
    if (cinfer_grammar_masks_create(g, tt, &m, &err))
        return;
    struct cinfer_grammar_matcher *mt = NULL;
    if (cinfer_grammar_matcher_create(m, &mt)) {
        cinfer_grammar_masks_unref(&m);
        return;
    }
    uint64_t bits[(VOCAB + 63) / 64];
    uint8_t out[256];
    size_t out_len = 0;
    for (size_t step = 0; step < 6 && step < n_choices; step++) {
        cinfer_grammar_matcher_fill_mask(mt, bits);
        int allowed[VOCAB], n = 0;
        for (int id = 0; id < VOCAB; id++) {
            struct cinfer_grammar_matcher *ref = NULL;
            if (cinfer_grammar_matcher_create(m, &ref))
                break;
            int ok = (out_len == 0 || cinfer_grammar_matcher_accept_bytes(ref, out, out_len) == 0) &&
                     cinfer_grammar_matcher_accept_token(ref, id) == 0;
            cinfer_grammar_matcher_free(&ref);
            if (ok != (int)(bits[id >> 6] >> (id & 63) & 1))
                abort(); /* the mask disagrees with the grammar */
            if (ok)
                allowed[n++] = id;
        }
        if (n == 0)
            break;
        int pick = allowed[choices[step] % n];
        if (cinfer_grammar_matcher_accept_token(mt, pick))
            abort();
        size_t len = tt->len[pick];
        if (out_len + len > sizeof out)
            break;
        memcpy(out + out_len, tt->bytes + tt->offset[pick], len);
        out_len += len;
    }
    cinfer_grammar_matcher_free(&mt);
    cinfer_grammar_masks_unref(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    uint8_t mode = data[0] % 4;
    /* the text ends at the first NUL; what follows chooses the walk's tokens */
    const uint8_t *body = data + 1;
    size_t n = size - 1, text_len = 0;
    while (text_len < n && body[text_len])
        text_len++;
    char *text = malloc(text_len + 1);
    if (!text)
        return 0;
    memcpy(text, body, text_len);
    text[text_len] = '\0';
    const uint8_t *choices = body + text_len + (text_len < n);
    size_t n_choices = n - text_len - (text_len < n);
    char *grammar = NULL;
    struct cinfer_error err = {0};
    int rc = 0;
    if (mode == 0) {
        grammar = strdup(text);
    } else if (mode == 1) {
        rc = cinfer_json_schema_to_grammar(text, text_len, &grammar, &err);
    } else if (mode == 2) {
        rc = cinfer_regex_to_grammar(text, text_len, &grammar, &err);
    } else {
        struct cinfer_sampling_params p = {.json_schema = text};
        rc = cinfer_constraint_grammar(&p, 1, &grammar, &err);
    }
    if (rc && !err.message[0])
        abort(); /* a refusal must say why */
    if (rc == 0 && grammar)
        walk(grammar, choices, n_choices);
    free(grammar);
    free(text);
    return 0;
}
