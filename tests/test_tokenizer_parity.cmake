# test_tokenizer_parity needs the official libraries' ids: the fixture below makes the
# corpus and the reference files in build/tokenizer-reference (npm ci of
# tests/reference/package-lock.json into it, node and /usr/bin/python3 scripts), once per
# change of the scripts. Where node, npm or python3-sentencepiece is absent the fixture
# leaves a SKIP file with the reason and the test exits 77, which ctest reports as skipped.
add_test(NAME tokenizer_reference_setup
  COMMAND sh ${PROJECT_SOURCE_DIR}/tests/reference/make_tokenizer_reference.sh
          ${PROJECT_BINARY_DIR}/tokenizer-reference
          ${PROJECT_SOURCE_DIR}/tests/data/tokenizers/llama2-tokenizer.model)
# Eight Hugging Face tokenizers take about 8 minutes on 2 loaded cores; room for a slower CI.
set_tests_properties(tokenizer_reference_setup PROPERTIES
  FIXTURES_SETUP tokenizer_reference TIMEOUT 1500)
set_tests_properties(test_tokenizer_parity PROPERTIES
  FIXTURES_REQUIRED tokenizer_reference SKIP_RETURN_CODE 77 TIMEOUT 1800)
if(TARGET cinfer_plugin_tokenizer_bpe AND NOT CINFER_STATIC_PLUGINS)
  add_dependencies(test_tokenizer_parity cinfer_plugin_tokenizer_bpe)
  target_compile_definitions(test_tokenizer_parity PRIVATE CINFER_PARITY_HAVE_PLUGIN=1)
endif()

# tools/gguf_writer.py (which writes the Llama 2 vocabulary GGUF above) checked against
# cinfer's own GGUF reader in libcinfer: every value type, alignments, tensor types.
# python loads libcinfer with ctypes, so a sanitizer build needs its runtimes preloaded
# (gcc's; with clang's the check is left out).
if(NOT CINFER_STATIC_PLUGINS AND (NOT CINFER_SANITIZE OR CMAKE_C_COMPILER_ID STREQUAL "GNU"))
  add_test(NAME tools_gguf_writer
    COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/reference/check_gguf_writer.py
            $<TARGET_FILE:cinfer> ${PROJECT_BINARY_DIR}/gguf-writer-check)
  set_tests_properties(tools_gguf_writer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
  if(CINFER_SANITIZE)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                    OUTPUT_VARIABLE tokref_asan OUTPUT_STRIP_TRAILING_WHITESPACE)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libubsan.so
                    OUTPUT_VARIABLE tokref_ubsan OUTPUT_STRIP_TRAILING_WHITESPACE)
    set_tests_properties(tools_gguf_writer PROPERTIES
      ENVIRONMENT "LD_PRELOAD=${tokref_asan}:${tokref_ubsan};ASAN_OPTIONS=detect_leaks=0")
  endif()
endif()
