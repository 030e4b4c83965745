# test_http_server starts engines (cinfer-worker, the fork launcher, the tokenizer
# plugin) and runs `cinfer serve`; it needs the curl and openssl programs.
add_dependencies(test_http_server cinfer_worker cinfer_plugin_launch_fork cinfer_cli)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_http_server cinfer_plugin_tokenizer_bpe)
endif()
