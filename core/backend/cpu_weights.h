/* core/backend/cpu_weights.h — the CPU backend's own copies of weights (Q8_0, F16, BF16
 * and some K-quants repacked into panels of 16 rows for the AVX-512 kernels), kept in
 * slabs of huge-page memory. A prepared weight's type is then the kernels' panel type
 * (enum cinfer_kernel_wtype, CINFER_KW_*_PANELS: 4-6, 19-23), which the public enum
 * cinfer_tensor_type leaves out: only this backend reads it. */
#ifndef CINFER_BACKEND_CPU_WEIGHTS_H
#define CINFER_BACKEND_CPU_WEIGHTS_H

#include "cinfer/backend.h"
#include "util/thread_pool.h"

struct cpu_weight_slab;

struct cpu_weight_store {
    struct cpu_weight_slab *slabs; /* newest first; new copies go to the newest */
};

/* The weight as the kernels at the level in use read it fastest: *out = *w, or a copy
 * in the store (repacked with the pool's threads). */
int cinfer_cpu_weights_prepare(struct cpu_weight_store *store, struct cinfer_thread_pool *pool,
                               const struct cinfer_backend_weight *w, struct cinfer_backend_weight *out,
                               struct cinfer_error *err);
/* Gives back a copy cinfer_cpu_weights_prepare made (nothing for a weight it returned as is);
 * a slab is freed with its last copy. */
void cinfer_cpu_weights_release(struct cpu_weight_store *store, const struct cinfer_backend_weight *w);
/* Frees every slab (the backend's end). */
void cinfer_cpu_weights_free_all(struct cpu_weight_store *store);

#endif
