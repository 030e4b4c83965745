/* A tokenizer built against a vtable version older than any this core accepts. */
#define FAKE_VTABLE_VERSION 0u
#include "fake_tokenizer_ops.h"

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_TOKENIZER, "fake-old-vtable", "1.0.0", &fake_tokenizer_ops);
