# Runs the cinfer binary, which starts cinfer-worker and loads the plugins.
add_dependencies(test_cli_generate cinfer_worker cinfer_plugin_launch_fork cinfer_cli)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_cli_generate cinfer_plugin_tokenizer_bpe)
endif()
