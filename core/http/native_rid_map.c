/* The client's request ids (SGLang's rid) in flight, each mapped to the engine's
 * request ids, so that POST /abort_request {rid} reaches the engine. One small table
 * for every server in the process, keyed by engine as well as rid, under one lock;
 * a /generate holds its entry from start to finish. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "http/native_api.h"

struct rid_entry {
    struct rid_entry *next;
    const struct cinfer_engine *engine;
    char rid[NATIVE_RID_BYTES];
    size_t n_ids;
    uint64_t ids[]; /* (n_ids) */
};

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rid_entry *entries;

static struct rid_entry **find(const struct cinfer_engine *engine, const char *rid)
{
    for (struct rid_entry **p = &entries; *p; p = &(*p)->next)
        if ((*p)->engine == engine && strcmp((*p)->rid, rid) == 0)
            return p;
    return NULL;
}

int cinfer_native_rid_register(const struct cinfer_engine *engine, const char *rid, const uint64_t *ids, size_t n)
{
    if (strlen(rid) >= NATIVE_RID_BYTES)
        return CINFER_ERR_RANGE;
    struct rid_entry *e = malloc(sizeof *e + n * sizeof e->ids[0]);
    if (!e)
        return CINFER_ERR_NOMEM;
    e->engine = engine;
    snprintf(e->rid, sizeof e->rid, "%s", rid);
    e->n_ids = n;
    memcpy(e->ids, ids, n * sizeof ids[0]);
    pthread_mutex_lock(&map_lock);
    int taken = find(engine, rid) != NULL;
    if (!taken) {
        e->next = entries;
        entries = e;
    }
    pthread_mutex_unlock(&map_lock);
    if (taken) {
        free(e);
        return CINFER_ERR_STATE;
    }
    return CINFER_OK;
}

void cinfer_native_rid_unregister(const struct cinfer_engine *engine, const char *rid)
{
    pthread_mutex_lock(&map_lock);
    struct rid_entry **p = find(engine, rid);
    struct rid_entry *gone = p ? *p : NULL;
    if (p)
        *p = gone->next;
    pthread_mutex_unlock(&map_lock);
    free(gone);
}

int cinfer_native_rid_abort(struct cinfer_engine *engine, const char *rid)
{
    /* Collect under the lock, abort outside it: cinfer_engine_abort sends a frame. */
    uint64_t *ids = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&map_lock);
    for (struct rid_entry *e = entries; e; e = e->next) {
        if (e->engine != engine || (rid && strcmp(e->rid, rid) != 0))
            continue;
        if (n + e->n_ids > cap) {
            size_t grown_cap = (n + e->n_ids) * 2;
            uint64_t *grown = realloc(ids, grown_cap * sizeof *ids);
            if (!grown)
                break;
            ids = grown;
            cap = grown_cap;
        }
        memcpy(ids + n, e->ids, e->n_ids * sizeof *ids);
        n += e->n_ids;
    }
    pthread_mutex_unlock(&map_lock);
    int aborted = 0;
    for (size_t i = 0; i < n; i++)
        if (cinfer_engine_abort(engine, ids[i]) == CINFER_OK)
            aborted++;
    free(ids);
    return aborted;
}

void cinfer_native_rid_new(char out[NATIVE_RID_BYTES])
{
    unsigned char bytes[16];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        /* No entropy source: unique enough within this process, which is all a rid needs. */
        static unsigned long long counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        snprintf(out, NATIVE_RID_BYTES, "%016llx%016llx",
                 (unsigned long long)ts.tv_nsec ^ (unsigned long long)ts.tv_sec, c);
        return;
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}
