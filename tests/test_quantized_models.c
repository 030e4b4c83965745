/* Real trained models quantized by llama.cpp's own llama-quantize, in the types people
 * download (tests/data/models/quantized/: stories260K and the default model as Q4_K_M,
 * Q5_K_M, Q6_K, Q4_0, IQ4_XS, Q3_K_M and Q2_K, with the fallback types llama-quantize
 * chose where a row is not a multiple of 256, listed in README.md): cinfer's greedy continuation of each
 * prompt must be llama.cpp's, token for token (48 tokens; expected.json, recorded from
 * llama.cpp built from source by scripts/quantized-test-models.sh), up to the first
 * near tie: both round activations to int8 blocks, differently (logits move by up to
 * about 0.2 here), so where the exact answer's top two logits are closer than 0.5 two
 * correct implementations may choose differently. expected.json carries each step's gap
 * as the float64 numpy reference computes it on the file's dequantized weights; a
 * continuation that leaves llama.cpp's anywhere else fails. Each continuation that
 * leaves it is printed with where and how close the tie was. When the tokenizer plugin
 * is built, it must also encode each prompt to llama.cpp's ids and decode a continuation
 * equal to llama.cpp's to its text (llama.cpp keeps SentencePiece's space after BOS,
 * which SentencePiece's own decode drops: one leading space of its text is not
 * compared). The last two runs read stories260K-Q4_K_M split into three files by
 * llama.cpp's gguf-split, from its first part. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "support/llama_cpp_runs.h"
#include "support/runner.h"

#define QUANTIZED_DIR CINFER_TEST_DATA_DIR "/models/quantized"
#define TOKENIZER_SEARCH_PATH CINFER_BINARY_DIR "/lib/cinfer/plugins"

START_TEST(greedy_equals_llama_cpp)
{
    struct cinfer_plugin *plugin = NULL;
    struct cinfer_error err = {0};
    const struct cinfer_tokenizer_ops *tok_ops = NULL;
    if (cinfer_plugin_open("tokenizer-bpe", CINFER_PLUGIN_KIND_TOKENIZER, TOKENIZER_SEARCH_PATH, &plugin, &err) == 0)
        tok_ops = cinfer_plugin_vtable(plugin);
    else
        printf("tokenizer-bpe plugin not used (ids only): %s\n", err.message);
    struct llama_cpp_runs_result r = cinfer_test_llama_cpp_runs(QUANTIZED_DIR, 22, tok_ops);
    cinfer_plugin_close(&plugin);
    printf("%d prompts on %d files: %d continuations all llama.cpp's, the others up to a near tie\n", r.checked,
           r.files, r.full);
}
END_TEST

static Suite *suite_quantized_models(void)
{
    Suite *s = suite_create("quantized_models");
    TCase *tc = tcase_create("llama_cpp");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, greedy_equals_llama_cpp);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_quantized_models)
