/* core/util/mmap_file.h — a whole file mapped read-only, for the model file readers. */
#ifndef CINFER_UTIL_MMAP_FILE_H
#define CINFER_UTIL_MMAP_FILE_H

#include <stddef.h>

#include "cinfer/error.h"

struct cinfer_mapped_file {
    const unsigned char *data; /* NULL for an empty file */
    size_t size_bytes;
};

/* Maps path read-only. Errors name the file and the system's reason. */
int cinfer_mapped_file_open(const char *path, struct cinfer_mapped_file *out, struct cinfer_error *err);
/* The whole pages inside [p, p + bytes), which lie in a mapping this file made, leave
 * the process's memory (its resident set): for bytes a reader will not touch again
 * soon. They are not lost: a later read faults them back in from the file. */
void cinfer_mapped_bytes_drop(const void *p, size_t bytes);
/* Unmaps and zeroes f; safe on a zeroed or already closed f. */
void cinfer_mapped_file_close(struct cinfer_mapped_file *f);

#endif
