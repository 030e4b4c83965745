/* launch-ssh: the descriptor alone (the code is in launch_ssh_module.c). */
#include "cinfer/plugin.h"
#include "launch_ssh_module.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_LAUNCHER, "launch-ssh", "1.0.0", &cinfer_launch_ssh_ops);
