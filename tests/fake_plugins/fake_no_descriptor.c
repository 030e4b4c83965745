/* A shared object that is not a cinfer plugin: it exports something, but no descriptor. */
#include "cinfer/export.h"

CINFER_API int fake_not_a_plugin(void);
int fake_not_a_plugin(void) { return 42; }
