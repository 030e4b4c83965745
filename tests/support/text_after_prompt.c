#include "support/text_after_prompt.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/tokenizer.h"

int cinfer_test_boundary_models(struct cinfer_test_boundary_model *out)
{
    int n = 0;
    out[n++] = (struct cinfer_test_boundary_model){
        .path = CINFER_TEST_DATA_DIR "/models/stories260K.gguf",
        .name = "stories260K",
        .prompts = {"The cat", "Once upon a ti", "Lily liked to pla", "One day, a little gir"},
        .chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}",
    };
    out[n++] = (struct cinfer_test_boundary_model){
        .path = CINFER_SOURCE_DIR "/models/default",
        .name = "models/default",
        .prompts = {"And God said", "In the begin", "And the LORD spa", "And it came to pa"},
    };
    return n;
}

char *cinfer_test_text_past(const char *prompt_text, const char *all_text)
{
    size_t n = strlen(prompt_text);
    ck_assert_msg(strncmp(all_text, prompt_text, n) == 0,
                  "decode(prompt) \"%s\" is not a prefix of decode(prompt + output) \"%s\"", prompt_text, all_text);
    char *rest = strdup(all_text + n);
    ck_assert_ptr_nonnull(rest);
    return rest;
}

char *cinfer_test_text_after_prompt(const struct cinfer_tokenizer_ctx *tok, const int32_t *prompt, size_t n_prompt,
                                    const int32_t *output, size_t n_output, int skip_special)
{
    int32_t *all = malloc((n_prompt + n_output + 1) * sizeof *all);
    ck_assert_ptr_nonnull(all);
    memcpy(all, prompt, n_prompt * sizeof *all);
    memcpy(all + n_prompt, output, n_output * sizeof *all);
    char *prompt_text = NULL, *all_text = NULL;
    size_t len;
    struct cinfer_error err = {0};
    ck_assert_msg(tok->ops->decode(tok->tok, prompt, n_prompt, skip_special, &prompt_text, &len, &err) == 0, "%s",
                  err.message);
    ck_assert_msg(tok->ops->decode(tok->tok, all, n_prompt + n_output, skip_special, &all_text, &len, &err) == 0,
                  "%s", err.message);
    char *rest = cinfer_test_text_past(prompt_text, all_text);
    free(prompt_text);
    free(all_text);
    free(all);
    return rest;
}
