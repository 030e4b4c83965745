/* launch-fork: the descriptor alone (the code is in launch_fork_module.c). */
#include "cinfer/plugin.h"
#include "launch_fork_module.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_LAUNCHER, "launch-fork", "1.0.0", &cinfer_launch_fork_ops);
