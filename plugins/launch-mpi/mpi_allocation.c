#include "mpi_allocation.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cinfer_mpi_free_names(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

/* A growing list of names; repeats are removed at the end (dedupe), keeping each
 * name's first place. */
struct names {
    char **items;
    size_t n, cap;
};

static int add_name(struct names *l, const char *name, size_t len, struct cinfer_error *err)
{
    if (l->n >= MPI_ALLOCATION_MAX_NODES)
        return cinfer_error_set(err, CINFER_ERR_RANGE, "more than %d nodes", MPI_ALLOCATION_MAX_NODES);
    if (l->n + 1 >= l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **grown = realloc(l->items, cap * sizeof *grown);
        if (!grown)
            return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory listing nodes");
        l->items = grown;
        l->cap = cap;
    }
    if (!(l->items[l->n] = strndup(name, len)))
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory listing nodes");
    l->items[++l->n] = NULL;
    return CINFER_OK;
}

static int by_name_then_place(const void *a, const void *b, void *names)
{
    char **items = names;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(items[i], items[j]);
    return c ? c : (i > j) - (i < j);
}

/* Drops every repeat of a name after its first place, in n log n. */
static int dedupe(struct names *l, struct cinfer_error *err)
{
    size_t *order = malloc(l->n * sizeof *order + 1);
    if (!order)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "out of memory listing nodes");
    for (size_t i = 0; i < l->n; i++)
        order[i] = i;
    qsort_r(order, l->n, sizeof *order, by_name_then_place, l->items);
    /* in each run of equal names (sorted by place within it) all but the first go */
    for (size_t k = l->n; k-- > 1;)
        if (!strcmp(l->items[order[k]], l->items[order[k - 1]])) {
            free(l->items[order[k]]);
            l->items[order[k]] = NULL;
        }
    free(order);
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->items[i])
            l->items[kept++] = l->items[i];
    l->n = kept;
    l->items[kept] = NULL;
    return CINFER_OK;
}

/* One "prefix[ranges]suffix" item of a Slurm list (no commas outside brackets). One
 * bracket group is expanded; Slurm writes one per item for one-dimensional names. */
static int expand_item(const char *item, size_t len, struct names *l, struct cinfer_error *err)
{
    const char *open = memchr(item, '[', len);
    if (!open)
        return len ? add_name(l, item, len, err)
                   : cinfer_error_set(err, CINFER_ERR_PARSE, "an empty name");
    const char *close = memchr(open, ']', len - (size_t)(open - item));
    if (!close)
        return cinfer_error_set(err, CINFER_ERR_PARSE, "'%.*s': '[' without ']'", (int)len, item);
    const char *suffix = close + 1;
    size_t suffix_len = len - (size_t)(suffix - item);
    if (memchr(suffix, '[', suffix_len))
        return cinfer_error_set(err, CINFER_ERR_PARSE, "'%.*s': more than one [range] in a name", (int)len, item);
    for (const char *r = open + 1; r < close;) {
        const char *end = memchr(r, ',', (size_t)(close - r));
        if (!end)
            end = close;
        const char *dash = memchr(r, '-', (size_t)(end - r));
        const char *lo_end = dash ? dash : end;
        int width = (int)(lo_end - r);
        char *stop;
        errno = 0;
        unsigned long lo = strtoul(r, &stop, 10), hi = lo;
        if (width == 0 || stop != lo_end || !isdigit((unsigned char)*r))
            return cinfer_error_set(err, CINFER_ERR_PARSE, "'%.*s': '%.*s' is not a number or a range", (int)len, item,
                                    (int)(end - r), r);
        if (dash) {
            hi = strtoul(dash + 1, &stop, 10);
            if (stop != end || dash + 1 == end || !isdigit((unsigned char)dash[1]) || hi < lo)
                return cinfer_error_set(err, CINFER_ERR_PARSE, "'%.*s': '%.*s' is not a range low-high", (int)len,
                                        item, (int)(end - r), r);
        }
        if (hi - lo >= MPI_ALLOCATION_MAX_NODES || width > 12)
            return cinfer_error_set(err, CINFER_ERR_RANGE, "'%.*s': range '%.*s' is too large", (int)len, item,
                                    (int)(end - r), r);
        for (unsigned long v = lo; v <= hi; v++) {
            char name[512];
            int n = snprintf(name, sizeof name, "%.*s%0*lu%.*s", (int)(open - item), item, width, v,
                             (int)suffix_len, suffix);
            if (n < 0 || (size_t)n >= sizeof name)
                return cinfer_error_set(err, CINFER_ERR_RANGE, "'%.*s': a name longer than %zu bytes", (int)len, item,
                                        sizeof name - 1);
            int rc = add_name(l, name, (size_t)n, err);
            if (rc)
                return rc;
        }
        r = end + (end < close);
    }
    return CINFER_OK;
}

int cinfer_mpi_expand_slurm_nodelist(const char *list, char ***nodes, size_t *n, struct cinfer_error *err)
{
    struct names l = {0};
    int rc = CINFER_OK;
    const char *p = list;
    while (rc == CINFER_OK && *p) {
        /* an item ends at a comma outside brackets */
        size_t len = 0;
        int depth = 0;
        while (p[len] && (depth || p[len] != ',')) {
            depth += p[len] == '[' ? 1 : p[len] == ']' ? -1 : 0;
            len++;
        }
        rc = expand_item(p, len, &l, err);
        p += len + (p[len] == ',');
    }
    if (rc == CINFER_OK && l.n == 0)
        rc = cinfer_error_set(err, CINFER_ERR_PARSE, "no node in it");
    if (rc == CINFER_OK)
        rc = dedupe(&l, err);
    if (rc) {
        cinfer_error_prefix(err, "SLURM_JOB_NODELIST \"%.200s\"", list);
        cinfer_mpi_free_names(l.items, l.n);
        return rc;
    }
    *nodes = l.items;
    *n = l.n;
    return CINFER_OK;
}

int cinfer_mpi_parse_hostfile(const char *text, const char *what, char ***nodes, size_t *n, struct cinfer_error *err)
{
    struct names l = {0};
    int rc = CINFER_OK, line = 0;
    for (const char *p = text; rc == CINFER_OK && *p;) {
        line++;
        size_t len = strcspn(p, "\n");
        const char *s = p;
        while (s < p + len && isspace((unsigned char)*s))
            s++;
        size_t word = 0;
        while (s + word < p + len && !isspace((unsigned char)s[word]) && s[word] != '#')
            word++;
        if (word)
            rc = add_name(&l, s, word, err);
        p += len + (p[len] == '\n');
    }
    if (rc == CINFER_OK && l.n == 0)
        rc = cinfer_error_set(err, CINFER_ERR_PARSE, "no host in it");
    if (rc == CINFER_OK)
        rc = dedupe(&l, err);
    if (rc) {
        cinfer_error_prefix(err, "hostfile %s (line %d)", what, line);
        cinfer_mpi_free_names(l.items, l.n);
        return rc;
    }
    *nodes = l.items;
    *n = l.n;
    return CINFER_OK;
}

static const char *hostfile_env(void)
{
    const char *f = getenv("OMPI_MCA_orte_default_hostfile");
    if (f && f[0])
        return "OMPI_MCA_orte_default_hostfile";
    f = getenv("PBS_NODEFILE");
    return f && f[0] ? "PBS_NODEFILE" : NULL;
}

int cinfer_mpi_in_allocation(const char **source)
{
    const char *s = getenv("SLURM_JOB_NODELIST");
    if (s && s[0]) {
        *source = "SLURM_JOB_NODELIST";
        return 1;
    }
    if ((*source = hostfile_env()))
        return 1;
    s = getenv("OMPI_COMM_WORLD_SIZE");
    if (s && s[0]) {
        *source = "OMPI_COMM_WORLD_SIZE (inside mpirun)";
        return 1;
    }
    return 0;
}

static int read_file(const char *path, char **out, struct cinfer_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return cinfer_error_set(err, CINFER_ERR_IO, "hostfile %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            if (cap >= ((size_t)64 << 20)) {
                free(buf);
                fclose(f);
                return cinfer_error_set(err, CINFER_ERR_RANGE, "hostfile %s: larger than 64 MiB", path);
            }
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return cinfer_error_set(err, CINFER_ERR_NOMEM, "hostfile %s: out of memory", path);
    buf[len] = '\0';
    *out = buf;
    return CINFER_OK;
}

int cinfer_mpi_allocation_hosts(int dp_size, char ***hosts, struct cinfer_error *err)
{
    *hosts = NULL;
    char **nodes = NULL;
    size_t n = 0;
    int rc;
    const char *source;
    const char *slurm = getenv("SLURM_JOB_NODELIST");
    if (slurm && slurm[0]) {
        source = "SLURM_JOB_NODELIST";
        rc = cinfer_mpi_expand_slurm_nodelist(slurm, &nodes, &n, err);
    } else if ((source = hostfile_env())) {
        const char *path = getenv(source);
        char *text = NULL;
        rc = read_file(path, &text, err);
        if (rc == CINFER_OK)
            rc = cinfer_mpi_parse_hostfile(text, path, &nodes, &n, err);
        free(text);
        if (rc)
            cinfer_error_prefix(err, "%s", source);
    } else {
        return CINFER_OK; /* no allocation (inside mpirun alone says nothing of hosts) */
    }
    if (rc)
        return rc;
    int want = dp_size > 0 ? dp_size : 1;
    if (n < (size_t)want) {
        cinfer_mpi_free_names(nodes, n);
        return cinfer_error_set(err, CINFER_ERR_CONFIG,
                                "the allocation (%s) has %zu node%s, fewer than launcher.dp_size %d (one replica per "
                                "node; list hosts in launcher.hosts to place them otherwise)",
                                source, n, n == 1 ? "" : "s", want);
    }
    for (size_t i = (size_t)want; i < n; i++) {
        free(nodes[i]);
        nodes[i] = NULL;
    }
    *hosts = nodes;
    return CINFER_OK;
}
