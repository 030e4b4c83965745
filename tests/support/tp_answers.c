#include "support/tp_answers.h"

#include <check.h>
#include <math.h>
#include <string.h>

void cinfer_test_tp_answer(struct cinfer_engine *e, const char *prompt, struct cinfer_generate_result *out)
{
    struct cinfer_generate_request req = {.prompt = prompt};
    cinfer_sampling_params_init(&req.sampling);
    req.sampling.temperature = 0;
    req.sampling.max_new_tokens = TP_ANSWER_NEW_TOKENS;
    req.sampling.ignore_eos = 1;
    req.sampling.logprobs = 1;
    req.sampling.top_logprobs = TP_ANSWER_TOP_LOGPROBS;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_engine_generate(e, &req, out, &err) == 0, "%s", err.message);
}

double cinfer_test_tp_compare(const struct cinfer_generate_result *base, const struct cinfer_generate_result *got,
                              const char *what)
{
    ck_assert_msg(base->n_output_ids == got->n_output_ids && !strcmp(base->text, got->text),
                  "%s: text '%s', TP=1 gave '%s'", what, got->text, base->text);
    double worst = 0;
    for (size_t t = 0; t < base->n_output_ids; t++) {
        ck_assert_int_eq(got->output_ids[t], base->output_ids[t]);
        const struct cinfer_token_logprob *a = &base->logprobs[t], *b = &got->logprobs[t];
        double d = fabs((double)a->logprob - (double)b->logprob);
        for (int k = 0; k < a->n_top && k < b->n_top; k++)
            if (a->top_ids[k] == b->top_ids[k]) {
                double dk = fabs((double)a->top_logprobs[k] - (double)b->top_logprobs[k]);
                d = dk > d ? dk : d;
            }
        worst = d > worst ? d : worst;
    }
    ck_assert_msg(worst < TP_ANSWER_LOGPROB_BOUND, "%s: a logprob differs from TP=1's by %.3g", what, worst);
    return worst;
}
