/* fuzz/fuzz_input_file.h — the readers under test open paths, so fuzz inputs are put in
 * an anonymous memory file and opened through /proc/self/fd. */
#ifndef CINFER_FUZZ_INPUT_FILE_H
#define CINFER_FUZZ_INPUT_FILE_H

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to a fresh memfd and its /proc path into path; returns the fd or -1. */
static inline int fuzz_input_file(const unsigned char *data, size_t size, char *path, size_t path_bytes)
{
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    snprintf(path, path_bytes, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
