# test_output_text loads the built tokenizer plugin.
add_dependencies(test_output_text cinfer_plugin_tokenizer_bpe)
