/* core/config/int_literals.h — refuses integers that libconfig 1.5 would wrap. */
#ifndef CINFER_CONFIG_INT_LITERALS_H
#define CINFER_CONFIG_INT_LITERALS_H

#include "cinfer/error.h"

/* CINFER_ERR_CONFIG naming name:line when text holds an integer literal outside 32 bits
 * without an L suffix (outside strings and comments); 0 otherwise. */
int cinfer_config_check_integer_literals(const char *text, const char *name, struct cinfer_error *err);

#endif
