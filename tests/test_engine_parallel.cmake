# The engine starts cinfer-worker and loads the tokenizer and launcher plugins.
add_dependencies(test_engine_parallel cinfer_worker cinfer_plugin_launch_fork)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_engine_parallel cinfer_plugin_tokenizer_bpe)
endif()
# The expert-parallel case runs a mixture of experts the numpy reference's fixture writes
# (test_model_reference.cmake).
target_compile_definitions(${name} PRIVATE CINFER_REFERENCE_DIR="${PROJECT_BINARY_DIR}/tests/reference-models")
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED model_reference_data)
