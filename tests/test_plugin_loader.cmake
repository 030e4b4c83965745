# Fake plugins that test_plugin_loader really loads, each breaking one rule.
set(fake_dir ${CMAKE_CURRENT_BINARY_DIR}/fake-plugins)
set(fake_names)
foreach(fake good wrong_abi wrong_kind no_descriptor null_slot old_vtable)
  string(REPLACE "_" "-" file_name "fake-${fake}")
  add_library(fake_plugin_${fake} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/fake_plugins/fake_${fake}.c)
  set_target_properties(fake_plugin_${fake} PROPERTIES PREFIX "" OUTPUT_NAME ${file_name}
                        LIBRARY_OUTPUT_DIRECTORY ${fake_dir})
  target_link_libraries(fake_plugin_${fake} PRIVATE cinfer)
  add_dependencies(test_plugin_loader fake_plugin_${fake})
endforeach()
# Two copies of the good plugin with different versions, for the search order.
foreach(copy first second)
  add_library(fake_plugin_good_${copy} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/fake_plugins/fake_good.c)
  set_target_properties(fake_plugin_good_${copy} PROPERTIES PREFIX "" OUTPUT_NAME fake-good
                        LIBRARY_OUTPUT_DIRECTORY ${fake_dir}/${copy})
  target_compile_definitions(fake_plugin_good_${copy} PRIVATE FAKE_VERSION="${copy}")
  target_link_libraries(fake_plugin_good_${copy} PRIVATE cinfer)
  add_dependencies(test_plugin_loader fake_plugin_good_${copy})
endforeach()
file(WRITE ${fake_dir}/fake-not-elf.so "this is a text file, not a shared object\n")
target_compile_definitions(test_plugin_loader PRIVATE FAKE_PLUGIN_DIR="${fake_dir}")
add_dependencies(test_plugin_loader cinfer_cli)
