/* tests/support/smaps.h — the one reader of /proc/self/smaps the tests share: a line of
 * the entry a mapping starts, and how much of a file's mappings is resident. */
#ifndef CINFER_TEST_SMAPS_H
#define CINFER_TEST_SMAPS_H

#include <stddef.h>

/* The first line starting with `key` in the /proc/self/smaps entry that starts at
 * addr, into out; "" when there is none. */
void cinfer_test_smaps_line(const void *addr, const char *key, char *out, size_t out_size);
/* kB of the entry starting at addr that are resident ("Rss:"), or -1. */
long cinfer_test_smaps_rss_kb_at(const void *addr);
/* kB resident ("Rss:") summed over every mapping of the file at path (compared by
 * device and inode, so any spelling of the path will do); 0 when none, -1 when the
 * file or smaps cannot be read. */
long cinfer_test_smaps_rss_kb_of_file(const char *path);
/* The same for process pid (0: this one). */
long cinfer_test_smaps_rss_kb_of_file_in(int pid, const char *path);

#endif
