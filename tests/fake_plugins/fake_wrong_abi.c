/* Claims an ABI version from the future; the loader must refuse it before using anything else. */
#include "fake_tokenizer_ops.h"

CINFER_API const struct cinfer_plugin_descriptor cinfer_plugin_descriptor = {
    999u, sizeof(struct cinfer_plugin_descriptor), CINFER_PLUGIN_KIND_TOKENIZER,
    "fake-wrong-abi", "1.0.0", &fake_tokenizer_ops};
