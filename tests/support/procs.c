#include "support/procs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Reads "pid (comm) S ppid ..." from /proc/pid/stat; comm may hold spaces and parens. */
static int read_stat(pid_t pid, char *state, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close_paren = strrchr(buf, ')');
    if (!close_paren)
        return -1;
    int parent = 0;
    if (sscanf(close_paren + 2, "%c %d", state, &parent) != 2)
        return -1;
    *ppid = parent;
    return 0;
}

int cinfer_test_pid_running(pid_t pid)
{
    char state;
    pid_t ppid;
    if (read_stat(pid, &state, &ppid) != 0)
        return 0;
    return state != 'Z' && state != 'X';
}

pid_t cinfer_test_wait_gone(const pid_t *pids, int n, int timeout_ms)
{
    for (int waited = 0;; waited += 10) {
        pid_t alive = 0;
        for (int i = 0; i < n && !alive; i++)
            if (pids[i] > 0 && cinfer_test_pid_running(pids[i]))
                alive = pids[i];
        if (!alive || waited >= timeout_ms)
            return alive;
        struct timespec nap = {0, 10 * 1000000};
        nanosleep(&nap, NULL);
    }
}

int cinfer_test_children_of(pid_t parent, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        pid_t pid = (pid_t)atoi(e->d_name);
        char state;
        pid_t ppid;
        if (pid > 0 && read_stat(pid, &state, &ppid) == 0 && ppid == parent && state != 'Z')
            out[n++] = pid;
    }
    closedir(d);
    return n;
}

void cinfer_test_cmdline(pid_t pid, char *buf, int buf_bytes)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, (size_t)buf_bytes - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = '\0';
}
