# Runs on ../shared/models/stories260K.gguf; exits 77 (skipped) when it is absent.
set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
# One case starts the real engine: it runs cinfer-worker with the launcher and tokenizer plugins.
add_dependencies(${name} cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
