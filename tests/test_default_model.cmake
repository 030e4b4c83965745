# The tokenizer-bpe plugin, when built, must agree on the prompt's ids and the text.
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
