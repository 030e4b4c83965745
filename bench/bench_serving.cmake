# bench_serving speaks HTTP over plain sockets with the tests' small client, and can
# start `cinfer serve` itself (--model): build it, its worker and plugins with it.
target_sources(bench_serving PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/http_client.c)
target_include_directories(bench_serving PRIVATE ${PROJECT_SOURCE_DIR}/tests)
foreach(dep IN ITEMS cinfer_cli cinfer_worker cinfer_plugin_launch_fork cinfer_plugin_tokenizer_bpe)
  if(TARGET ${dep})
    add_dependencies(bench_serving ${dep})
  endif()
endforeach()
