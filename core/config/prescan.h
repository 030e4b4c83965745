/* core/config/prescan.h — refuses what libconfig would read silently wrong. */
#ifndef CINFER_CONFIG_PRESCAN_H
#define CINFER_CONFIG_PRESCAN_H

#include "cinfer/error.h"

/* CINFER_ERR_CONFIG naming name:line when text (outside strings and comments) holds an
 * integer literal beyond 32 bits without an L suffix, or an @include while
 * allow_include is 0; 0 otherwise. */
int cinfer_config_prescan(const char *text, const char *name, int allow_include, struct cinfer_error *err);

#endif
