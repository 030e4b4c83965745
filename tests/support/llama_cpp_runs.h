/* llama.cpp's recorded greedy continuations (an expected.json written by
 * scripts/quantized-test-models.sh or scripts/architecture-test-models.sh) replayed
 * through cinfer's runtime: each continuation must be llama.cpp's token for token up to
 * the first near tie, a step where the float64 numpy reference's top two logits are
 * closer than the file's near_tie_logit_gap (both engines round differently there, so
 * two correct implementations may part). Check assertions; prints a line per run. */
#ifndef CINFER_TEST_LLAMA_CPP_RUNS_H
#define CINFER_TEST_LLAMA_CPP_RUNS_H

#include "cinfer/tokenizer.h"

struct llama_cpp_runs_result {
    int checked; /* runs replayed */
    int full;    /* runs equal to llama.cpp's for every token */
    int files;   /* distinct model files */
};

/* dir holds expected.json and the files it names. With tok_ops, a run that has a
 * "prompt" text must also encode to llama.cpp's prompt ids and decode to its text. */
struct llama_cpp_runs_result cinfer_test_llama_cpp_runs(const char *dir, int min_runs,
                                                        const struct cinfer_tokenizer_ops *tok_ops);

#endif
