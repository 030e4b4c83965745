/* Whole-file read-only mappings (core/util/mmap_file.c): the bytes are the file's, the
 * mapping starts on a 2 MiB boundary and, where the kernel offers transparent huge
 * pages, carries the huge-page advice; dropped bytes leave memory and read back; bad
 * paths give errors that name the file. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/runner.h"
#include "support/smaps.h"
#include "support/tmp_dir.h"
#include "util/mmap_file.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)

/* bytes of a file no two of whose 8-byte words are alike */
static void write_file(const char *path, size_t bytes)
{
    unsigned char *buf = malloc(bytes + 8);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t word = (uint64_t)(i / 8 + 1) * 0x9E3779B97F4A7C15ull;
        memcpy(buf + i, &word, sizeof word);
    }
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, bytes, f), bytes);
    ck_assert_int_eq(fclose(f), 0);
    free(buf);
}

/* Whether this kernel gives huge pages to mappings that ask for them. */
static int kernel_offers_huge_pages(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    char mode[128] = "";
    char *got = fgets(mode, sizeof mode, f);
    fclose(f);
    return got && (strstr(mode, "[always]") || strstr(mode, "[madvise]"));
}

START_TEST(maps_the_file_on_a_huge_page_boundary)
{
    cinfer_test_make_tmp_dir("test_mmap_file");
    /* sizes around page and huge-page edges */
    const size_t sizes[] = {1, 4095, 4097, (size_t)HUGE_PAGE + 12345, 3 * (size_t)HUGE_PAGE};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const char *path = cinfer_test_tmp_path("weights.bin");
        write_file(path, sizes[s]);
        struct cinfer_mapped_file mf;
        struct cinfer_error err = {0};
        int rc = cinfer_mapped_file_open(path, &mf, &err);
        ck_assert_msg(rc == 0, "%s", err.message);
        ck_assert_uint_eq(mf.size_bytes, sizes[s]);
        ck_assert_msg((uintptr_t)mf.data % HUGE_PAGE == 0, "size %zu: mapped at %p, not on a 2 MiB boundary", sizes[s],
                      (const void *)mf.data);
        unsigned char *expect = malloc(sizes[s]);
        FILE *f = fopen(path, "rb");
        ck_assert_uint_eq(fread(expect, 1, sizes[s], f), sizes[s]);
        fclose(f);
        ck_assert_int_eq(memcmp(mf.data, expect, sizes[s]), 0);
        free(expect);
        char flags[512];
        cinfer_test_smaps_line(mf.data, "VmFlags:", flags, sizeof flags);
        ck_assert_msg(flags[0] != '\0', "size %zu: no /proc/self/smaps entry starts at the mapping", sizes[s]);
        if (kernel_offers_huge_pages())
            ck_assert_msg(strstr(flags, " hg") != NULL, "size %zu: the mapping lacks the huge-page advice: %s",
                          sizes[s], flags);
        cinfer_mapped_file_close(&mf);
        ck_assert_ptr_null(mf.data);
        ck_assert_uint_eq(mf.size_bytes, 0);
        cinfer_mapped_file_close(&mf); /* twice is harmless */
        unlink(path);
    }
    cinfer_test_remove_tmp_dir();
}
END_TEST

/* Dropped bytes leave the resident set (the whole pages inside the range, not the
 * partial ones at its ends) and read back as the file's bytes. */
START_TEST(dropped_bytes_leave_memory_and_read_back)
{
    cinfer_test_make_tmp_dir("test_mmap_file");
    const size_t size = 3 * (size_t)HUGE_PAGE + 12345;
    const char *path = cinfer_test_tmp_path("weights.bin");
    write_file(path, size);
    struct cinfer_mapped_file mf;
    struct cinfer_error err = {0};
    ck_assert_int_eq(cinfer_mapped_file_open(path, &mf, &err), 0);
    unsigned char *expect = malloc(size);
    FILE *f = fopen(path, "rb");
    ck_assert_uint_eq(fread(expect, 1, size, f), size);
    fclose(f);
    ck_assert_int_eq(memcmp(mf.data, expect, size), 0); /* every page touched */
    long before = cinfer_test_smaps_rss_kb_at(mf.data);
    ck_assert_int_ge(before, (long)(size / 1024) - 4);
    size_t from = 5000, bytes = size - 9000; /* partial pages at both ends stay */
    cinfer_mapped_bytes_drop(mf.data + from, bytes);
    long after = cinfer_test_smaps_rss_kb_at(mf.data);
    printf("mmap_file: %ld kB resident, %ld kB after dropping %zu bytes\n", before, after, bytes);
    ck_assert_int_le(after, 12);                 /* the two partial pages, at most */
    ck_assert_int_eq(memcmp(mf.data, expect, size), 0); /* faulted back in from the file */
    ck_assert_int_ge(cinfer_test_smaps_rss_kb_at(mf.data), before - 4);
    cinfer_mapped_bytes_drop(mf.data + 10, 100); /* inside one page: nothing to drop */
    ck_assert_int_eq(memcmp(mf.data, expect, size), 0);
    free(expect);
    cinfer_mapped_file_close(&mf);
    unlink(path);
    cinfer_test_remove_tmp_dir();
}
END_TEST

START_TEST(empty_missing_and_odd_files)
{
    cinfer_test_make_tmp_dir("test_mmap_file");
    struct cinfer_mapped_file mf;
    struct cinfer_error err = {0};

    const char *empty = cinfer_test_tmp_path("empty.bin");
    write_file(empty, 0);
    ck_assert_int_eq(cinfer_mapped_file_open(empty, &mf, &err), 0);
    ck_assert_ptr_null(mf.data);
    ck_assert_uint_eq(mf.size_bytes, 0);
    cinfer_mapped_file_close(&mf);
    unlink(empty);

    const char *absent = cinfer_test_tmp_path("absent.bin");
    ck_assert_int_eq(cinfer_mapped_file_open(absent, &mf, &err), CINFER_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.message, absent) != NULL, "%s", err.message);
    ck_assert_ptr_null(mf.data);

    ck_assert_int_eq(cinfer_mapped_file_open(cinfer_test_tmp_dir, &mf, &err), CINFER_ERR_IO);
    ck_assert_msg(strstr(err.message, "not a regular file") != NULL, "%s", err.message);
    ck_assert_ptr_null(mf.data);
    cinfer_test_remove_tmp_dir();
}
END_TEST

static Suite *suite_mmap_file(void)
{
    Suite *s = suite_create("mmap_file");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, maps_the_file_on_a_huge_page_boundary);
    tcase_add_test(tc, dropped_bytes_leave_memory_and_read_back);
    tcase_add_test(tc, empty_missing_and_odd_files);
    suite_add_tcase(s, tc);
    return s;
}

CINFER_TEST_MAIN(suite_mmap_file)
