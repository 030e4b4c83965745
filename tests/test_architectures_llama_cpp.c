/* Each family cinfer runs, read by llama.cpp too: one random-weight GGUF file per family
 * (tests/data/models/architectures/, from tests/reference/make_random_models.py: Llama,
 * Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3, Qwen3 with YaRN, Phi-3 with LongRoPE,
 * a Phi-4-mini-shaped one turning half of each head, and the mixtures of experts Qwen3-MoE,
 * Mixtral, Qwen2-MoE (with its gated shared expert) and gpt-oss, 8 experts with 2 per token;
 * gpt-oss with attention sinks, biases, YaRN and an 8-token window on alternate layers), with llama.cpp's greedy continuation of two prompts given as
 * ids (expected.json, recorded from llama.cpp built from source by
 * scripts/architecture-test-models.sh; the longer prompt runs past the Gemma files'
 * 32-token sliding windows). cinfer's continuation must be llama.cpp's, token for token,
 * up to the first near tie (a step where the float64 numpy reference's top two logits
 * are under 0.01 apart: both engines compute in f32 with f16 K/V, in other orders). The
 * recorded gaps also show that llama.cpp's argmax is the reference's at every step. */
#include <stdio.h>

#include "support/llama_cpp_runs.h"
#include "support/runner.h"

#define ARCHITECTURES_DIR CINFER_TEST_DATA_DIR "/models/architectures"

START_TEST(each_family_greedy_equals_llama_cpp)
{
    struct llama_cpp_runs_result r = cinfer_test_llama_cpp_runs(ARCHITECTURES_DIR, 24, NULL);
    printf("%d prompts on %d families: %d continuations all llama.cpp's, the others up to a near tie\n", r.checked,
           r.files, r.full);
    ck_assert_int_eq(r.files, 14);
}
END_TEST

static Suite *suite_architectures_llama_cpp(void)
{
    Suite *s = suite_create("architectures_llama_cpp");
    TCase *tc = tcase_create("llama_cpp");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, each_family_greedy_equals_llama_cpp);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_architectures_llama_cpp)
