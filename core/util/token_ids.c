/* The growable token id array shared by tokenizers and their callers. */
#include <stdlib.h>

#include "cinfer/tokenizer.h"

int cinfer_token_ids_reserve(struct cinfer_token_ids *ids, size_t need)
{
    if (need <= ids->cap)
        return CINFER_OK;
    size_t cap = ids->cap ? ids->cap : 16;
    while (cap < need)
        cap *= 2;
    int32_t *grown = realloc(ids->ids, cap * sizeof *grown);
    if (!grown)
        return CINFER_ERR_NOMEM;
    ids->ids = grown;
    ids->cap = cap;
    return CINFER_OK;
}

int cinfer_token_ids_push(struct cinfer_token_ids *ids, int32_t id)
{
    int rc = cinfer_token_ids_reserve(ids, ids->len + 1);
    if (rc == CINFER_OK)
        ids->ids[ids->len++] = id;
    return rc;
}

void cinfer_token_ids_free(struct cinfer_token_ids *ids)
{
    free(ids->ids);
    ids->ids = NULL;
    ids->len = ids->cap = 0;
}
