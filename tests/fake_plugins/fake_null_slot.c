/* A tokenizer whose required encode slot is NULL. */
#define FAKE_NULL_ENCODE 1
#include "fake_tokenizer_ops.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_TOKENIZER, "fake-null-slot", "1.0.0", &fake_tokenizer_ops);
