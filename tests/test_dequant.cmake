# The numpy implementation writes random blocks of every type and their values (a
# fixture); the C test checks kernels/quant.c gives the same bits. Skips (77) when
# /usr/bin/python3 with numpy is absent.
set(cinfer_dequant_blocks ${PROJECT_BINARY_DIR}/tests/dequant-blocks.bin)
target_compile_definitions(${name} PRIVATE CINFER_DEQUANT_BLOCKS="${cinfer_dequant_blocks}")
add_test(NAME dequant_reference_data
         COMMAND sh -c "rm -f \"$1\"; if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then /usr/bin/python3 \"$0\" \"$1\"; else echo '/usr/bin/python3 with numpy is absent'; fi"
                 ${CMAKE_CURRENT_SOURCE_DIR}/reference/make_dequant_blocks.py ${cinfer_dequant_blocks})
set_tests_properties(dequant_reference_data PROPERTIES FIXTURES_SETUP dequant_reference_data)
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED dequant_reference_data SKIP_RETURN_CODE 77)
# The same blocks against llama.cpp's own C (ggml's to_float through ctypes), when the
# llama.cpp that scripts/build-llama-cpp.sh builds is there; skips otherwise.
add_test(NAME dequant_matches_ggml
         COMMAND sh -c "lib=\"\${CINFER_LLAMA_CPP_CACHE:-$2/.cache/llama.cpp}/build/bin/libggml-base.so\"; if [ ! -f \"$lib\" ]; then echo \"SKIP: $lib is absent (scripts/build-llama-cpp.sh builds it)\"; exit 77; fi; /usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo 'SKIP: /usr/bin/python3 with numpy is absent'; exit 77; }; exec /usr/bin/python3 \"$0\" \"$lib\" \"$1\""
                 ${CMAKE_CURRENT_SOURCE_DIR}/reference/check_ggml_dequant.py ${cinfer_dequant_blocks} ${PROJECT_SOURCE_DIR})
set_tests_properties(dequant_matches_ggml PROPERTIES FIXTURES_REQUIRED dequant_reference_data SKIP_RETURN_CODE 77)
