/* The tokenizer-bpe plugin's descriptor: the one exported symbol. */
#include "cinfer/plugin.h"
#include "cinfer/tokenizer.h"

extern const struct cinfer_tokenizer_ops cinfer_tokenizer_bpe_ops;

CINFER_PLUGIN_DEFINE(CINFER_PLUGIN_KIND_TOKENIZER, "tokenizer-bpe", "1.0.0", &cinfer_tokenizer_bpe_ops);
