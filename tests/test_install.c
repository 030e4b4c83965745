/* The installed product: `cmake --install` lays out bin/cinfer, the plugins, the
 * headers, the CMake package and the pkg-config file; a third-party plugin builds out
 * of tree against that package (find_package and pkg-config both), and the installed
 * cinfer loads it — and its own plugins — with no environment variable set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/run_command.h"
#include "support/runner.h"

#define WORK CINFER_BINARY_DIR "/install-test"
#define PREFIX WORK "/prefix"

static char output[65536];

static void run_ok(const char *cmd)
{
    int rc = cinfer_test_run(cmd, output, sizeof output);
    ck_assert_msg(rc == 0, "command failed (%d): %s\n%s", rc, cmd, output);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void install_once(void)
{
    static int done;
    if (done)
        return;
    run_ok("rm -rf " WORK " && cmake --install " CINFER_BINARY_DIR " --prefix " PREFIX);
    done = 1;
}

START_TEST(install_lays_out_the_product)
{
    install_once();
    const char *paths[] = {
        PREFIX "/bin/cinfer",
        PREFIX "/include/cinfer/plugin.h",
        PREFIX "/include/cinfer/tokenizer.h",
        PREFIX "/include/cinfer/launcher.h",
        PREFIX "/include/cinfer/plugins.h",
        PREFIX "/lib/cmake/cinfer/cinferConfig.cmake",
        PREFIX "/lib/cmake/cinfer/cinferTargets.cmake",
        PREFIX "/lib/pkgconfig/cinfer.pc",
        PREFIX "/lib/libcinfer.so",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        ck_assert_msg(exists(paths[i]), "not installed: %s", paths[i]);
}
END_TEST

START_TEST(installed_cinfer_finds_its_plugins_without_environment)
{
    install_once();
    run_ok("env -u CINFER_PLUGIN_PATH " PREFIX "/bin/cinfer plugins");
    /* Every plugin built in this tree is installed and loads from the install folder. */
    ck_assert_msg(strstr(output, PREFIX "/lib/cinfer/plugins/tokenizer-bpe.so"), "output:\n%s", output);
    ck_assert_msg(!strstr(output, "REFUSED"), "output:\n%s", output);
}
END_TEST

START_TEST(third_party_plugin_builds_with_find_package_and_loads)
{
    install_once();
    run_ok("cmake -S " CINFER_SOURCE_DIR "/tests/external_plugin -B " WORK "/ext-cmake"
           " -DCMAKE_PREFIX_PATH=" PREFIX " && cmake --build " WORK "/ext-cmake");
    ck_assert(exists(WORK "/ext-cmake/hello-tokenizer.so"));
    run_ok("env -u CINFER_PLUGIN_PATH " PREFIX "/bin/cinfer plugins --plugin-path " WORK "/ext-cmake");
    ck_assert_msg(strstr(output, "hello-tokenizer  tokenizer  0.3.0    loads"), "output:\n%s", output);
    /* And it really runs: word lengths 5 and 5 and 1. */
    run_ok("env -u CINFER_PLUGIN_PATH " PREFIX "/bin/cinfer tokenize --plugin hello-tokenizer --plugin-path "
           WORK "/ext-cmake --model /nonexistent 'hello world !'");
    ck_assert_msg(strstr(output, "5 5 1"), "output:\n%s", output);
}
END_TEST

/* A third-party launcher: chosen by name (flag and config file), or by auto when it says
 * it is usable here with a higher priority than launch-fork; it really starts the
 * workers (it logs each one it starts). */
START_TEST(third_party_launcher_is_chosen_by_name_and_by_auto)
{
    install_once();
    run_ok("cmake -S " CINFER_SOURCE_DIR "/tests/external_plugin -B " WORK "/ext-cmake"
           " -DCMAKE_PREFIX_PATH=" PREFIX " && cmake --build " WORK "/ext-cmake");
    const char *cinfer = "env -u CINFER_PLUGIN_PATH RELAY_LAUNCHER_LOG=" WORK "/relay.log " PREFIX "/bin/cinfer";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s plugins --plugin-path %s", cinfer, WORK "/ext-cmake");
    run_ok(cmd);
    ck_assert_msg(strstr(output, "relay-launcher   launcher   0.1.0    loads") &&
                      strstr(output, "here: not usable: RELAY_LAUNCHER_ENABLE is not set to 1") &&
                      strstr(output, "here: usable, priority 10"),
                  "output:\n%s", output);
    snprintf(cmd, sizeof cmd, "RELAY_LAUNCHER_ENABLE=1 %s plugins --plugin-path %s", cinfer, WORK "/ext-cmake");
    run_ok(cmd);
    ck_assert_msg(strstr(output, "here: usable, priority 50"), "output:\n%s", output);

    /* By name on the command line, and from a config file; auto picks it when enabled,
     * launch-fork when not. */
    static const struct {
        const char *env, *flags;
        int relayed;
    } runs[] = {
        {"RELAY_LAUNCHER_ENABLE=1", "--launcher relay-launcher", 1},
        {"RELAY_LAUNCHER_ENABLE=1", "--config " WORK "/relay.cfg", 1},
        {"RELAY_LAUNCHER_ENABLE=1", "--launcher auto", 1},
        {"RELAY_LAUNCHER_ENABLE=0", "--launcher auto", 0},
    };
    FILE *cfg = fopen(WORK "/relay.cfg", "w");
    ck_assert_ptr_nonnull(cfg);
    fprintf(cfg, "launcher = { plugin = \"relay-launcher\"; plugin_path = \"%s\"; };\n", WORK "/ext-cmake");
    fclose(cfg);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        unlink(WORK "/relay.log");
        snprintf(cmd, sizeof cmd, "%s %s generate --plugin-path %s %s --log-level error --max-new-tokens 6 "
                 "'And God said'", runs[i].env, cinfer, WORK "/ext-cmake", runs[i].flags);
        run_ok(cmd);
        ck_assert_msg(strncmp(output, "And God said", 12) == 0, "%s: output:\n%s", runs[i].flags, output);
        FILE *log = fopen(WORK "/relay.log", "r");
        char lines[256] = "";
        if (log) {
            size_t n = fread(lines, 1, sizeof lines - 1, log);
            lines[n] = '\0';
            fclose(log);
        }
        if (runs[i].relayed)
            ck_assert_msg(!strcmp(lines, "detokenizer\nscheduler tp0\n"), "%s %s: the relay started: '%s'", runs[i].env,
                          runs[i].flags, lines);
        else
            ck_assert_msg(!lines[0], "%s %s: the relay started '%s'", runs[i].env, runs[i].flags, lines);
    }
    /* A launcher that is not usable here, named: refused with its reason. */
    snprintf(cmd, sizeof cmd, "RELAY_LAUNCHER_ENABLE=0 %s generate --plugin-path %s --launcher relay-launcher hi 2>&1",
             cinfer, WORK "/ext-cmake");
    ck_assert_int_ne(cinfer_test_run(cmd, output, sizeof output), 0);
    ck_assert_msg(strstr(output, "launcher.plugin \"relay-launcher\"") &&
                      strstr(output, "is not usable here: RELAY_LAUNCHER_ENABLE is not set to 1"),
                  "output:\n%s", output);
}
END_TEST

START_TEST(third_party_plugin_builds_with_pkg_config_and_loads)
{
    install_once();
    run_ok("mkdir -p " WORK "/ext-pc && export PKG_CONFIG_PATH=" PREFIX "/lib/pkgconfig && "
           "cc -std=c11 -Wall -Werror -fPIC -shared -fvisibility=hidden -DHELLO_NAME='\"hello-pc\"' "
           CINFER_SOURCE_DIR "/tests/external_plugin/hello_tokenizer.c -o " WORK "/ext-pc/hello-pc.so "
           "$(pkg-config --cflags --libs cinfer) -Wl,-rpath,$(pkg-config --variable=libdir cinfer)");
    run_ok("env CINFER_PLUGIN_PATH=" WORK "/ext-pc " PREFIX "/bin/cinfer plugins");
    ck_assert_msg(strstr(output, "hello-pc         tokenizer  0.3.0    loads"), "output:\n%s", output);
    run_ok("export PKG_CONFIG_PATH=" PREFIX "/lib/pkgconfig && pkg-config --variable=plugindir cinfer");
    output[strcspn(output, "\n")] = '\0';
    char resolved[4096];
    ck_assert_msg(realpath(output, resolved), "plugindir %s does not exist", output);
    ck_assert_str_eq(resolved, PREFIX "/lib/cinfer/plugins");
}
END_TEST

START_TEST(installed_cinfer_generates_with_its_default_model)
{
    install_once();
    ck_assert(exists(PREFIX "/share/cinfer/models/default/config.json"));
    ck_assert(exists(PREFIX "/bin/cinfer-worker"));
    /* The whole pipeline from the install tree: worker, plugins and model found there. */
    run_ok("env -u CINFER_PLUGIN_PATH -u CINFER_WORKER -u CINFER_DEFAULT_MODEL " PREFIX
           "/bin/cinfer generate --log-level error --max-new-tokens 12 'And God said'");
    ck_assert_msg(strncmp(output, "And God said", 12) == 0 && strlen(output) > 20, "output:\n%s", output);
}
END_TEST

static Suite *suite_install(void)
{
    Suite *s = suite_create("install");
    TCase *tc = tcase_create("installed tree");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, install_lays_out_the_product);
    tcase_add_test(tc, installed_cinfer_finds_its_plugins_without_environment);
    tcase_add_test(tc, third_party_plugin_builds_with_find_package_and_loads);
    tcase_add_test(tc, third_party_launcher_is_chosen_by_name_and_by_auto);
    tcase_add_test(tc, third_party_plugin_builds_with_pkg_config_and_loads);
    tcase_add_test(tc, installed_cinfer_generates_with_its_default_model);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_install)
