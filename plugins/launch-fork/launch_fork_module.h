#ifndef CINFER_LAUNCH_FORK_MODULE_H
#define CINFER_LAUNCH_FORK_MODULE_H

#include "cinfer/launcher.h"

extern const struct cinfer_launcher_ops cinfer_launch_fork_ops;

#endif
