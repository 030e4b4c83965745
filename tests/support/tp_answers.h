/* tests/support/tp_answers.h — what a tensor-parallel engine must answer: the same
 * greedy text and ids as the engine at TP=1, with every logprob (and its alternatives')
 * within the f32 bound of a sum split across ranks. Used by the launcher tests, whose
 * ranks run under mpirun, over ssh, or on one host. */
#ifndef CINFER_TEST_TP_ANSWERS_H
#define CINFER_TEST_TP_ANSWERS_H

#include "cinfer/engine.h"

#define TP_ANSWER_NEW_TOKENS 24
#define TP_ANSWER_TOP_LOGPROBS 5
#define TP_ANSWER_LOGPROB_BOUND 1e-4

/* Greedy answer of e to prompt (TP_ANSWER_NEW_TOKENS tokens, EOS ignored), with
 * logprobs and TP_ANSWER_TOP_LOGPROBS alternatives per token; fails the test on error. */
void cinfer_test_tp_answer(struct cinfer_engine *e, const char *prompt, struct cinfer_generate_result *out);

/* Fails the test unless got has base's text and ids and every logprob within
 * TP_ANSWER_LOGPROB_BOUND of base's; returns the largest difference. what names the case. */
double cinfer_test_tp_compare(const struct cinfer_generate_result *base, const struct cinfer_generate_result *got,
                              const char *what);

#endif
