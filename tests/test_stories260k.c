/* stories260K end to end: a real trained model (Karpathy's TinyStories, GGUF F32 from
 * llama.cpp's converter) must write exactly what llama.cpp writes, greedy, 48 new tokens
 * after "Once upon a time" with BOS (quoted in shared/models/README.md).
 *
 * Two independent routes to the expectation meet here:
 *  - the fixture stories260k_expected (tests/reference/stories260k_expected.py) derives
 *    the prompt's ids by SentencePiece-BPE merging over the GGUF vocabulary and the
 *    greedy ids with the float64 numpy reference, and checks their text against
 *    llama.cpp's; this test then requires the C runtime's greedy ids to equal them;
 *  - when the tokenizer-bpe plugin is built, it encodes the prompt (must equal the
 *    python ids) and decodes the runtime's output (must equal llama.cpp's text).
 * Skips when the model is absent, or when neither python with numpy nor the plugin is
 * there to say what the prompt's ids are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "model/model.h"
#include "model/runtime.h"
#include "support/greedy_reference.h"
#include "support/runner.h"

#define SKIP_EXIT_CODE 77

#define STORIES_PATH CINFER_TEST_DATA_DIR "/models/stories260K.gguf"
#define PROMPT "Once upon a time"
#define N_NEW 48
#define MAX_IDS 128
#define TOKENIZER_SEARCH_PATH CINFER_BINARY_DIR "/lib/cinfer/plugins"
/* shared/models/README.md: llama.cpp, greedy, 48 new tokens, BOS added. */
#define LLAMA_CPP_TEXT                                                                          \
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the " \
    "park. One day, she saw a big, red ball. She wanted to play with it,"

struct id_list {
    int32_t ids[MAX_IDS];
    int n;
};

/* "1,403,407" -> ids; returns 0, or -1 on anything else. */
static int parse_ids(const char *line, struct id_list *out)
{
    out->n = 0;
    const char *p = line;
    while (*p && *p != '\n') {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || out->n == MAX_IDS || v < 0 || v > INT32_MAX)
            return -1;
        out->ids[out->n++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    return out->n > 0 ? 0 : -1;
}

/* The fixture's file: prompt ids, greedy ids. 0 when read, -1 when there is none. */
static int python_expected_read(struct id_list *prompt, struct id_list *greedy)
{
    FILE *f = fopen(CINFER_STORIES_EXPECTED, "r");
    if (!f)
        return -1;
    char line[4096];
    int ok = fgets(line, sizeof line, f) && parse_ids(line, prompt) == 0 &&
             fgets(line, sizeof line, f) && parse_ids(line, greedy) == 0;
    fclose(f);
    ck_assert_msg(ok, "%s: expected two lines of comma-separated ids", CINFER_STORIES_EXPECTED);
    return 0;
}

struct tokenizer_handle {
    struct cinfer_plugin *plugin;
    const struct cinfer_tokenizer_ops *ops;
    struct cinfer_tokenizer *tok;
};

/* Opens the tokenizer-bpe plugin on the GGUF; 0, or -1 (with the reason printed). */
static int tokenizer_open(struct tokenizer_handle *th)
{
    struct cinfer_error err = {0};
    memset(th, 0, sizeof *th);
    if (cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, TOKENIZER_SEARCH_PATH, &th->plugin,
                           &err) != 0) {
        printf("tokenizer-bpe plugin not used: %s\n", err.message);
        return -1;
    }
    th->ops = cinfer_plugin_vtable(th->plugin);
    int rc = th->ops->open(STORIES_PATH, &th->tok, &err);
    ck_assert_msg(rc == 0, "tokenizer-bpe cannot open %s: %s", STORIES_PATH, err.message);
    return 0;
}

static void tokenizer_close(struct tokenizer_handle *th)
{
    if (th->tok)
        th->ops->close(th->tok);
    cinfer_plugin_close(&th->plugin);
}

/* Greedy decoding with the runtime alone (tests/support/greedy_reference.c): prefill
 * the prompt, then one token per call, exactly n_new tokens. */
static void runtime_greedy(const struct id_list *prompt, int n_new, struct id_list *out)
{
    ck_assert_int_le(prompt->n + n_new, MAX_IDS);
    out->n = cinfer_test_greedy_reference(STORIES_PATH, prompt->ids, prompt->n, n_new, 0, out->ids);
    ck_assert_int_eq(out->n, n_new);
}

static void print_ids(const char *label, const struct id_list *l)
{
    printf("%s:", label);
    for (int i = 0; i < l->n; i++)
        printf("%s%d", i ? "," : " ", l->ids[i]);
    printf("\n");
}

START_TEST(greedy_matches_llama_cpp)
{
    struct id_list python_prompt, python_greedy;
    int have_python_ids = python_expected_read(&python_prompt, &python_greedy) == 0;
    struct tokenizer_handle th;
    struct id_list prompt = {.n = 0};
    int plugin_ok = tokenizer_open(&th) == 0;
    if (plugin_ok) {
        struct cinfer_token_ids ids = {0};
        struct cinfer_error err = {0};
        ck_assert_msg(th.ops->encode(th.tok, PROMPT, strlen(PROMPT), 1, &ids, &err) == 0, "encode: %s",
                      err.message);
        ck_assert_int_le(ids.len, MAX_IDS);
        prompt.n = (int)ids.len;
        memcpy(prompt.ids, ids.ids, ids.len * sizeof(int32_t));
        cinfer_token_ids_free(&ids);
        print_ids("prompt ids (tokenizer-bpe)", &prompt);
    }
    if (have_python_ids) {
        print_ids("prompt ids (python SentencePiece merging)", &python_prompt);
        if (plugin_ok) {
            ck_assert_msg(prompt.n == python_prompt.n &&
                              memcmp(prompt.ids, python_prompt.ids, sizeof(int32_t) * (size_t)prompt.n) == 0,
                          "tokenizer-bpe's prompt ids differ from the python SentencePiece merging's");
        }
        prompt = python_prompt;
    }

    struct id_list greedy;
    runtime_greedy(&prompt, N_NEW, &greedy);
    print_ids("runtime greedy ids", &greedy);
    if (have_python_ids) {
        print_ids("numpy reference greedy ids", &python_greedy);
        int first_diff = -1;
        for (int i = 0; i < N_NEW && first_diff < 0; i++)
            if (i >= python_greedy.n || greedy.ids[i] != python_greedy.ids[i])
                first_diff = i;
        ck_assert_msg(first_diff < 0, "runtime's greedy id %d is %d, the numpy reference's %d", first_diff,
                      greedy.ids[first_diff], first_diff < python_greedy.n ? python_greedy.ids[first_diff] : -1);
    }
    if (plugin_ok) {
        struct id_list all = prompt;
        memcpy(all.ids + all.n, greedy.ids, sizeof(int32_t) * (size_t)greedy.n);
        all.n += greedy.n;
        char *text = NULL;
        size_t text_len = 0;
        struct cinfer_error err = {0};
        ck_assert_msg(th.ops->decode(th.tok, all.ids, (size_t)all.n, 1, &text, &text_len, &err) == 0,
                      "decode: %s", err.message);
        printf("text: %s\n", text);
        ck_assert_str_eq(text, LLAMA_CPP_TEXT);
        free(text);
        tokenizer_close(&th);
    }
    fflush(stdout);
}
END_TEST

static Suite *suite_stories260k(void)
{
    Suite *s = suite_create("stories260k");
    TCase *tc = tcase_create("greedy");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, greedy_matches_llama_cpp);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    FILE *expected = fopen(CINFER_STORIES_EXPECTED, "r");
    if (expected)
        fclose(expected);
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_error err = {0};
    int have_plugin = cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, TOKENIZER_SEARCH_PATH, &plugin,
                                         &err) == 0;
    cinfer_plugin_close(&plugin);
    if (!expected && !have_plugin) {
        printf("SKIP: no prompt ids: neither %s (python with numpy) nor the tokenizer-bpe plugin (%s)\n",
               CINFER_STORIES_EXPECTED, err.message);
        return SKIP_EXIT_CODE;
    }
    return cinfer_test_run_suite(suite_stories260k());
}
