# The Mistral case reads a Hugging Face folder that the numpy reference's fixture writes
# (test_model_reference.cmake).
target_compile_definitions(${name} PRIVATE CINFER_REFERENCE_DIR="${PROJECT_BINARY_DIR}/tests/reference-models")
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED model_reference_data)
