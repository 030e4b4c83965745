# test_tokenizer_bpe loads the built plugin and reads tokenizer.json files with jansson.
add_dependencies(test_tokenizer_bpe cinfer_plugin_tokenizer_bpe)
target_link_libraries(test_tokenizer_bpe PRIVATE PkgConfig::JANSSON Threads::Threads)
if(TARGET cinfer_cli)
  add_dependencies(test_tokenizer_bpe cinfer_cli) # the cli test case runs bin/cinfer tokenize
endif()
