/* The plugin loader really loads fake plugins (tests/fake_plugins), one good and one
 * for each rule a plugin can break, and refuses each with a message that names the
 * file and what was expected and found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/plugins.h"
#include "cinfer/tokenizer.h"
#include "support/runner.h"

#define FAKE(name) FAKE_PLUGIN_DIR "/" name ".so"

static int open_fake(const char *path, uint32_t kind, struct cinfer_plugin **p, struct cinfer_error *err)
{
    cinfer_error_clear(err);
    return cinfer_plugin_open(path, kind, NULL, p, err);
}

#define ASSERT_MESSAGE_HAS(err, text) \
    ck_assert_msg(strstr((err).message, (text)), "message \"%s\" lacks \"%s\"", (err).message, (text))

START_TEST(good_plugin_loads_and_runs)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-good"), CINFER_PLUGIN_KIND_TOKENIZER, &p, &err), CINFER_OK);
    const struct cinfer_plugin_descriptor *d = cinfer_plugin_descriptor_of(p);
    ck_assert_str_eq(d->name, "fake-good");
    ck_assert_str_eq(d->version, "1.0.0");
    ck_assert_str_eq(cinfer_plugin_file(p), FAKE("fake-good"));

    /* Its code really runs: one id per byte, and back. */
    const struct cinfer_tokenizer_ops *ops = cinfer_plugin_vtable(p);
    struct cinfer_tokenizer *tok = NULL;
    ck_assert_int_eq(ops->open("unused", &tok, &err), CINFER_OK);
    struct cinfer_token_ids ids = {0};
    ck_assert_int_eq(ops->encode(tok, "hi!", 3, 1, &ids, &err), CINFER_OK);
    ck_assert_uint_eq(ids.len, 3);
    ck_assert_int_eq(ids.ids[0], 'h');
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(ops->decode(tok, ids.ids, ids.len, 0, &text, &len, &err), CINFER_OK);
    ck_assert_str_eq(text, "hi!");
    free(text);
    cinfer_token_ids_free(&ids);
    ops->close(tok);
    cinfer_plugin_close(&p);
    ck_assert_ptr_null(p);
}
END_TEST

START_TEST(wrong_abi_is_refused_with_both_versions)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-wrong-abi"), CINFER_PLUGIN_KIND_TOKENIZER, &p, &err), CINFER_ERR_ABI);
    ck_assert_ptr_null(p);
    ASSERT_MESSAGE_HAS(err, FAKE("fake-wrong-abi"));
    ASSERT_MESSAGE_HAS(err, "plugin ABI version 999");
    ASSERT_MESSAGE_HAS(err, "expects ABI version 1");
}
END_TEST

START_TEST(wrong_kind_is_refused_naming_both_kinds)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-wrong-kind"), CINFER_PLUGIN_KIND_TOKENIZER, &p, &err),
                     CINFER_ERR_PLUGIN);
    ASSERT_MESSAGE_HAS(err, FAKE("fake-wrong-kind"));
    ASSERT_MESSAGE_HAS(err, "is a launcher plugin, expected a tokenizer plugin");
    /* Asked for as a launcher it loads. */
    ck_assert_int_eq(open_fake(FAKE("fake-wrong-kind"), CINFER_PLUGIN_KIND_LAUNCHER, &p, &err), CINFER_OK);
    cinfer_plugin_close(&p);
}
END_TEST

START_TEST(missing_descriptor_is_refused_naming_the_symbol)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-no-descriptor"), 0, &p, &err), CINFER_ERR_PLUGIN);
    ASSERT_MESSAGE_HAS(err, FAKE("fake-no-descriptor"));
    ASSERT_MESSAGE_HAS(err, "exports no symbol 'cinfer_plugin_descriptor'");
}
END_TEST

START_TEST(non_shared_object_is_refused)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-not-elf"), 0, &p, &err), CINFER_ERR_PLUGIN);
    ASSERT_MESSAGE_HAS(err, FAKE("fake-not-elf"));
    ASSERT_MESSAGE_HAS(err, "cannot load as a shared object");
}
END_TEST

START_TEST(null_required_slot_is_refused)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-null-slot"), CINFER_PLUGIN_KIND_TOKENIZER, &p, &err),
                     CINFER_ERR_PLUGIN);
    ASSERT_MESSAGE_HAS(err, "required tokenizer slot 'encode' is NULL");
}
END_TEST

START_TEST(old_vtable_is_refused_with_both_versions)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("fake-old-vtable"), CINFER_PLUGIN_KIND_TOKENIZER, &p, &err), CINFER_ERR_ABI);
    ASSERT_MESSAGE_HAS(err, "tokenizer vtable version 0");
    ASSERT_MESSAGE_HAS(err, "needs version 1");
}
END_TEST

START_TEST(missing_file_and_unknown_name)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err;
    ck_assert_int_eq(open_fake(FAKE("no-such-plugin"), 0, &p, &err), CINFER_ERR_NOT_FOUND);
    ASSERT_MESSAGE_HAS(err, "no-such-plugin.so: plugin file does not exist");
    cinfer_error_clear(&err);
    ck_assert_int_eq(cinfer_plugin_open("no-such-plugin", 0, FAKE_PLUGIN_DIR, &p, &err), CINFER_ERR_NOT_FOUND);
    ASSERT_MESSAGE_HAS(err, "plugin 'no-such-plugin' not found");
    ASSERT_MESSAGE_HAS(err, FAKE_PLUGIN_DIR);
}
END_TEST

START_TEST(search_order_configured_then_environment)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    /* The configured path wins over $CINFER_PLUGIN_PATH. */
    setenv("CINFER_PLUGIN_PATH", FAKE_PLUGIN_DIR "/second", 1);
    ck_assert_int_eq(cinfer_plugin_open("fake-good", CINFER_PLUGIN_KIND_TOKENIZER, FAKE_PLUGIN_DIR "/first", &p,
                                        &err), CINFER_OK);
    ck_assert_str_eq(cinfer_plugin_descriptor_of(p)->version, "first");
    cinfer_plugin_close(&p);
    /* Without a configured path, the environment is searched. */
    ck_assert_int_eq(cinfer_plugin_open("fake-good", CINFER_PLUGIN_KIND_TOKENIZER, NULL, &p, &err), CINFER_OK);
    ck_assert_str_eq(cinfer_plugin_descriptor_of(p)->version, "second");
    cinfer_plugin_close(&p);
    unsetenv("CINFER_PLUGIN_PATH");
}
END_TEST

struct listing_tally {
    int seen, loads;
    char why_abi[512];
};

static void tally(const struct cinfer_plugin_listing *e, void *ctx)
{
    struct listing_tally *t = ctx;
    t->seen++;
    t->loads += e->loads;
    if (!e->loads && strstr(e->file, "fake-wrong-abi"))
        snprintf(t->why_abi, sizeof t->why_abi, "%s", e->why_not);
}

START_TEST(listing_reports_each_file_and_why)
{
    struct listing_tally t = {0};
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_plugin_list(FAKE_PLUGIN_DIR, tally, &t, &err), CINFER_OK);
    /* 7 files in the folder (good, wrong-abi, wrong-kind, no-descriptor, null-slot,
     * old-vtable, not-elf), plus whatever the install folder holds. */
    ck_assert_int_ge(t.seen, 7);
    ck_assert_int_ge(t.loads, 2); /* fake-good and fake-wrong-kind (any kind is fine here) */
    ck_assert_msg(strstr(t.why_abi, "plugin ABI version 999"), "why: %s", t.why_abi);
}
END_TEST

START_TEST(cli_lists_plugins_and_refusals)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/bin/cinfer plugins --plugin-path %s 2>&1", CINFER_BINARY_DIR, FAKE_PLUGIN_DIR);
    FILE *out = popen(cmd, "r");
    ck_assert_ptr_nonnull(out);
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, out);
    buf[n] = '\0';
    ck_assert_int_eq(pclose(out), 0);
    ck_assert_msg(strstr(buf, "fake-good"), "output:\n%s", buf);
    ck_assert_msg(strstr(buf, "tokenizer  1.0.0    loads"), "output:\n%s", buf);
    ck_assert_msg(strstr(buf, "REFUSED " FAKE("fake-not-elf")), "output:\n%s", buf);
    ck_assert_msg(strstr(buf, "why: " FAKE("fake-wrong-abi") ": plugin ABI version 999"), "output:\n%s", buf);
}
END_TEST

static Suite *suite_plugin_loader(void)
{
    Suite *s = suite_create("plugin_loader");
    TCase *tc = tcase_create("fake plugins");
    tcase_add_test(tc, good_plugin_loads_and_runs);
    tcase_add_test(tc, wrong_abi_is_refused_with_both_versions);
    tcase_add_test(tc, wrong_kind_is_refused_naming_both_kinds);
    tcase_add_test(tc, missing_descriptor_is_refused_naming_the_symbol);
    tcase_add_test(tc, non_shared_object_is_refused);
    tcase_add_test(tc, null_required_slot_is_refused);
    tcase_add_test(tc, old_vtable_is_refused_with_both_versions);
    tcase_add_test(tc, missing_file_and_unknown_name);
    tcase_add_test(tc, search_order_configured_then_environment);
    tcase_add_test(tc, listing_reports_each_file_and_why);
    tcase_add_test(tc, cli_lists_plugins_and_refusals);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_plugin_loader)
