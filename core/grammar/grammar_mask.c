/* Matching and token masks (grammar.h): stacks as hash-consed (state, parent) nodes,
 * a step over one byte, each position's split of the vocabulary, and the matcher. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

/* ---- stacks ----------------------------------------------------------------------- */

/* Node n is the frame state[n] on top of the stack parent[n] (-1: the bottom). A top
 * node's state is where matching stands in its rule; every frame below holds the state
 * its rule returns to. */
struct arena {
    int32_t *state, *parent;
    uint32_t *stamp;
    int n, cap;
    int32_t *hash; /* node ids, -1 empty */
    int hash_cap;
    uint32_t gen;
    int failed;
};

static uint32_t node_hash(int32_t state, int32_t parent)
{
    uint64_t h = ((uint64_t)(uint32_t)state << 32 | (uint32_t)parent) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static void arena_free(struct arena *a)
{
    free(a->state);
    free(a->parent);
    free(a->stamp);
    free(a->hash);
    memset(a, 0, sizeof *a);
}

static void arena_reset(struct arena *a)
{
    a->n = 0;
    if (a->hash)
        memset(a->hash, 0xFF, (size_t)a->hash_cap * sizeof *a->hash);
}

static int arena_grow(struct arena *a)
{
    int cap = a->cap ? a->cap * 2 : 1024;
    int32_t *s = realloc(a->state, (size_t)cap * sizeof *s);
    if (s)
        a->state = s;
    int32_t *p = realloc(a->parent, (size_t)cap * sizeof *p);
    if (p)
        a->parent = p;
    uint32_t *st = realloc(a->stamp, (size_t)cap * sizeof *st);
    if (st)
        a->stamp = st;
    int32_t *h = malloc((size_t)cap * 2 * sizeof *h);
    if (!s || !p || !st || !h) {
        free(h);
        a->failed = 1;
        return -1;
    }
    memset(h, 0xFF, (size_t)cap * 2 * sizeof *h);
    for (int i = 0; i < a->n; i++)
        for (uint32_t k = node_hash(a->state[i], a->parent[i]) & (uint32_t)(cap * 2 - 1);;
             k = (k + 1) & (uint32_t)(cap * 2 - 1))
            if (h[k] < 0) {
                h[k] = i;
                break;
            }
    free(a->hash);
    a->hash = h;
    a->hash_cap = cap * 2;
    a->cap = cap;
    return 0;
}

static int32_t node(struct arena *a, int32_t state, int32_t parent)
{
    if (a->n == a->cap && arena_grow(a))
        return -1;
    uint32_t mask = (uint32_t)a->hash_cap - 1;
    uint32_t k = node_hash(state, parent) & mask;
    for (;; k = (k + 1) & mask) {
        int32_t id = a->hash[k];
        if (id < 0)
            break;
        if (a->state[id] == state && a->parent[id] == parent)
            return id;
    }
    int32_t id = a->n++;
    a->state[id] = state;
    a->parent[id] = parent;
    a->stamp[id] = 0;
    a->hash[k] = id;
    return id;
}

/* A set of stacks: the tops that read a byte next, and whether the bottom rule can
 * end here. */
struct cfg {
    int32_t *tops;
    int n, cap;
    int end;
};

static int cfg_push(struct cfg *c, int32_t id)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        int32_t *t = realloc(c->tops, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        c->tops = t;
        c->cap = cap;
    }
    c->tops[c->n++] = id;
    return 0;
}

struct walker {
    const struct cinfer_grammar *g;
    struct arena a;
    int32_t *stack;
    int n_stack, cap_stack;
    int failed;
};

static int walk_push(struct walker *w, int32_t id)
{
    if (id < 0) {
        w->failed = 1;
        return -1;
    }
    if (w->n_stack == w->cap_stack) {
        int cap = w->cap_stack ? w->cap_stack * 2 : 64;
        int32_t *s = realloc(w->stack, (size_t)cap * sizeof *s);
        if (!s) {
            w->failed = 1;
            return -1;
        }
        w->stack = s;
        w->cap_stack = cap;
    }
    w->stack[w->n_stack++] = id;
    return 0;
}

/* Expands the stacks on w->stack into out: calls are entered, finished rules return to
 * their caller, until every top reads a byte; a finished bottom rule sets out->end.
 * Nodes met twice in one expansion (the same stack) are taken once. */
static void expand(struct walker *w, struct cfg *out)
{
    const struct cinfer_grammar *g = w->g;
    struct arena *a = &w->a;
    while (w->n_stack > 0 && !w->failed) {
        int32_t x = w->stack[--w->n_stack];
        if (a->stamp[x] == a->gen)
            continue;
        a->stamp[x] = a->gen;
        int32_t s = a->state[x];
        const struct gstate *st = &g->states[s];
        if (st->n_byte_edges > 0 && cfg_push(out, x)) {
            w->failed = 1;
            return;
        }
        for (int e = st->first_edge + st->n_byte_edges; e < st->first_edge + st->n_edges; e++) {
            const struct gedge *ed = &g->edges[e];
            int32_t ret = node(a, ed->to, a->parent[x]);
            if (ret < 0 || walk_push(w, node(a, g->rule_start[ed->ref], ret))) {
                w->failed = 1;
                return;
            }
        }
        if (st->final) {
            int32_t p = a->parent[x];
            if (p < 0)
                out->end = 1;
            else if (walk_push(w, p))
                return;
        }
    }
}

/* in, after one byte, into out. */
static void step(struct walker *w, const struct cfg *in, uint8_t byte, struct cfg *out)
{
    const struct cinfer_grammar *g = w->g;
    struct arena *a = &w->a;
    out->n = 0;
    out->end = 0;
    a->gen++;
    for (int i = 0; i < in->n && !w->failed; i++) {
        int32_t t = in->tops[i];
        const struct gstate *st = &g->states[a->state[t]];
        const struct gedge *e = &g->edges[st->first_edge];
        /* byte edges are sorted and disjoint: at most one matches */
        int lo = 0, hi = st->n_byte_edges - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (byte < e[mid].lo)
                hi = mid - 1;
            else if (byte > e[mid].hi)
                lo = mid + 1;
            else {
                if (walk_push(w, node(a, e[mid].to, a->parent[t])) == 0)
                    expand(w, out);
                break;
            }
        }
    }
}

static void start_cfg(struct walker *w, int32_t state, struct cfg *out)
{
    out->n = 0;
    out->end = 0;
    w->a.gen++;
    if (walk_push(w, node(&w->a, state, -1)) == 0)
        expand(w, out);
}

/* ---- positions' splits ------------------------------------------------------------ */

struct split {
    int computed;
    int n_accept;
    int32_t *accept;        /* ids, when few */
    uint64_t *accept_bits;  /* else a bitset over the vocabulary */
    int n_uncertain;
    int32_t *uncertain;
};

struct cinfer_grammar_masks {
    int refs;
    struct cinfer_grammar *g;
    const struct cinfer_token_table *tt;
    struct split *split;     /* (n_states) */
    int n_positions;
    int n_computed;
    int64_t n_uncertain;
    /* the byte-only regions (no rule calls reachable by bytes, as inside strings):
     * per state, 0 unknown, 1 pure, 2 not; and its 256-entry transition table */
    uint8_t *pure;
    int32_t **next;
    int32_t *dstate;         /* (max_len + 1) states along the walk of a pure region */
    /* scratch of the precomputation */
    struct walker w;
    struct cfg *depth;       /* (max_len + 1) */
    uint8_t *unsure;         /* (max_len + 1) */
    int32_t *acc, *unc;
    int failed;
};

int cinfer_grammar_masks_create(struct cinfer_grammar *g, const struct cinfer_token_table *tt,
                                struct cinfer_grammar_masks **out, struct cinfer_error *err)
{
    *out = NULL;
    struct cinfer_grammar_masks *m = calloc(1, sizeof *m);
    if (m) {
        m->split = calloc((size_t)g->n_states, sizeof *m->split);
        m->depth = calloc((size_t)tt->max_len + 2, sizeof *m->depth);
        m->unsure = calloc((size_t)tt->max_len + 2, 1);
        m->acc = malloc(((size_t)tt->vocab + 1) * sizeof *m->acc);
        m->unc = malloc(((size_t)tt->vocab + 1) * sizeof *m->unc);
        m->pure = calloc((size_t)g->n_states, 1);
        m->next = calloc((size_t)g->n_states, sizeof *m->next);
        m->dstate = calloc((size_t)tt->max_len + 2, sizeof *m->dstate);
    }
    if (!m || !m->split || !m->depth || !m->unsure || !m->acc || !m->unc || !m->pure || !m->next || !m->dstate) {
        if (m) {
            m->g = g;
            m->refs = 1;
            cinfer_grammar_masks_unref(&m);
        } else {
            cinfer_grammar_free(&g);
        }
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory for the masks");
    }
    m->refs = 1;
    m->g = g;
    m->tt = tt;
    m->w.g = g;
    for (int s = 0; s < g->n_states; s++)
        if (g->states[s].n_byte_edges > 0)
            m->n_positions++;
    *out = m;
    return CINFER_OK;
}

void cinfer_grammar_masks_ref(struct cinfer_grammar_masks *m) { m->refs++; }

void cinfer_grammar_masks_unref(struct cinfer_grammar_masks **mp)
{
    if (!mp || !*mp)
        return;
    struct cinfer_grammar_masks *m = *mp;
    *mp = NULL;
    if (--m->refs > 0)
        return;
    for (int s = 0; m->split && s < m->g->n_states; s++) {
        free(m->split[s].accept);
        free(m->split[s].accept_bits);
        free(m->split[s].uncertain);
    }
    free(m->split);
    for (int s = 0; m->next && s < m->g->n_states; s++)
        free(m->next[s]);
    free(m->next);
    free(m->pure);
    free(m->dstate);
    for (int d = 0; m->depth && d <= (m->tt ? m->tt->max_len + 1 : -1); d++)
        free(m->depth[d].tops);
    free(m->depth);
    free(m->unsure);
    free(m->acc);
    free(m->unc);
    arena_free(&m->w.a);
    free(m->w.stack);
    cinfer_grammar_free(&m->g);
    free(m);
}

void cinfer_grammar_masks_stats(const struct cinfer_grammar_masks *m, int *positions, int *computed,
                                int64_t *uncertain_tokens)
{
    *positions = m->n_positions;
    *computed = m->n_computed;
    *uncertain_tokens = m->n_uncertain;
}

/* Is every state reachable from s by bytes free of rule calls? Then the rule's automaton
 * alone decides, and the split walks it as a plain DFA (pure_split). */
static int is_pure(struct cinfer_grammar_masks *m, int s)
{
    if (m->pure[s])
        return m->pure[s] == 1;
    const struct cinfer_grammar *g = m->g;
    int32_t *stack = malloc((size_t)g->n_states * sizeof *stack);
    uint8_t *seen = calloc((size_t)g->n_states, 1);
    int pure = stack && seen, top = 0;
    if (pure) {
        stack[top++] = s;
        seen[s] = 1;
    }
    while (pure && top) {
        const struct gstate *st = &g->states[stack[--top]];
        if (st->n_edges != st->n_byte_edges)
            pure = 0;
        for (int e = st->first_edge; pure && e < st->first_edge + st->n_byte_edges; e++) {
            int t = g->edges[e].to;
            if (!seen[t]) {
                seen[t] = 1;
                stack[top++] = t;
            }
        }
    }
    free(stack);
    free(seen);
    m->pure[s] = pure ? 1 : 2;
    return pure;
}

/* The state after byte b from s in a pure region (-1: none), by a table built the first
 * time s is walked. */
static inline int32_t pure_next(struct cinfer_grammar_masks *m, int32_t s, uint8_t b)
{
    int32_t *t = m->next[s];
    if (!t) {
        t = m->next[s] = malloc(256 * sizeof *t);
        if (!t) {
            m->failed = 1;
            return -1;
        }
        for (int c = 0; c < 256; c++)
            t[c] = -1;
        const struct gstate *st = &m->g->states[s];
        for (int e = st->first_edge; e < st->first_edge + st->n_byte_edges; e++)
            for (int c = m->g->edges[e].lo; c <= m->g->edges[e].hi; c++)
                t[c] = m->g->edges[e].to;
    }
    return t[b];
}

/* compute_split for a pure region: the same walk and the same rules, with a state per
 * depth instead of sets of stacks (the rule ends where a state is final). */
static void pure_split(struct cinfer_grammar_masks *m, int s, int *n_acc, int *n_unc)
{
    const struct cinfer_token_table *tt = m->tt;
    const struct cinfer_grammar *g = m->g;
    const uint64_t *follow = g->follow[g->states[s].rule];
    int32_t *st = m->dstate;
    st[0] = s;
    m->unsure[0] = 0;
    int valid = 0;
    for (int i = 0; i < tt->n_sorted && !m->failed;) {
        int32_t id = tt->sorted[i];
        const uint8_t *b = tt->bytes + tt->offset[id];
        int len = (int)tt->len[id];
        int d = valid < tt->lcp[i] ? valid : tt->lcp[i];
        int dead = -1;
        while (d < len) {
            if (st[d] < 0) {
                dead = d;
                break;
            }
            int ends = d > 0 && g->states[st[d]].final;
            m->unsure[d + 1] = (uint8_t)(m->unsure[d] || (ends && (follow[b[d] >> 6] >> (b[d] & 63) & 1)));
            st[d + 1] = pure_next(m, st[d], b[d]);
            d++;
        }
        valid = d;
        if (dead >= 0) {
            int j = i + 1;
            while (j < tt->n_sorted && tt->lcp[j] >= dead)
                j++;
            if (m->unsure[dead])
                for (int k = i; k < j; k++)
                    m->unc[(*n_unc)++] = tt->sorted[k];
            i = j;
            continue;
        }
        if (st[len] >= 0 && (g->states[st[len]].final || g->states[st[len]].n_byte_edges > 0))
            m->acc[(*n_acc)++] = id;
        else if (m->unsure[len])
            m->unc[(*n_unc)++] = id;
        i++;
    }
}

/* Splits the vocabulary at state s: a walk over the tokens in sorted order that keeps
 * the stacks of every prefix depth, so tokens sharing a prefix share its steps, and a
 * prefix no path survives discards every token under it at once. */
static void compute_split(struct cinfer_grammar_masks *m, int s)
{
    const struct cinfer_token_table *tt = m->tt;
    const struct cinfer_grammar *g = m->g;
    struct walker *w = &m->w;
    struct split *sp = &m->split[s];
    const uint64_t *follow = g->follow[g->states[s].rule];
    int n_acc = 0, n_unc = 0;
    if (is_pure(m, s)) {
        pure_split(m, s, &n_acc, &n_unc);
        if (m->failed)
            return;
        goto store;
    }
    if (w->a.cap > (1 << 16)) { /* keep the scratch from growing without bound */
        arena_free(&w->a);
    }
    arena_reset(&w->a);
    struct cfg *c = m->depth;
    c[0].n = 0;
    c[0].end = 0;
    int32_t root = node(&w->a, s, -1);
    if (root < 0 || cfg_push(&c[0], root)) {
        m->failed = 1;
        return;
    }
    m->unsure[0] = 0;
    int valid = 0;
    for (int i = 0; i < tt->n_sorted && !w->failed;) {
        int32_t id = tt->sorted[i];
        const uint8_t *b = tt->bytes + tt->offset[id];
        int len = (int)tt->len[id];
        int d = valid < tt->lcp[i] ? valid : tt->lcp[i];
        int dead = -1;
        while (d < len) {
            if (c[d].n == 0 && !c[d].end) {
                dead = d;
                break;
            }
            m->unsure[d + 1] = (uint8_t)(m->unsure[d] ||
                                         (c[d].end && d > 0 && (follow[b[d] >> 6] >> (b[d] & 63) & 1)));
            step(w, &c[d], b[d], &c[d + 1]);
            d++;
        }
        valid = d;
        if (dead >= 0) {
            int j = i + 1;
            while (j < tt->n_sorted && tt->lcp[j] >= dead)
                j++;
            if (m->unsure[dead])
                for (int k = i; k < j; k++)
                    m->unc[n_unc++] = tt->sorted[k];
            i = j;
            continue;
        }
        if (c[len].n > 0 || c[len].end)
            m->acc[n_acc++] = id;
        else if (m->unsure[len])
            m->unc[n_unc++] = id;
        i++;
    }
    if (w->failed) {
        m->failed = 1;
        return;
    }
store:
    sp->n_accept = n_acc;
    if ((size_t)n_acc * 32 > (size_t)tt->vocab) {
        size_t words = ((size_t)tt->vocab + 63) / 64;
        sp->accept_bits = calloc(words, sizeof *sp->accept_bits);
        if (!sp->accept_bits) {
            m->failed = 1;
            return;
        }
        for (int k = 0; k < n_acc; k++)
            sp->accept_bits[m->acc[k] >> 6] |= 1ull << (m->acc[k] & 63);
    } else if (n_acc) {
        sp->accept = malloc((size_t)n_acc * sizeof *sp->accept);
        if (!sp->accept) {
            m->failed = 1;
            return;
        }
        memcpy(sp->accept, m->acc, (size_t)n_acc * sizeof *sp->accept);
    }
    if (n_unc) {
        sp->uncertain = malloc((size_t)n_unc * sizeof *sp->uncertain);
        if (!sp->uncertain) {
            m->failed = 1;
            return;
        }
        memcpy(sp->uncertain, m->unc, (size_t)n_unc * sizeof *sp->uncertain);
    }
    sp->n_uncertain = n_unc;
    sp->computed = 1;
    m->n_computed++;
    m->n_uncertain += n_unc;
}

int cinfer_grammar_masks_precompute_all(struct cinfer_grammar_masks *m)
{
    for (int s = 0; s < m->g->n_states; s++)
        if (m->g->states[s].n_byte_edges > 0 && !m->split[s].computed)
            compute_split(m, s);
    return m->n_positions;
}

/* ---- matchers ------------------------------------------------------------------- */

struct cinfer_grammar_matcher {
    struct cinfer_grammar_masks *masks;
    struct walker w;
    struct cfg cur, a, b;
};

int cinfer_grammar_matcher_create(struct cinfer_grammar_masks *masks, struct cinfer_grammar_matcher **out)
{
    *out = NULL;
    struct cinfer_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return CINFER_ERR_NOMEM;
    m->masks = masks;
    cinfer_grammar_masks_ref(masks);
    m->w.g = masks->g;
    start_cfg(&m->w, masks->g->rule_start[masks->g->root], &m->cur);
    if (m->w.failed) {
        cinfer_grammar_matcher_free(&m);
        return CINFER_ERR_NOMEM;
    }
    *out = m;
    return CINFER_OK;
}

void cinfer_grammar_matcher_free(struct cinfer_grammar_matcher **mp)
{
    if (!mp || !*mp)
        return;
    struct cinfer_grammar_matcher *m = *mp;
    arena_free(&m->w.a);
    free(m->w.stack);
    free(m->cur.tops);
    free(m->a.tops);
    free(m->b.tops);
    cinfer_grammar_masks_unref(&m->masks);
    free(m);
    *mp = NULL;
}

int cinfer_grammar_matcher_can_end(const struct cinfer_grammar_matcher *m) { return m->cur.end; }
int cinfer_grammar_matcher_must_end(const struct cinfer_grammar_matcher *m) { return m->cur.end && m->cur.n == 0; }

/* Copies the live stacks into a fresh arena once the old one has grown large: every
 * step leaves nodes behind that no stack uses any more. */
static void compact(struct cinfer_grammar_matcher *m)
{
    if (m->w.a.n < (1 << 16))
        return;
    struct arena fresh = {0};
    struct arena *old = &m->w.a;
    for (int i = 0; i < m->cur.n; i++) {
        /* copy the chain bottom first */
        int32_t chain[4096];
        int n = 0;
        for (int32_t x = m->cur.tops[i]; x >= 0 && n < 4096; x = old->parent[x])
            chain[n++] = x;
        int32_t parent = -1;
        for (int k = n - 1; k >= 0; k--)
            parent = node(&fresh, old->state[chain[k]], parent);
        if (parent < 0 || n == 4096) { /* out of memory or an absurdly deep stack: keep the old arena */
            arena_free(&fresh);
            return;
        }
        m->cur.tops[i] = parent;
    }
    arena_free(old);
    *old = fresh;
}

/* Steps from *from over bytes into scratch configurations; returns the final one or NULL. */
static const struct cfg *run(struct cinfer_grammar_matcher *m, const struct cfg *from, const uint8_t *bytes,
                             size_t len)
{
    const struct cfg *in = from;
    struct cfg *out = &m->a;
    for (size_t i = 0; i < len; i++) {
        if (in->n == 0)
            return NULL;
        step(&m->w, in, bytes[i], out);
        if (m->w.failed)
            return NULL;
        in = out;
        out = out == &m->a ? &m->b : &m->a;
    }
    return in->n > 0 || in->end ? in : NULL;
}

int cinfer_grammar_matcher_accept_bytes(struct cinfer_grammar_matcher *m, const uint8_t *bytes, size_t len)
{
    if (len == 0)
        return -1;
    const struct cfg *r = run(m, &m->cur, bytes, len);
    if (!r)
        return -1;
    struct cfg keep = m->cur;
    m->cur = *r;
    if (r == &m->a)
        m->a = keep;
    else
        m->b = keep;
    compact(m);
    return 0;
}

int cinfer_grammar_matcher_accept_token(struct cinfer_grammar_matcher *m, int32_t id)
{
    const struct cinfer_token_table *tt = m->masks->tt;
    if (id < 0 || id >= tt->vocab || tt->len[id] == 0)
        return -1;
    return cinfer_grammar_matcher_accept_bytes(m, tt->bytes + tt->offset[id], tt->len[id]);
}

void cinfer_grammar_matcher_fill_mask(struct cinfer_grammar_matcher *m, uint64_t *bits)
{
    struct cinfer_grammar_masks *mk = m->masks;
    const struct cinfer_token_table *tt = mk->tt;
    size_t words = ((size_t)tt->vocab + 63) / 64;
    memset(bits, 0, words * sizeof *bits);
    struct cfg one = {0};
    int32_t top;
    one.tops = &top;
    one.n = one.cap = 1;
    for (int i = 0; i < m->cur.n; i++) {
        int32_t s = m->w.a.state[m->cur.tops[i]];
        struct split *sp = &mk->split[s];
        if (!sp->computed) {
            compute_split(mk, s);
            if (!sp->computed)
                continue; /* out of memory: this stack allows nothing */
        }
        if (sp->accept_bits) {
            for (size_t k = 0; k < words; k++)
                bits[k] |= sp->accept_bits[k];
        } else {
            for (int k = 0; k < sp->n_accept; k++)
                bits[sp->accept[k] >> 6] |= 1ull << (sp->accept[k] & 63);
        }
        top = m->cur.tops[i];
        for (int k = 0; k < sp->n_uncertain; k++) {
            int32_t id = sp->uncertain[k];
            if (bits[id >> 6] >> (id & 63) & 1)
                continue;
            if (run(m, &one, tt->bytes + tt->offset[id], tt->len[id]))
                bits[id >> 6] |= 1ull << (id & 63);
        }
    }
}
