# The random reference models the numpy reference uses (written by the fixture
# model_reference_data, see test_model_reference.cmake), at tp_size 2 and 4 against
# tp_size 1. Skips (77) when /usr/bin/python3 with numpy is absent.
target_compile_definitions(${name} PRIVATE CINFER_REFERENCE_DIR="${PROJECT_BINARY_DIR}/tests/reference-models")
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED model_reference_data SKIP_RETURN_CODE 77)
