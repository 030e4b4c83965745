# The engine starts cinfer-worker and loads the tokenizer and launcher plugins.
add_dependencies(test_engine_parallel cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_engine_parallel cinfer_plugin_tokenizer_bpe)
endif()
