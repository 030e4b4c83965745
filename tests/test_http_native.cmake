# The native-API test starts a real engine (cinfer-worker, the fork launcher, the BPE
# tokenizer plugin) behind the HTTP server and drives it with the curl binary. It is
# only built where the HTTP server is (tests/CMakeLists.txt leaves test_http_* out of
# CINFER_MINIMAL builds).
add_dependencies(test_http_native cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_http_native cinfer_plugin_tokenizer_bpe)
endif()
find_program(CURL_PROGRAM curl)
if(NOT CURL_PROGRAM)
  message(STATUS "curl not found: test_http_native will fail to spawn it (Debian: apt-get install curl)")
endif()
set_tests_properties(test_http_native PROPERTIES TIMEOUT 300)
