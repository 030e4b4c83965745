# test_http_openai drives the server with the official OpenAI client under node: the
# fixture below installs it (npm ci of tests/reference/openai_client/package-lock.json)
# and the scripts into build/openai-client. Where node or npm is absent the fixture
# leaves a SKIP file with the reason and the test exits 77, which ctest reports as
# skipped. (tests/CMakeLists.txt leaves HTTP tests out of the appliance build.)
add_test(NAME test_http_openai_client_setup
  COMMAND sh ${PROJECT_SOURCE_DIR}/tests/reference/openai_client/install.sh ${PROJECT_BINARY_DIR}/openai-client)
set_tests_properties(test_http_openai_client_setup PROPERTIES FIXTURES_SETUP openai_client TIMEOUT 600)
set_tests_properties(test_http_openai PROPERTIES
  FIXTURES_REQUIRED openai_client SKIP_RETURN_CODE 77 TIMEOUT 300)
add_dependencies(test_http_openai cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_http_openai cinfer_plugin_tokenizer_bpe)
endif()
