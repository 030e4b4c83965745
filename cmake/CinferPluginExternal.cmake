# For third-party plugins built against an installed cinfer:
#   find_package(cinfer REQUIRED)
#   cinfer_add_external_plugin(my-tokenizer SOURCES my_tokenizer.c)
# builds a loadable module named my-tokenizer.so linked to cinfer::cinfer.
function(cinfer_add_external_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBRARIES" ${ARGN})
  string(MAKE_C_IDENTIFIER "${name}" ident)
  add_library(${ident} MODULE ${P_SOURCES})
  set_target_properties(${ident} PROPERTIES PREFIX "" OUTPUT_NAME "${name}"
                        C_VISIBILITY_PRESET hidden)
  target_link_libraries(${ident} PRIVATE cinfer::cinfer ${P_LIBRARIES})
endfunction()
