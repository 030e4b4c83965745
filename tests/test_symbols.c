/* One copy of the core per process, and no name of the core's that an embedder's own
 * could collide with: every global symbol the core's objects define starts with
 * cinfer_, libcinfer.so exports only cinfer_ names, and the cinfer and cinfer-worker
 * programs link libcinfer.so (the library their plugins link) rather than a copy of
 * the core. Read with binutils' nm and readelf, the tools a packager would use. */
#include <stdio.h>
#include <string.h>

#include "support/run_command.h"
#include "support/runner.h"

/* Lists the names nm prints for cmd (one symbol per line, name last) that do not
 * start with cinfer_; returns how many, with the first few in bad. */
static int foreign_names(const char *cmd, char *bad, size_t bad_bytes, int *total)
{
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run: %s", cmd);
    char line[1024];
    int n_bad = 0;
    *total = 0;
    bad[0] = '\0';
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *name = strrchr(line, ' ');
        name = name ? name + 1 : line;
        if (!*name || strchr(line, ':') == line + strlen(line) - 1) /* archive member header "x.o:" */
            continue;
        if (!strncmp(name, "__odr_asan.", 11)) /* AddressSanitizer's marker beside a global of ours */
            continue;
        (*total)++;
        if (strncmp(name, "cinfer_", 7) != 0) {
            size_t used = strlen(bad), n = strlen(name);
            if (n_bad++ < 12 && used + n + 2 <= bad_bytes) {
                bad[used] = ' ';
                memcpy(bad + used + 1, name, n + 1);
            }
        }
    }
    ck_assert_int_eq(pclose(p), 0);
    return n_bad;
}

START_TEST(core_objects_define_only_cinfer_names)
{
    /* The static core (libcinfer.a in an appliance build, cinfer_internal otherwise:
     * the same objects) and the kernels it carries. */
    const char *archives[] = {CINFER_CORE_ARCHIVE, CINFER_KERNELS_ARCHIVE};
    for (size_t i = 0; i < sizeof archives / sizeof *archives; i++) {
        if (!archives[i][0])
            continue;
        char cmd[4096], bad[1024];
        snprintf(cmd, sizeof cmd, "nm -g --defined-only --format=posix '%s' | awk 'NF >= 2 {print $1}'",
                 archives[i]);
        int total;
        int n_bad = foreign_names(cmd, bad, sizeof bad, &total);
        ck_assert_msg(total > 20, "%s: expected the core's symbols, found %d", archives[i], total);
        ck_assert_msg(n_bad == 0, "%s: %d global symbols without the cinfer_ prefix:%s", archives[i], n_bad, bad);
    }
}
END_TEST

START_TEST(shared_library_exports_only_cinfer_names)
{
    if (!CINFER_SHARED_LIBRARY[0])
        return; /* an appliance build has no libcinfer.so */
    char cmd[4096], bad[1024];
    snprintf(cmd, sizeof cmd,
             "nm -D --defined-only --format=posix '%s' | awk 'NF >= 2 && $1 !~ /^(__bss_start|_edata|_end)$/ {print $1}'",
             CINFER_SHARED_LIBRARY);
    int total;
    int n_bad = foreign_names(cmd, bad, sizeof bad, &total);
    ck_assert_msg(total > 20, "%s: expected the public API, found %d exported names", CINFER_SHARED_LIBRARY, total);
    ck_assert_msg(n_bad == 0, "%s exports %d names outside the API:%s", CINFER_SHARED_LIBRARY, n_bad, bad);
}
END_TEST

START_TEST(programs_link_the_shared_core)
{
    if (!CINFER_SHARED_LIBRARY[0])
        return;
    const char *programs[] = {CINFER_CLI_PROGRAM, CINFER_WORKER_PROGRAM};
    for (size_t i = 0; i < 2; i++) {
        char cmd[4096], out[16384];
        snprintf(cmd, sizeof cmd, "readelf -d '%s' | grep NEEDED", programs[i]);
        ck_assert_int_eq(cinfer_test_run(cmd, out, sizeof out), 0);
        ck_assert_msg(strstr(out, "[libcinfer.so."), "%s does not link libcinfer.so:\n%s", programs[i], out);
        /* A program that carried its own core would define the core's functions. */
        snprintf(cmd, sizeof cmd,
                 "nm -g --defined-only --format=posix '%s' | awk 'NF >= 2 {print $1}' | sort -u > core.syms.tmp; "
                 "nm --defined-only --format=posix '%s' | awk 'NF >= 2 {print $1}' | sort -u | comm -12 - core.syms.tmp "
                 "| head -5; rm -f core.syms.tmp",
                 CINFER_CORE_ARCHIVE, programs[i]);
        ck_assert_int_eq(cinfer_test_run(cmd, out, sizeof out), 0);
        ck_assert_msg(out[0] == '\0', "%s defines the core's own symbols itself (a second copy of the core):\n%s",
                      programs[i], out);
    }
}
END_TEST

static Suite *suite_symbols(void)
{
    Suite *s = suite_create("symbols");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, core_objects_define_only_cinfer_names);
    tcase_add_test(tc, shared_library_exports_only_cinfer_names);
    tcase_add_test(tc, programs_link_the_shared_core);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_symbols)
