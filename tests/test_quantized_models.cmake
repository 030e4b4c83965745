# The recorded llama.cpp outputs are JSON (jansson); the tokenizer plugin, when built,
# is loaded by the test to check prompt ids and text too.
target_link_libraries(${name} PRIVATE PkgConfig::JANSSON)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
