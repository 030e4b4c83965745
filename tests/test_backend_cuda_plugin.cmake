# Loads the real backend-cuda plugin (skipped, 77, where it is not built) and runs the
# cinfer binary's `plugins` command.
set_tests_properties(test_backend_cuda_plugin PROPERTIES SKIP_RETURN_CODE 77)
add_dependencies(test_backend_cuda_plugin cinfer_worker cinfer_cli)
if(TARGET cinfer_plugin_backend_cuda)
  add_dependencies(test_backend_cuda_plugin cinfer_plugin_backend_cuda)
endif()
