# stories260K end to end: a fixture computes the expected ids without cinfer (python
# SentencePiece merging + numpy reference), the C test runs the runtime (and the
# tokenizer plugin when it is built). Skips (77) only when neither /usr/bin/python3 with
# numpy nor the tokenizer plugin can give the prompt's ids.
set(cinfer_stories_expected ${PROJECT_BINARY_DIR}/tests/stories260k-expected.txt)
target_compile_definitions(${name} PRIVATE CINFER_STORIES_EXPECTED="${cinfer_stories_expected}")
add_test(NAME stories260k_expected
         COMMAND sh -c "rm -f \"$2\"; if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then /usr/bin/python3 \"$0\" \"$1\" 48 \"$2\"; else echo '/usr/bin/python3 with numpy is absent: no independent ids'; fi"
                 ${CMAKE_CURRENT_SOURCE_DIR}/reference/stories260k_expected.py
                 ${PROJECT_SOURCE_DIR}/tests/data/models ${cinfer_stories_expected})
set_tests_properties(stories260k_expected PROPERTIES FIXTURES_SETUP stories260k_expected)
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED stories260k_expected SKIP_RETURN_CODE 77)
# Build the tokenizer plugin with the test, so the text route runs whenever it exists.
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
