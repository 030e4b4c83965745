/* Every block-quantized type's dequantization (kernels/quant.c) against the numpy
 * implementation written independently from the ggml block layouts
 * (tests/reference/ggml_quants.py), bit for bit, on random blocks of every type: 4096
 * blocks of random bytes (so subnormal, infinite and NaN scales occur) and blocks whose
 * scales are set to extremes. The ctest fixture dequant_reference_data writes the blocks
 * and numpy's values (tests/reference/make_dequant_blocks.py); without /usr/bin/python3
 * and numpy the test skips. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "support/runner.h"

#define SKIP_EXIT_CODE 77

static unsigned char *blob;
static size_t blob_size;

static void take(size_t *at, void *out, size_t n)
{
    ck_assert_msg(*at + n <= blob_size, "%s: truncated at byte %zu", CINFER_DEQUANT_BLOCKS, *at);
    memcpy(out, blob + *at, n);
    *at += n;
}

/* The kernel type of a ggml type name. */
static int wtype_of(const char *name, enum cinfer_kernel_wtype *out)
{
    for (int t = 0; t < CINFER_KW_TYPE_COUNT; t++) {
        const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info((enum cinfer_kernel_wtype)t);
        if (info && !strcmp(info->name, name)) {
            *out = (enum cinfer_kernel_wtype)t;
            return 0;
        }
    }
    return -1;
}

START_TEST(every_type_matches_numpy_bit_for_bit)
{
    size_t at = 0;
    char magic[8];
    uint32_t n_types;
    take(&at, magic, 8);
    ck_assert_msg(!memcmp(magic, "CINFDQ01", 8), "%s: not a CINFDQ01 file", CINFER_DEQUANT_BLOCKS);
    take(&at, &n_types, 4);
    int seen = 0;
    for (uint32_t t = 0; t < n_types; t++) {
        uint8_t name_len;
        char name[32] = "";
        uint32_t geometry[3];
        take(&at, &name_len, 1);
        ck_assert_int_lt(name_len, sizeof name);
        take(&at, name, name_len);
        take(&at, geometry, sizeof geometry);
        uint32_t block_values = geometry[0], block_bytes = geometry[1], blocks = geometry[2];
        enum cinfer_kernel_wtype wtype;
        ck_assert_msg(wtype_of(name, &wtype) == 0, "numpy type %s has no kernel type", name);
        const struct cinfer_kernel_type_info *info = cinfer_kernel_type_info(wtype);
        ck_assert_msg((uint32_t)info->block_values == block_values && (uint32_t)info->block_bytes == block_bytes,
                      "%s: numpy says %u values in %u bytes, the kernels %d in %d", name, block_values, block_bytes,
                      info->block_values, info->block_bytes);
        const unsigned char *raw = blob + at;
        at += (size_t)blocks * block_bytes;
        size_t n = (size_t)blocks * block_values;
        uint32_t *want = malloc(n * 4), *got = malloc(n * 4);
        ck_assert(want && got);
        take(&at, want, n * 4);
        ck_assert_uint_eq(cinfer_kernel_row_bytes(wtype, (int64_t)n), (size_t)blocks * block_bytes);
        /* the whole run of blocks as one row, and block by block as rows of one block */
        cinfer_kernel_dequantize_row(wtype, raw, (int64_t)n, (float *)got);
        size_t differ = 0, first = 0, nan = 0;
        for (size_t i = 0; i < n; i++) {
            if (got[i] != want[i] && differ++ == 0)
                first = i;
            nan += (want[i] & 0x7f800000u) == 0x7f800000u && (want[i] & 0x007fffffu);
        }
        ck_assert_msg(differ == 0,
                      "%s: %zu of %zu values differ from numpy's; the first, value %zu of block %zu, is 0x%08" PRIx32
                      " (numpy 0x%08" PRIx32 ")",
                      name, differ, n, first % block_values, first / block_values, got[first], want[first]);
        float one_block[256];
        for (uint32_t b = 0; b < blocks; b++) {
            cinfer_kernel_row_to_f32(raw + (size_t)b * block_bytes, wtype, (int)block_values, one_block);
            ck_assert_msg(!memcmp(one_block, want + (size_t)b * block_values, block_values * 4),
                          "%s: block %u widened alone differs from numpy's", name, b);
        }
        printf("%-7s %5u blocks (%zu values, %zu of them NaN): every bit as numpy's\n", name, blocks, n, nan);
        free(want);
        free(got);
        seen++;
    }
    ck_assert_int_eq(seen, 13);
    ck_assert_msg(at == blob_size, "%s: %zu bytes left over", CINFER_DEQUANT_BLOCKS, blob_size - at);
}
END_TEST

static Suite *suite_dequant(void)
{
    Suite *s = suite_create("dequant");
    TCase *tc = tcase_create("numpy");
    tcase_add_test(tc, every_type_matches_numpy_bit_for_bit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    FILE *f = fopen(CINFER_DEQUANT_BLOCKS, "rb");
    if (!f) {
        printf("SKIP: %s is absent (the fixture dequant_reference_data writes it with /usr/bin/python3 and numpy)\n",
               CINFER_DEQUANT_BLOCKS);
        return SKIP_EXIT_CODE;
    }
    fseek(f, 0, SEEK_END);
    blob_size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    blob = malloc(blob_size);
    if (!blob || fread(blob, 1, blob_size, f) != blob_size) {
        fclose(f);
        fprintf(stderr, "%s: cannot read\n", CINFER_DEQUANT_BLOCKS);
        return 1;
    }
    fclose(f);
    int rc = cinfer_test_run_suite(suite_dequant());
    free(blob);
    return rc;
}
