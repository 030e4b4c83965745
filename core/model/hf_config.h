/* core/model/hf_config.h — a Hugging Face config.json (and generation_config.json) read
 * into a cinfer_model_config, for the Llama family: llama, mistral, qwen2, qwen3. */
#ifndef CINFER_MODEL_HF_CONFIG_H
#define CINFER_MODEL_HF_CONFIG_H

#include <stddef.h>

#include "model/model.h"

struct cinfer_hf_config {
    struct cinfer_model_config model;
    int tie_word_embeddings_given; /* the key was present (else lm_head decides) */
};

/* Parses config.json text; source names the file in messages. Fills every field of
 * out (defaults as transformers has them) or fails naming the key. */
int cinfer_hf_config_parse(const char *text, size_t len, const char *source, struct cinfer_hf_config *out,
                           struct cinfer_error *err);
/* Applies generation_config.json text: its bos/eos ids replace config.json's. */
int cinfer_hf_generation_config_parse(const char *text, size_t len, const char *source, struct cinfer_hf_config *cfg,
                                      struct cinfer_error *err);
/* Reads folder/config.json and, when present, folder/generation_config.json. */
int cinfer_hf_config_read(const char *folder, struct cinfer_hf_config *out, struct cinfer_error *err);

#endif
