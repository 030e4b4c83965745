/* plugins/backend-cuda/cuda_step_log.c — queued ops as records, and the graph cache's
 * choices (cuda_step_log.h). */
#include "cuda_step_log.h"

#include <stdlib.h>
#include <string.h>

void step_op_init(struct step_op *op, enum step_op_kind kind)
{
    memset(op, 0, sizeof *op);
    op->kind = (int32_t)kind;
}

static struct step_op record(enum step_op_kind kind, const void *p0, const void *p1, const void *p2, int64_t i0,
                             int64_t i1, float f0, float f1)
{
    struct step_op op;
    step_op_init(&op, kind);
    op.p[0] = p0;
    op.p[1] = p1;
    op.p[2] = p2;
    op.i[0] = i0;
    op.i[1] = i1;
    op.f[0] = f0;
    op.f[1] = f1;
    return op;
}

struct step_op step_record_embedding(const struct cinfer_backend_weight *w, const int32_t *tokens, int n, float *out)
{
    return record(STEP_OP_EMBEDDING, w, tokens, out, n, 0, 0.0f, 0.0f);
}

struct step_op step_record_matmul(const float *x, int n, const struct cinfer_backend_matmul_out *outs, int n_outs)
{
    struct step_op op;
    step_op_init(&op, n_outs >= 1 && n_outs <= STEP_OP_MAX_OUTS ? STEP_OP_MATMUL : 0);
    if (op.kind == 0)
        return op;
    op.p[0] = x;
    op.i[0] = n;
    op.n_outs = n_outs;
    for (int i = 0; i < n_outs; i++) { /* field by field: the struct's padding stays zero */
        op.outs[i].w = outs[i].w;
        op.outs[i].bias = outs[i].bias;
        op.outs[i].y = outs[i].y;
        op.outs[i].exact_x = outs[i].exact_x;
    }
    return op;
}

struct step_op step_record_rmsnorm(float *y, const float *x, int n_rows, int dim, const float *w, float eps)
{
    return record(STEP_OP_RMSNORM, y, x, w, n_rows, dim, eps, 0.0f);
}

struct step_op step_record_rope(float *x, int n_tokens, int n_heads, int head_dim,
                                const struct cinfer_backend_rope *rope)
{
    struct step_op op = record(STEP_OP_ROPE, x, rope->cos, rope->sin, n_tokens, n_heads, 0.0f, 0.0f);
    op.i[2] = head_dim;
    op.i[3] = rope->interleaved;
    return op;
}

struct step_op step_record_gated(enum step_op_kind kind, float *gate, const float *up, size_t n, float alpha,
                                 float limit)
{
    return record(kind, gate, up, NULL, (int64_t)n, 0, alpha, limit);
}

struct step_op step_record_add(float *y, const float *x, size_t n)
{
    return record(STEP_OP_ADD, y, x, NULL, (int64_t)n, 0, 0.0f, 0.0f);
}

struct step_op step_record_scaled(enum step_op_kind kind, float *x, size_t n, float factor)
{
    return record(kind, x, NULL, NULL, (int64_t)n, 0, factor, 0.0f);
}

struct step_op step_record_add_gated(float *y, const float *x, const float *gate, int n, int dim)
{
    return record(STEP_OP_ADD_GATED, y, x, gate, n, dim, 0.0f, 0.0f);
}

struct step_op step_record_zero(float *x, size_t n)
{
    return record(STEP_OP_ZERO, x, NULL, NULL, (int64_t)n, 0, 0.0f, 0.0f);
}

struct step_op step_record_copy(void *dst, const void *src, size_t bytes)
{
    return record(STEP_OP_COPY, dst, src, NULL, (int64_t)bytes, 0, 0.0f, 0.0f);
}

struct step_op step_record_kv_write(void *kv, int layer, const float *k, const float *v, int n, const int32_t *slots)
{
    struct step_op op = record(STEP_OP_KV_WRITE, kv, k, v, layer, n, 0.0f, 0.0f);
    op.p[3] = slots;
    return op;
}

struct step_op step_record_attention(void *kv, int layer, const float *q, float *out,
                                     const struct cinfer_backend_attn_seq *seqs, int n_seqs, int n_heads,
                                     int n_kv_heads, int head_dim, const struct cinfer_backend_attn_options *opts)
{
    struct step_op op = record(STEP_OP_ATTENTION, kv, q, out, layer, n_seqs, 0.0f, 0.0f);
    op.p[3] = seqs;
    op.i[2] = n_heads;
    op.i[3] = n_kv_heads;
    op.i[4] = head_dim;
    int window = opts && opts->window > 0 ? opts->window : 0, max_tokens, seen_class;
    step_attention_shape(seqs, n_seqs, window, &max_tokens, &seen_class);
    op.i[5] = max_tokens; /* the grid */
    op.i[6] = seen_class; /* the warps per block */
    if (opts) {
        op.attn.window = opts->window;
        op.attn.scale = opts->scale;
        op.attn.softcap = opts->softcap;
        op.attn.sinks = opts->sinks;
    }
    return op;
}

int step_op_run(const struct cinfer_backend_ops *ops, void *state, const struct step_op *op, struct cinfer_error *err)
{
    switch ((enum step_op_kind)op->kind) {
    case STEP_OP_EMBEDDING:
        ops->embedding(state, op->p[0], op->p[1], (int)op->i[0], (float *)op->p[2]);
        return 0;
    case STEP_OP_MATMUL: return ops->matmul(state, op->p[0], (int)op->i[0], op->outs, op->n_outs, err);
    case STEP_OP_RMSNORM:
        ops->rmsnorm(state, (float *)op->p[0], op->p[1], (int)op->i[0], (int)op->i[1], op->p[2], op->f[0]);
        return 0;
    case STEP_OP_ROPE: {
        struct cinfer_backend_rope rope = {op->p[1], op->p[2], (int)op->i[3]};
        ops->rope(state, (float *)op->p[0], (int)op->i[0], (int)op->i[1], (int)op->i[2], &rope);
        return 0;
    }
    case STEP_OP_SILU_MUL: ops->silu_mul(state, (float *)op->p[0], op->p[1], (size_t)op->i[0]); return 0;
    case STEP_OP_GELU_TANH_MUL: ops->gelu_tanh_mul(state, (float *)op->p[0], op->p[1], (size_t)op->i[0]); return 0;
    case STEP_OP_SWIGLU_OAI:
        ops->swiglu_oai(state, (float *)op->p[0], op->p[1], (size_t)op->i[0], op->f[0], op->f[1]);
        return 0;
    case STEP_OP_ADD: ops->add(state, (float *)op->p[0], op->p[1], (size_t)op->i[0]); return 0;
    case STEP_OP_SCALE: ops->scale(state, (float *)op->p[0], (size_t)op->i[0], op->f[0]); return 0;
    case STEP_OP_SOFTCAP: ops->softcap(state, (float *)op->p[0], (size_t)op->i[0], op->f[0]); return 0;
    case STEP_OP_ADD_GATED:
        ops->add_gated(state, (float *)op->p[0], op->p[1], op->p[2], (int)op->i[0], (int)op->i[1]);
        return 0;
    case STEP_OP_ZERO: ops->zero(state, (float *)op->p[0], (size_t)op->i[0]); return 0;
    case STEP_OP_COPY: ops->copy(state, (void *)op->p[0], op->p[1], (size_t)op->i[0]); return 0;
    case STEP_OP_KV_WRITE:
        ops->kv_write(state, (void *)op->p[0], (int)op->i[0], op->p[1], op->p[2], (int)op->i[1], op->p[3]);
        return 0;
    case STEP_OP_ATTENTION:
        return ops->attention_windowed(state, (void *)op->p[0], (int)op->i[0], op->p[1], (float *)op->p[2], op->p[3],
                                       (int)op->i[1], (int)op->i[2], (int)op->i[3], (int)op->i[4], &op->attn, err);
    }
    return cinfer_error_set(err, CINFER_ERR_INTERNAL, "step log: a record of unknown kind %d", (int)op->kind);
}

void step_attention_shape(const struct cinfer_backend_attn_seq *seqs, int n_seqs, int window, int *max_tokens,
                          int *seen_class)
{
    int tokens = 0, context = 0;
    for (int i = 0; i < n_seqs; i++) {
        if (seqs[i].n_tokens > tokens)
            tokens = seqs[i].n_tokens;
        if (seqs[i].start_pos + seqs[i].n_tokens > context)
            context = seqs[i].start_pos + seqs[i].n_tokens;
    }
    int seen = window > 0 && window < context ? window : context;
    *max_tokens = tokens;
    *seen_class = seen >= 512 ? 2 : seen >= 128 ? 1 : 0;
}

int step_names_open(struct step_names *names, const struct cinfer_backend_step *step)
{
    names->open = 0;
    if (step->n_arrays < 0 || step->n_arrays > STEP_MAX_ARRAYS || step->n_seq_lists < 0 ||
        step->n_seq_lists > STEP_MAX_SEQ_LISTS || step->n_seqs < 0)
        return -1;
    if (step->n_arrays)
        memcpy(names->arrays, step->arrays, sizeof *step->arrays * (size_t)step->n_arrays);
    if (step->n_seq_lists)
        memcpy(names->lists, step->seq_lists, sizeof *step->seq_lists * (size_t)step->n_seq_lists);
    names->n_arrays = step->n_arrays;
    names->n_lists = step->n_seq_lists;
    names->n_seqs = step->n_seqs;
    names->n_tokens = step->n_tokens;
    names->open = 1;
    return 0;
}

int step_names_array(const struct step_names *names, const void *host, size_t bytes)
{
    for (int i = 0; names->open && host && i < names->n_arrays; i++)
        if (names->arrays[i].data == host && bytes <= names->arrays[i].bytes)
            return i;
    return -1;
}

int step_names_list(const struct step_names *names, const struct cinfer_backend_attn_seq *seqs, int n_seqs)
{
    for (int i = 0; names->open && seqs && n_seqs == names->n_seqs && i < names->n_lists; i++)
        if (names->lists[i] == seqs)
            return i;
    return -1;
}

int step_decode_bucket(int n, int max_rows)
{
    if (n < 1 || n > max_rows)
        return n;
    int bucket = n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : (n + 7) / 8 * 8;
    return bucket <= max_rows ? bucket : n;
}

int step_log_append(struct step_log *log, const struct step_op *op)
{
    if (log->n == log->cap) {
        int cap = log->cap ? 2 * log->cap : 256;
        struct step_op *grown = realloc(log->ops, sizeof *grown * (size_t)cap);
        if (!grown)
            return -1;
        log->ops = grown;
        log->cap = cap;
    }
    log->ops[log->n++] = *op;
    return 0;
}

void step_log_clear(struct step_log *log)
{
    log->n = 0;
}

void step_log_free(struct step_log *log)
{
    free(log->ops);
    memset(log, 0, sizeof *log);
}

/* Field by field (a struct's padding bytes need not survive a copy); floats by their bits. */
static int op_equal(const struct step_op *a, const struct step_op *b)
{
    if (a->kind != b->kind || a->n_outs != b->n_outs || memcmp(a->p, b->p, sizeof a->p) != 0 ||
        memcmp(a->i, b->i, sizeof a->i) != 0 || memcmp(a->f, b->f, sizeof a->f) != 0)
        return 0;
    for (int i = 0; i < a->n_outs && i < STEP_OP_MAX_OUTS; i++)
        if (a->outs[i].w != b->outs[i].w || a->outs[i].bias != b->outs[i].bias || a->outs[i].y != b->outs[i].y ||
            a->outs[i].exact_x != b->outs[i].exact_x)
            return 0;
    return a->attn.window == b->attn.window && memcmp(&a->attn.scale, &b->attn.scale, sizeof a->attn.scale) == 0 &&
           memcmp(&a->attn.softcap, &b->attn.softcap, sizeof a->attn.softcap) == 0 && a->attn.sinks == b->attn.sinks;
}

int step_log_equal(const struct step_log *a, const struct step_log *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (!op_equal(&a->ops[i], &b->ops[i]))
            return 0;
    return 1;
}

int step_log_copy(struct step_log *dst, const struct step_log *src)
{
    if (dst->cap < src->n) {
        struct step_op *grown = realloc(dst->ops, sizeof *grown * (size_t)src->n);
        if (!grown)
            return -1;
        dst->ops = grown;
        dst->cap = src->n;
    }
    if (src->n)
        memcpy(dst->ops, src->ops, sizeof *src->ops * (size_t)src->n);
    dst->n = src->n;
    return 0;
}

void step_graphs_init(struct step_graph_cache *c, void (*drop)(void *ctx, void *exec), void *drop_ctx)
{
    memset(c, 0, sizeof *c);
    c->drop = drop;
    c->drop_ctx = drop_ctx;
}

static void drop_graph(struct step_graph_cache *c, struct step_graph_entry *e)
{
    if (e->exec && c->drop)
        c->drop(c->drop_ctx, e->exec);
    e->exec = NULL;
}

void step_graphs_free(struct step_graph_cache *c)
{
    for (int i = 0; i < STEP_GRAPHS_MAX; i++) {
        drop_graph(c, &c->entries[i]);
        step_log_free(&c->entries[i].log);
    }
    memset(c->entries, 0, sizeof c->entries);
}

/* The entry of key, or a free one, or the least recently used (emptied). */
static struct step_graph_entry *entry_of(struct step_graph_cache *c, const int64_t key[3])
{
    struct step_graph_entry *free_one = NULL, *oldest = NULL;
    for (int i = 0; i < STEP_GRAPHS_MAX; i++) {
        struct step_graph_entry *e = &c->entries[i];
        if (e->used && memcmp(e->key, key, sizeof e->key) == 0)
            return e;
        if (!e->used && !free_one)
            free_one = e;
        if (e->used && (!oldest || e->last_used < oldest->last_used))
            oldest = e;
    }
    struct step_graph_entry *e = free_one ? free_one : oldest;
    drop_graph(c, e);
    e->used = 1;
    memcpy(e->key, key, sizeof e->key);
    e->seen = 0;
    e->failures = 0;
    e->log.n = -1; /* equal to no queue */
    return e;
}

enum step_plan step_graphs_plan(struct step_graph_cache *c, const struct step_log *log, int n_tokens, int n_seqs,
                                uint64_t generation, struct step_graph_entry **entry)
{
    int64_t key[3] = {n_tokens, n_seqs, log->n};
    struct step_graph_entry *e = entry_of(c, key);
    e->last_used = ++c->clock;
    *entry = e;
    if (e->log.n < 0 || !step_log_equal(&e->log, log)) { /* a new queue for this key */
        drop_graph(c, e);
        e->seen = 0;
        e->failures = 0;
        if (step_log_copy(&e->log, log) < 0) {
            e->log.n = -1;
            c->runs++;
            return STEP_RUN;
        }
    }
    e->seen++;
    if (e->exec && e->generation != generation) /* a buffer it points into has moved */
        drop_graph(c, e);
    if (e->exec) {
        c->replays++;
        return STEP_REPLAY;
    }
    if (e->seen >= 2 && e->failures < STEP_CAPTURE_TRIES) {
        c->captures++;
        return STEP_CAPTURE;
    }
    c->runs++;
    return STEP_RUN;
}

void step_graphs_captured(struct step_graph_cache *c, struct step_graph_entry *entry, void *exec,
                          uint64_t generation)
{
    (void)c;
    entry->exec = exec;
    entry->generation = generation;
    if (!exec) {
        entry->failures++;
        entry->seen = 0;
    }
}
