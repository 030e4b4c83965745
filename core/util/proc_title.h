/* Sets the process title that `ps` shows ("cinfer-worker scheduler tp0") by rewriting
 * the argv area in place, and the thread name (`ps -o comm`, 15 bytes). */
#ifndef CINFER_UTIL_PROC_TITLE_H
#define CINFER_UTIL_PROC_TITLE_H

void cinfer_set_process_title(int argc, char **argv, const char *title);

#endif
