/* kernels/cuda/sample_row.cuh — one row's draw for backend.h's sample op, written once
 * for the device (a block of CINFER_SAMPLE_THREADS threads per row, sample.cu) and for
 * the host (the same code with its threads run one after another: test_sample_row
 * checks it against the host's sampler, core/scheduler/sampler.c, on random rows).
 *
 * The host's sampler ranks candidates with a heap and walks them in rank order (the
 * larger logit first, the lower id on equal logits). A block cannot sort a vocabulary
 * cheaply, so every cut here is a radix selection on the logits' order-preserving keys
 * instead: four passes over the row, each a histogram of the candidates' count or mass
 * (exp(logit - max) in double, as the host weighs them) over the next 8 bits of the
 * key, walked from the top bucket down until the running total crosses the target;
 * then the tokens of the one key found, in id order. The same selection gives the
 * top-k cut (count >= k), the top-p cut (mass >= top_p of the kept mass) and the draw
 * itself (mass > u x the kept mass), so the token is the one the host's walk picks;
 * only where a running sum lands within rounding of a cut (the two sum in different
 * orders, about 1e-16 of the mass) may they differ. A pass computes weights (exp in
 * double, its costly part) only for the entries the selection needs them for: with
 * top-k, top-p and min-p together about four passes of the row's 20 do for every entry.
 *
 * The code between phases runs in every thread alike (its decisions are read from
 * the block's shared state); a phase is a statement every thread t runs, between two
 * barriers on the device and as a loop over t on the host. */
#ifndef CINFER_CUDA_SAMPLE_ROW_CUH
#define CINFER_CUDA_SAMPLE_ROW_CUH

#include <math.h>
#include <stdint.h>

#include "host_device.cuh"
#include "logits_rank.cuh"

#define CINFER_SAMPLE_THREADS 256 /* also the number of buckets of a radix pass */
#define CINFER_SAMPLE_GREEDY_BELOW 1e-5f /* the host sampler's GREEDY_BELOW_TEMPERATURE */

#ifdef __CUDA_ARCH__
#define CINFER_SAMPLE_PHASE(statement)                                                                                 \
    do {                                                                                                               \
        __syncthreads();                                                                                               \
        {                                                                                                              \
            const int t = (int)threadIdx.x;                                                                            \
            statement;                                                                                                 \
        }                                                                                                              \
        __syncthreads();                                                                                               \
    } while (0)
#define CINFER_SAMPLE_ADD(to, value) atomicAdd((to), (value))
#else
#define CINFER_SAMPLE_PHASE(statement)                                                                                 \
    do {                                                                                                               \
        for (int t = 0; t < CINFER_SAMPLE_THREADS; t++) {                                                              \
            statement;                                                                                                 \
        }                                                                                                              \
    } while (0)
#define CINFER_SAMPLE_ADD(to, value) (*(to) += (value))
#endif

/* What one row is drawn with (backend.h's struct cinfer_backend_sample_params). */
struct cinfer_sample_row_params {
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    double uniform;
};

/* The block's shared state. */
struct cinfer_sample_block {
    double part[CINFER_SAMPLE_THREADS]; /* each thread's partial sum */
    uint32_t key[CINFER_SAMPLE_THREADS]; /* each thread's best candidate */
    int32_t id[CINFER_SAMPLE_THREADS];
    double hist[CINFER_SAMPLE_THREADS]; /* a radix pass's buckets */
    /* the row */
    float *logits;
    int vocab;
    uint32_t top_key; /* the most likely token (rank 0) */
    int32_t top_id;   /* -1: no entry above -inf */
    double max;       /* its logit */
    /* the candidate set: rankable entries ranking no lower than (bound_key, bound_id),
     * and, with min_p_on, weighing at least min_p (rank 0 always) */
    int bounded;
    uint32_t bound_key;
    int32_t bound_id;
    int min_p_on;
    double min_p;
    /* the selection under way */
    int mass;       /* 1: the metric is a token's weight; 0: 1 per token */
    int strict;     /* 1: crosses when the running total is above target; 0: at or above */
    double target;
    uint32_t prefix; /* the key's bits found so far */
    double before;  /* the metric of every candidate ranking before those */
    int found;
    int scan_thread;  /* the thread whose ids hold the crossing */
    int take_last;    /* 1: its last token (rounding left the total short) */
    int32_t selected; /* the token the selection found */
    double sum;
};

/* The logit's key: larger logits have larger keys; 0 and -0 share one (they are equal
 * logits, ranked by id). */
CINFER_HD uint32_t cinfer_sample_key(float logit)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = logit == 0.0f ? 0.0f : logit;
    return (v.u & 0x80000000u) ? ~v.u : v.u | 0x80000000u;
}

/* 1 when (key_a, id_a) ranks before or at (key_b, id_b) */
CINFER_HD int cinfer_sample_ranks_no_lower(uint32_t key_a, int32_t id_a, uint32_t key_b, int32_t id_b)
{
    return key_a > key_b || (key_a == key_b && id_a <= id_b);
}

CINFER_HD double cinfer_sample_weight(const struct cinfer_sample_block *S, float logit)
{
    return exp((double)logit - S->max);
}

/* 1 when token i (its logit's key and weight given) is in the candidate set */
CINFER_HD int cinfer_sample_in_set(const struct cinfer_sample_block *S, int32_t i, float logit, uint32_t key,
                                   double w)
{
    if (!cinfer_logit_rankable(logit))
        return 0;
    if (S->bounded && !cinfer_sample_ranks_no_lower(key, i, S->bound_key, S->bound_id))
        return 0;
    return !S->min_p_on || w >= S->min_p || (key == S->top_key && i == S->top_id);
}

CINFER_HD int cinfer_sample_crosses(const struct cinfer_sample_block *S, double total)
{
    return S->strict ? total > S->target : total >= S->target;
}

/* Thread t's ids in a scan in id order: [*begin, *end). */
CINFER_HD void cinfer_sample_range(int vocab, int t, int *begin, int *end)
{
    int per = (vocab + CINFER_SAMPLE_THREADS - 1) / CINFER_SAMPLE_THREADS;
    int b = t * per, e = b + per;
    *begin = b < vocab ? b : vocab;
    *end = e < vocab ? e : vocab;
}

/* ---- the phases' statements -------------------------------------------------------- */

/* The host sampler's temperature: logits * (1 / temperature) in float, in place. */
CINFER_HD void cinfer_sample_scale_part(struct cinfer_sample_block *S, int t, float temperature)
{
    if (!(temperature >= CINFER_SAMPLE_GREEDY_BELOW) || temperature == 1.0f || isinf(temperature))
        return;
    float inv = 1.0f / temperature;
    for (int i = t; i < S->vocab; i += CINFER_SAMPLE_THREADS)
        S->logits[i] *= inv;
}

/* Thread t's most likely rankable entry over its stripe (worst 0), or (worst 1) its
 * least likely token of the set that weighs anything: the host's draw when rounding
 * leaves u x mass at the very top. Into key[t], id[t] (-1: none). */
CINFER_HD void cinfer_sample_extreme_part(struct cinfer_sample_block *S, int t, int worst)
{
    uint32_t key = 0;
    int32_t id = -1;
    for (int i = t; i < S->vocab; i += CINFER_SAMPLE_THREADS) {
        float l = S->logits[i];
        uint32_t k = cinfer_sample_key(l);
        double w = worst ? cinfer_sample_weight(S, l) : 0.0; /* max is known by then */
        int eligible = worst ? w > 0 && cinfer_sample_in_set(S, i, l, k, w) : cinfer_logit_rankable(l);
        if (eligible && (id < 0 || cinfer_sample_ranks_no_lower(key, id, k, i) == worst))
            key = k, id = i;
    }
    S->key[t] = key;
    S->id[t] = id;
}

/* Thread 0: the most likely (worst 0) or least likely (1) of the threads' picks: its id
 * (-1: none) and *key. */
CINFER_HD int32_t cinfer_sample_extreme_join(const struct cinfer_sample_block *S, int worst, uint32_t *key)
{
    int32_t id = -1;
    for (int u = 0; u < CINFER_SAMPLE_THREADS; u++)
        if (S->id[u] >= 0 && (id < 0 || cinfer_sample_ranks_no_lower(*key, id, S->key[u], S->id[u]) == worst))
            *key = S->key[u], id = S->id[u];
    return id;
}

CINFER_HD void cinfer_sample_top_join(struct cinfer_sample_block *S)
{
    S->top_id = cinfer_sample_extreme_join(S, 0, &S->top_key);
    S->max = S->top_id >= 0 ? (double)S->logits[S->top_id] : 0.0;
}

/* Thread t's part over its id range, in id order: the weights of every entry (every 1:
 * the host's plain softmax), else the metric (mass: the weight, else 1) of the set's
 * entries, only those of key `prefix` when at_key. */
CINFER_HD void cinfer_sample_part(struct cinfer_sample_block *S, int t, int every, int at_key, int mass)
{
    int b, e;
    cinfer_sample_range(S->vocab, t, &b, &e);
    double sum = 0;
    for (int i = b; i < e; i++) {
        float l = S->logits[i];
        uint32_t k = cinfer_sample_key(l);
        if (at_key && k != S->prefix)
            continue;
        double w = cinfer_sample_weight(S, l);
        if (every || cinfer_sample_in_set(S, i, l, k, w))
            sum += mass ? w : 1.0;
    }
    S->part[t] = sum;
}

CINFER_HD void cinfer_sample_sum_join(struct cinfer_sample_block *S)
{
    double sum = 0;
    for (int u = 0; u < CINFER_SAMPLE_THREADS; u++)
        sum += S->part[u];
    S->sum = sum;
}

CINFER_HD void cinfer_sample_hist_part(struct cinfer_sample_block *S, int t, int pass)
{
    int shift = 24 - 8 * pass;
    for (int i = t; i < S->vocab; i += CINFER_SAMPLE_THREADS) {
        float l = S->logits[i];
        uint32_t k = cinfer_sample_key(l);
        if (pass > 0 && (k >> (shift + 8)) != S->prefix)
            continue;
        double w = S->mass || S->min_p_on ? cinfer_sample_weight(S, l) : 0.0; /* exp is a pass's cost */
        if (cinfer_sample_in_set(S, i, l, k, w))
            CINFER_SAMPLE_ADD(&S->hist[(k >> shift) & 0xFF], S->mass ? w : 1.0);
    }
}

/* Thread 0: the bucket where the running total crosses, from the largest keys down. */
CINFER_HD void cinfer_sample_hist_walk(struct cinfer_sample_block *S)
{
    for (int b = CINFER_SAMPLE_THREADS - 1; b >= 0; b--) {
        double total = S->before + S->hist[b];
        if (cinfer_sample_crosses(S, total)) {
            S->prefix = S->prefix << 8 | (uint32_t)b;
            return;
        }
        S->before = total;
    }
    S->found = 0;
}

/* Thread 0: the thread whose range holds the crossing; where rounding leaves the total
 * short of the target (the buckets summed in another order), the last thread with any
 * part, whose last token is then taken. */
CINFER_HD void cinfer_sample_tie_walk(struct cinfer_sample_block *S)
{
    double total = S->before;
    S->scan_thread = -1;
    S->take_last = 0;
    for (int u = 0; u < CINFER_SAMPLE_THREADS; u++) {
        if (cinfer_sample_crosses(S, total + S->part[u])) {
            S->scan_thread = u;
            S->before = total;
            return;
        }
        if (S->part[u] > 0)
            S->scan_thread = u;
        total += S->part[u];
    }
    S->take_last = 1;
    S->found = S->scan_thread >= 0;
}

CINFER_HD void cinfer_sample_tie_scan(struct cinfer_sample_block *S, int t, int all)
{
    if (t != S->scan_thread)
        return;
    int b, e;
    cinfer_sample_range(S->vocab, t, &b, &e);
    double total = S->before;
    for (int i = b; i < e; i++) {
        float l = S->logits[i];
        uint32_t k = cinfer_sample_key(l);
        if (!all && k != S->prefix)
            continue;
        double w = cinfer_sample_weight(S, l);
        if (!all && !cinfer_sample_in_set(S, i, l, k, w))
            continue;
        double m = S->mass ? w : 1.0;
        if (!(m > 0))
            continue;
        S->selected = i;
        total += m;
        if (!S->take_last && cinfer_sample_crosses(S, total))
            return;
    }
}

/* Thread 0: the least likely token of the set that weighs anything, or rank 0 when
 * none does (the host's index 0). */
CINFER_HD void cinfer_sample_worst_join(struct cinfer_sample_block *S)
{
    uint32_t key = 0;
    int32_t worst = cinfer_sample_extreme_join(S, 1, &key);
    S->selected = worst >= 0 ? worst : S->top_id;
}

/* ---- the row ----------------------------------------------------------------------- */

/* Thread 0: a selection of the first token at which the running metric crosses target. */
CINFER_HD void cinfer_sample_begin(struct cinfer_sample_block *S, int mass, int strict, double target)
{
    S->mass = mass;
    S->strict = strict;
    S->target = target;
    S->prefix = 0;
    S->before = 0;
    S->found = 1;
    S->selected = -1;
}

/* The selection's end, from the threads' parts: the token, in id order over the parts'
 * entries (every entry, every 1, or the set's of key prefix): S->selected, with
 * S->found 0 when the total never crosses. */
CINFER_HD void cinfer_sample_settle(struct cinfer_sample_block *S, int every)
{
    CINFER_SAMPLE_PHASE(if (t == 0) cinfer_sample_tie_walk(S));
    CINFER_SAMPLE_PHASE(if (S->found) cinfer_sample_tie_scan(S, t, every));
}

/* The first token in rank order at which the running metric crosses target (begin's
 * arguments): S->selected, with S->found 0 when it never does. */
CINFER_HD void cinfer_sample_select(struct cinfer_sample_block *S, int mass, int strict, double target)
{
    CINFER_SAMPLE_PHASE(if (t == 0) cinfer_sample_begin(S, mass, strict, target));
    for (int pass = 0; pass < 4; pass++) {
        CINFER_SAMPLE_PHASE(S->hist[t] = 0);
        CINFER_SAMPLE_PHASE(cinfer_sample_hist_part(S, t, pass));
        CINFER_SAMPLE_PHASE(if (t == 0 && S->found) cinfer_sample_hist_walk(S));
        if (!S->found) /* read between two barriers: every thread sees the same */
            return;
    }
    CINFER_SAMPLE_PHASE(cinfer_sample_part(S, t, 0, 1, S->mass));
    cinfer_sample_settle(S, 0);
}

/* The row's token for p, drawn as the host's sampler draws it: returned in every thread
 * (device) or to the caller (host). The row is left divided by the temperature. */
CINFER_HD int32_t cinfer_sample_row(struct cinfer_sample_block *S, float *logits, int vocab,
                                    const struct cinfer_sample_row_params *p)
{
    CINFER_SAMPLE_PHASE(if (t == 0) {
        S->logits = logits;
        S->vocab = vocab;
        S->bounded = 0;
        S->min_p_on = 0;
    });
    CINFER_SAMPLE_PHASE(cinfer_sample_scale_part(S, t, p->temperature));
    CINFER_SAMPLE_PHASE(cinfer_sample_extreme_part(S, t, 0));
    CINFER_SAMPLE_PHASE(if (t == 0) cinfer_sample_top_join(S));
    if (S->top_id < 0) /* every entry -inf (or NaN): the host's argmax of such a row */
        return 0;
    int top_k_on = p->top_k > 0 && p->top_k < vocab;
    int top_p_on = p->top_p > 0.0f && p->top_p < 1.0f;
    int min_p_on = p->min_p > 0.0f;
    if (!top_k_on && !top_p_on && !min_p_on) { /* plain softmax, candidates in id order */
        CINFER_SAMPLE_PHASE(cinfer_sample_part(S, t, 1, 0, 1)); /* the mass and the draw's parts at once */
        CINFER_SAMPLE_PHASE(if (t == 0) {
            cinfer_sample_sum_join(S);
            cinfer_sample_begin(S, 1, 1, p->uniform * S->sum);
        });
        cinfer_sample_settle(S, 1);
        return S->found ? S->selected : S->top_id;
    }
    if (top_k_on) {
        cinfer_sample_select(S, 0, 0, (double)p->top_k);
        CINFER_SAMPLE_PHASE(if (t == 0 && S->found) {
            S->bounded = 1;
            S->bound_key = S->prefix;
            S->bound_id = S->selected;
        });
    }
    if (top_p_on) { /* of the mass top-k kept (SGLang renormalizes before top-p), else of all */
        CINFER_SAMPLE_PHASE(cinfer_sample_part(S, t, 0, 0, 1));
        CINFER_SAMPLE_PHASE(if (t == 0) cinfer_sample_sum_join(S));
        cinfer_sample_select(S, 1, 0, (double)p->top_p * S->sum);
        CINFER_SAMPLE_PHASE(if (t == 0 && S->found) {
            S->bounded = 1;
            S->bound_key = S->prefix;
            S->bound_id = S->selected;
        });
    }
    CINFER_SAMPLE_PHASE(if (t == 0) {
        S->min_p_on = min_p_on;
        S->min_p = (double)p->min_p;
    });
    CINFER_SAMPLE_PHASE(cinfer_sample_part(S, t, 0, 0, 1));
    CINFER_SAMPLE_PHASE(if (t == 0) cinfer_sample_sum_join(S));
    cinfer_sample_select(S, 1, 1, p->uniform * S->sum);
    if (S->found)
        return S->selected;
    CINFER_SAMPLE_PHASE(cinfer_sample_extreme_part(S, t, 1));
    CINFER_SAMPLE_PHASE(if (t == 0) cinfer_sample_worst_join(S));
    return S->selected;
}

#endif
