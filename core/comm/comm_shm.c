/* core/comm/comm_shm.c — the shared-memory communicator (design in comm_shm.h). */
#include "comm/comm_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SHM_MAGIC "CINFSHM\0"
#define SHM_LAYOUT_VERSION 1u
#define CONTROL_BYTES ((size_t)4096)
#define NAME_BYTES 240
#define WHY_BYTES 240
/* Pause loops a waiting rank spins before it sleeps on the futex: about 10-50 us,
 * depending on the CPU's pause. A decode step's all-reduces come about a layer's
 * compute apart; a rank whose peer is descheduled (more ranks than free cores) stops
 * burning the core that peer needs soon after. */
#define SPIN_ITERATIONS 2000
/* The barrier word counts in steps of 2; bit 0 says the group was aborted. */
#define GENERATION_STEP 2u
#define ABORTED_BIT 1u

struct shm_control {
    char magic[8];
    uint32_t layout_version;
    uint32_t n_ranks;
    uint64_t chunk_bytes;
    uint64_t segment_bytes;
    _Alignas(64) _Atomic uint32_t arrived;    /* ranks at the current barrier */
    _Alignas(64) _Atomic uint32_t generation; /* futex word: += 2 per barrier, | 1 when aborted */
    _Alignas(64) _Atomic uint32_t sleepers;   /* ranks asleep (or about to be) on generation */
    _Alignas(64) _Atomic int32_t abort_rank;  /* -1, or the first rank that aborted */
    char abort_why[WHY_BYTES];
    _Atomic uint32_t attached[CINFER_COMM_SHM_MAX_RANKS];
};
_Static_assert(sizeof(struct shm_control) <= CONTROL_BYTES, "the control block fits its 4 KiB");

struct shm_comm {
    struct cinfer_comm comm; /* what attach hands out */
    struct shm_control *ctl;
    uint8_t *buffers;        /* (2, n_ranks, chunk_bytes) */
    size_t segment_bytes, chunk_bytes;
    int rank, size;
    uint32_t step; /* chunk steps taken so far: the buffer set of the next is step & 1 */
    char name[NAME_BYTES];
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Shared (not FUTEX_PRIVATE): the ranks are usually separate processes. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int check_name(const char *name, struct cinfer_error *err)
{
    size_t len = name ? strlen(name) : 0;
    if (len < 2 || name[0] != '/' || strchr(name + 1, '/') || len >= NAME_BYTES)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "shm communicator: segment name \"%s\" must be '/' and 1 to %d more characters, none "
                                "of them '/'",
                                name ? name : "(null)", NAME_BYTES - 2);
    return CINFER_OK;
}

size_t cinfer_comm_shm_segment_bytes(int n_ranks, size_t chunk_bytes)
{
    if (chunk_bytes == 0)
        chunk_bytes = CINFER_COMM_SHM_DEFAULT_CHUNK_BYTES;
    return CONTROL_BYTES + 2 * (size_t)n_ranks * chunk_bytes;
}

int cinfer_comm_shm_create(const char *name, int n_ranks, size_t chunk_bytes, struct cinfer_error *err)
{
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    if (chunk_bytes == 0)
        chunk_bytes = CINFER_COMM_SHM_DEFAULT_CHUNK_BYTES;
    if (n_ranks < 1 || n_ranks > CINFER_COMM_SHM_MAX_RANKS)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "shm communicator %s: %d ranks; expected 1 to %d", name,
                                n_ranks, CINFER_COMM_SHM_MAX_RANKS);
    if (chunk_bytes % 64 != 0 || chunk_bytes < CINFER_COMM_SHM_MIN_CHUNK_BYTES ||
        chunk_bytes > CINFER_COMM_SHM_MAX_CHUNK_BYTES)
        return cinfer_error_set(err, CINFER_ERR_RANGE,
                                "shm communicator %s: chunk of %zu bytes; expected a multiple of 64 from %zu to %zu",
                                name, chunk_bytes, CINFER_COMM_SHM_MIN_CHUNK_BYTES, CINFER_COMM_SHM_MAX_CHUNK_BYTES);
    size_t bytes = cinfer_comm_shm_segment_bytes(n_ranks, chunk_bytes);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return cinfer_error_set(err, errno == EEXIST ? CINFER_ERR_STATE : CINFER_ERR_IO,
                                "shm communicator: cannot create segment %s: %s%s", name, strerror(errno),
                                errno == EEXIST ? " (another engine's, or one a crashed engine left: unlink it)" : "");
    void *map = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0)
        map = mmap(NULL, CONTROL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED) {
        shm_unlink(name);
        return cinfer_error_set(err, CINFER_ERR_IO, "shm communicator: cannot size and map segment %s (%zu bytes): %s",
                                name, bytes, strerror(saved));
    }
    struct shm_control *ctl = map; /* the file is zero-filled: counters start at 0 */
    ctl->layout_version = SHM_LAYOUT_VERSION;
    ctl->n_ranks = (uint32_t)n_ranks;
    ctl->chunk_bytes = chunk_bytes;
    ctl->segment_bytes = bytes;
    atomic_store(&ctl->abort_rank, -1);
    atomic_thread_fence(memory_order_release);
    memcpy(ctl->magic, SHM_MAGIC, sizeof ctl->magic); /* last: attach reads it first */
    munmap(map, CONTROL_BYTES);
    return CINFER_OK;
}

int cinfer_comm_shm_unlink(const char *name, struct cinfer_error *err)
{
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    if (shm_unlink(name) != 0)
        return cinfer_error_set(err, errno == ENOENT ? CINFER_ERR_NOT_FOUND : CINFER_ERR_IO,
                                "shm communicator: cannot unlink segment %s: %s", name, strerror(errno));
    return CINFER_OK;
}

/* ---- collectives -------------------------------------------------------------------- */

static int aborted_error(const struct shm_comm *c, struct cinfer_error *err)
{
    const struct shm_control *ctl = c->ctl;
    int32_t who = atomic_load(&((struct shm_control *)ctl)->abort_rank);
    char why[WHY_BYTES];
    memcpy(why, ctl->abort_why, sizeof why);
    why[WHY_BYTES - 1] = '\0';
    return cinfer_error_set(err, CINFER_ERR_STATE, "shm communicator %s: rank %d aborted the group: %s", c->name,
                            (int)who, why[0] ? why : "(no reason given)");
}

/* Returns when every rank has arrived (0), or the group was aborted (CINFER_ERR_STATE).
 * The last rank to arrive resets the count and moves the generation on; the others
 * wait for the generation to move. Arriving is a release and leaving an acquire, so
 * what any rank wrote before the barrier is seen by every rank after it. */
static int barrier_wait(struct shm_comm *c, struct cinfer_error *err)
{
    struct shm_control *ctl = c->ctl;
    uint32_t gen = atomic_load(&ctl->generation);
    if (gen & ABORTED_BIT)
        return aborted_error(c, err);
    if (atomic_fetch_add(&ctl->arrived, 1) + 1 == (uint32_t)c->size) {
        atomic_store(&ctl->arrived, 0);
        atomic_fetch_add(&ctl->generation, GENERATION_STEP); /* seq_cst: pairs with sleepers below */
        if (atomic_load(&ctl->sleepers) > 0)
            futex_wake_all(&ctl->generation);
        return CINFER_OK;
    }
    uint32_t now = gen;
    for (int spin = 0; spin < SPIN_ITERATIONS; spin++) {
        now = atomic_load_explicit(&ctl->generation, memory_order_acquire);
        if (now != gen)
            break;
        cpu_relax();
    }
    if (now == gen) {
        atomic_fetch_add(&ctl->sleepers, 1);
        /* the generation is read again after announcing the sleep: either the last rank
         * sees sleepers > 0 and wakes us, or we see its new generation here; the futex
         * itself sleeps only while the word still holds gen */
        while ((now = atomic_load(&ctl->generation)) == gen)
            futex_wait(&ctl->generation, gen);
        atomic_fetch_sub(&ctl->sleepers, 1);
    }
    if (now & ABORTED_BIT)
        return aborted_error(c, err);
    return CINFER_OK;
}

static uint8_t *buffer_of(const struct shm_comm *c, uint32_t step, int rank)
{
    return c->buffers + ((size_t)(step & 1) * (size_t)c->size + (size_t)rank) * c->chunk_bytes;
}

static int shm_all_reduce_sum_f32(void *state, float *data, size_t n, struct cinfer_error *err)
{
    struct shm_comm *c = state;
    size_t chunk = c->chunk_bytes / sizeof(float);
    for (size_t first = 0; first < n; first += chunk) {
        size_t len = n - first < chunk ? n - first : chunk;
        uint32_t step = c->step++;
        memcpy(buffer_of(c, step, c->rank), data + first, len * sizeof(float));
        int rc = barrier_wait(c, err);
        if (rc < 0)
            return rc;
        /* (((r0 + r1) + r2) + ...) per element, the same order on every rank */
        float *out = data + first;
        memcpy(out, buffer_of(c, step, 0), len * sizeof(float));
        for (int r = 1; r < c->size; r++) {
            const float *in = (const float *)buffer_of(c, step, r);
            for (size_t i = 0; i < len; i++)
                out[i] += in[i];
        }
    }
    return CINFER_OK;
}

static int shm_all_gather(void *state, const void *send, size_t bytes_per_rank, void *recv, struct cinfer_error *err)
{
    struct shm_comm *c = state;
    for (size_t first = 0; first < bytes_per_rank; first += c->chunk_bytes) {
        size_t len = bytes_per_rank - first < c->chunk_bytes ? bytes_per_rank - first : c->chunk_bytes;
        uint32_t step = c->step++;
        memcpy(buffer_of(c, step, c->rank), (const uint8_t *)send + first, len);
        int rc = barrier_wait(c, err);
        if (rc < 0)
            return rc;
        for (int r = 0; r < c->size; r++)
            memcpy((uint8_t *)recv + (size_t)r * bytes_per_rank + first, buffer_of(c, step, r), len);
    }
    return CINFER_OK;
}

static int shm_broadcast(void *state, void *data, size_t bytes, int root, struct cinfer_error *err)
{
    struct shm_comm *c = state;
    if (root < 0 || root >= c->size)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "shm communicator %s: broadcast from rank %d of %d",
                                c->name, root, c->size);
    for (size_t first = 0; first < bytes; first += c->chunk_bytes) {
        size_t len = bytes - first < c->chunk_bytes ? bytes - first : c->chunk_bytes;
        uint32_t step = c->step++;
        if (c->rank == root)
            memcpy(buffer_of(c, step, root), (uint8_t *)data + first, len);
        int rc = barrier_wait(c, err);
        if (rc < 0)
            return rc;
        if (c->rank != root)
            memcpy((uint8_t *)data + first, buffer_of(c, step, root), len);
    }
    return CINFER_OK;
}

static int shm_barrier(void *state, struct cinfer_error *err)
{
    return barrier_wait(state, err);
}

static int shm_abort(void *state, const char *why, struct cinfer_error *err)
{
    struct shm_comm *c = state;
    struct shm_control *ctl = c->ctl;
    int32_t none = -1;
    if (atomic_compare_exchange_strong(&ctl->abort_rank, &none, c->rank))
        snprintf(ctl->abort_why, sizeof ctl->abort_why, "%s", why ? why : "");
    atomic_fetch_or(&ctl->generation, ABORTED_BIT); /* after the record: seq_cst */
    futex_wake_all(&ctl->generation);
    return CINFER_OK;
}

static void shm_destroy(void *state)
{
    struct shm_comm *c = state;
    if (!c)
        return;
    atomic_store(&c->ctl->attached[c->rank], 0);
    munmap(c->ctl, c->segment_bytes);
    free(c);
}

static const struct cinfer_comm_ops shm_ops = {
    .version = CINFER_COMM_OPS_VERSION,
    .struct_size = sizeof(struct cinfer_comm_ops),
    .name = "shm",
    .all_reduce_sum_f32 = shm_all_reduce_sum_f32,
    .all_gather = shm_all_gather,
    .broadcast = shm_broadcast,
    .barrier = shm_barrier,
    .abort = shm_abort,
    .destroy = shm_destroy,
};

int cinfer_comm_shm_attach(const char *name, int rank, struct cinfer_comm **out, struct cinfer_error *err)
{
    *out = NULL;
    int rc = check_name(name, err);
    if (rc < 0)
        return rc;
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return cinfer_error_set(err, errno == ENOENT ? CINFER_ERR_NOT_FOUND : CINFER_ERR_IO,
                                "shm communicator: cannot open segment %s: %s", name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < CONTROL_BYTES) {
        close(fd);
        return cinfer_error_set(err, CINFER_ERR_PARSE,
                                "shm communicator: segment %s holds %lld bytes, fewer than its control block's %zu",
                                name, (long long)st.st_size, CONTROL_BYTES);
    }
    size_t bytes = (size_t)st.st_size;
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED)
        return cinfer_error_set(err, CINFER_ERR_IO, "shm communicator: cannot map segment %s (%zu bytes): %s", name,
                                bytes, strerror(saved));
    struct shm_control *ctl = map;
    const char *refusal = NULL;
    char found[160];
    if (memcmp(ctl->magic, SHM_MAGIC, sizeof ctl->magic) != 0) {
        refusal = "is not a cinfer communicator segment (no magic)";
    } else if (ctl->layout_version != SHM_LAYOUT_VERSION) {
        snprintf(found, sizeof found, "has layout version %u, this build reads %u", ctl->layout_version,
                 SHM_LAYOUT_VERSION);
        refusal = found;
    } else if (ctl->n_ranks < 1 || ctl->n_ranks > CINFER_COMM_SHM_MAX_RANKS || ctl->segment_bytes != bytes ||
               ctl->chunk_bytes == 0 || ctl->segment_bytes != cinfer_comm_shm_segment_bytes((int)ctl->n_ranks,
                                                                                            ctl->chunk_bytes)) {
        snprintf(found, sizeof found, "is inconsistent: %u ranks, chunks of %llu bytes, %llu bytes said, %zu found",
                 ctl->n_ranks, (unsigned long long)ctl->chunk_bytes, (unsigned long long)ctl->segment_bytes, bytes);
        refusal = found;
    } else if (rank < 0 || rank >= (int)ctl->n_ranks) {
        snprintf(found, sizeof found, "is for %u ranks: rank %d is outside [0, %u)", ctl->n_ranks, rank,
                 ctl->n_ranks);
        refusal = found;
    } else {
        uint32_t free_slot = 0;
        if (!atomic_compare_exchange_strong(&ctl->attached[rank], &free_slot, 1)) {
            snprintf(found, sizeof found, "already has a rank %d attached", rank);
            refusal = found;
        }
    }
    if (refusal) {
        munmap(map, bytes);
        return cinfer_error_set(err, CINFER_ERR_STATE, "shm communicator: segment %s %s", name, refusal);
    }
    struct shm_comm *c = calloc(1, sizeof *c);
    if (!c) {
        atomic_store(&ctl->attached[rank], 0);
        munmap(map, bytes);
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "shm communicator: out of memory");
    }
    c->ctl = ctl;
    c->buffers = (uint8_t *)map + CONTROL_BYTES;
    c->segment_bytes = bytes;
    c->chunk_bytes = (size_t)ctl->chunk_bytes;
    c->rank = rank;
    c->size = (int)ctl->n_ranks;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->comm = (struct cinfer_comm){&shm_ops, c, rank, c->size};
    *out = &c->comm;
    return CINFER_OK;
}
