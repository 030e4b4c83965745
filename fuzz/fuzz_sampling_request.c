/* libFuzzer target for a GENERATE frame as the scheduler receives it, and for the
 * sampler fed whatever parameters it carries. Any bytes either decode or fail with a
 * message; what decodes encodes to a frame that decodes and encodes to the same bytes;
 * validated or not, the sampler and its logprobs stay inside a 64-token vocabulary
 * (the scheduler samples with what the wire gave it). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/messages.h"
#include "scheduler/sampler.h"
#include "scheduler/sampling_validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { VOCAB = 64 };

static void check_reencoding(const struct cinfer_msg_generate *m)
{
    void *first = NULL, *second = NULL;
    size_t first_len = 0, second_len = 0;
    if (cinfer_msg_encode_generate(m, &first, &first_len))
        return; /* out of memory */
    struct cinfer_msg_generate again;
    struct cinfer_error err = {0};
    if (cinfer_msg_decode_generate(first, first_len, &again, &err))
        abort(); /* what cinfer writes, cinfer must read */
    if (cinfer_msg_encode_generate(&again, &second, &second_len) == 0 &&
        (second_len != first_len || memcmp(first, second, first_len) != 0))
        abort(); /* and write back the same bytes */
    cinfer_msg_generate_free(&again);
    free(first);
    free(second);
}

static void check_sampler(const struct cinfer_msg_generate *m)
{
    struct cinfer_error err = {0};
    if (cinfer_sampling_validate(&m->sampling, VOCAB, &err) && err.message[0] == '\0')
        abort(); /* every refusal carries words */
    struct cinfer_sampler s;
    if (cinfer_sampler_init(&s, VOCAB))
        return;
    float logits[VOCAB]; /* (vocab) */
    for (int i = 0; i < VOCAB; i++)
        logits[i] = (float)((i * 37) % VOCAB) / 8.0f - 4.0f;
    int32_t eos[] = {2};
    int n_history = m->n_ids > 4096 ? 4096 : (int)m->n_ids;
    struct cinfer_sample_context ctx = {
        .prompt = m->ids, .n_prompt = n_history, .output = m->ids, .n_output = n_history / 2,
        .eos_ids = eos, .n_eos = 1,
    };
    struct cinfer_rng rng;
    cinfer_rng_seed(&rng, m->sampling.seed);
    float logprob = 0;
    int32_t id = cinfer_sample(&s, logits, &m->sampling, &ctx, &rng, &logprob);
    if (id < 0 || id >= VOCAB)
        abort();
    struct cinfer_token_logprobs lp;
    cinfer_sample_logprobs(logits, VOCAB, id, m->sampling.top_logprobs, &lp);
    if (lp.n_top < 0 || lp.n_top > CINFER_MAX_TOP_LOGPROBS)
        abort();
    for (int i = 0; i < lp.n_top; i++)
        if (lp.top_ids[i] < 0 || lp.top_ids[i] >= VOCAB)
            abort();
    cinfer_sampler_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    struct cinfer_msg_generate m;
    struct cinfer_error err = {0};
    if (cinfer_msg_decode_generate(data, size, &m, &err)) {
        if (err.message[0] == '\0')
            abort(); /* every rejection names the frame and the field */
        return 0;
    }
    check_reencoding(&m);
    check_sampler(&m);
    cinfer_msg_generate_free(&m);
    return 0;
}
