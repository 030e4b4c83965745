/* Refusing per-request sampling parameters that no sampler could honour, with the
 * parameter, the value found and the range allowed in the message. */
#ifndef CINFER_SCHEDULER_SAMPLING_VALIDATE_H
#define CINFER_SCHEDULER_SAMPLING_VALIDATE_H

#include "cinfer/engine.h"
#include "cinfer/error.h"

/* 0 when every parameter is in range, else CINFER_ERR_RANGE (a value out of its range)
 * or CINFER_ERR_INVALID_ARGUMENT (a missing stop string, a repeated logit_bias id).
 * vocab_size bounds token ids (stop_token_ids, logit_bias); 0 when not known. */
int cinfer_sampling_validate(const struct cinfer_sampling_params *p, int vocab_size, struct cinfer_error *err);

#endif
