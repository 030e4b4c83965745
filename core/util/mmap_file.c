/* Read-only whole-file mappings: weights are used in place from the page cache. */
#include "util/mmap_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int cinfer_mapped_file_open(const char *path, struct cinfer_mapped_file *out, struct cinfer_error *err)
{
    out->data = NULL;
    out->size_bytes = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int code = errno == ENOENT ? CINFER_ERR_NOT_FOUND : CINFER_ERR_IO;
        return cinfer_error_set(err, code, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot stat: %s", path, strerror(saved));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return CINFER_OK;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED)
        return cinfer_error_set(err, CINFER_ERR_IO, "%s: cannot map %lld bytes: %s", path,
                                (long long)st.st_size, strerror(saved));
    out->data = map;
    out->size_bytes = (size_t)st.st_size;
    return CINFER_OK;
}

void cinfer_mapped_file_close(struct cinfer_mapped_file *f)
{
    if (f->data)
        munmap((void *)f->data, f->size_bytes);
    f->data = NULL;
    f->size_bytes = 0;
}
