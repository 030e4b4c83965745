/* core/backend/cpu_weights.c — the CPU backend's weight copies.
 *
 * At the AVX-512 level Q8_0, F16 and BF16 weights are repacked into panels of 16 rows
 * (kernels/kernels.h), which the decode GEMV streams as one sequential read. The copies
 * are carved one after another out of slabs of 2 MiB pages: a decode step streams
 * every byte, and 4 KiB pages read 6-17% slower on the development machine
 * (docs/benchmarks.md); and a huge page per weight would hold a whole 2 MiB resident
 * for a 117 KB K projection. Carved in load order, a layer's weights also lie in the
 * order a forward pass reads them. */
#include "backend/cpu_weights.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "kernels.h"

#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define SLAB_BYTES ((size_t)64 << 20) /* unless one copy needs more */
#define COPY_ALIGN_BYTES 64
#define PACK_PANELS_PER_PART 64 /* panels one thread repacks at a time */

struct cpu_weight_slab {
    uint8_t *base;
    size_t bytes, used;
    int live; /* copies carved from it and not released */
    struct cpu_weight_slab *next;
};

/* `bytes` in the newest slab, or in a new one; NULL when out of memory. */
static uint8_t *carve(struct cpu_weight_store *store, size_t bytes, size_t *slab_bytes)
{
    bytes = (bytes + COPY_ALIGN_BYTES - 1) / COPY_ALIGN_BYTES * COPY_ALIGN_BYTES;
    struct cpu_weight_slab *s = store->slabs;
    if (!s || s->bytes - s->used < bytes) {
        size_t want = bytes > SLAB_BYTES ? (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
                                         : SLAB_BYTES;
        *slab_bytes = want;
        s = calloc(1, sizeof *s);
        uint8_t *base = s ? aligned_alloc(HUGE_PAGE_BYTES, want) : NULL;
        if (!base) {
            free(s);
            return NULL;
        }
#ifdef MADV_HUGEPAGE
        madvise(base, want, MADV_HUGEPAGE); /* advice only: EINVAL where THP is not built in */
#endif
        *s = (struct cpu_weight_slab){base, want, 0, 0, store->slabs};
        store->slabs = s;
    }
    uint8_t *p = s->base + s->used;
    s->used += bytes;
    s->live++;
    return p;
}

struct pack_job {
    const struct cinfer_backend_weight *w;
    uint8_t *panels;
    int n_parts;
};

static void pack_part(void *arg, int part, int thread)
{
    const struct pack_job *job = arg;
    (void)thread;
    int64_t rows = job->w->rows, panels = (rows + CINFER_KERNEL_PANEL_ROWS - 1) / CINFER_KERNEL_PANEL_ROWS;
    int64_t r0 = panels * part / job->n_parts * CINFER_KERNEL_PANEL_ROWS;
    int64_t r1 = panels * (part + 1) / job->n_parts * CINFER_KERNEL_PANEL_ROWS;
    if (r1 > rows)
        r1 = rows;
    enum cinfer_kernel_wtype stored = (enum cinfer_kernel_wtype)job->w->type;
    if (r1 > r0)
        cinfer_kernel_pack_panels(stored, (const uint8_t *)job->w->data + (size_t)r0 * job->w->row_bytes,
                                  job->w->row_bytes, r1 - r0, job->w->cols,
                                  job->panels + cinfer_kernel_panels_bytes(stored, r0, job->w->cols));
}

int cinfer_cpu_weights_prepare(struct cpu_weight_store *store, struct cinfer_thread_pool *pool,
                               const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                               struct cinfer_error *err)
{
    *out = *w;
    enum cinfer_kernel_wtype stored = (enum cinfer_kernel_wtype)w->type;
    if (cinfer_kernel_is_panels(stored) || cinfer_kernel_preferred_wtype(stored) == stored ||
        !cinfer_kernel_can_pack_panels(stored, w->cols))
        return 0;
    size_t bytes = cinfer_kernel_panels_bytes(stored, w->rows, w->cols), slab_bytes = 0;
    uint8_t *panels = carve(store, bytes, &slab_bytes);
    if (!panels)
        return cinfer_error_set(err, CINFER_ERR_NOMEM,
                                "cpu backend: cannot allocate a %zu-byte slab to repack a (%lld, %lld) weight",
                                slab_bytes, (long long)w->rows, (long long)w->cols);
    int64_t n_panels = (w->rows + CINFER_KERNEL_PANEL_ROWS - 1) / CINFER_KERNEL_PANEL_ROWS;
    struct pack_job job = {w, panels, (int)((n_panels + PACK_PANELS_PER_PART - 1) / PACK_PANELS_PER_PART)};
    cinfer_thread_pool_run_chunks(pool, pack_part, &job, job.n_parts);
    out->type = (uint32_t)cinfer_kernel_preferred_wtype(stored);
    out->data = panels;
    out->row_bytes = cinfer_kernel_row_bytes(stored, w->cols);
    return 0;
}

void cinfer_cpu_weights_release(struct cpu_weight_store *store, const struct cinfer_backend_weight *w)
{
    if (!cinfer_kernel_is_panels((enum cinfer_kernel_wtype)w->type)) /* copies are panels; the rest stored views */
        return;
    const uint8_t *p = w->data;
    for (struct cpu_weight_slab **at = &store->slabs; *at; at = &(*at)->next) {
        struct cpu_weight_slab *s = *at;
        if (p >= s->base && p < s->base + s->bytes) {
            if (--s->live == 0) {
                *at = s->next;
                free(s->base);
                free(s);
            }
            return;
        }
    }
}

void cinfer_cpu_weights_free_all(struct cpu_weight_store *store)
{
    while (store->slabs) {
        struct cpu_weight_slab *s = store->slabs;
        store->slabs = s->next;
        free(s->base);
        free(s);
    }
}
