/* core/detokenizer/output_text.c on real vocabularies through the tokenizer plugin: the
 * output after a prompt is decode(prompt + output) past decode(prompt), by decode() of
 * the whole ids: a Metaspace tokenizer keeps the output's leading space, also after
 * special tokens that are skipped; a context the tokenizer cannot decode is left out
 * (the output reads as the start of a text); and on stories260K's byte pieces a
 * character the prompt completed is not repeated, one it left half spelled comes out
 * whole, a context cut inside a long byte run starts at a character, and a whole
 * prompt ending in a run invalid as a whole keeps it whole. The parity test checks the
 * same against the official libraries over a corpus; this one runs without them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cinfer/plugin.h"
#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "detokenizer/output_text.h"
#include "ipc/messages.h"
#include "support/runner.h"
#include "support/text_after_prompt.h"

#define PLUGIN_DIR CINFER_BINARY_DIR "/lib/cinfer/plugins"
#define METASPACE CINFER_SOURCE_DIR "/tests/data/tokenizers/tiny-metaspace"
#define STORIES CINFER_TEST_DATA_DIR "/models/stories260K.gguf"

static struct cinfer_plugin *plugin;
static struct cinfer_tokenizer_ctx ctx;

static void open_tokenizer(const char *path)
{
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, PLUGIN_DIR, &plugin, &err) == 0,
                  "loading tokenizer-bpe from %s: %s", PLUGIN_DIR, err.message);
    ctx.ops = cinfer_plugin_vtable(plugin);
    ck_assert_msg(ctx.ops->open(path, &ctx.tok, &err) == 0, "%s: %s", path, err.message);
}

static void close_tokenizer(void)
{
    ctx.ops->close(ctx.tok);
    cinfer_plugin_close(&plugin);
}

/* The output text of output[0..n_output) after a prompt whose last ids (at most the 32
 * the scheduler sends) prime the decoder, fed one id per step; *context_failed says
 * whether the context was left out. */
static char *output_text(const int32_t *prompt, size_t n_prompt, const int32_t *output, size_t n_output, int skip,
                         int *context_failed)
{
    size_t n_context = n_prompt < CINFER_IPC_MAX_PROMPT_TAIL ? n_prompt : CINFER_IPC_MAX_PROMPT_TAIL;
    struct cinfer_output_text o;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_output_text_start(&o, ctx.ops, ctx.tok, skip, prompt + n_prompt - n_context, n_context,
                                           n_prompt < CINFER_IPC_MAX_PROMPT_TAIL, &err) == 0, "%s", err.message);
    if (context_failed)
        *context_failed = o.context_failed;
    char *all = calloc(1, 1);
    size_t len = 0;
    for (size_t i = 0; i <= n_output; i++) {
        char *delta = NULL;
        size_t delta_len = 0;
        int rc = i < n_output ? cinfer_output_text_step(&o, &output[i], 1, &delta, &delta_len, &err)
                              : cinfer_output_text_finish(&o, &delta, &delta_len, &err);
        ck_assert_msg(rc == 0, "%s", err.message);
        all = realloc(all, len + delta_len + 1);
        ck_assert_ptr_nonnull(all);
        memcpy(all + len, delta, delta_len);
        len += delta_len;
        all[len] = '\0';
        free(delta);
    }
    cinfer_output_text_free(&o);
    return all;
}

/* The output text must be what decode() of the whole ids says. */
static void check(const char *what, const int32_t *prompt, size_t n_prompt, const int32_t *output, size_t n_output,
                  int skip)
{
    char *want = cinfer_test_text_after_prompt(&ctx, prompt, n_prompt, output, n_output, skip);
    char *got = output_text(prompt, n_prompt, output, n_output, skip, NULL);
    ck_assert_msg(!strcmp(got, want), "%s: output text \"%s\", decode past the prompt \"%s\"", what, got, want);
    printf("%s: \"%s\"\n", what, got);
    free(want);
    free(got);
}

START_TEST(metaspace_keeps_the_leading_space)
{
    open_tokenizer(METASPACE);
    const int32_t prompt[] = {1, 7};            /* <s> ▁a */
    const int32_t output[] = {9, 8};            /* ▁ab ab */
    check("after \"a\"", prompt, 2, output, 2, 1);
    char *got = output_text(prompt, 2, output, 2, 1, NULL);
    ck_assert_str_eq(got, " abab");
    free(got);
    got = output_text(prompt, 0, output, 2, 1, NULL); /* no prompt: the start of a text */
    ck_assert_str_eq(got, "abab");
    free(got);
    check("special tokens kept", prompt, 2, output, 2, 0);

    /* Special tokens at the prompt's end, skipped: the output still follows "a". */
    const int32_t specials[] = {7, 2, 12, 2, 1};
    check("after \"a\" and 4 skipped special tokens", specials, 5, output, 2, 1);
    check("after \"a\" and 4 special tokens kept", specials, 5, output, 2, 0);

    /* An id the tokenizer lacks in the context: decoded without the context. */
    const int32_t bad[] = {7, 99999};
    int failed = 0;
    got = output_text(bad, 2, output, 2, 1, &failed);
    ck_assert_int_eq(failed, 1);
    ck_assert_str_eq(got, "abab");
    free(got);
    close_tokenizer();
}
END_TEST

START_TEST(stories260k_byte_runs)
{
    open_tokenizer(STORIES);
    int32_t e2 = ctx.ops->piece_to_id(ctx.tok, "<0xE2>", 6), x82 = ctx.ops->piece_to_id(ctx.tok, "<0x82>", 6),
            xac = ctx.ops->piece_to_id(ctx.tok, "<0xAC>", 6);
    ck_assert(e2 > 0 && x82 > 0 && xac > 0);
    struct cinfer_token_ids the = {0}, word = {0};
    struct cinfer_error err = {0};
    ck_assert_int_eq(ctx.ops->encode(ctx.tok, "The", 3, 1, &the, &err), 0);   /* <s> ▁The */
    ck_assert_int_eq(ctx.ops->encode(ctx.tok, "and", 3, 0, &word, &err), 0);   /* ▁and (the dummy prefix) */
    ck_assert_uint_eq(word.len, 1);
    int32_t prompt[64], output[8];
    size_t n = 0;
    for (size_t i = 0; i < the.len; i++)
        prompt[n++] = the.ids[i];

    /* "The cat" -> " and a boy", the greedy answer of the issue */
    const int32_t cat[] = {1, 291, 280, 294}, boy[] = {269, 261, 268};
    check("\"The cat\"", cat, 4, boy, 3, 1);

    /* The prompt ends in a whole euro sign spelled by bytes (held until the run ends): it
     * is the prompt's, not repeated in the output. */
    prompt[n] = e2, prompt[n + 1] = x82, prompt[n + 2] = xac;
    output[0] = word.ids[0];
    check("after \"The\u20ac\" in bytes", prompt, n + 3, output, 1, 1);

    /* The prompt ends inside it: the output completes the character and has it whole
     * (decode(prompt) is "The" and two U+FFFD there, no prefix of "The\u20ac and"). */
    output[0] = xac, output[1] = word.ids[0];
    char *got = output_text(prompt, n + 2, output, 2, 1, NULL);
    ck_assert_str_eq(got, "\u20ac and");
    free(got);

    /* A run of 15 euro signs (45 ids) is longer than the 32 the detokenizer gets, which
     * start inside a character: the context starts at the next one. */
    size_t m = 0;
    prompt[m++] = 1;
    for (int k = 0; k < 15; k++)
        prompt[m++] = e2, prompt[m++] = x82, prompt[m++] = xac;
    output[0] = e2, output[1] = x82, output[2] = xac, output[3] = word.ids[0];
    check("after 15 euro signs in bytes", prompt, m, output, 4, 1);

    /* A whole prompt that ends in a run invalid as a whole, <0xC5><0x77>, carried on by
     * the output: every byte of the run reads U+FFFD, also the 'w' that alone would be
     * valid text (found by the parity test on Gemma 3's random ids). */
    int32_t c5 = ctx.ops->piece_to_id(ctx.tok, "<0xC5>", 6), x77 = ctx.ops->piece_to_id(ctx.tok, "<0x77>", 6),
            x31 = ctx.ops->piece_to_id(ctx.tok, "<0x31>", 6);
    ck_assert(c5 > 0 && x77 > 0 && x31 > 0);
    const int32_t invalid_run[] = {1, c5, x77};
    output[0] = x31, output[1] = word.ids[0];
    check("after a run invalid as a whole, skipped", invalid_run, 3, output, 2, 1);
    check("after a run invalid as a whole, kept", invalid_run, 3, output, 2, 0);
    got = output_text(invalid_run, 3, output, 2, 1, NULL);
    ck_assert_str_eq(got, "\uFFFD and");
    free(got);
    cinfer_token_ids_free(&the);
    cinfer_token_ids_free(&word);
    close_tokenizer();
}
END_TEST

static Suite *suite_output_text(void)
{
    Suite *s = suite_create("output_text");
    TCase *tc = tcase_create("output_text");
    tcase_add_test(tc, metaspace_keeps_the_leading_space);
    tcase_add_test(tc, stories260k_byte_runs);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_output_text)
