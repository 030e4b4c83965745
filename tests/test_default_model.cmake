# The model runtime is part of the core: its cases always compile (and fail, not skip,
# if the core's API changes).
target_compile_definitions(${name} PRIVATE CINFER_HAVE_MODEL_RUNTIME=1)
# The tokenizer-bpe plugin, when built, must agree on the prompt's ids and the text.
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
