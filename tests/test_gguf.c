/* The GGUF reader: files written byte by byte by tests/support/gguf_builder read back
 * exactly, and every kind of damage is refused with a message that names the problem. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer/gguf.h"
#include "support/gguf_builder.h"
#include "support/runner.h"
#include "support/tmp_dir.h"

static int str_is(struct cinfer_gguf_str s, const char *z)
{
    return s.len == strlen(z) && memcmp(s.data, z, s.len) == 0;
}

/* A small model-like file: one key of every scalar type, arrays, four tensor types. */
static float emb[4 * 8];      /* (4 rows, 8 cols) */
static uint16_t norm_f16[8];
static unsigned char q8[2 * 34]; /* (2 rows of 32) Q8_0 */
static uint16_t bf16[3 * 2];

static void build_sample(struct gguf_builder *b, uint32_t version)
{
    gguf_builder_init(b, version);
    gguf_builder_kv_str(b, "general.architecture", "llama");
    gguf_builder_kv_u32(b, "llama.block_count", 5);
    gguf_builder_kv_u8(b, "test.u8", 200);
    gguf_builder_kv_i32(b, "test.neg", -7);
    gguf_builder_kv_u64(b, "test.big", 5000000000ull);
    gguf_builder_kv_i64(b, "test.i64", -3);
    gguf_builder_kv_f32(b, "llama.rope.freq_base", 10000.0f);
    gguf_builder_kv_f64(b, "test.f64", 0.25);
    gguf_builder_kv_bool(b, "test.flag", 1);
    const char *tokens[] = {"<unk>", "<s>", "</s>", "h\xc3\xa9llo", ""};
    gguf_builder_kv_str_array(b, "tokenizer.ggml.tokens", tokens, 5);
    float scores[] = {0.0f, -1.5f, 2.25f};
    gguf_builder_kv_f32_array(b, "tokenizer.ggml.scores", scores, 3);
    int32_t types[] = {2, 3, -1};
    gguf_builder_kv_i32_array(b, "tokenizer.ggml.token_type", types, 3);
    for (int i = 0; i < 32; i++)
        emb[i] = (float)i * 0.5f;
    for (int i = 0; i < 8; i++)
        norm_f16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < 68; i++)
        q8[i] = (unsigned char)(i * 7);
    for (int i = 0; i < 6; i++)
        bf16[i] = (uint16_t)(0x3f80 + i);
    gguf_builder_tensor(b, "token_embd.weight", CINFER_GGML_F32, 2, (uint64_t[]){8, 4}, emb, sizeof emb);
    gguf_builder_tensor(b, "output_norm.weight", CINFER_GGML_F16, 1, (uint64_t[]){8}, norm_f16, sizeof norm_f16);
    gguf_builder_tensor(b, "blk.0.attn_q.weight", CINFER_GGML_Q8_0, 2, (uint64_t[]){32, 2}, q8, sizeof q8);
    gguf_builder_tensor(b, "blk.0.ffn_up.weight", CINFER_GGML_BF16, 2, (uint64_t[]){2, 3}, bf16, sizeof bf16);
}

static void check_sample(const struct cinfer_gguf *g, uint32_t version)
{
    struct cinfer_error err;
    ck_assert_uint_eq(cinfer_gguf_version(g), version);
    ck_assert_int_eq(cinfer_gguf_key_count(g), 12);
    ck_assert_int_eq(cinfer_gguf_find_key(g, "llama.block_count"), 1);
    ck_assert_int_eq(cinfer_gguf_find_key(g, "llama.block"), -1);
    ck_assert(str_is(cinfer_gguf_key_name(g, 1), "llama.block_count"));
    ck_assert_int_eq(cinfer_gguf_key_type(g, 1), CINFER_GGUF_UINT32);
    ck_assert_int_eq((int)cinfer_gguf_key_type(g, -1), -1);
    ck_assert_ptr_null(cinfer_gguf_key_name(g, 99).data);

    struct cinfer_gguf_str s;
    ck_assert_int_eq(cinfer_gguf_get_str(g, "general.architecture", &s, &err), 0);
    ck_assert(str_is(s, "llama"));
    uint32_t u32;
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "llama.block_count", &u32, &err), 0);
    ck_assert_uint_eq(u32, 5);
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "test.u8", &u32, &err), 0); /* any integer that fits */
    ck_assert_uint_eq(u32, 200);
    int32_t i32;
    ck_assert_int_eq(cinfer_gguf_get_i32(g, "test.neg", &i32, &err), 0);
    ck_assert_int_eq(i32, -7);
    ck_assert_int_eq(cinfer_gguf_get_i32(g, "test.i64", &i32, &err), 0);
    ck_assert_int_eq(i32, -3);
    uint64_t u64;
    ck_assert_int_eq(cinfer_gguf_get_u64(g, "test.big", &u64, &err), 0);
    ck_assert_uint_eq(u64, 5000000000ull);
    float f;
    ck_assert_int_eq(cinfer_gguf_get_f32(g, "llama.rope.freq_base", &f, &err), 0);
    ck_assert_float_eq(f, 10000.0f);
    ck_assert_int_eq(cinfer_gguf_get_f32(g, "test.f64", &f, &err), 0);
    ck_assert_float_eq(f, 0.25f);
    int flag = 0;
    ck_assert_int_eq(cinfer_gguf_get_bool(g, "test.flag", &flag, &err), 0);
    ck_assert_int_eq(flag, 1);

    enum cinfer_gguf_value_type et;
    uint64_t count;
    ck_assert_int_eq(cinfer_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &count, &err), 0);
    ck_assert_int_eq(et, CINFER_GGUF_STRING);
    ck_assert_uint_eq(count, 5);
    ck_assert_int_eq(cinfer_gguf_array_str(g, "tokenizer.ggml.tokens", 3, &s), 0);
    ck_assert(str_is(s, "h\xc3\xa9llo"));
    ck_assert_int_eq(cinfer_gguf_array_str(g, "tokenizer.ggml.tokens", 4, &s), 0);
    ck_assert_uint_eq(s.len, 0);
    ck_assert_int_eq(cinfer_gguf_array_str(g, "tokenizer.ggml.tokens", 5, &s), CINFER_ERR_NOT_FOUND);
    ck_assert_int_eq(cinfer_gguf_array_f32(g, "tokenizer.ggml.scores", 2, &f), 0);
    ck_assert_float_eq(f, 2.25f);
    ck_assert_int_eq(cinfer_gguf_array_f32(g, "tokenizer.ggml.tokens", 0, &f), CINFER_ERR_PARSE);
    int64_t i64;
    ck_assert_int_eq(cinfer_gguf_array_i64(g, "tokenizer.ggml.token_type", 2, &i64), 0);
    ck_assert_int_eq(i64, -1);
    ck_assert_int_eq(cinfer_gguf_array_i64(g, "tokenizer.ggml.scores", 0, &i64), CINFER_ERR_PARSE);

    ck_assert_uint_eq(cinfer_gguf_tensor_count(g), 4);
    const struct cinfer_gguf_tensor *t = cinfer_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->type, CINFER_GGML_F32);
    ck_assert_uint_eq(t->n_dims, 2);
    ck_assert_uint_eq(t->ne[0], 8);
    ck_assert_uint_eq(t->ne[1], 4);
    ck_assert_uint_eq(t->ne[2], 1);
    ck_assert_uint_eq(t->nbytes, sizeof emb);
    ck_assert_int_eq(memcmp(t->data, emb, sizeof emb), 0);
    t = cinfer_gguf_find_tensor(g, "blk.0.attn_q.weight");
    ck_assert_uint_eq(t->nbytes, 68);
    ck_assert_int_eq(memcmp(t->data, q8, sizeof q8), 0);
    t = cinfer_gguf_tensor_at(g, 3);
    ck_assert(str_is(t->name, "blk.0.ffn_up.weight"));
    ck_assert_int_eq(memcmp(t->data, bf16, sizeof bf16), 0);
    ck_assert_uint_eq(((uintptr_t)t->data) % 32, 0);
    ck_assert_ptr_null(cinfer_gguf_tensor_at(g, 4));
    ck_assert_ptr_null(cinfer_gguf_find_tensor(g, "output.weight"));
}

START_TEST(reads_v3_and_v2)
{
    cinfer_test_make_tmp_dir("test_gguf");
    for (uint32_t version = 2; version <= 3; version++) {
        struct gguf_builder b;
        build_sample(&b, version);
        ck_assert_int_eq(gguf_builder_write(&b, cinfer_test_tmp_path("sample.gguf"), NULL), 0);
        gguf_builder_free(&b);
        struct cinfer_gguf *g = NULL;
        struct cinfer_error err;
        int rc = cinfer_gguf_open(cinfer_test_tmp_path("sample.gguf"), &g, &err);
        ck_assert_msg(rc == 0, "%s", err.message);
        ck_assert_str_eq(cinfer_gguf_path(g), cinfer_test_tmp_path("sample.gguf"));
        check_sample(g, version);
        cinfer_gguf_close(&g);
        ck_assert_ptr_null(g);
    }
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(custom_alignment)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct gguf_builder b;
    gguf_builder_init(&b, 3);
    gguf_builder_set_alignment(&b, 64);
    float a[3] = {1, 2, 3}, c[5] = {4, 5, 6, 7, 8};
    gguf_builder_tensor(&b, "a", CINFER_GGML_F32, 1, (uint64_t[]){3}, a, sizeof a);
    gguf_builder_tensor(&b, "c", CINFER_GGML_F32, 1, (uint64_t[]){5}, c, sizeof c);
    struct gguf_layout lay;
    ck_assert_int_eq(gguf_builder_write(&b, cinfer_test_tmp_path("a64.gguf"), &lay), 0);
    gguf_builder_free(&b);
    ck_assert_uint_eq(lay.data_start % 64, 0);
    struct cinfer_gguf *g = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(cinfer_gguf_open(cinfer_test_tmp_path("a64.gguf"), &g, &err), 0);
    const struct cinfer_gguf_tensor *t = cinfer_gguf_find_tensor(g, "c");
    ck_assert_ptr_eq(t->data, (const char *)cinfer_gguf_tensor_at(g, 0)->data + 64);
    ck_assert_int_eq(memcmp(t->data, c, sizeof c), 0);
    cinfer_gguf_close(&g);
    cinfer_gguf_close(&g); /* a second close is harmless */
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(getter_errors_name_key_and_types)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct gguf_builder b;
    build_sample(&b, 3);
    ck_assert_int_eq(gguf_builder_write(&b, cinfer_test_tmp_path("s.gguf"), NULL), 0);
    gguf_builder_free(&b);
    struct cinfer_gguf *g = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(cinfer_gguf_open(cinfer_test_tmp_path("s.gguf"), &g, &err), 0);
    uint32_t u32;
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "llama.nope", &u32, &err), CINFER_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "GGUF key llama.nope is missing"));
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "general.architecture", &u32, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "key general.architecture has type string, expected an integer"));
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "test.neg", &u32, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "test.neg is -7, which does not fit in uint32"));
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "test.big", &u32, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "5000000000, which does not fit in uint32"));
    int32_t i32;
    ck_assert_int_eq(cinfer_gguf_get_i32(g, "test.big", &i32, &err), CINFER_ERR_PARSE);
    float f;
    ck_assert_int_eq(cinfer_gguf_get_f32(g, "test.flag", &f, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "test.flag has type bool, expected float32"));
    struct cinfer_gguf_str s;
    ck_assert_int_eq(cinfer_gguf_get_str(g, "tokenizer.ggml.tokens", &s, &err), CINFER_ERR_PARSE);
    ck_assert_ptr_nonnull(strstr(err.message, "has type array, expected string"));
    int flag;
    ck_assert_int_eq(cinfer_gguf_get_bool(g, "test.u8", &flag, &err), CINFER_ERR_PARSE);
    cinfer_gguf_close(&g);
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* Opens bytes written to a file, expects failure with code and a message containing want. */
static void expect_refused(const unsigned char *bytes, size_t len, int code, const char *want)
{
    const char *path = cinfer_test_tmp_path("bad.gguf");
    ck_assert_int_eq(gguf_write_bytes(path, bytes, len), 0);
    struct cinfer_gguf *g = NULL;
    struct cinfer_error err;
    memset(&err, 0, sizeof err);
    int rc = cinfer_gguf_open(path, &g, &err);
    ck_assert_msg(rc == code, "expected code %d for \"%s\", got %d: %s", code, want, rc, err.message);
    ck_assert_ptr_null(g);
    ck_assert_msg(strncmp(err.message, path, strlen(path)) == 0, "message does not name the file: %s", err.message);
    ck_assert_msg(strstr(err.message, want) != NULL, "expected \"%s\" in: %s", want, err.message);
}

START_TEST(every_truncation_is_refused)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct gguf_builder b;
    build_sample(&b, 3);
    size_t len;
    struct gguf_layout lay;
    unsigned char *bytes = gguf_builder_finish(&b, &len, &lay);
    gguf_builder_free(&b);
    int n_checked = 0;
    for (size_t cut = 0; cut < len; cut++) {
        /* Before the data section the header parser says "truncated"; inside it the
         * tensor bounds check names the tensor that runs past the end. */
        const char *want = cut < lay.data_start ? "truncated" : "outside the data section";
        expect_refused(bytes, cut, CINFER_ERR_PARSE, want);
        n_checked++;
    }
    printf("gguf: %d truncation points refused (file of %zu bytes)\n", n_checked, len);
    free(bytes);
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(bad_headers_are_refused)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct gguf_builder b;
    build_sample(&b, 3);
    size_t len;
    struct gguf_layout lay;
    unsigned char *good = gguf_builder_finish(&b, &len, &lay);
    gguf_builder_free(&b);
    unsigned char *bad = malloc(len);

    memcpy(bad, good, len);
    bad[0] = 'X';
    expect_refused(bad, len, CINFER_ERR_PARSE,
                   "not a GGUF file: GGUF files start with \"GGUF\" (47 47 55 46); this file starts with 58 47 55 46 "
                   "(\"XGUF\")");
    memcpy(bad, good, len);
    gguf_patch_u32(bad, 4, 1);
    expect_refused(bad, len, CINFER_ERR_UNSUPPORTED, "GGUF version 1, expected 2 or 3");
    gguf_patch_u32(bad, 4, 0x03000000);
    expect_refused(bad, len, CINFER_ERR_UNSUPPORTED, "big-endian");

    memcpy(bad, good, len);
    gguf_patch_u64(bad, lay.n_kv_pos, UINT64_MAX / 2);
    expect_refused(bad, len, CINFER_ERR_PARSE, "claims 9223372036854775807 key-value pairs");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, lay.n_tensors_pos, 1ull << 40);
    expect_refused(bad, len, CINFER_ERR_PARSE, "claims 1099511627776 tensors");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, lay.n_tensors_pos, 5); /* one more record than there is */
    expect_refused(bad, len, CINFER_ERR_PARSE, "");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, lay.kv_start, 1ull << 62); /* first key's name length */
    expect_refused(bad, len, CINFER_ERR_PARSE, "the name of key 0 needs 4611686018427387904 bytes");

    free(bad);
    free(good);
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* One tensor record's fields, from the layout: name, n_dims, ne[], type, offset. */
static size_t record_field(const struct gguf_layout *lay, int tensor, size_t name_len, uint32_t n_dims,
                           const char *field)
{
    size_t p = lay->tensor_record[tensor] + 8 + name_len;
    if (!strcmp(field, "n_dims"))
        return p;
    p += 4;
    if (!strcmp(field, "ne"))
        return p;
    p += 8 * n_dims;
    if (!strcmp(field, "type"))
        return p;
    return p + 4; /* offset */
}

START_TEST(bad_tensor_records_are_refused)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct gguf_builder b;
    build_sample(&b, 3);
    size_t len;
    struct gguf_layout lay;
    unsigned char *good = gguf_builder_finish(&b, &len, &lay);
    gguf_builder_free(&b);
    unsigned char *bad = malloc(len);
    size_t emb_name = strlen("token_embd.weight"), q_name = strlen("blk.0.attn_q.weight");

    memcpy(bad, good, len);
    gguf_patch_u32(bad, record_field(&lay, 0, emb_name, 2, "type"), 4);
    expect_refused(bad, len, CINFER_ERR_UNSUPPORTED, "GGUF tensor token_embd.weight has unknown ggml type 4");
    memcpy(bad, good, len);
    gguf_patch_u32(bad, record_field(&lay, 0, emb_name, 2, "n_dims"), 0);
    expect_refused(bad, len, CINFER_ERR_PARSE, "token_embd.weight has 0 dimensions, expected 1..4");
    memcpy(bad, good, len);
    gguf_patch_u32(bad, record_field(&lay, 0, emb_name, 2, "n_dims"), 7);
    expect_refused(bad, len, CINFER_ERR_PARSE, "has 7 dimensions");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 0, emb_name, 2, "ne") + 8, 0);
    expect_refused(bad, len, CINFER_ERR_PARSE, "token_embd.weight has dimension 1 of 0 elements");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 0, emb_name, 2, "ne"), 1ull << 40);
    gguf_patch_u64(bad, record_field(&lay, 0, emb_name, 2, "ne") + 8, 1ull << 40);
    expect_refused(bad, len, CINFER_ERR_PARSE, "token_embd.weight: size of shape overflows 64 bits");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 2, q_name, 2, "ne"), 48);
    expect_refused(bad, len, CINFER_ERR_PARSE,
                   "blk.0.attn_q.weight of type q8_0 has rows of 48 elements, expected a multiple of the block size 32");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 2, q_name, 2, "offset"), 8);
    expect_refused(bad, len, CINFER_ERR_PARSE, "blk.0.attn_q.weight starts at data offset 8, not a multiple of the alignment 32");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 2, q_name, 2, "offset"), 1ull << 50);
    expect_refused(bad, len, CINFER_ERR_PARSE, "blk.0.attn_q.weight spans data offsets 1125899906842624");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 2, q_name, 2, "offset"), 96); /* inside token_embd's 128 bytes */
    expect_refused(bad, len, CINFER_ERR_PARSE, "tensors token_embd.weight (data offsets 0..128) and blk.0.attn_q.weight (from 96) overlap");
    memcpy(bad, good, len);
    gguf_patch_u64(bad, record_field(&lay, 0, emb_name, 2, "offset"), UINT64_MAX - 31);
    expect_refused(bad, len, CINFER_ERR_PARSE, "token_embd.weight spans data offsets 18446744073709551584");

    free(bad);
    free(good);
    cinfer_test_remove_tmp_dir();
}
END_TEST

static void expect_built_refused(struct gguf_builder *b, int code, const char *want)
{
    size_t len;
    unsigned char *bytes = gguf_builder_finish(b, &len, NULL);
    gguf_builder_free(b);
    expect_refused(bytes, len, code, want);
    free(bytes);
}

START_TEST(bad_keys_are_refused)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct gguf_builder b;
    float x[32] = {0};

    gguf_builder_init(&b, 3);
    gguf_builder_kv_u32(&b, "a.b", 1);
    gguf_builder_kv_u32(&b, "a.b", 2);
    expect_built_refused(&b, CINFER_ERR_PARSE, "GGUF key \"a.b\" appears twice (keys 0 and 1)");

    gguf_builder_init(&b, 3);
    gguf_builder_kv_raw(&b, "odd", 13, "\0\0\0\0", 4);
    expect_built_refused(&b, CINFER_ERR_PARSE, "GGUF key \"odd\" has unknown value type 13");

    gguf_builder_init(&b, 3);
    unsigned char nested[12] = {9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}; /* array of 1 array */
    gguf_builder_kv_raw(&b, "nest", 9, nested, sizeof nested);
    expect_built_refused(&b, CINFER_ERR_UNSUPPORTED, "GGUF key \"nest\" is an array of arrays");

    gguf_builder_init(&b, 3);
    unsigned char arr[12] = {4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}; /* 2^60 uint32 */
    gguf_builder_kv_raw(&b, "huge", 9, arr, sizeof arr);
    expect_built_refused(&b, CINFER_ERR_PARSE, "GGUF key \"huge\": array of 1152921504606846976 uint32 values");

    gguf_builder_init(&b, 3);
    unsigned char sarr[12] = {8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
    gguf_builder_kv_raw(&b, "strs", 9, sarr, sizeof sarr);
    expect_built_refused(&b, CINFER_ERR_PARSE, "array of 1152921504606846976 strings cannot fit");

    gguf_builder_init(&b, 3);
    gguf_builder_kv_u32(&b, "general.alignment", 48);
    expect_built_refused(&b, CINFER_ERR_PARSE, "general.alignment is 48, expected a non-zero power of two");

    gguf_builder_init(&b, 3);
    gguf_builder_kv_u64(&b, "general.alignment", 64);
    expect_built_refused(&b, CINFER_ERR_PARSE, "general.alignment has type uint64, expected uint32");

    gguf_builder_init(&b, 3);
    gguf_builder_tensor(&b, "w", CINFER_GGML_F32, 1, (uint64_t[]){32}, x, sizeof x);
    gguf_builder_tensor(&b, "w", CINFER_GGML_F32, 1, (uint64_t[]){32}, x, sizeof x);
    expect_built_refused(&b, CINFER_ERR_PARSE, "GGUF tensor w appears twice (tensors 0 and 1)");

    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(missing_and_empty_files)
{
    cinfer_test_make_tmp_dir("test_gguf");
    struct cinfer_gguf *g = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(cinfer_gguf_open(cinfer_test_tmp_path("absent.gguf"), &g, &err), CINFER_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "absent.gguf: cannot open"));
    ck_assert_int_eq(cinfer_gguf_open(cinfer_test_tmp_dir, &g, &err), CINFER_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "not a regular file"));
    /* A header with no keys and no tensors is a valid (empty) file. */
    struct gguf_builder b;
    gguf_builder_init(&b, 3);
    ck_assert_int_eq(gguf_builder_write(&b, cinfer_test_tmp_path("empty.gguf"), NULL), 0);
    gguf_builder_free(&b);
    ck_assert_int_eq(cinfer_gguf_open(cinfer_test_tmp_path("empty.gguf"), &g, &err), 0);
    ck_assert_int_eq(cinfer_gguf_key_count(g), 0);
    ck_assert_uint_eq(cinfer_gguf_tensor_count(g), 0);
    cinfer_gguf_close(&g);
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* The real llama.cpp-written file in tests/data/models. */
START_TEST(reads_stories260k)
{
    const char *path = CINFER_TEST_DATA_DIR "/models/stories260K.gguf";
    struct cinfer_gguf *g = NULL;
    struct cinfer_error err;
    int rc = cinfer_gguf_open(path, &g, &err);
    ck_assert_msg(rc == 0, "%s", err.message);
    struct cinfer_gguf_str arch;
    ck_assert_int_eq(cinfer_gguf_get_str(g, "general.architecture", &arch, &err), 0);
    ck_assert(str_is(arch, "llama"));
    uint32_t n;
    ck_assert_int_eq(cinfer_gguf_get_u32(g, "llama.embedding_length", &n, &err), 0);
    ck_assert_uint_eq(n, 64);
    enum cinfer_gguf_value_type et;
    uint64_t count;
    ck_assert_int_eq(cinfer_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &count, &err), 0);
    ck_assert_uint_eq(count, 512);
    const struct cinfer_gguf_tensor *t = cinfer_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->ne[0], 64);
    ck_assert_uint_eq(t->ne[1], 512);
    printf("gguf: stories260K.gguf v%u, %lld keys, %llu tensors\n", cinfer_gguf_version(g),
           (long long)cinfer_gguf_key_count(g), (unsigned long long)cinfer_gguf_tensor_count(g));
    cinfer_gguf_close(&g);
}
END_TEST

static Suite *suite_gguf(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300); /* file-heavy: generous on a loaded machine */
    tcase_add_test(tc, reads_v3_and_v2);
    tcase_add_test(tc, custom_alignment);
    tcase_add_test(tc, getter_errors_name_key_and_types);
    tcase_add_test(tc, every_truncation_is_refused);
    tcase_add_test(tc, bad_headers_are_refused);
    tcase_add_test(tc, bad_tensor_records_are_refused);
    tcase_add_test(tc, bad_keys_are_refused);
    tcase_add_test(tc, missing_and_empty_files);
    tcase_add_test(tc, reads_stories260k);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_gguf)
