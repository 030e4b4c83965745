/* Per-request sampling defaults and finish-reason names. */
#include <string.h>

#include "cinfer/engine.h"

void cinfer_sampling_params_init(struct cinfer_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = -1;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->max_new_tokens = 128;
    p->skip_special_tokens = 1;
}

const char *cinfer_finish_reason_name(enum cinfer_finish_reason r)
{
    switch (r) {
    case CINFER_FINISH_NONE: return "none";
    case CINFER_FINISH_LENGTH: return "length";
    case CINFER_FINISH_STOP_TOKEN: return "stop";
    case CINFER_FINISH_STOP_STRING: return "stop";
    case CINFER_FINISH_ABORT: return "abort";
    case CINFER_FINISH_ERROR: return "error";
    }
    return "unknown";
}
