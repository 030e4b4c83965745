#include "mpi_job_output.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A non-negative decimal at *p (skipping blanks); advances *p. -1 when there is none. */
static long number_at(const char **p)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)*s) && v < 100000000)
        v = v * 10 + (*s++ - '0');
    *p = s;
    return v;
}

/* Skips blanks (line breaks included), then expects word; advances *p. */
static int expect(const char **p, const char *word)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    size_t n = strlen(word);
    if (strncmp(s, word, n))
        return 0;
    *p = s + n;
    return 1;
}

static void copy_word(const char **p, char *out, size_t out_bytes)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    size_t n = 0;
    while (s[n] && !isspace((unsigned char)s[n]))
        n++;
    snprintf(out, out_bytes, "%.*s", (int)n, s);
    *p = s + n;
}

/* "process rank R with PID P on node N" at p; fills rank and node. */
static int rank_and_node(const char **p, struct mpi_job_end *out)
{
    long rank, pid;
    if (!expect(p, "process rank") || (rank = number_at(p)) < 0 || !expect(p, "with PID") ||
        (pid = number_at(p)) < 0 || !expect(p, "on") || !expect(p, "node"))
        return 0;
    out->rank = (int)rank;
    copy_word(p, out->node, sizeof out->node);
    return 1;
}

static int scan_signal(const char *text, struct mpi_job_end *out)
{
    for (const char *at = strstr(text, "noticed that process rank"); at;
         at = strstr(at + 1, "noticed that process rank")) {
        const char *p = at + strlen("noticed that");
        struct mpi_job_end e = {0};
        long sig;
        if (rank_and_node(&p, &e) && expect(&p, "exited on signal") && (sig = number_at(&p)) >= 0) {
            e.known = 1;
            e.signaled = 1;
            e.code = (int)sig;
            *out = e;
            return 1;
        }
    }
    return 0;
}

static int scan_exit_code(const char *text, struct mpi_job_end *out)
{
    for (const char *at = strstr(text, "Process name: [["); at; at = strstr(at + 1, "Process name: [[")) {
        const char *p = at + strlen("Process name: [[");
        long job, step, rank, code;
        if ((job = number_at(&p)) < 0 || !expect(&p, ",") || (step = number_at(&p)) < 0 || !expect(&p, "],") ||
            (rank = number_at(&p)) < 0 || !expect(&p, "]") || !expect(&p, "Exit code:") || (code = number_at(&p)) < 0)
            continue;
        *out = (struct mpi_job_end){.known = 1, .rank = (int)rank, .code = (int)code};
        return 1;
    }
    return 0;
}

static int scan_improper(const char *text, struct mpi_job_end *out)
{
    for (const char *at = strstr(text, "due to process rank"); at; at = strstr(at + 1, "due to process rank")) {
        const char *p = at + strlen("due to");
        struct mpi_job_end e = {0};
        if (rank_and_node(&p, &e) && expect(&p, "exiting improperly")) {
            e.known = 1;
            e.improper = 1;
            *out = e;
            return 1;
        }
    }
    return 0;
}

void cinfer_mpi_job_output_scan(const char *text, struct mpi_job_end *out)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return;
    /* A signal or an exit status says the most; "improperly" is what is left when a
     * rank simply went. */
    if (!scan_signal(text, out) && !scan_exit_code(text, out))
        scan_improper(text, out);
}
