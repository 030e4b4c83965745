/* The model runtime's own greedy output, computed in this process without the engine:
 * what the multi-process pipeline must reproduce token for token. */
#ifndef CINFER_TEST_GREEDY_REFERENCE_H
#define CINFER_TEST_GREEDY_REFERENCE_H

#include <stdint.h>

/* Loads model_path, prefills prompt (n_prompt ids), then decodes greedily until
 * max_new tokens or one of eos_ids. Writes the new ids to out (room for max_new) and
 * returns how many, or a negative status. */
int cinfer_test_greedy_reference(const char *model_path, const int32_t *prompt, int n_prompt, int max_new,
                                 int stop_at_eos, int32_t *out);

#endif
