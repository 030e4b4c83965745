#include "group_blob.h"

#include <stdlib.h>
#include <string.h>

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

int cinfer_mpi_group_blob_encode(const void *const *parts, const size_t *sizes, int n, void **out, size_t *out_len,
                                 struct cinfer_error *err)
{
    *out = NULL;
    if (n < 1 || n > GROUP_BLOB_MAX_RANKS)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "launch-mpi: a group of %d ranks (1 to %d)", n,
                                GROUP_BLOB_MAX_RANKS);
    size_t total = GROUP_BLOB_HEAD_BYTES;
    for (int i = 0; i < n; i++) {
        if (sizes[i] > GROUP_BLOB_MAX_RANK_BYTES)
            return cinfer_error_set(err, CINFER_ERR_RANGE,
                                    "launch-mpi: rank %d's settings hold %zu bytes, more than %zu",
                                    i, sizes[i], GROUP_BLOB_MAX_RANK_BYTES);
        total += 4 + sizes[i];
    }
    uint8_t *b = malloc(total);
    if (!b)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "launch-mpi: out of memory for %zu bytes of settings", total);
    put_u32(b, GROUP_BLOB_MAGIC);
    put_u32(b + 4, GROUP_BLOB_VERSION);
    put_u32(b + 8, (uint32_t)n);
    size_t at = GROUP_BLOB_HEAD_BYTES;
    for (int i = 0; i < n; i++) {
        put_u32(b + at, (uint32_t)sizes[i]);
        if (sizes[i])
            memcpy(b + at + 4, parts[i], sizes[i]);
        at += 4 + sizes[i];
    }
    *out = b;
    *out_len = total;
    return CINFER_OK;
}

int cinfer_mpi_group_blob_head(const void *head, size_t len, uint32_t *n_ranks, struct cinfer_error *err)
{
    const uint8_t *p = head;
    if (len < GROUP_BLOB_HEAD_BYTES)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the group's settings: %zu bytes, fewer than the %d of a head",
                                len, GROUP_BLOB_HEAD_BYTES);
    if (get_u32(p) != GROUP_BLOB_MAGIC)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "the group's settings: magic 0x%08x, expected 0x%08x (\"CGRP\"): standard input does "
                                "not come from launch-mpi", get_u32(p), GROUP_BLOB_MAGIC);
    if (get_u32(p + 4) != GROUP_BLOB_VERSION)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the group's settings: version %u, this worker reads version %u",
                                get_u32(p + 4), GROUP_BLOB_VERSION);
    uint32_t n = get_u32(p + 8);
    if (n < 1 || n > GROUP_BLOB_MAX_RANKS)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the group's settings: %u ranks, expected 1 to %d", n,
                                GROUP_BLOB_MAX_RANKS);
    *n_ranks = n;
    return CINFER_OK;
}

int cinfer_mpi_group_blob_parse(const void *blob, size_t len, uint32_t n_ranks, const uint8_t **parts,
                                size_t *sizes, struct cinfer_error *err)
{
    uint32_t n;
    int rc = cinfer_mpi_group_blob_head(blob, len, &n, err);
    if (rc)
        return rc;
    if (n != n_ranks)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the group's settings are for %u ranks, the MPI job has %u", n,
                                n_ranks);
    const uint8_t *p = blob;
    size_t at = GROUP_BLOB_HEAD_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        if (len - at < 4)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "the group's settings end at byte %zu, inside rank %u's length", len, i);
        size_t bytes = get_u32(p + at);
        at += 4;
        if (bytes > GROUP_BLOB_MAX_RANK_BYTES || bytes > len - at)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "the group's settings: rank %u's part says %zu bytes, %zu are left", i, bytes,
                                    len - at);
        parts[i] = p + at;
        sizes[i] = bytes;
        at += bytes;
    }
    if (at != len)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "the group's settings: %zu bytes after the last rank's part",
                                len - at);
    return CINFER_OK;
}
