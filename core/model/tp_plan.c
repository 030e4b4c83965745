/* core/model/tp_plan.c — encoding and checked decoding of a forward call's plan
 * (format in tp_plan.h). */
#include "model/tp_plan.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t plan_magic[4] = {'C', 'T', 'P', 'P'};

/* ep_size as the header holds it: 0 and 1 both say no expert parallelism */
static uint32_t ep_field(int ep_size)
{
    return ep_size > 1 ? (uint32_t)ep_size : 1u;
}

static int pages_used(int start_pos, int n_tokens, int page_tokens)
{
    return (int)(((int64_t)start_pos + n_tokens + page_tokens - 1) / page_tokens);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t cinfer_tp_plan_bytes(const struct cinfer_seq_chunk *seqs, int n_seqs, const struct cinfer_tp_plan_limits *lim)
{
    size_t bytes = CINFER_TP_PLAN_HEADER_BYTES;
    for (int s = 0; s < n_seqs; s++) {
        size_t pages = (size_t)pages_used(seqs[s].start_pos, seqs[s].n_tokens, lim->page_tokens);
        bytes += CINFER_TP_PLAN_SEQ_BYTES + 4 * ((size_t)seqs[s].n_tokens + pages * (lim->window_pages > 0 ? 2 : 1));
    }
    return bytes;
}

void cinfer_tp_plan_encode(uint64_t step, const struct cinfer_tp_plan_limits *lim, const struct cinfer_seq_chunk *seqs,
                           int n_seqs, const int32_t *window_of, uint8_t *out)
{
    size_t total = cinfer_tp_plan_bytes(seqs, n_seqs, lim);
    uint32_t n_tokens = 0;
    for (int s = 0; s < n_seqs; s++)
        n_tokens += (uint32_t)seqs[s].n_tokens;
    memcpy(out, plan_magic, 4);
    put_u32(out + 4, CINFER_TP_PLAN_VERSION);
    put_u32(out + 8, (uint32_t)total);
    put_u32(out + 12, (uint32_t)n_seqs);
    put_u32(out + 16, (uint32_t)step);
    put_u32(out + 20, (uint32_t)(step >> 32));
    put_u32(out + 24, n_tokens);
    put_u32(out + 28, (uint32_t)lim->kv_pages);
    put_u32(out + 32, (uint32_t)lim->page_tokens);
    put_u32(out + 36, (uint32_t)lim->vocab);
    put_u32(out + 40, (uint32_t)lim->window_pages);
    put_u32(out + 44, ep_field(lim->ep_size));
    uint8_t *p = out + CINFER_TP_PLAN_HEADER_BYTES;
    for (int s = 0; s < n_seqs; s++) {
        const struct cinfer_seq_chunk *c = &seqs[s];
        int n_pages = pages_used(c->start_pos, c->n_tokens, lim->page_tokens);
        put_u32(p, (uint32_t)c->n_tokens);
        put_u32(p + 4, (uint32_t)c->start_pos);
        put_u32(p + 8, (uint32_t)n_pages);
        put_u32(p + 12, (uint32_t)c->logits);
        p += CINFER_TP_PLAN_SEQ_BYTES;
        for (int t = 0; t < c->n_tokens; t++, p += 4)
            put_u32(p, (uint32_t)c->tokens[t]);
        for (int i = 0; i < n_pages; i++, p += 4)
            put_u32(p, (uint32_t)c->page_table[i]);
        for (int i = 0; lim->window_pages > 0 && i < n_pages; i++, p += 4)
            put_u32(p, (uint32_t)window_of[c->page_table[i]]);
    }
}

/* Grows the decode arrays to hold n_seqs sequences and n_ints tokens and pages. */
static int plan_reserve(struct cinfer_tp_plan *out, size_t n_seqs, size_t n_ints, struct cinfer_error *err)
{
    if (n_seqs > out->seqs_cap) {
        struct cinfer_seq_chunk *grown = realloc(out->seqs, n_seqs * sizeof *grown);
        if (grown)
            out->seqs = grown;
        const int32_t **window_of = realloc(out->window_of, n_seqs * sizeof *window_of);
        if (window_of)
            out->window_of = window_of;
        if (!grown || !window_of)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "plan: out of memory for %zu sequences", n_seqs);
        out->seqs_cap = n_seqs;
    }
    if (n_ints > out->ints_cap) {
        int32_t *grown = realloc(out->ints, n_ints * sizeof *grown);
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "plan: out of memory for %zu tokens and pages", n_ints);
        out->ints = grown;
        out->ints_cap = n_ints;
    }
    return CINFER_OK;
}

int cinfer_tp_plan_decode(const void *plan, size_t plan_bytes, const struct cinfer_tp_plan_limits *lim,
                          struct cinfer_tp_plan *out, struct cinfer_error *err)
{
    const uint8_t *b = plan;
    out->n_seqs = out->n_tokens = 0;
    if (!b || plan_bytes < CINFER_TP_PLAN_HEADER_BYTES)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: %zu bytes, shorter than the %u-byte header", plan_bytes,
                                CINFER_TP_PLAN_HEADER_BYTES);
    if (memcmp(b, plan_magic, 4) != 0)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: magic is %02x %02x %02x %02x, expected \"CTPP\"", b[0],
                                b[1], b[2], b[3]);
    uint32_t version = get_u32(b + 4), total = get_u32(b + 8), n_seqs = get_u32(b + 12);
    uint64_t step = (uint64_t)get_u32(b + 16) | (uint64_t)get_u32(b + 20) << 32;
    uint32_t n_tokens = get_u32(b + 24), kv_pages = get_u32(b + 28), page_tokens = get_u32(b + 32);
    uint32_t vocab = get_u32(b + 36), window_pages = get_u32(b + 40), ep_size = get_u32(b + 44);
    if (version != CINFER_TP_PLAN_VERSION)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: version %u, this build reads %u", version,
                                CINFER_TP_PLAN_VERSION);
    if (total != plan_bytes)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: total bytes says %u, %zu were given", total, plan_bytes);
    if (kv_pages != (uint32_t)lim->kv_pages || page_tokens != (uint32_t)lim->page_tokens)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "plan: kv_pages %u of page_tokens %u, this rank's cache has %d pages of %d tokens "
                                "(every rank must size its cache alike)",
                                kv_pages, page_tokens, lim->kv_pages, lim->page_tokens);
    if (window_pages != (uint32_t)lim->window_pages)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "plan: window_pages %u, this rank's sliding-window pool has %d pages (every rank must "
                                "size its cache alike)",
                                window_pages, lim->window_pages);
    if (ep_size != ep_field(lim->ep_size))
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "plan: ep_size %u, this rank runs ep_size %u (every rank must split the experts "
                                "alike)",
                                ep_size, ep_field(lim->ep_size));
    if (vocab != (uint32_t)lim->vocab)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: vocab %u, this rank's model has %d", vocab, lim->vocab);
    if (n_tokens < 1 || n_tokens > (uint32_t)lim->max_batch_tokens)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: n_tokens %u, expected 1 to max_batch_tokens %d",
                                n_tokens, lim->max_batch_tokens);
    size_t body = plan_bytes - CINFER_TP_PLAN_HEADER_BYTES;
    if (n_seqs < 1 || n_seqs > n_tokens || n_seqs > body / CINFER_TP_PLAN_SEQ_BYTES)
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "plan: n_seqs %u, expected 1 to n_tokens %u, each sequence in at least %u of the %zu "
                                "bytes after the header",
                                n_seqs, n_tokens, CINFER_TP_PLAN_SEQ_BYTES, body);
    int rc = plan_reserve(out, n_seqs, body / 4, err); /* every token and page takes 4 bytes of the plan */
    if (rc < 0)
        return rc;
    const uint8_t *p = b + CINFER_TP_PLAN_HEADER_BYTES, *end = b + plan_bytes;
    int32_t *ints = out->ints;
    uint32_t tokens_seen = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        if ((size_t)(end - p) < CINFER_TP_PLAN_SEQ_BYTES)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "plan: sequence %u's fields run past the end (byte %zu of %zu)", s,
                                    (size_t)(p - b), plan_bytes);
        uint32_t seq_tokens = get_u32(p), start_pos = get_u32(p + 4), n_pages = get_u32(p + 8), mode = get_u32(p + 12);
        p += CINFER_TP_PLAN_SEQ_BYTES;
        if (seq_tokens < 1 || seq_tokens > n_tokens - tokens_seen)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "plan: sequence %u n_tokens %u, expected 1 to the %u tokens the header leaves", s,
                                    seq_tokens, n_tokens - tokens_seen);
        if (start_pos > (uint32_t)INT32_MAX - seq_tokens)
            return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: sequence %u start_pos %u is past any context", s,
                                    start_pos);
        uint64_t end_pos = (uint64_t)start_pos + seq_tokens;
        uint64_t need = (end_pos + page_tokens - 1) / page_tokens;
        if (n_pages != need)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "plan: sequence %u n_pages %u, its positions [0, %llu) take %llu pages of %u "
                                    "tokens",
                                    s, n_pages, (unsigned long long)end_pos, (unsigned long long)need, page_tokens);
        if (mode > CINFER_LOGITS_ALL)
            return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: sequence %u logits mode %u, expected 0, 1 or 2", s,
                                    mode);
        size_t page_ints = (size_t)n_pages * (window_pages > 0 ? 2 : 1);
        if ((size_t)(end - p) / 4 < (size_t)seq_tokens + page_ints)
            return cinfer_error_set(err, CINFER_ERR_PARSE,
                                    "plan: sequence %u's %u tokens and %u pages run past the end (byte %zu of %zu)", s,
                                    seq_tokens, n_pages, (size_t)(p - b), plan_bytes);
        int32_t *tokens = ints;
        for (uint32_t t = 0; t < seq_tokens; t++, p += 4) {
            int32_t id = (int32_t)get_u32(p);
            if (id < 0 || id >= lim->vocab)
                return cinfer_error_set(err, CINFER_ERR_PARSE,
                                        "plan: sequence %u token %u is id %d, outside the vocabulary [0, %d)", s, t, id,
                                        lim->vocab);
            *ints++ = id;
        }
        int32_t *pages = ints;
        for (uint32_t i = 0; i < n_pages; i++, p += 4) {
            int32_t page = (int32_t)get_u32(p);
            if (page < 0 || page >= lim->kv_pages)
                return cinfer_error_set(err, CINFER_ERR_PARSE,
                                        "plan: sequence %u page %u is %d, outside the cache's [0, %d)", s, i, page,
                                        lim->kv_pages);
            *ints++ = page;
        }
        out->window_of[s] = window_pages > 0 ? ints : NULL;
        for (uint32_t i = 0; window_pages > 0 && i < n_pages; i++, p += 4) {
            int32_t wp = (int32_t)get_u32(p);
            if (wp < -1 || wp >= (int32_t)window_pages)
                return cinfer_error_set(err, CINFER_ERR_PARSE,
                                        "plan: sequence %u page %u's window page is %d, expected -1 (released) or "
                                        "one of [0, %u)",
                                        s, i, wp, window_pages);
            *ints++ = wp;
        }
        out->seqs[s] = (struct cinfer_seq_chunk){tokens, (int)seq_tokens, (int)start_pos, pages, (int)n_pages,
                                                 (enum cinfer_logits_mode)mode, NULL, 0, 0, NULL, NULL, NULL};
        tokens_seen += seq_tokens;
    }
    if (tokens_seen != n_tokens)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: the sequences carry %u tokens, n_tokens says %u",
                                tokens_seen, n_tokens);
    if (p != end)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "plan: %zu bytes after the last sequence", (size_t)(end - p));
    out->step = step;
    out->n_seqs = (int)n_seqs;
    out->n_tokens = (int)n_tokens;
    return CINFER_OK;
}

void cinfer_tp_plan_free(struct cinfer_tp_plan *p)
{
    free(p->seqs);
    free(p->window_of);
    free(p->ints);
    memset(p, 0, sizeof *p);
}
