# Runs on tests/data/models/stories260K.gguf.
# One case starts the real engine: it runs cinfer-worker with the launcher and tokenizer plugins.
add_dependencies(${name} cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
