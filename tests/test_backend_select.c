/* Choosing the compute backend (engine.device): the built-in CPU backend is listed and
 * chosen like a plugin; fake backend plugins (tests/fake_plugins/fake_backend_*.c) that
 * the loader really loads show that auto passes over a backend without a device, that
 * naming one fails with its reason, and that a vtable older or shorter than version 8
 * is refused naming the plugin. The CPU backend wrapped to report a device error from
 * status shows the forward step failing with that error, and wrapped to copy every 1-D
 * weight shows norms and biases reaching the ops through weight_prepare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_select.h"
#include "backend/cpu_backend.h"
#include "cinfer/plugins.h"
#include "model/runtime.h"
#include "support/engine_fixture.h"
#include "support/random_model.h"
#include "support/run_command.h"
#include "support/runner.h"

#define FAKE(name) FAKE_BACKEND_DIR "/" name ".so"

#define ASSERT_MESSAGE_HAS(err, text) \
    ck_assert_msg(strstr((err).message, (text)), "message \"%s\" lacks \"%s\"", (err).message, (text))

#define REAL_CUDA_PLUGIN CINFER_BINARY_DIR "/lib/cinfer/plugins/backend-cuda.so"

/* Whether the real backend-cuda plugin is built and has a device here: auto then takes
 * it over the CPU (on a GPU machine), whatever the fake plugins say. */
static int real_cuda_usable(void)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_backend_answer a = {0};
    struct cinfer_error err = {0};
    int usable = access(REAL_CUDA_PLUGIN, F_OK) == 0 &&
                 cinfer_plugin_open(REAL_CUDA_PLUGIN, CINFER_PLUGIN_KIND_BACKEND, NULL, &p, &err) == CINFER_OK &&
                 cinfer_backend_query(p, &a) == CINFER_OK && a.usable;
    cinfer_plugin_close(&p);
    return usable;
}

START_TEST(cpu_is_a_built_in_backend_plugin)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_plugin_open("cpu", CINFER_PLUGIN_KIND_BACKEND, NULL, &p, &err), CINFER_OK);
    ck_assert_str_eq(cinfer_plugin_file(p), "built-in");
    ck_assert_ptr_eq(cinfer_plugin_vtable(p), cinfer_cpu_backend_ops());
    struct cinfer_backend_answer a;
    ck_assert_int_eq(cinfer_backend_query(p, &a), CINFER_OK);
    ck_assert_int_eq(a.usable, 1);
    ck_assert_int_eq(a.priority, 10);
    ck_assert_int_eq(a.device_count, 1);
    cinfer_plugin_close(&p);
}
END_TEST

START_TEST(auto_passes_over_a_backend_without_device)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    int rc = cinfer_backend_select("auto", FAKE_BACKEND_DIR, &p, &err);
    ck_assert_msg(rc == CINFER_OK, "auto: %s", err.message);
    ck_assert_str_eq(cinfer_plugin_descriptor_of(p)->name, real_cuda_usable() ? CINFER_CUDA_BACKEND_NAME : "cpu");
    cinfer_plugin_close(&p);
}
END_TEST

START_TEST(named_backend_without_device_fails_with_its_reason)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    /* by name on the search path, and by file */
    const char *const names[] = {"fake-backend-nodevice", FAKE("fake-backend-nodevice")};
    for (int i = 0; i < 2; i++) {
        cinfer_error_clear(&err);
        ck_assert_int_eq(cinfer_backend_select(names[i], FAKE_BACKEND_DIR, &p, &err), CINFER_ERR_UNSUPPORTED);
        ck_assert_ptr_null(p);
        ASSERT_MESSAGE_HAS(err, "engine.device (--device)");
        ASSERT_MESSAGE_HAS(err, FAKE("fake-backend-nodevice"));
        ASSERT_MESSAGE_HAS(err, "not usable here: no device: the fake driver reports 0 devices");
    }
}
END_TEST

START_TEST(cuda_without_plugin_says_so)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    /* where the real plugin is built (CINFER_CUDA), the default places have it:
     * test_backend_cuda_plugin checks what --device cuda says then */
    if (access(REAL_CUDA_PLUGIN, F_OK) == 0)
        return;
    ck_assert_int_eq(cinfer_backend_select("cuda", FAKE_BACKEND_DIR, &p, &err), CINFER_ERR_NOT_FOUND);
    ASSERT_MESSAGE_HAS(err, "engine.device (--device) \"cuda\": no CUDA backend plugin is installed");
    ASSERT_MESSAGE_HAS(err, "backend-cuda.so");
    ASSERT_MESSAGE_HAS(err, FAKE_BACKEND_DIR);
}
END_TEST

START_TEST(old_and_short_vtables_are_refused_naming_the_plugin)
{
    struct cinfer_plugin *p = NULL;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_plugin_open(FAKE("fake-backend-old"), CINFER_PLUGIN_KIND_BACKEND, NULL, &p, &err),
                     CINFER_ERR_ABI);
    ASSERT_MESSAGE_HAS(err, FAKE("fake-backend-old"));
    ASSERT_MESSAGE_HAS(err, "plugin 'fake-backend-old' has backend vtable version 6");
    ASSERT_MESSAGE_HAS(err, "needs version 8");

    cinfer_error_clear(&err);
    ck_assert_int_eq(cinfer_backend_select("fake-backend-short", FAKE_BACKEND_DIR, &p, &err), CINFER_ERR_ABI);
    ASSERT_MESSAGE_HAS(err, "plugin 'fake-backend-short' has backend vtable version 8");
    ASSERT_MESSAGE_HAS(err, "bytes), but this cinfer needs version 8");
    ck_assert_ptr_null(p);
}
END_TEST

/* What a user sees: `cinfer plugins` lists the CPU backend and each backend's answer. */
START_TEST(plugins_command_lists_backends_and_answers)
{
    char cmd[1024], out[16384];
    snprintf(cmd, sizeof cmd, "%s/bin/cinfer plugins --plugin-path %s 2>&1", CINFER_BINARY_DIR, FAKE_BACKEND_DIR);
    ck_assert_int_eq(cinfer_test_run(cmd, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "cpu              backend") && strstr(out, "built-in\n  here: usable, priority 10"),
                  "printed: %s", out);
    ck_assert_msg(strstr(out, "fake-backend-nodevice backend") &&
                      strstr(out, "here: not usable: no device: the fake driver reports 0 devices"),
                  "printed: %s", out);
    ck_assert_msg(strstr(out, "fake-backend-old") && strstr(out, "REFUSED"), "printed: %s", out);
}
END_TEST

/* The main process asks before any worker starts: the reason comes at once. */
START_TEST(generate_with_unusable_device_fails_at_start)
{
    char cmd[2048], out[8192];
    const char *model = cinfer_test_engine_model();
    snprintf(cmd, sizeof cmd,
             "%s/bin/cinfer generate --model '%s' --plugin-path %s --device fake-backend-nodevice hello 2>&1",
             CINFER_BINARY_DIR, model, FAKE_BACKEND_DIR);
    ck_assert_int_ne(cinfer_test_run(cmd, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "engine.device (--device) \"fake-backend-nodevice\"") &&
                      strstr(out, "no device: the fake driver reports 0 devices"),
                  "printed: %s", out);
    snprintf(cmd, sizeof cmd,
             "%s/bin/cinfer generate --model '%s' --plugin-path %s --device auto --kv-cache-bytes 16777216 "
             "--max-new-tokens 4 --log-level info hello 2>&1",
             CINFER_BINARY_DIR, model, FAKE_BACKEND_DIR);
    ck_assert_msg(cinfer_test_run(cmd, out, sizeof out) == 0, "printed: %s", out);
    ck_assert_msg(strstr(out, real_cuda_usable() ? "compute backend: " CINFER_CUDA_BACKEND_NAME
                                                 : "compute backend: cpu (built-in)"),
                  "printed: %s", out);
}
END_TEST

/* The CPU backend with a device error injected into status on the countdown's step. */
static struct cinfer_backend_ops failing_ops;
static int status_calls, fail_at_call;

static int failing_status(void *state, struct cinfer_error *err)
{
    (void)state;
    if (++status_calls == fail_at_call)
        return cinfer_error_set(err, CINFER_ERR_INTERNAL, "fake device 0: an illegal memory access in a kernel");
    return 0;
}

START_TEST(device_error_from_status_fails_the_step)
{
    static const struct random_model_spec spec = {
        .vocab = 53, .hidden = 32, .intermediate = 48, .layers = 2, .heads = 4, .kv_heads = 2, .head_dim = 8,
        .dtype = CINFER_DTYPE_F32, .seed = 5,
    };
    struct cinfer_model *m = random_model_create(&spec);
    ck_assert_ptr_nonnull(m);
    failing_ops = *cinfer_cpu_backend_ops();
    failing_ops.status = failing_status;
    status_calls = 0;
    fail_at_call = 2;
    struct cinfer_runtime_options o = {.kv_cache_bytes = 1u << 20, .kv_page_tokens = 16, .n_threads = 1,
                                       .max_batch_tokens = 64, .kv_dtype = CINFER_KV_CACHE_DTYPE_F32,
                                       .backend = &failing_ops};
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_create(m, &o, &rt, &err) == 0, "runtime: %s", err.message);
    int32_t page;
    ck_assert_int_eq(cinfer_runtime_kv_page_alloc(rt, &page), 0);
    int32_t tokens[3] = {1, 2, 3};
    float logits[53];
    struct cinfer_seq_chunk c = {tokens, 2, 0, &page, 1, CINFER_LOGITS_LAST, logits, 0, 0, NULL, NULL, NULL};
    ck_assert_msg(cinfer_runtime_forward(rt, &c, 1, &err) == 0, "forward: %s", err.message);
    c = (struct cinfer_seq_chunk){tokens + 2, 1, 2, &page, 1, CINFER_LOGITS_LAST, logits, 0, 0, NULL, NULL, NULL};
    ck_assert_int_eq(cinfer_runtime_forward(rt, &c, 1, &err), CINFER_ERR_INTERNAL);
    ASSERT_MESSAGE_HAS(err, "fake device 0: an illegal memory access");
    ck_assert_int_eq(status_calls, 2);
    cinfer_runtime_destroy(&rt);
    random_model_free(&m);
}
END_TEST

/* A backend that, like a device one, copies every 1-D weight it is given: the runtime
 * must hand each norm and bias to weight_prepare and pass the ops the copy. */
static struct cinfer_backend_ops copying_ops;
static int vectors_prepared, vectors_released;

static int copying_prepare(void *state, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                           struct cinfer_error *err)
{
    if (w->rows != 1)
        return cinfer_cpu_backend_ops()->weight_prepare(state, w, out, err);
    *out = *w;
    void *copy = malloc(w->row_bytes);
    memcpy(copy, w->data, w->row_bytes);
    memset((void *)w->data, 0xff, w->row_bytes); /* NaNs: an op that reads the host copy shows */
    out->data = copy;
    vectors_prepared++;
    return 0;
}

static void copying_release(void *state, const struct cinfer_backend_weight *w)
{
    if (w->rows != 1) {
        cinfer_cpu_backend_ops()->weight_release(state, w);
        return;
    }
    free((void *)w->data);
    vectors_released++;
}

static void last_logits(const struct cinfer_model *m, const struct cinfer_backend_ops *ops, float *logits)
{
    struct cinfer_runtime_options o = {.kv_cache_bytes = 1u << 20, .kv_page_tokens = 16, .n_threads = 1,
                                       .max_batch_tokens = 64, .kv_dtype = CINFER_KV_CACHE_DTYPE_F32,
                                       .backend = ops};
    struct cinfer_runtime *rt = NULL;
    struct cinfer_error err = {0};
    ck_assert_msg(cinfer_runtime_create(m, &o, &rt, &err) == 0, "runtime: %s", err.message);
    int32_t page, tokens[5] = {3, 1, 4, 1, 5};
    ck_assert_int_eq(cinfer_runtime_kv_page_alloc(rt, &page), 0);
    struct cinfer_seq_chunk c = {tokens, 5, 0, &page, 1, CINFER_LOGITS_LAST, logits, 0, 0, NULL, NULL, NULL};
    ck_assert_msg(cinfer_runtime_forward(rt, &c, 1, &err) == 0, "forward: %s", err.message);
    cinfer_runtime_destroy(&rt);
}

START_TEST(norms_and_biases_pass_through_weight_prepare)
{
    /* Qwen2/3-like: q/k/v biases and q/k norms besides the two norms of each layer */
    static const struct random_model_spec spec = {
        .vocab = 53, .hidden = 32, .intermediate = 48, .layers = 2, .heads = 4, .kv_heads = 2, .head_dim = 8,
        .qk_norm = 1, .attention_bias = 1, .dtype = CINFER_DTYPE_F32, .seed = 9,
    };
    struct cinfer_model *m = random_model_create(&spec);
    ck_assert_ptr_nonnull(m);
    float want[53], got[53];
    last_logits(m, NULL, want);
    copying_ops = *cinfer_cpu_backend_ops();
    copying_ops.weight_prepare = copying_prepare;
    copying_ops.weight_release = copying_release;
    vectors_prepared = vectors_released = 0;
    last_logits(m, &copying_ops, got);
    /* output_norm, then per layer attn/ffn norms, q/k norms and q/k/v biases */
    ck_assert_int_eq(vectors_prepared, 1 + 2 * 7);
    ck_assert_int_eq(vectors_released, vectors_prepared);
    for (int i = 0; i < 53; i++)
        ck_assert_msg(got[i] == want[i], "logit %d: %g with the copies, %g without", i, got[i], want[i]);
    random_model_free(&m);
}
END_TEST

static Suite *suite_backend_select(void)
{
    Suite *s = suite_create("backend_select");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, cpu_is_a_built_in_backend_plugin);
    tcase_add_test(tc, auto_passes_over_a_backend_without_device);
    tcase_add_test(tc, named_backend_without_device_fails_with_its_reason);
    tcase_add_test(tc, cuda_without_plugin_says_so);
    tcase_add_test(tc, old_and_short_vtables_are_refused_naming_the_plugin);
    tcase_add_test(tc, plugins_command_lists_backends_and_answers);
    tcase_add_test(tc, generate_with_unusable_device_fails_at_start);
    tcase_add_test(tc, device_error_from_status_fails_the_step);
    tcase_add_test(tc, norms_and_biases_pass_through_weight_prepare);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_backend_select)
