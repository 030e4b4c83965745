# The tokenizer plugin, when built, is loaded by the test to check prompt ids and text too.
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
