/* GGUF models split over several files, as llama.cpp's gguf-split writes them:
 * PREFIX-00001-of-0000N.gguf .. PREFIX-0000N-of-0000N.gguf (llama_split_path's
 * "%s-%05d-of-%05d.gguf"), every part with split.no (0-based), split.count and
 * split.tensors.count (the tensors of all parts), the first also with the model's
 * metadata; tensor data lies in the part that lists the tensor. A model is opened from
 * its first part; the others are found beside it by name. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_load_internal.h"

#define SPLIT_MAX_PARTS 9999

static int key_u32(const struct cinfer_gguf *g, const char *key, uint32_t *out, struct cinfer_error *err)
{
    int rc = cinfer_gguf_get_u32(g, key, out, err);
    if (rc == CINFER_ERR_NOT_FOUND)
        return cinfer_error_set(err, rc, "%s: GGUF split part without %s", cinfer_gguf_path(g), key);
    return rc;
}

int cinfer_gguf_split_open(const char *path, struct cinfer_model_storage *s, struct cinfer_error *err)
{
    uint32_t count = 1, no = 0, total = 0;
    int rc = cinfer_gguf_get_u32(s->gguf, "split.count", &count, err);
    if (rc == CINFER_ERR_NOT_FOUND)
        return CINFER_OK; /* one file */
    if (rc || (rc = key_u32(s->gguf, "split.no", &no, err)) ||
        (rc = key_u32(s->gguf, "split.tensors.count", &total, err)))
        return rc;
    if (count < 1 || count > SPLIT_MAX_PARTS)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "%s: split.count is %u, expected 1 to %d", path, count,
                                SPLIT_MAX_PARTS);
    if (no != 0)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "%s: this is part %u of %u of a split model (split.no %u); open its first part, "
                                "the file named ...-00001-of-%05u.gguf",
                                path, no + 1, count, no, count);
    char postfix[32];
    snprintf(postfix, sizeof postfix, "-%05d-of-%05u.gguf", 1, count);
    size_t len = strlen(path), plen = strlen(postfix);
    if (count > 1 && (len <= plen || strcmp(path + len - plen, postfix) != 0))
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "%s: split.count is %u, so the other parts are found by name, but the name does not "
                                "end in %s as gguf-split names the first part",
                                path, count, postfix);
    if (count > 1) {
        s->parts = calloc(count - 1, sizeof *s->parts);
        if (!s->parts)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory for %u split parts", path, count);
    }
    uint64_t tensors = cinfer_gguf_tensor_count(s->gguf);
    for (uint32_t i = 1; i < count; i++) {
        char *part = malloc(len + 1);
        if (!part)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "%s: out of memory", path);
        memcpy(part, path, len - plen);
        snprintf(part + len - plen, plen + 1, "-%05u-of-%05u.gguf", i + 1, count);
        rc = cinfer_gguf_open(part, &s->parts[i - 1], err);
        if (rc) {
            free(part);
            return cinfer_error_prefix(err, "%s: part %u of %u of the split model", path, i + 1, count);
        }
        s->n_parts = i;
        uint32_t part_no = 0, part_count = 0;
        if ((rc = key_u32(s->parts[i - 1], "split.no", &part_no, err)) ||
            (rc = key_u32(s->parts[i - 1], "split.count", &part_count, err))) {
            free(part);
            return rc;
        }
        if (part_no != i || part_count != count) {
            rc = cinfer_error_set(err, CINFER_ERR_PARSE,
                                  "%s: split.no %u and split.count %u, expected %u and %u (part %u of %u of %s)", part,
                                  part_no, part_count, i, count, i + 1, count, path);
            free(part);
            return rc;
        }
        /* a tensor listed by two parts would be ambiguous */
        for (uint64_t k = 0; k < cinfer_gguf_tensor_count(s->parts[i - 1]); k++) {
            const struct cinfer_gguf_tensor *t = cinfer_gguf_tensor_at(s->parts[i - 1], k);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 255 ? t->name.len : 255), t->name.data);
            const struct cinfer_gguf_tensor *seen = cinfer_gguf_find_tensor(s->gguf, name);
            for (uint32_t j = 1; !seen && j < i; j++)
                seen = cinfer_gguf_find_tensor(s->parts[j - 1], name);
            if (seen) {
                rc = cinfer_error_set(err, CINFER_ERR_PARSE, "%s: tensor %s is also in an earlier part of %s", part,
                                      name, path);
                free(part);
                return rc;
            }
        }
        free(part);
        tensors += cinfer_gguf_tensor_count(s->parts[i - 1]);
    }
    if (tensors != total)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "%s: split.tensors.count is %u but the %u parts hold %" PRIu64 " tensors", path, total,
                                count, tensors);
    return CINFER_OK;
}

const struct cinfer_gguf_tensor *cinfer_gguf_split_find(const struct cinfer_model_storage *s, const char *name)
{
    const struct cinfer_gguf_tensor *t = cinfer_gguf_find_tensor(s->gguf, name);
    for (size_t i = 0; !t && i < s->n_parts; i++)
        t = cinfer_gguf_find_tensor(s->parts[i], name);
    return t;
}

const char *cinfer_gguf_split_file_of(const struct cinfer_model_storage *s, const struct cinfer_gguf_tensor *t)
{
    for (size_t i = 0; i < s->n_parts; i++) {
        uint64_t n = cinfer_gguf_tensor_count(s->parts[i]);
        const struct cinfer_gguf_tensor *first = n ? cinfer_gguf_tensor_at(s->parts[i], 0) : NULL;
        if (first && t >= first && t < first + n)
            return cinfer_gguf_path(s->parts[i]);
    }
    return cinfer_gguf_path(s->gguf);
}

void cinfer_gguf_split_close(struct cinfer_model_storage *s)
{
    for (size_t i = 0; i < s->n_parts; i++)
        cinfer_gguf_close(&s->parts[i]);
    free(s->parts);
    s->parts = NULL;
    s->n_parts = 0;
}
