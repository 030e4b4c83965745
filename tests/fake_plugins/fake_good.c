/* A well-formed tokenizer plugin; FAKE_VERSION tells copies apart in search-order tests. */
#include "fake_tokenizer_ops.h"

#ifndef FAKE_VERSION
#define FAKE_VERSION "1.0.0"
#endif

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_TOKENIZER, "fake-good", FAKE_VERSION, &fake_tokenizer_ops);
