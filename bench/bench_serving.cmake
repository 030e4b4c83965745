# bench_serving speaks HTTP over plain sockets with the tests' small client, and can
# start `cinfer serve` itself (--model).
target_sources(bench_serving PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/http_client.c)
target_include_directories(bench_serving PRIVATE ${PROJECT_SOURCE_DIR}/tests)
add_dependencies(bench_serving cinfer_cli cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(bench_serving cinfer_plugin_tokenizer_bpe)
endif()
