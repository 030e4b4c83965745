#include "support/tmp_dir.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

char cinfer_test_tmp_dir[256];

void cinfer_test_make_tmp_dir(const char *prefix)
{
    snprintf(cinfer_test_tmp_dir, sizeof cinfer_test_tmp_dir, "%s/%s.XXXXXX", CINFER_BINARY_DIR, prefix);
    ck_assert_ptr_nonnull(mkdtemp(cinfer_test_tmp_dir));
}

void cinfer_test_remove_tmp_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cinfer_test_tmp_dir);
    ck_assert_int_eq(system(cmd), 0);
}

const char *cinfer_test_tmp_path(const char *name)
{
    static char paths[4][400];
    static int next;
    char *path = paths[next];
    next = (next + 1) % 4;
    snprintf(path, sizeof paths[0], "%s/%s", cinfer_test_tmp_dir, name);
    return path;
}
