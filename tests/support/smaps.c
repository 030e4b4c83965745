/* Reads /proc/self/smaps (see smaps.h). */
#include "support/smaps.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

void cinfer_test_smaps_line(const void *addr, const char *key, char *out, size_t out_size)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return;
    char line[512], start[32];
    snprintf(start, sizeof start, "%lx-", (unsigned long)(uintptr_t)addr);
    int in_entry = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, start, strlen(start)))
            in_entry = 1;
        else if (in_entry && !strncmp(line, key, strlen(key))) {
            snprintf(out, out_size, "%s", line);
            break;
        }
    }
    fclose(f);
}

long cinfer_test_smaps_rss_kb_at(const void *addr)
{
    char line[512];
    long kb = -1;
    cinfer_test_smaps_line(addr, "Rss:", line, sizeof line);
    return sscanf(line, "Rss: %ld kB", &kb) == 1 ? kb : -1;
}

long cinfer_test_smaps_rss_kb_of_file(const char *path)
{
    return cinfer_test_smaps_rss_kb_of_file_in(0, path);
}

long cinfer_test_smaps_rss_kb_of_file_in(int pid, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    char smaps[64];
    if (pid > 0)
        snprintf(smaps, sizeof smaps, "/proc/%d/smaps", pid);
    else
        snprintf(smaps, sizeof smaps, "/proc/self/smaps");
    FILE *f = fopen(smaps, "r");
    if (!f)
        return -1;
    char line[4096];
    long total = 0;
    int in_file = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, offset, inode;
        unsigned major, minor;
        char perms[8];
        /* an entry's first line: "lo-hi perms offset major:minor inode [path]" */
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &offset, &major, &minor, &inode) == 7) {
            in_file = inode == (unsigned long)st.st_ino && makedev(major, minor) == st.st_dev;
            continue;
        }
        long kb;
        if (in_file && sscanf(line, "Rss: %ld kB", &kb) == 1)
            total += kb;
    }
    fclose(f);
    return total;
}
