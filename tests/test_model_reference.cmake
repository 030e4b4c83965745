# The numpy reference writes the models and expected logits (a fixture), then the C test
# runs them through the runtime. Skips (77) when /usr/bin/python3 with numpy is absent.
set(cinfer_reference_dir ${PROJECT_BINARY_DIR}/tests/reference-models)
target_compile_definitions(${name} PRIVATE CINFER_REFERENCE_DIR="${cinfer_reference_dir}")
add_test(NAME model_reference_data
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/reference/make_expected.sh ${cinfer_reference_dir})
set_tests_properties(model_reference_data PROPERTIES FIXTURES_SETUP model_reference_data)
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED model_reference_data SKIP_RETURN_CODE 77)
