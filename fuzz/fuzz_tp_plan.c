/* fuzz_tp_plan: the decoder of the plans tensor-parallel rank 0 sends its followers
 * (core/model/tp_plan.c) on arbitrary bytes. A plan either decodes (and then encodes to
 * the very same bytes, so every field was read and none guessed, and every token and
 * page lies within the limits) or is refused with a message; nothing may crash, leak or
 * read out of bounds. A plan whose header says a sliding-window pool of 8 pages is read
 * against limits with that pool, any other against limits without one; likewise one whose
 * header says ep_size 2 against a rank of that expert split. Seeds:
 * fuzz/seeds/fuzz_tp_plan/, plans made for these limits (the *_window ones with a pool,
 * *_ep at ep_size 2). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WINDOW_PAGES 8
#define EP_SIZE 2

static int32_t window_of[64]; /* (kv_pages) as rank 0 holds it, rebuilt from each plan */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct cinfer_tp_plan plan; /* reused, as a follower reuses its own */
    struct cinfer_error err = {0};
    struct cinfer_tp_plan_limits limits = {.vocab = 512, .kv_pages = 64, .page_tokens = 16, .max_batch_tokens = 256};
    if (size >= CINFER_TP_PLAN_HEADER_BYTES &&
        (data[40] | data[41] << 8 | data[42] << 16 | (uint32_t)data[43] << 24) == WINDOW_PAGES)
        limits.window_pages = WINDOW_PAGES;
    if (size >= CINFER_TP_PLAN_HEADER_BYTES &&
        (data[44] | data[45] << 8 | data[46] << 16 | (uint32_t)data[47] << 24) == EP_SIZE)
        limits.ep_size = EP_SIZE;
    if (cinfer_tp_plan_decode(data, size, &limits, &plan, &err) != CINFER_OK) {
        if (!err.message[0])
            abort(); /* a refusal must say why */
        return 0;
    }
    int tokens = 0, consistent = 1; /* every page mapped to one window page (as rank 0's plans are) */
    for (int i = 0; i < 64; i++)
        window_of[i] = -2;
    for (int s = 0; s < plan.n_seqs; s++) {
        const struct cinfer_seq_chunk *c = &plan.seqs[s];
        tokens += c->n_tokens;
        for (int t = 0; t < c->n_tokens; t++)
            if (c->tokens[t] < 0 || c->tokens[t] >= limits.vocab)
                abort();
        for (int i = 0; i < c->n_pages; i++)
            if (c->page_table[i] < 0 || c->page_table[i] >= limits.kv_pages)
                abort();
        if ((int64_t)c->n_pages * limits.page_tokens < (int64_t)c->start_pos + c->n_tokens)
            abort();
        if ((plan.window_of[s] != NULL) != (limits.window_pages > 0))
            abort();
        for (int i = 0; plan.window_of[s] && i < c->n_pages; i++) {
            int32_t wp = plan.window_of[s][i], *held = &window_of[c->page_table[i]];
            if (wp < -1 || wp >= limits.window_pages)
                abort();
            consistent &= *held == -2 || *held == wp;
            *held = wp;
        }
    }
    if (tokens != plan.n_tokens || tokens > limits.max_batch_tokens)
        abort();
    if (!consistent) /* decodes (a follower maps each page as the plan last says), but re-encodes otherwise */
        return 0;
    size_t bytes = cinfer_tp_plan_bytes(plan.seqs, plan.n_seqs, &limits);
    uint8_t *again = malloc(bytes);
    if (!again)
        return 0;
    cinfer_tp_plan_encode(plan.step, &limits, plan.seqs, plan.n_seqs, limits.window_pages ? window_of : NULL, again);
    if (bytes != size || memcmp(again, data, size) != 0)
        abort();
    free(again);
    return 0;
}
