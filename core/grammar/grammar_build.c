/* Expression trees into one deterministic automaton per rule (grammar_internal.h):
 * a Thompson construction with empty moves, then the subset construction over bytes
 * and rule calls. Then the facts matching needs: which states can finish their rule
 * without a byte (nullable), that no rule calls itself before reading a byte (left
 * recursion, refused), and which bytes can follow each rule (for the masks). */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

/* ---- the automaton with empty moves, one rule at a time --------------------------- */

enum { NE_EPS, NE_BYTE, NE_REF };
struct nedge {
    int32_t from, to;
    uint8_t kind, lo, hi;
    int32_t ref;
};
struct nfa {
    int n_states;
    struct nedge *e;
    int n_e, cap_e;
    int failed; /* 1 out of memory, 2 too large */
    /* after indexing: edges of state s are e[first[s] .. first[s + 1]) */
    int32_t *first;
};

#define NFA_MAX_STATES (1 << 21)

static int nfa_state(struct nfa *n)
{
    if (n->n_states >= NFA_MAX_STATES) {
        n->failed = 2;
        return 0;
    }
    return n->n_states++;
}

static void nfa_edge(struct nfa *n, int from, int to, int kind, int lo, int hi, int ref)
{
    if (n->failed)
        return;
    if (n->n_e == n->cap_e) {
        int cap = n->cap_e ? n->cap_e * 2 : 256;
        struct nedge *g = realloc(n->e, (size_t)cap * sizeof *g);
        if (!g) {
            n->failed = 1;
            return;
        }
        n->e = g;
        n->cap_e = cap;
    }
    n->e[n->n_e++] = (struct nedge){.from = from, .to = to, .kind = (uint8_t)kind, .lo = (uint8_t)lo,
                                    .hi = (uint8_t)hi, .ref = ref};
}

/* Code points [lo, hi] of one UTF-8 length as chains of byte ranges from `from` to
 * `to` (the usual split: ranges whose lower bytes do not cover their whole span are
 * cut until every byte position is a plain range). */
static void utf8_range(struct nfa *n, int from, int to, uint32_t lo, uint32_t hi)
{
    int len = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    for (int i = 1; i < len; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_range(n, from, to, lo, lo | m);
                utf8_range(n, from, to, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_range(n, from, to, lo, (hi & ~m) - 1);
                utf8_range(n, from, to, hi & ~m, hi);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    if (len == 1) {
        a[0] = (uint8_t)lo;
        b[0] = (uint8_t)hi;
    } else {
        uint32_t vals[2] = {lo, hi};
        uint8_t *outs[2] = {a, b};
        for (int k = 0; k < 2; k++) {
            uint32_t v = vals[k];
            uint8_t *o = outs[k];
            for (int i = len - 1; i > 0; i--) {
                o[i] = (uint8_t)(0x80 | (v & 0x3F));
                v >>= 6;
            }
            o[0] = (uint8_t)((len == 2 ? 0xC0 : len == 3 ? 0xE0 : 0xF0) | v);
        }
    }
    int cur = from;
    for (int i = 0; i < len; i++) {
        int next = i == len - 1 ? to : nfa_state(n);
        nfa_edge(n, cur, next, NE_BYTE, a[i], b[i], -1);
        cur = next;
    }
}

static void class_edges(struct nfa *n, int from, int to, const uint32_t *ranges, int n_ranges)
{
    static const uint32_t cuts[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, 0x10FFFF}};
    for (int r = 0; r < n_ranges; r++)
        for (int c = 0; c < 4; c++) {
            uint32_t lo = ranges[2 * r] > cuts[c][0] ? ranges[2 * r] : cuts[c][0];
            uint32_t hi = ranges[2 * r + 1] < cuts[c][1] ? ranges[2 * r + 1] : cuts[c][1];
            if (lo > hi)
                continue;
            /* surrogates are not scalar values: cut them out of the 3-byte span */
            if (c == 2 && lo <= 0xDFFF && hi >= 0xD800) {
                if (lo < 0xD800)
                    utf8_range(n, from, to, lo, 0xD7FF);
                if (hi > 0xDFFF)
                    utf8_range(n, from, to, 0xE000, hi);
                continue;
            }
            utf8_range(n, from, to, lo, hi);
        }
}

/* Adds x's automaton starting at state from; returns its end state. */
static int frag(struct nfa *n, const struct gx *x, int from)
{
    if (n->failed)
        return from;
    switch (x->kind) {
    case GX_EMPTY:
        return from;
    case GX_BYTES: {
        int cur = from;
        for (int i = 0; i < x->n_bytes; i++) {
            int next = nfa_state(n);
            nfa_edge(n, cur, next, NE_BYTE, x->bytes[i], x->bytes[i], -1);
            cur = next;
        }
        return cur;
    }
    case GX_CLASS: {
        int to = nfa_state(n);
        class_edges(n, from, to, x->ranges, x->n_ranges);
        return to;
    }
    case GX_REF: {
        int to = nfa_state(n);
        nfa_edge(n, from, to, NE_REF, 0, 0, x->rule);
        return to;
    }
    case GX_SEQ: {
        int cur = from;
        for (int i = 0; i < x->n_kids; i++) {
            /* a fresh state between items keeps a loop of one item from taking the next
             * item's edges into its body */
            int next = nfa_state(n);
            nfa_edge(n, cur, next, NE_EPS, 0, 0, -1);
            cur = frag(n, x->kids[i], next);
        }
        return cur;
    }
    case GX_ALT: {
        int to = nfa_state(n);
        for (int i = 0; i < x->n_kids; i++) {
            int start = nfa_state(n);
            nfa_edge(n, from, start, NE_EPS, 0, 0, -1);
            nfa_edge(n, frag(n, x->kids[i], start), to, NE_EPS, 0, 0, -1);
        }
        return to;
    }
    case GX_REPEAT: {
        const struct gx *k = x->kids[0];
        int cur = from;
        for (int i = 0; i < x->min && !n->failed; i++) {
            int next = nfa_state(n);
            nfa_edge(n, cur, next, NE_EPS, 0, 0, -1);
            cur = frag(n, k, next);
        }
        if (x->max < 0) {
            int loop = nfa_state(n);
            nfa_edge(n, cur, loop, NE_EPS, 0, 0, -1);
            int body = nfa_state(n);
            nfa_edge(n, loop, body, NE_EPS, 0, 0, -1);
            nfa_edge(n, frag(n, k, body), loop, NE_EPS, 0, 0, -1);
            int out = nfa_state(n);
            nfa_edge(n, loop, out, NE_EPS, 0, 0, -1);
            return out;
        }
        int end = nfa_state(n);
        for (int i = x->min; i < x->max && !n->failed; i++) {
            nfa_edge(n, cur, end, NE_EPS, 0, 0, -1);
            int next = nfa_state(n);
            nfa_edge(n, cur, next, NE_EPS, 0, 0, -1);
            cur = frag(n, k, next);
        }
        nfa_edge(n, cur, end, NE_EPS, 0, 0, -1);
        return end;
    }
    }
    return from;
}

static int by_from(const void *a, const void *b)
{
    const struct nedge *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

static int nfa_index(struct nfa *n)
{
    if (n->n_e)
        qsort(n->e, (size_t)n->n_e, sizeof *n->e, by_from);
    n->first = calloc((size_t)n->n_states + 1, sizeof *n->first);
    if (!n->first)
        return -1;
    for (int i = 0; i < n->n_e; i++)
        n->first[n->e[i].from + 1]++;
    for (int s = 0; s < n->n_states; s++)
        n->first[s + 1] += n->first[s];
    return 0;
}

/* ---- subset construction ----------------------------------------------------------- */

struct dfa_builder {
    /* sets of NFA states, each sorted, stored back to back */
    int32_t *set_data;
    size_t n_data, cap_data;
    size_t *set_off;   /* (n_sets + 1) */
    int n_sets, cap_sets;
    int32_t *hash;     /* open addressing over set ids, -1 empty */
    int hash_cap;
    /* output */
    struct gstate *states;
    int n_states, cap_states;
    struct gedge *edges;
    int n_edges, cap_edges;
    int failed;
    /* scratch */
    uint32_t *stamp;
    uint32_t gen;
    int32_t *work;
    int cap_work;
};

static uint64_t set_hash(const int32_t *s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)s[i]) * 1099511628211ull;
    return h;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Closes work[0..n) under empty moves (stamping what is in), sorts it; returns the new n. */
static int close_set(struct dfa_builder *b, const struct nfa *n, int count)
{
    b->gen++;
    for (int i = 0; i < count; i++)
        b->stamp[b->work[i]] = b->gen;
    for (int i = 0; i < count; i++) {
        int s = b->work[i];
        for (int e = n->first[s]; e < n->first[s + 1]; e++) {
            if (n->e[e].kind != NE_EPS || b->stamp[n->e[e].to] == b->gen)
                continue;
            if (count == b->cap_work) {
                int cap = b->cap_work * 2;
                int32_t *w = realloc(b->work, (size_t)cap * sizeof *w);
                if (!w) {
                    b->failed = 1;
                    return count;
                }
                b->work = w;
                b->cap_work = cap;
            }
            b->stamp[n->e[e].to] = b->gen;
            b->work[count++] = n->e[e].to;
        }
    }
    qsort(b->work, (size_t)count, sizeof *b->work, cmp_i32);
    return count;
}

static int grow_hash(struct dfa_builder *b);

/* The DFA state of the set work[0..n) (closed, sorted), made when new. */
static int set_id(struct dfa_builder *b, int count, int rule, int nfa_final)
{
    if (b->failed)
        return 0;
    if ((b->n_sets + 1) * 2 > b->hash_cap && grow_hash(b))
        return 0;
    uint64_t h = set_hash(b->work, (size_t)count);
    int mask = b->hash_cap - 1;
    for (int i = (int)(h & (uint64_t)mask);; i = (i + 1) & mask) {
        int id = b->hash[i];
        if (id < 0)
            break;
        size_t len = b->set_off[id + 1] - b->set_off[id];
        if (len == (size_t)count && memcmp(b->set_data + b->set_off[id], b->work, len * sizeof *b->work) == 0 &&
            b->states[id].rule == rule)
            return id;
    }
    if (b->n_states >= CINFER_GRAMMAR_MAX_STATES || b->n_data + (size_t)count > CINFER_GRAMMAR_MAX_POSITIONS) {
        b->failed = 2;
        return 0;
    }
    if (b->n_data + (size_t)count > b->cap_data) {
        size_t cap = (b->cap_data + (size_t)count) * 2;
        int32_t *d = realloc(b->set_data, cap * sizeof *d);
        if (!d) {
            b->failed = 1;
            return 0;
        }
        b->set_data = d;
        b->cap_data = cap;
    }
    if (b->n_sets + 2 > b->cap_sets) {
        int cap = b->cap_sets ? b->cap_sets * 2 : 256;
        size_t *o = realloc(b->set_off, (size_t)cap * sizeof *o);
        struct gstate *st = o ? realloc(b->states, (size_t)cap * sizeof *st) : NULL;
        if (o)
            b->set_off = o;
        if (st)
            b->states = st;
        if (!o || !st) {
            b->failed = 1;
            return 0;
        }
        b->cap_sets = cap;
        b->cap_states = cap;
    }
    int id = b->n_sets++;
    b->set_off[id] = b->n_data;
    memcpy(b->set_data + b->n_data, b->work, (size_t)count * sizeof *b->work);
    b->n_data += (size_t)count;
    b->set_off[id + 1] = b->n_data;
    int final = 0;
    for (int i = 0; i < count; i++)
        if (b->work[i] == nfa_final)
            final = 1;
    b->states[id] = (struct gstate){.first_edge = -1, .rule = rule, .final = (uint8_t)final};
    b->n_states = b->n_sets;
    for (int i = (int)(h & (uint64_t)mask);; i = (i + 1) & mask)
        if (b->hash[i] < 0) {
            b->hash[i] = id;
            break;
        }
    return id;
}

static int grow_hash(struct dfa_builder *b)
{
    int cap = b->hash_cap ? b->hash_cap * 2 : 1024;
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) {
        b->failed = 1;
        return -1;
    }
    memset(h, 0xFF, (size_t)cap * sizeof *h);
    for (int id = 0; id < b->n_sets; id++) {
        const int32_t *s = b->set_data + b->set_off[id];
        size_t len = b->set_off[id + 1] - b->set_off[id];
        for (int i = (int)(set_hash(s, len) & (uint64_t)(cap - 1));; i = (i + 1) & (cap - 1))
            if (h[i] < 0) {
                h[i] = id;
                break;
            }
    }
    free(b->hash);
    b->hash = h;
    b->hash_cap = cap;
    return 0;
}

static void add_edge(struct dfa_builder *b, int lo, int hi, int ref, int to)
{
    if (b->failed)
        return;
    if (b->n_edges == b->cap_edges) {
        int cap = b->cap_edges ? b->cap_edges * 2 : 1024;
        struct gedge *e = realloc(b->edges, (size_t)cap * sizeof *e);
        if (!e) {
            b->failed = 1;
            return;
        }
        b->edges = e;
        b->cap_edges = cap;
    }
    b->edges[b->n_edges++] = (struct gedge){.lo = (uint8_t)lo, .hi = (uint8_t)hi, .ref = ref, .to = to};
}

static int reserve_work(struct dfa_builder *b, int need)
{
    if (need <= b->cap_work)
        return 0;
    int32_t *w = realloc(b->work, (size_t)need * sizeof *w);
    if (!w) {
        b->failed = 1;
        return -1;
    }
    b->work = w;
    b->cap_work = need;
    return 0;
}

/* Builds the DFA of one rule from its NFA; returns its start state. */
static int determinize(struct dfa_builder *b, struct nfa *n, int rule, int nfa_start, int nfa_final)
{
    free(b->stamp);
    b->stamp = calloc((size_t)n->n_states, sizeof *b->stamp);
    b->gen = 0;
    if (!b->stamp || reserve_work(b, 64)) {
        b->failed = 1;
        return 0;
    }
    b->work[0] = nfa_start;
    int first_new = b->n_sets;
    int start = set_id(b, close_set(b, n, 1), rule, nfa_final);
    for (int id = first_new; id < b->n_sets && !b->failed; id++) {
        b->states[id].first_edge = b->n_edges;
        size_t off = b->set_off[id], len = b->set_off[id + 1] - off;
        /* byte edges: cut [0, 256) at every range boundary of the set's edges */
        uint8_t cut[257] = {0};
        int any = 0;
        for (size_t i = 0; i < len; i++) {
            int s = b->set_data[off + i];
            for (int e = n->first[s]; e < n->first[s + 1]; e++)
                if (n->e[e].kind == NE_BYTE) {
                    cut[n->e[e].lo] = 1;
                    cut[n->e[e].hi + 1] = 1;
                    any = 1;
                }
        }
        int last_to = -1, last_lo = 0, last_hi = -1;
        for (int lo = 0; any && lo < 256;) {
            int hi = lo;
            while (hi + 1 < 256 && !cut[hi + 1])
                hi++;
            int count = 0;
            for (size_t i = 0; i < len && !b->failed; i++) {
                int s = b->set_data[b->set_off[id] + i];
                for (int e = n->first[s]; e < n->first[s + 1]; e++)
                    if (n->e[e].kind == NE_BYTE && n->e[e].lo <= lo && n->e[e].hi >= lo) {
                        if (reserve_work(b, count + 1))
                            break;
                        b->work[count++] = n->e[e].to;
                    }
            }
            if (count) {
                if (reserve_work(b, count * 2 + 16))
                    break;
                int to = set_id(b, close_set(b, n, count), rule, nfa_final);
                if (to == last_to && last_hi + 1 == lo) {
                    last_hi = hi;
                } else {
                    if (last_to >= 0)
                        add_edge(b, last_lo, last_hi, -1, last_to);
                    last_to = to;
                    last_lo = lo;
                    last_hi = hi;
                }
            }
            lo = hi + 1;
        }
        if (last_to >= 0)
            add_edge(b, last_lo, last_hi, -1, last_to);
        b->states[id].n_byte_edges = b->n_edges - b->states[id].first_edge;
        /* call edges: one per rule called */
        off = b->set_off[id];
        len = b->set_off[id + 1] - off;
        for (size_t i = 0; i < len && !b->failed; i++) {
            int s = b->set_data[b->set_off[id] + i];
            for (int e = n->first[s]; e < n->first[s + 1]; e++) {
                if (n->e[e].kind != NE_REF)
                    continue;
                int ref = n->e[e].ref, seen = 0;
                for (int k = b->states[id].first_edge + b->states[id].n_byte_edges; k < b->n_edges; k++)
                    if (b->edges[k].ref == ref)
                        seen = 1;
                if (seen)
                    continue;
                int count = 0;
                for (size_t j = 0; j < len; j++) {
                    int s2 = b->set_data[b->set_off[id] + j];
                    for (int e2 = n->first[s2]; e2 < n->first[s2 + 1]; e2++)
                        if (n->e[e2].kind == NE_REF && n->e[e2].ref == ref) {
                            if (reserve_work(b, count + 1))
                                break;
                            b->work[count++] = n->e[e2].to;
                        }
                }
                if (reserve_work(b, count * 2 + 16))
                    break;
                int to = set_id(b, close_set(b, n, count), rule, nfa_final);
                add_edge(b, 0, 0, ref, to);
            }
        }
        b->states[id].n_edges = b->n_edges - b->states[id].first_edge;
    }
    return start;
}

/* ---- analysis ---------------------------------------------------------------------- */

static int analyze(struct cinfer_grammar *g, struct cinfer_error *err)
{
    int ns = g->n_states, nr = g->n_rules;
    uint8_t *nullable = calloc((size_t)ns, 1);
    uint64_t (*first)[4] = calloc((size_t)ns, sizeof *first);
    g->follow = calloc((size_t)nr, sizeof *g->follow);
    uint8_t *calls = calloc((size_t)nr * (size_t)nr, 1);
    if (!nullable || !first || !g->follow || !calls) {
        free(nullable);
        free(first);
        free(calls);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory analyzing %d states", ns);
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int s = 0; s < ns; s++) {
            const struct gstate *st = &g->states[s];
            int nu = st->final;
            uint64_t f[4] = {first[s][0], first[s][1], first[s][2], first[s][3]};
            for (int e = st->first_edge; e < st->first_edge + st->n_edges; e++) {
                const struct gedge *ed = &g->edges[e];
                if (ed->ref < 0) {
                    for (int c = ed->lo; c <= ed->hi; c++)
                        f[c >> 6] |= 1ull << (c & 63);
                    continue;
                }
                int callee = g->rule_start[ed->ref];
                for (int w = 0; w < 4; w++)
                    f[w] |= first[callee][w];
                if (nullable[callee]) {
                    for (int w = 0; w < 4; w++)
                        f[w] |= first[ed->to][w];
                    if (nullable[ed->to])
                        nu = 1;
                }
            }
            if (nu != nullable[s] || memcmp(f, first[s], sizeof f)) {
                nullable[s] = (uint8_t)nu;
                memcpy(first[s], f, sizeof f);
                changed = 1;
            }
        }
    }
    /* left recursion: rules each rule can call before reading a byte */
    for (int s = 0; s < ns; s++) {
        const struct gstate *st = &g->states[s];
        for (int e = st->first_edge + st->n_byte_edges; e < st->first_edge + st->n_edges; e++)
            calls[(size_t)st->rule * (size_t)nr + (size_t)g->edges[e].ref] = 2; /* a call somewhere */
    }
    /* a call at the start: from the start state, through nullable calls */
    uint8_t *at_start = calloc((size_t)ns, 1);
    int32_t *stack = malloc((size_t)ns * sizeof *stack);
    int rc = CINFER_OK;
    if (!at_start || !stack)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory");
    uint8_t *reach = calloc((size_t)nr * (size_t)nr, 1);
    if (!reach && rc == CINFER_OK)
        rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory");
    for (int r = 0; r < nr && rc == CINFER_OK; r++) {
        memset(at_start, 0, (size_t)ns);
        int top = 0;
        stack[top++] = g->rule_start[r];
        at_start[g->rule_start[r]] = 1;
        while (top) {
            int s = stack[--top];
            const struct gstate *st = &g->states[s];
            for (int e = st->first_edge + st->n_byte_edges; e < st->first_edge + st->n_edges; e++) {
                const struct gedge *ed = &g->edges[e];
                reach[(size_t)r * (size_t)nr + (size_t)ed->ref] = 1;
                if (nullable[g->rule_start[ed->ref]] && !at_start[ed->to]) {
                    at_start[ed->to] = 1;
                    stack[top++] = ed->to;
                }
            }
        }
    }
    /* transitive closure (rules are few) */
    for (int k = 0; k < nr && rc == CINFER_OK; k++)
        for (int i = 0; i < nr; i++)
            if (reach[(size_t)i * (size_t)nr + (size_t)k])
                for (int j = 0; j < nr; j++)
                    if (reach[(size_t)k * (size_t)nr + (size_t)j])
                        reach[(size_t)i * (size_t)nr + (size_t)j] = 1;
    for (int r = 0; r < nr && rc == CINFER_OK; r++)
        if (reach[(size_t)r * (size_t)nr + (size_t)r])
            rc = cinfer_error_set(err, CINFER_ERR_UNSUPPORTED,
                                  "grammar: rule '%s' is left-recursive (it can reach itself before reading any "
                                  "character); rewrite it with repetition, e.g. a ::= b (\",\" b)*",
                                  g->rule_names[r]);
    /* follow sets */
    for (int changed = rc == CINFER_OK; changed;) {
        changed = 0;
        for (int s = 0; s < ns; s++) {
            const struct gstate *st = &g->states[s];
            for (int e = st->first_edge + st->n_byte_edges; e < st->first_edge + st->n_edges; e++) {
                const struct gedge *ed = &g->edges[e];
                uint64_t *fo = g->follow[ed->ref];
                for (int w = 0; w < 4; w++) {
                    uint64_t add = first[ed->to][w] | (nullable[ed->to] ? g->follow[st->rule][w] : 0);
                    if (add & ~fo[w]) {
                        fo[w] |= add;
                        changed = 1;
                    }
                }
            }
        }
    }
    free(reach);
    free(at_start);
    free(stack);
    free(nullable);
    free(first);
    free(calls);
    return rc;
}

/* ---- the whole grammar --------------------------------------------------------------- */

void cinfer_grammar_free(struct cinfer_grammar **gp)
{
    if (!gp || !*gp)
        return;
    struct cinfer_grammar *g = *gp;
    for (int i = 0; i < g->n_rules; i++)
        free(g->rule_names[i]);
    free(g->rule_names);
    free(g->rule_start);
    free(g->states);
    free(g->edges);
    free(g->follow);
    free(g);
    *gp = NULL;
}

int cinfer_grammar_n_states(const struct cinfer_grammar *g) { return g->n_states; }
int cinfer_grammar_n_rules(const struct cinfer_grammar *g) { return g->n_rules; }

int cinfer_grammar_compile_text(const char *text, size_t len, struct cinfer_grammar **out, struct cinfer_error *err)
{
    *out = NULL;
    struct grammar_rules rules;
    int rc = cinfer_grammar_parse(text, len, &rules, err);
    if (rc)
        return rc;
    struct cinfer_grammar *g = calloc(1, sizeof *g);
    struct dfa_builder b = {0};
    if (!g || !(g->rule_start = calloc((size_t)rules.n, sizeof *g->rule_start))) {
        free(g);
        cinfer_grammar_rules_free(&rules);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory");
    }
    g->n_rules = rules.n;
    g->rule_names = rules.names;
    rules.names = NULL;
    for (int r = 0; r < rules.n; r++)
        if (!strcmp(g->rule_names[r], "root"))
            g->root = r;
    for (int r = 0; r < rules.n && rc == CINFER_OK; r++) {
        struct nfa n = {0};
        int start = nfa_state(&n);
        int end = frag(&n, rules.body[r], start);
        if (!n.failed && nfa_index(&n))
            n.failed = 1;
        if (n.failed == 2)
            rc = cinfer_error_set(err, CINFER_ERR_RANGE,
                                  "grammar: rule '%s' is too large (over %d automaton states; a repetition {m,n} "
                                  "with large bounds?)",
                                  g->rule_names[r], NFA_MAX_STATES);
        else if (n.failed)
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory building rule '%s'", g->rule_names[r]);
        else
            g->rule_start[r] = determinize(&b, &n, r, start, end);
        if (rc == CINFER_OK && b.failed == 2)
            rc = cinfer_error_set(err, CINFER_ERR_RANGE,
                                  "grammar: rule '%s' makes too large an automaton (over %d states or %d NFA "
                                  "positions in them; a pattern that must remember many characters back, such as "
                                  "(a|b)*a(a|b){30})",
                                  g->rule_names[r], CINFER_GRAMMAR_MAX_STATES, CINFER_GRAMMAR_MAX_POSITIONS);
        else if (rc == CINFER_OK && b.failed)
            rc = cinfer_error_set(err, CINFER_ERR_NOMEM, "grammar: out of memory building rule '%s'", g->rule_names[r]);
        free(n.e);
        free(n.first);
    }
    g->states = b.states;
    g->n_states = b.n_states;
    g->edges = b.edges;
    g->n_edges = b.n_edges;
    free(b.set_data);
    free(b.set_off);
    free(b.hash);
    free(b.stamp);
    free(b.work);
    cinfer_grammar_rules_free(&rules);
    if (rc == CINFER_OK)
        rc = analyze(g, err);
    if (rc) {
        cinfer_grammar_free(&g);
        return rc;
    }
    *out = g;
    return CINFER_OK;
}
