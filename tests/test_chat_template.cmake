# test_chat_template compares cinfer's renderer with the official one (@huggingface/jinja
# under node): the fixture installs it into build/chat-template-reference. Without node
# or npm the fixture leaves a SKIP file and the test's comparisons are skipped (77).
add_test(NAME chat_template_reference_setup
  COMMAND sh ${PROJECT_SOURCE_DIR}/tests/reference/chat_template/setup.sh
          ${PROJECT_BINARY_DIR}/chat-template-reference)
set_tests_properties(chat_template_reference_setup PROPERTIES
  FIXTURES_SETUP chat_template_reference TIMEOUT 600)
set_tests_properties(test_chat_template PROPERTIES
  FIXTURES_REQUIRED chat_template_reference SKIP_RETURN_CODE 77 TIMEOUT 600)
