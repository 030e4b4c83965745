# The load test runs `cinfer serve` (bin/cinfer, which starts cinfer-worker and loads
# the plugins) and 500 streaming clients against it on loopback.
add_dependencies(test_http_load cinfer_cli cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_http_load cinfer_plugin_tokenizer_bpe)
endif()
set_tests_properties(test_http_load PROPERTIES TIMEOUT 300)
