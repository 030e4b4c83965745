# The numpy reference writes the models and expected logits (a fixture), then the C test
# runs them through the runtime. Skips (77) when /usr/bin/python3 with numpy is absent.
set(cinfer_reference_dir ${PROJECT_BINARY_DIR}/tests/reference-models)
target_compile_definitions(${name} PRIVATE CINFER_REFERENCE_DIR="${cinfer_reference_dir}")
add_test(NAME model_reference_data
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/reference/make_expected.sh ${cinfer_reference_dir})
set_tests_properties(model_reference_data PROPERTIES FIXTURES_SETUP model_reference_data)
set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED model_reference_data SKIP_RETURN_CODE 77)
# Compiled for real once the core defines cinfer_model_load and cinfer_runtime_forward
# (written alongside this test); until then the test prints why and skips.
file(GLOB_RECURSE cinfer_core_c CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/*.c)
set(cinfer_runtime_parts 0)
foreach(f IN LISTS cinfer_core_c)
  file(STRINGS ${f} defs REGEX "^int cinfer_(model_load|runtime_forward)\\(")
  list(LENGTH defs n_defs)
  math(EXPR cinfer_runtime_parts "${cinfer_runtime_parts} + ${n_defs}")
  if(f MATCHES "/core/model/")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
  endif()
endforeach()
if(cinfer_runtime_parts GREATER_EQUAL 2)
  target_compile_definitions(${name} PRIVATE CINFER_HAVE_MODEL_RUNTIME=1)
else()
  message(STATUS "${name}: model loader or forward pass not in the core yet; the test skips")
endif()
