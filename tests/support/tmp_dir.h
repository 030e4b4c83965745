/* A scratch folder for one test, under the build folder, removed by the test. */
#ifndef CINFER_TEST_TMP_DIR_H
#define CINFER_TEST_TMP_DIR_H

extern char cinfer_test_tmp_dir[256];

/* Makes CINFER_BINARY_DIR/<prefix>.XXXXXX; fails the test if it cannot. */
void cinfer_test_make_tmp_dir(const char *prefix);
void cinfer_test_remove_tmp_dir(void);
/* <tmp dir>/<name>; the last four results stay valid. */
const char *cinfer_test_tmp_path(const char *name);

#endif
