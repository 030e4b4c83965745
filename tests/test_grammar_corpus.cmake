# test_grammar_corpus decodes a corpus of real JSON schemas (npm packages, installed
# with ajv by the fixture below into build/grammar-reference) under real vocabularies
# read through the tokenizer plugin (Qwen3's from the tokenizer_reference fixture of
# tests/test_tokenizer_parity.cmake, stories260K's GGUF), then validates every output
# with node. Where node or npm is absent the fixture leaves a SKIP file and the test
# exits 77 (skipped).
add_test(NAME test_grammar_corpus_setup
  COMMAND sh ${PROJECT_SOURCE_DIR}/tests/reference/grammar/install.sh ${PROJECT_BINARY_DIR}/grammar-reference)
set_tests_properties(test_grammar_corpus_setup PROPERTIES FIXTURES_SETUP grammar_reference TIMEOUT 600)
set_tests_properties(test_grammar_corpus PROPERTIES
  FIXTURES_REQUIRED "grammar_reference;tokenizer_reference" SKIP_RETURN_CODE 77 TIMEOUT 1500)
add_dependencies(test_grammar_corpus cinfer_plugin_tokenizer_bpe)
target_link_libraries(test_grammar_corpus PRIVATE PkgConfig::JANSSON)
add_dependencies(test_grammar_corpus cinfer_worker cinfer_plugin_launch_fork)
