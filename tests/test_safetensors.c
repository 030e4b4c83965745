/* The safetensors reader: files from tests/support/safetensors_builder read back exactly,
 * and each kind of damage is refused with a message naming file, tensor and problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/safetensors.h"
#include "support/runner.h"
#include "support/tmp_dir.h"
#include "support/safetensors_builder.h"

static float w32[3 * 4];   /* (3, 4) */
static uint16_t w16[5];    /* (5,) */
static uint16_t wb16[2 * 2 * 2];

static void build_sample(struct st_builder *b)
{
    for (int i = 0; i < 12; i++)
        w32[i] = (float)i - 5.5f;
    for (int i = 0; i < 5; i++)
        w16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < 8; i++)
        wb16[i] = (uint16_t)(0x4000 + i);
    st_builder_init(b);
    st_builder_add(b, "model.norm.weight", "F16", (int64_t[]){5}, 1, w16, sizeof w16);
    st_builder_add(b, "model.embed_tokens.weight", "F32", (int64_t[]){3, 4}, 2, w32, sizeof w32);
    st_builder_add(b, "cube", "BF16", (int64_t[]){2, 2, 2}, 3, wb16, sizeof wb16);
    st_builder_add(b, "scalar", "F32", NULL, 0, w32, 4);
}

START_TEST(reads_tensors_in_place)
{
    cinfer_test_make_tmp_dir("test_safetensors");
    struct st_builder b;
    build_sample(&b);
    ck_assert_int_eq(st_builder_write(&b, cinfer_test_tmp_path("m.safetensors")), 0);
    st_builder_free(&b);
    struct cinfer_safetensors *st = NULL;
    struct cinfer_error err;
    int rc = cinfer_safetensors_open(cinfer_test_tmp_path("m.safetensors"), &st, &err);
    ck_assert_msg(rc == 0, "%s", err.message);
    ck_assert_uint_eq(cinfer_safetensors_count(st), 4);
    ck_assert_str_eq(cinfer_safetensors_at(st, 0)->name, "cube"); /* name order */
    const struct cinfer_st_tensor *t = cinfer_safetensors_find(st, "model.embed_tokens.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, CINFER_ST_F32);
    ck_assert_int_eq(t->n_dims, 2);
    ck_assert_int_eq(t->shape[0], 3);
    ck_assert_int_eq(t->shape[1], 4);
    ck_assert_uint_eq(t->nbytes, sizeof w32);
    ck_assert_int_eq(memcmp(t->data, w32, sizeof w32), 0);
    ck_assert_uint_eq((uintptr_t)t->data % 4, 0);
    t = cinfer_safetensors_find(st, "model.norm.weight");
    ck_assert_int_eq(t->dtype, CINFER_ST_F16);
    ck_assert_int_eq(memcmp(t->data, w16, sizeof w16), 0);
    t = cinfer_safetensors_find(st, "cube");
    ck_assert_int_eq(t->dtype, CINFER_ST_BF16);
    ck_assert_int_eq(t->shape[2], 2);
    ck_assert_int_eq(memcmp(t->data, wb16, sizeof wb16), 0);
    t = cinfer_safetensors_find(st, "scalar");
    ck_assert_int_eq(t->n_dims, 0);
    ck_assert_uint_eq(t->nbytes, 4);
    ck_assert_ptr_null(cinfer_safetensors_find(st, "lm_head.weight"));
    ck_assert_str_eq(cinfer_st_dtype_name(CINFER_ST_BF16), "BF16");
    ck_assert_uint_eq(cinfer_st_dtype_bytes(CINFER_ST_F64), 8);
    cinfer_safetensors_close(&st);
    ck_assert_ptr_null(st);
    cinfer_test_remove_tmp_dir();
}
END_TEST

static void expect_refused_file(const char *path, int code, const char *want)
{
    struct cinfer_safetensors *st = NULL;
    struct cinfer_error err;
    memset(&err, 0, sizeof err);
    int rc = cinfer_safetensors_open(path, &st, &err);
    ck_assert_msg(rc == code, "expected code %d for \"%s\", got %d: %s", code, want, rc, err.message);
    ck_assert_ptr_null(st);
    ck_assert_msg(strncmp(err.message, path, strlen(path)) == 0, "message does not name the file: %s", err.message);
    ck_assert_msg(strstr(err.message, want) != NULL, "expected \"%s\" in: %s", want, err.message);
}

static void expect_header_refused(const char *header, size_t data_len, int code, const char *want)
{
    static const unsigned char zeros[256];
    ck_assert_uint_le(data_len, sizeof zeros);
    ck_assert_int_eq(st_write_raw(cinfer_test_tmp_path("bad.safetensors"), header, zeros, data_len), 0);
    expect_refused_file(cinfer_test_tmp_path("bad.safetensors"), code, want);
}

START_TEST(every_truncation_is_refused)
{
    cinfer_test_make_tmp_dir("test_safetensors");
    struct st_builder b;
    build_sample(&b);
    ck_assert_int_eq(st_builder_write(&b, cinfer_test_tmp_path("good.safetensors")), 0);
    st_builder_free(&b);
    FILE *f = fopen(cinfer_test_tmp_path("good.safetensors"), "rb");
    unsigned char bytes[4096];
    size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    uint64_t header_bytes;
    memcpy(&header_bytes, bytes, 8);
    for (size_t cut = 0; cut < len; cut++) {
        f = fopen(cinfer_test_tmp_path("cut.safetensors"), "wb");
        ck_assert_uint_eq(fwrite(bytes, 1, cut, f), cut);
        fclose(f);
        const char *want = cut < 8 + header_bytes ? "safetensors file truncated" : "outside the data buffer";
        expect_refused_file(cinfer_test_tmp_path("cut.safetensors"), CINFER_ERR_PARSE, want);
    }
    printf("safetensors: %zu truncation points refused (file of %zu bytes)\n", len, len);
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(bad_headers_are_refused)
{
    cinfer_test_make_tmp_dir("test_safetensors");
    expect_header_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, CINFER_ERR_PARSE,
                          "safetensors header is not valid JSON: '}' expected near end of file at header byte 53 (line 1, column 53)");
    expect_header_refused("{\"a\": tru}", 0, CINFER_ERR_PARSE, "not valid JSON: invalid token near 'tru' at header byte 9");
    expect_header_refused("[1, 2]", 0, CINFER_ERR_PARSE, "safetensors header is JSON but not an object");
    expect_header_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                          "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                          8, CINFER_ERR_PARSE, "duplicate object key");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, CINFER_ERR_PARSE,
                          "tensor w: data_offsets [0, 20] span 20 bytes, but dtype F32 x shape needs 24");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 16, CINFER_ERR_PARSE,
                          "tensor w: data_offsets [0, 24] are outside the data buffer of 16 bytes");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 16, CINFER_ERR_PARSE,
                          "data_offsets [8, 4] are outside");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 16, CINFER_ERR_PARSE,
                          "data_offsets [-4, 0] are outside");
    expect_header_refused("{\"w\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 16, CINFER_ERR_UNSUPPORTED,
                          "tensor w has unknown dtype \"Q4\"");
    expect_header_refused("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 16, CINFER_ERR_PARSE,
                          "tensor w: \"dtype\" is missing, expected a string");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}", 16, CINFER_ERR_PARSE,
                          "tensor w: \"shape\" is not an array");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,-2],\"data_offsets\":[0,4]}}", 16, CINFER_ERR_PARSE,
                          "tensor w: shape[1] is not a non-negative integer");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 16, CINFER_ERR_PARSE,
                          "tensor w: \"data_offsets\" is malformed, expected [begin, end] integers");
    expect_header_refused("{\"w\":[1]}", 16, CINFER_ERR_PARSE, "tensor w: expected an object, found an array");
    expect_header_refused("{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 16,
                          CINFER_ERR_PARSE, "tensor w: size of shape overflows 64 bits");
    expect_header_refused("{\"__metadata__\":3}", 0, CINFER_ERR_PARSE, "__metadata__ is not an object");
    /* A 54-byte header puts the data buffer at file offset 62, not a multiple of 4. */
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 16,
                          CINFER_ERR_PARSE, "tensor w starts at file offset 62, not aligned to its 4-byte F32 elements");
    expect_header_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}    ",
                          16, CINFER_ERR_PARSE, "safetensors tensors a [0, 8) and b [4, 12) overlap");

    /* The header length itself. */
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    FILE *f = fopen(cinfer_test_tmp_path("len.safetensors"), "wb");
    fwrite(huge, 1, sizeof huge, f);
    fclose(f);
    expect_refused_file(cinfer_test_tmp_path("len.safetensors"), CINFER_ERR_PARSE,
                        "safetensors file truncated: header of 9223372036854775807 bytes, but only 8 follow the length");
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(empty_and_missing)
{
    cinfer_test_make_tmp_dir("test_safetensors");
    struct cinfer_safetensors *st = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(cinfer_safetensors_open(cinfer_test_tmp_path("none.safetensors"), &st, &err), CINFER_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "none.safetensors: cannot open"));
    ck_assert_int_eq(st_write_raw(cinfer_test_tmp_path("empty.safetensors"), "{}", NULL, 0), 0);
    ck_assert_int_eq(cinfer_safetensors_open(cinfer_test_tmp_path("empty.safetensors"), &st, &err), 0);
    ck_assert_uint_eq(cinfer_safetensors_count(st), 0);
    cinfer_safetensors_close(&st);
    cinfer_test_remove_tmp_dir();
}
END_TEST

static Suite *suite_safetensors(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300); /* file-heavy: generous on a loaded machine */
    tcase_add_test(tc, reads_tensors_in_place);
    tcase_add_test(tc, every_truncation_is_refused);
    tcase_add_test(tc, bad_headers_are_refused);
    tcase_add_test(tc, empty_and_missing);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_safetensors)
