/* The real backend-cuda plugin, as built, on the machine the tests run on: it loads,
 * and its query answers without taking a device. Where the machine has no NVIDIA device
 * (no /dev/nvidiactl) the answer must be "not usable" with a reason, --device cuda
 * must fail with that reason, --device auto must take the CPU, and `cinfer plugins`
 * must print the reason. Where a device is present the answer must be usable with a
 * device count. Skips (77) when the plugin is not built (CINFER_CUDA off, no toolkit). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_select.h"
#include "cinfer/plugins.h"
#include "support/run_command.h"
#include "support/runner.h"

#define PLUGIN_DIR CINFER_BINARY_DIR "/lib/cinfer/plugins"
#define PLUGIN_FILE PLUGIN_DIR "/backend-cuda.so"
#define SKIP_EXIT_CODE 77

static int machine_has_nvidia_device(void)
{
    return access("/dev/nvidiactl", F_OK) == 0;
}

static struct cinfer_backend_answer query_plugin(void)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_plugin_open(PLUGIN_FILE, CINFER_PLUGIN_KIND_BACKEND, NULL, &p, &err);
    ck_assert_msg(rc == CINFER_OK, "loading %s: %s", PLUGIN_FILE, err.message);
    ck_assert_str_eq(cinfer_plugin_descriptor_of(p)->name, CINFER_CUDA_BACKEND_NAME);
    struct cinfer_backend_answer a;
    memset(&a, 0x5a, sizeof a); /* query must fill every field */
    ck_assert_int_eq(cinfer_backend_query(p, &a), CINFER_OK);
    cinfer_plugin_close(&p);
    return a;
}

START_TEST(query_answers_with_a_reason)
{
    struct cinfer_backend_answer a = query_plugin();
    ck_assert_msg(memchr(a.why, '\0', sizeof a.why), "why is not terminated");
    if (!machine_has_nvidia_device()) {
        ck_assert_int_eq(a.usable, 0);
        ck_assert_int_eq(a.device_count, 0);
    }
    if (a.usable) {
        ck_assert_int_ge(a.device_count, 1);
        ck_assert_int_gt(a.priority, 10); /* above the CPU: auto takes the GPU */
    } else {
        ck_assert_msg(a.why[0] != '\0', "not usable, but no reason given");
        printf("backend-cuda here: not usable: %s\n", a.why);
    }
}
END_TEST

START_TEST(device_cuda_fails_naming_the_reason)
{
    struct cinfer_backend_answer a = query_plugin();
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_backend_select("cuda", PLUGIN_DIR, &p, &err);
    if (a.usable) {
        ck_assert_msg(rc == CINFER_OK, "--device cuda on a usable device: %s", err.message);
    } else {
        ck_assert_int_eq(rc, CINFER_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.message, a.why), "message \"%s\" lacks the reason \"%s\"", err.message, a.why);
        ck_assert_ptr_null(p);
    }
    cinfer_plugin_close(&p);
}
END_TEST

START_TEST(device_auto_takes_the_cpu_without_a_device)
{
    struct cinfer_backend_answer a = query_plugin();
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_backend_select("auto", PLUGIN_DIR, &p, &err) == CINFER_OK, "auto: %s", err.message);
    ck_assert_str_eq(cinfer_plugin_descriptor_of(p)->name, a.usable ? CINFER_CUDA_BACKEND_NAME : "cpu");
    cinfer_plugin_close(&p);
}
END_TEST

START_TEST(cinfer_plugins_prints_the_reason)
{
    struct cinfer_backend_answer a = query_plugin();
    static char out[65536];
    int rc = cinfer_test_run(CINFER_BINARY_DIR "/bin/cinfer plugins", out, sizeof out);
    ck_assert_msg(rc == 0, "cinfer plugins exited %d:\n%s", rc, out);
    const char *line = strstr(out, CINFER_CUDA_BACKEND_NAME);
    ck_assert_msg(line, "cinfer plugins does not list %s:\n%s", CINFER_CUDA_BACKEND_NAME, out);
    if (!a.usable)
        ck_assert_msg(strstr(line, a.why), "cinfer plugins does not give the reason \"%s\":\n%s", a.why, out);
}
END_TEST

static Suite *suite_backend_cuda_plugin(void)
{
    Suite *s = suite_create("backend_cuda_plugin");
    TCase *tc = tcase_create("query");
    tcase_add_test(tc, query_answers_with_a_reason);
    tcase_add_test(tc, device_cuda_fails_naming_the_reason);
    tcase_add_test(tc, device_auto_takes_the_cpu_without_a_device);
    tcase_add_test(tc, cinfer_plugins_prints_the_reason);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (access(PLUGIN_FILE, F_OK) != 0) {
        printf("SKIP: %s is not built (CINFER_CUDA off or no CUDA toolkit)\n", PLUGIN_FILE);
        return SKIP_EXIT_CODE;
    }
    return cinfer_test_run_suite(suite_backend_cuda_plugin());
}
