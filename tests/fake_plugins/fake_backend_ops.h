/* A compute backend that never has a device: its query says "not usable" with the
 * reason a GPU backend gives on a machine without one, and create_on refuses. Every op
 * slot is filled (the loader requires them) but aborts: the core must never run one
 * after query said no. FAKE_BACKEND_VERSION and FAKE_BACKEND_SIZE set the vtable's
 * header words, so one source builds the good fake and the mismatched ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer/backend.h"
#include "cinfer/plugin.h"

#ifndef FAKE_BACKEND_VERSION
#define FAKE_BACKEND_VERSION CINFER_BACKEND_OPS_VERSION
#endif
#ifndef FAKE_BACKEND_SIZE
#define FAKE_BACKEND_SIZE sizeof(struct cinfer_backend_ops)
#endif

static void never(const char *op)
{
    fprintf(stderr, "fake backend: %s called although query said not usable\n", op);
    abort();
}

static int fake_query(struct cinfer_backend_answer *answer)
{
    memset(answer, 0, sizeof *answer);
    snprintf(answer->why, sizeof answer->why, "no device: the fake driver reports 0 devices");
    return 0;
}

static int fake_create_on(const struct cinfer_backend_create_options *opts, void **state, struct cinfer_error *err)
{
    (void)state;
    return cinfer_error_set(err, CINFER_ERR_UNSUPPORTED, "fake backend: no device %d", opts->device);
}

static int fake_create(int n_threads, void **state, struct cinfer_error *err)
{
    struct cinfer_backend_create_options o = {sizeof o, n_threads, 0, NULL};
    return fake_create_on(&o, state, err);
}

static void fake_destroy(void *s) { (void)s; never("destroy"); }
static void *fake_buffer_alloc(void *s, size_t b) { (void)s; (void)b; never("buffer_alloc"); return NULL; }
static void fake_buffer_free(void *s, void *b) { (void)s; (void)b; never("buffer_free"); }
static void fake_copy(void *s, void *d, const void *src, size_t b)
{
    (void)s; (void)d; (void)src; (void)b;
    never("copy");
}
static int fake_kv_create(void *s, const struct cinfer_backend_kv_layout *l, void **kv, struct cinfer_error *e)
{
    (void)s; (void)l; (void)kv; (void)e;
    never("kv_create");
    return -1;
}
static void fake_kv_destroy(void *s, void *kv) { (void)s; (void)kv; never("kv_destroy"); }
static void fake_kv_write(void *s, void *kv, int l, const float *k, const float *v, int n, const int32_t *slots)
{
    (void)s; (void)kv; (void)l; (void)k; (void)v; (void)n; (void)slots;
    never("kv_write");
}
static void fake_embedding(void *s, const struct cinfer_backend_weight *w, const int32_t *t, int n, float *o)
{
    (void)s; (void)w; (void)t; (void)n; (void)o;
    never("embedding");
}
static int fake_matmul(void *s, const float *x, int n, const struct cinfer_backend_matmul_out *o, int n_o,
                       struct cinfer_error *e)
{
    (void)s; (void)x; (void)n; (void)o; (void)n_o; (void)e;
    never("matmul");
    return -1;
}
static void fake_rmsnorm(void *s, float *y, const float *x, int r, int d, const float *w, float eps)
{
    (void)s; (void)y; (void)x; (void)r; (void)d; (void)w; (void)eps;
    never("rmsnorm");
}
static void fake_rope(void *s, float *x, int t, int h, int d, const struct cinfer_backend_rope *r)
{
    (void)s; (void)x; (void)t; (void)h; (void)d; (void)r;
    never("rope");
}
static void fake_mul(void *s, float *g, const float *u, size_t n) { (void)s; (void)g; (void)u; (void)n; never("mul"); }
static int fake_attention_windowed(void *s, void *kv, int l, const float *q, float *o,
                                   const struct cinfer_backend_attn_seq *seqs, int n_seqs, int h, int kvh, int d,
                                   const struct cinfer_backend_attn_options *opts, struct cinfer_error *e)
{
    (void)s; (void)kv; (void)l; (void)q; (void)o; (void)seqs; (void)n_seqs; (void)h; (void)kvh; (void)d;
    (void)opts; (void)e;
    never("attention");
    return -1;
}
static int fake_attention(void *s, void *kv, int l, const float *q, float *o,
                          const struct cinfer_backend_attn_seq *seqs, int n_seqs, int h, int kvh, int d,
                          struct cinfer_error *e)
{
    return fake_attention_windowed(s, kv, l, q, o, seqs, n_seqs, h, kvh, d, NULL, e);
}
static int fake_weight_prepare(void *s, const struct cinfer_backend_weight *w, struct cinfer_backend_weight *o,
                               struct cinfer_error *e)
{
    (void)s; (void)w; (void)o; (void)e;
    never("weight_prepare");
    return -1;
}
static void fake_weight_release(void *s, const struct cinfer_backend_weight *w) { (void)s; (void)w; never("release"); }
static void fake_scale(void *s, float *x, size_t n, float f) { (void)s; (void)x; (void)n; (void)f; never("scale"); }
static int fake_status(void *s, struct cinfer_error *e) { (void)s; (void)e; never("status"); return -1; }
static void fake_moe_route(void *s, const float *l, int n, int e, int k, int norm, int32_t *ids, float *w)
{
    (void)s; (void)l; (void)n; (void)e; (void)k; (void)norm; (void)ids; (void)w;
    never("moe_route");
}
static void fake_gather_rows(void *s, float *o, const float *x, const int32_t *r, int n, int d)
{
    (void)s; (void)o; (void)x; (void)r; (void)n; (void)d;
    never("gather_rows");
}
static void fake_scatter_add_rows(void *s, float *y, const float *x, const int32_t *r, const float *w, int n, int d)
{
    (void)s; (void)y; (void)x; (void)r; (void)w; (void)n; (void)d;
    never("scatter_add_rows");
}
static void fake_zero(void *s, float *x, size_t n) { (void)s; (void)x; (void)n; never("zero"); }

static const struct cinfer_backend_ops fake_backend_ops = {
    .version = FAKE_BACKEND_VERSION,
    .struct_size = FAKE_BACKEND_SIZE,
    .name = "fake",
    .create = fake_create,
    .destroy = fake_destroy,
    .buffer_alloc = fake_buffer_alloc,
    .buffer_free = fake_buffer_free,
    .copy = fake_copy,
    .download = fake_copy,
    .kv_create = fake_kv_create,
    .kv_destroy = fake_kv_destroy,
    .kv_write = fake_kv_write,
    .embedding = fake_embedding,
    .matmul = fake_matmul,
    .rmsnorm = fake_rmsnorm,
    .rope = fake_rope,
    .silu_mul = fake_mul,
    .add = fake_mul,
    .attention = fake_attention,
    .weight_prepare = fake_weight_prepare,
    .weight_release = fake_weight_release,
    .attention_windowed = fake_attention_windowed,
    .gelu_tanh_mul = fake_mul,
    .scale = fake_scale,
    .softcap = fake_scale,
    .moe_route = fake_moe_route,
    .gather_rows = fake_gather_rows,
    .scatter_add_rows = fake_scatter_add_rows,
    .zero = fake_zero,
    .query = fake_query,
    .create_on = fake_create_on,
    .status = fake_status,
    .upload = fake_copy,
};
