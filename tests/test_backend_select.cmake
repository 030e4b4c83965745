# Fake backend plugins that test_backend_select really loads: one without a device,
# one built against ops version 6, one whose vtable is cut short.
set(fake_backend_dir ${CMAKE_CURRENT_BINARY_DIR}/fake-backends)
foreach(fake nodevice old short)
  add_library(fake_backend_${fake} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/fake_plugins/fake_backend_${fake}.c)
  set_target_properties(fake_backend_${fake} PROPERTIES PREFIX "" OUTPUT_NAME fake-backend-${fake}
                        LIBRARY_OUTPUT_DIRECTORY ${fake_backend_dir})
  target_link_libraries(fake_backend_${fake} PRIVATE cinfer)
  add_dependencies(test_backend_select fake_backend_${fake})
endforeach()
target_compile_definitions(test_backend_select PRIVATE FAKE_BACKEND_DIR="${fake_backend_dir}")
# Runs the cinfer binary, which starts cinfer-worker and loads the plugins.
add_dependencies(test_backend_select cinfer_worker cinfer_cli)
if(TARGET cinfer_plugin_launch_fork)
  add_dependencies(test_backend_select cinfer_plugin_launch_fork)
endif()
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_backend_select cinfer_plugin_tokenizer_bpe)
endif()
