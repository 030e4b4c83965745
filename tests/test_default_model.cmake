# The default model's runtime cases need the model loader and the forward pass. They are
# compiled in when the core defines both (the runtime is written alongside this test);
# until then only the folder, the reference text and its words are checked.
file(GLOB_RECURSE cinfer_core_c CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/*.c)
set(cinfer_has_model_load OFF)
set(cinfer_has_runtime_forward OFF)
foreach(f IN LISTS cinfer_core_c)
  file(STRINGS ${f} defs REGEX "^int cinfer_(model_load|runtime_forward)\\(")
  foreach(d IN LISTS defs)
    if(d MATCHES "^int cinfer_model_load\\(")
      set(cinfer_has_model_load ON)
    elseif(d MATCHES "^int cinfer_runtime_forward\\(")
      set(cinfer_has_runtime_forward ON)
    endif()
  endforeach()
  # Re-check when the model runtime's files change, not only when files are added.
  if(f MATCHES "/core/model/")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
  endif()
endforeach()
if(cinfer_has_model_load AND cinfer_has_runtime_forward)
  target_compile_definitions(${name} PRIVATE CINFER_HAVE_MODEL_RUNTIME=1)
else()
  message(STATUS "test_default_model: model runtime not in the core yet; runtime cases left out")
endif()
# The tokenizer-bpe plugin, when built, must agree on the prompt's ids and the text.
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(${name} cinfer_plugin_tokenizer_bpe)
endif()
